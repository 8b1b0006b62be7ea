"""Template macros for cluster lookups: ``{{ macros.kafka_controller.controller() }}`` and friends.

Each call opens the cluster connection, does its batched reads and closes it; the default
connection id is the provider's (``kafka_controller_default``). Values are plain and JSON-ready.
"""

from __future__ import annotations

from typing import Any

from kafka_controller.airflow.connections import DEFAULT_CLUSTER_CONN_ID
from kafka_controller.airflow.hooks.cluster import KafkaClusterHook
from kafka_controller.domain.values import TopicPartition


def _hook(conn_id: str) -> KafkaClusterHook:
    return KafkaClusterHook(conn_id)


def controller(conn_id: str = DEFAULT_CLUSTER_CONN_ID) -> dict[str, int | None]:
    """``{"broker_id": ..., "epoch": ...}`` of the active controller."""
    with _hook(conn_id) as hook:
        cid, epoch, _ = hook.controller()
    return {"broker_id": cid, "epoch": epoch}


def brokers(conn_id: str = DEFAULT_CLUSTER_CONN_ID) -> list[int]:
    """Registered broker ids, sorted."""
    with _hook(conn_id) as hook:
        return list(hook.get_store().get_sorted_broker_list())


def partition_leader(topic: str, partition: int, conn_id: str = DEFAULT_CLUSTER_CONN_ID) -> int | None:
    """The leader in the partition's state znode (-1 = none), or None when it has no state."""
    tp = TopicPartition(topic, int(partition))
    with _hook(conn_id) as hook:
        read = hook.get_store().get_partition_states([tp])[tp]
    lai = getattr(read, "leader_and_isr", None)
    return None if lai is None else int(lai.leader)


def cluster_summary(conn_id: str = DEFAULT_CLUSTER_CONN_ID) -> dict[str, Any]:
    """``describe``'s summary: brokers, partitions, offline, under-replicated, leader skew, ..."""
    with _hook(conn_id) as hook:
        return dict(hook.describe().summary)


def offline_partitions(conn_id: str = DEFAULT_CLUSTER_CONN_ID) -> list[str]:
    with _hook(conn_id) as hook:
        return [str(p.topic_partition) for p in hook.describe().partitions if p.offline]


MACROS = [controller, brokers, partition_leader, cluster_summary, offline_partitions]
