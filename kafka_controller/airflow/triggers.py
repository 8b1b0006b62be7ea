"""``ReassignmentTrigger``: waits in the triggerer until a reassignment plan is complete.

kazoo is synchronous, so each poll runs in a worker thread (``asyncio.to_thread``) on one session
opened for the trigger's lifetime; the event loop only sleeps between polls. The connection is
fetched with the async API (the triggerer's rule) and parsed like the hook does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from kafka_controller.airflow.connections import ClusterConnection, airflow_fields, cluster_connection
from kafka_controller.airflow.hooks.cluster import KafkaClusterHook
from kafka_controller.airflow.reassignment_plan import plan_from_json
from kafka_controller.airflow.runbooks import reassignment_progress
from kafka_controller.domain.values import TopicPartition

if TYPE_CHECKING:
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore


class ReassignmentTrigger(BaseTrigger):
    """Fires ``{"status": "complete" | "timeout" | "error" | "broker_lost", ...}`` for ``plan``
    (``plan_to_json`` form). ``brokers``: the plan's target brokers; a poll that finds one of them
    unregistered fires ``broker_lost`` (its new replicas cannot catch up: the wait could only time
    out)."""

    def __init__(
        self,
        kafka_controller_conn_id: str,
        plan: list[dict[str, Any]],
        poll_interval_s: float = 2.0,
        timeout_s: float = 3600.0,
        brokers: list[int] | None = None,
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.kafka_controller_conn_id = kafka_controller_conn_id
        self.plan = plan
        self.poll_interval_s = poll_interval_s
        self.timeout_s = timeout_s
        self.brokers = brokers

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "kafka_controller_conn_id": self.kafka_controller_conn_id,
                "plan": self.plan,
                "poll_interval_s": self.poll_interval_s,
                "timeout_s": self.timeout_s,
                "brokers": self.brokers,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            c = await KafkaClusterHook.aget_connection(self.kafka_controller_conn_id)
            conn = cluster_connection(self.kafka_controller_conn_id, **airflow_fields(c))
            plan = plan_from_json(self.plan)
            store = await asyncio.to_thread(_open_store, conn)
        except Exception as e:
            yield _event({"status": "error", "message": f"{type(e).__name__}: {e}"})
            return
        deadline = time.monotonic() + self.timeout_s
        try:
            while True:
                try:
                    progress = await asyncio.to_thread(_progress, store, plan)
                    gone = sorted(set(self.brokers or ()) - set(await asyncio.to_thread(_registered, store)))
                except Exception as e:  # a poll that fails is retried until the deadline
                    self.log.warning("reassignment poll failed: %s", e)
                    progress, gone = None, []
                if gone and progress is not None:
                    left = {k: len(v) for k, v in progress.items()}
                    yield _event({"status": "broker_lost", "brokers": gone, "progress": left})
                    return
                if progress is not None and not progress["in_progress"] and not progress["pending"]:
                    yield _event({"status": "complete", "partitions": len(progress["complete"])})
                    return
                if time.monotonic() >= deadline:
                    left = {} if progress is None else {k: len(v) for k, v in progress.items()}
                    yield _event({"status": "timeout", "progress": left})
                    return
                await asyncio.sleep(self.poll_interval_s)
        finally:
            await asyncio.to_thread(store.close)


def _event(payload: dict[str, Any]) -> TriggerEvent:
    return TriggerEvent(payload)  # type: ignore[no-untyped-call]


def _open_store(conn: ClusterConnection) -> KazooMetadataStore:
    # Imported on use: kazoo (the 'zk' extra) costs a DAG file's parse, which imports the sensor and
    # so this module, while only the triggerer opens a session.
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    return KazooMetadataStore(conn.zk_config())


def _registered(store: KazooMetadataStore) -> list[int]:
    return list(store.get_sorted_broker_list())


def _progress(
    store: KazooMetadataStore, plan: Mapping[TopicPartition, Sequence[int]]
) -> dict[str, list[str]]:
    return {k: [str(tp) for tp in v] for k, v in reassignment_progress(store, plan).items()}
