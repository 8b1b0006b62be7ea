"""A controller context and in-memory store with topic ``t``'s partitions on brokers (1, 2), broker 1
dead and broker 2 alive, every partition Offline with its given state cached: the starting point
of the OfflineReplica and election tests that need many partitions."""

from __future__ import annotations

from collections.abc import Collection

from kafka_controller.core.context import ControllerContext
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore


def offline_cluster(
    states: dict[TopicPartition, LeaderIsrAndControllerEpoch], missing: Collection[int] = ()
) -> tuple[ControllerContext, InMemoryMetadataStore, list[TopicPartition]]:
    """``states``' partitions (of topic ``t``) cached with their states; their state znodes written
    except for the partitions numbered in ``missing``. Controller 7's epoch is registered."""
    store = InMemoryMetadataStore()
    ctx = ControllerContext()
    ctx.epoch, ctx.epoch_zk_version = store.register_controller_and_increment_controller_epoch(7)
    ctx.set_live_brokers({Broker(2, (EndPoint("h", 1),)): 10})
    tps = list(states)
    ctx.set_all_topics(["t"])
    ctx.partition_assignments["t"] = {tp.partition: ReplicaAssignment((1, 2)) for tp in tps}
    store.create_topic("t", ctx.partition_assignments["t"])
    written = {tp: s for tp, s in states.items() if tp.partition not in missing}
    assert all(e is None for e in store.create_partition_states(written, -1).values())
    for tp, state in states.items():
        ctx.put_partition_leadership_info(tp, state)
        ctx.put_partition_state(tp, PartitionState.OFFLINE_PARTITION)
    return ctx, store, tps
