"""Kafka's TopicDeletionManagerTest and the 22nd PartitionStateMachineTest test, ported.

A real ``TopicDeletionManager`` drives the mock state machines of ``kafka_controller.testing``
and a ``RecordingDeletionClient``; the call counts per target state are Kafka's assertions that
each deletion step is one batched call for all topics.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.strategies import (
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
)
from kafka_controller.core.topic_deletion_manager import TopicDeletionManager
from kafka_controller.domain.errors import (
    IllegalControllerStateError,
    InvalidArgumentError,
    MetadataStoreError,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import PartitionStateRead, UpdateLeaderAndIsrResult
from kafka_controller.testing.doubles import RecordingRequestBatch
from kafka_controller.testing.mock_state_machines import (
    MockPartitionStateMachine,
    MockReplicaStateMachine,
    RecordingDeletionClient,
)

PS = PartitionState
RS = ReplicaState


def _broker(broker_id: int) -> Broker:
    return Broker(broker_id, (EndPoint("localhost", 9900 + broker_id, listener_name="blah"),))


def init_context(
    brokers: Sequence[int], topics: Sequence[str], num_partitions: int, replication_factor: int
) -> ControllerContext:
    """Kafka's ``initContext``: live brokers (epoch 1) and round-robin replicas across topics."""
    ctx = ControllerContext()
    ctx.set_live_brokers({_broker(b): 1 for b in brokers})
    leader_index = 0
    for topic in topics:
        for p in range(num_partitions):
            replicas = [brokers[(i + leader_index) % len(brokers)] for i in range(replication_factor)]
            ctx.update_partition_full_replica_assignment(
                TopicPartition(topic, p), ReplicaAssignment.of(replicas)
            )
            leader_index += 1
    ctx.set_all_topics(topics)
    return ctx


@dataclass
class Harness:
    ctx: ControllerContext
    rsm: MockReplicaStateMachine
    psm: MockPartitionStateMachine
    client: RecordingDeletionClient
    manager: TopicDeletionManager

    def partitions(self, topic: str) -> list[TopicPartition]:
        return self.ctx.partitions_for_topic(topic)

    def replicas(self, topic: str) -> set[PartitionAndReplica]:
        return set(self.ctx.replicas_for_partition(self.partitions(topic)))

    def partitions_in_state(self, topic: str, state: PartitionState) -> set[TopicPartition]:
        return set(self.ctx.partitions_in_state_for_topic(topic, state))

    def topic_sets(self) -> tuple[set[str], set[str], set[str]]:
        c = self.ctx
        return (
            set(c.topics_to_be_deleted),
            set(c.topics_with_deletion_started),
            set(c.topics_ineligible_for_deletion),
        )


def harness(topics: Sequence[str], *, delete_topic_enable: bool = True) -> Harness:
    ctx = init_context([1, 2, 3], topics, num_partitions=2, replication_factor=3)
    rsm = MockReplicaStateMachine(ctx)
    rsm.startup()
    psm = MockPartitionStateMachine(ctx, unclean_leader_election_enabled=False)
    psm.startup()
    client = RecordingDeletionClient()
    manager = TopicDeletionManager(1, ctx, rsm, psm, client, delete_topic_enable=delete_topic_enable)
    return Harness(ctx, rsm, psm, client, manager)


def take_broker_offline(h: Harness, broker_id: int) -> tuple[Broker, int]:
    broker = h.ctx.live_or_shutting_down_broker(broker_id)
    epoch = h.ctx.live_broker_epoch(broker_id)
    assert broker is not None and epoch is not None
    h.ctx.remove_live_brokers([broker_id])
    assert h.ctx.live_broker_ids == {1, 3}
    return broker, epoch


# --------------------------------------------------------------------------- Kafka's TopicDeletionManagerTest
def test_initialization() -> None:
    h = harness(["foo", "bar", "baz"])
    assert h.manager.is_delete_topic_enabled
    h.manager.init(topics_to_delete={"foo", "bar"}, topics_ineligible={"bar", "baz"})
    assert h.ctx.topics_to_be_deleted == {"foo", "bar"}
    assert h.ctx.topics_ineligible_for_deletion == {"bar"}
    assert h.client.calls == []


def test_basic_deletion() -> None:
    h = harness(["foo", "bar"])
    h.manager.init(set(), set())
    foo_partitions, bar_partitions = h.partitions("foo"), h.partitions("bar")
    foo_replicas, bar_replicas = h.replicas("foo"), h.replicas("bar")
    h.rsm.clear()
    h.psm.clear()

    h.manager.enqueue_topics_for_deletion({"foo", "bar"})

    assert h.partitions_in_state("foo", PS.NON_EXISTENT_PARTITION) == set(foo_partitions)
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == foo_replicas
    assert h.partitions_in_state("bar", PS.NON_EXISTENT_PARTITION) == set(bar_partitions)
    assert h.ctx.replicas_in_state("bar", RS.REPLICA_DELETION_STARTED) == bar_replicas
    assert h.client.calls == [("send_metadata_update", frozenset(foo_partitions + bar_partitions))]
    assert h.topic_sets() == ({"foo", "bar"}, {"foo", "bar"}, set())

    h.manager.complete_replica_deletion(foo_replicas | bar_replicas)

    assert h.ctx.partitions_for_topic("foo") == []
    assert {r for r in h.ctx.replica_states if r.topic == "foo"} == set()
    assert h.ctx.partitions_for_topic("bar") == []
    assert {r for r in h.ctx.replica_states if r.topic == "bar"} == set()
    assert h.topic_sets() == (set(), set(), set())

    assert h.psm.state_changes_calls(PS.OFFLINE_PARTITION) == 1
    assert h.psm.state_changes_calls(PS.NON_EXISTENT_PARTITION) == 1
    assert h.rsm.state_changes_calls(RS.REPLICA_DELETION_INELIGIBLE) == 1  # with an empty list
    assert h.rsm.state_changes_calls(RS.OFFLINE_REPLICA) == 1
    assert h.rsm.state_changes_calls(RS.REPLICA_DELETION_STARTED) == 1
    assert h.rsm.state_changes_calls(RS.REPLICA_DELETION_SUCCESSFUL) == 1


def test_deletion_with_broker_offline() -> None:
    h = harness(["foo", "bar"])
    h.manager.init(set(), set())
    foo_partitions, foo_replicas = h.partitions("foo"), h.replicas("foo")

    offline_broker, last_epoch = take_broker_offline(h, 2)
    offline_replicas = {r for r in foo_replicas if r.replica == 2}
    online_replicas = foo_replicas - offline_replicas
    h.rsm.handle_state_changes(sorted(offline_replicas), RS.OFFLINE_REPLICA)

    h.manager.enqueue_topics_for_deletion({"foo"})
    assert h.partitions_in_state("foo", PS.NON_EXISTENT_PARTITION) == set(foo_partitions)
    assert h.client.calls_named("send_metadata_update") == [
        ("send_metadata_update", frozenset(foo_partitions))
    ]
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == online_replicas
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_INELIGIBLE) == offline_replicas
    assert h.topic_sets() == ({"foo"}, {"foo"}, {"foo"})

    h.manager.complete_replica_deletion(online_replicas)
    assert h.partitions_in_state("foo", PS.NON_EXISTENT_PARTITION) == set(foo_partitions)
    assert h.topic_sets() == ({"foo"}, {"foo"}, {"foo"})
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_SUCCESSFUL) == online_replicas
    assert (
        h.ctx.replicas_in_state("foo", RS.OFFLINE_REPLICA) == offline_replicas
    )  # retried: Ineligible -> Offline

    h.ctx.add_live_brokers({offline_broker: last_epoch + 1})
    h.manager.resume_deletion_for_topics({"foo"})
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_SUCCESSFUL) == online_replicas
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == offline_replicas

    h.manager.complete_replica_deletion(offline_replicas)
    assert h.ctx.partitions_for_topic("foo") == []
    assert {r for r in h.ctx.replica_states if r.topic == "foo"} == set()
    assert h.topic_sets() == (set(), set(), set())


def test_broker_failure_after_deletion_started() -> None:
    h = harness(["foo", "bar"])
    h.manager.init(set(), set())
    foo_partitions, foo_replicas = h.partitions("foo"), h.replicas("foo")

    h.manager.enqueue_topics_for_deletion({"foo"})
    assert h.partitions_in_state("foo", PS.NON_EXISTENT_PARTITION) == set(foo_partitions)
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == foo_replicas

    offline_broker, last_epoch = take_broker_offline(h, 2)
    offline_replicas = {r for r in foo_replicas if r.replica == 2}
    online_replicas = foo_replicas - offline_replicas

    h.manager.fail_replica_deletion(offline_replicas)
    assert h.topic_sets() == ({"foo"}, {"foo"}, {"foo"})
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_INELIGIBLE) == offline_replicas
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == online_replicas

    # Broker 2 is back; its replicas stay Ineligible while any delete request is outstanding.
    h.ctx.add_live_brokers({offline_broker: last_epoch + 1})
    h.manager.resume_deletion_for_topics({"foo"})
    assert h.topic_sets() == ({"foo"}, {"foo"}, set())
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == online_replicas
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_INELIGIBLE) == offline_replicas

    # Once those are answered, the rest is retried: Ineligible -> Offline -> Started.
    h.manager.complete_replica_deletion(online_replicas)
    assert h.topic_sets() == ({"foo"}, {"foo"}, set())
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_SUCCESSFUL) == online_replicas
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == offline_replicas


# --------------------------------------------------------------------------- PartitionStateMachineTest #22
def test_updating_offline_partitions_count_during_topic_deletion() -> None:
    broker_id = 5
    ctx = ControllerContext()
    ctx.epoch = 50
    partitions = [TopicPartition("test", p) for p in range(4)]
    for tp in partitions:
        ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of([broker_id]))
    psm = MockPartitionStateMachine(ctx, unclean_leader_election_enabled=False)
    rsm = MockReplicaStateMachine(ctx)
    client = RecordingDeletionClient()
    manager = TopicDeletionManager(broker_id, ctx, rsm, psm, client)

    psm.handle_state_changes(partitions, PS.NEW_PARTITION)
    psm.handle_state_changes(partitions, PS.OFFLINE_PARTITION)
    for tp in partitions:
        ctx.put_replica_state(PartitionAndReplica(tp, broker_id), RS.OFFLINE_REPLICA)
    assert ctx.offline_partition_count == 4

    manager.enqueue_topics_for_deletion({"test"})
    assert ctx.offline_partition_count == 0
    # No live broker: every replica is parked, the topic halted, nothing was asked to delete.
    assert ctx.replicas_in_state("test", RS.REPLICA_DELETION_INELIGIBLE) == {
        PartitionAndReplica(tp, broker_id) for tp in partitions
    }
    assert ctx.topics_ineligible_for_deletion == {"test"}
    assert ctx.is_topic_deletion_in_progress("test")


# --------------------------------------------------------------------------- beyond Kafka's suite
def test_deletion_disabled() -> None:
    h = harness(["foo", "bar"], delete_topic_enable=False)
    h.ctx.epoch_zk_version = 4
    h.rsm.clear()
    h.psm.clear()

    h.manager.init({"foo"}, {"foo"})
    # Pending deletion requests are dropped from the store, fenced, instead of being queued.
    assert h.client.calls == [("delete_topic_deletions", frozenset({"foo"}), 4)]
    assert h.topic_sets() == (set(), set(), set())
    assert not h.manager.is_topic_queued_up_for_deletion("foo")

    h.ctx.topics_to_be_deleted.add("bar")  # even if someone else queued it
    assert not h.manager.is_topic_queued_up_for_deletion("bar")
    h.ctx.topics_to_be_deleted.discard("bar")

    h.manager.enqueue_topics_for_deletion({"foo"})
    h.manager.try_topic_deletion()
    h.manager.resume_deletion_for_topics({"foo"})
    h.manager.fail_replica_deletion(h.replicas("foo"))
    h.manager.mark_topic_ineligible_for_deletion({"foo"}, reason="test")
    assert h.topic_sets() == (set(), set(), set())
    assert h.ctx.replicas_in_state("foo", RS.ONLINE_REPLICA) == h.replicas("foo")
    assert h.partitions_in_state("foo", PS.ONLINE_PARTITION) == set(h.partitions("foo"))
    assert all(h.psm.state_changes_calls(s) == 0 for s in PS)
    assert all(h.rsm.state_changes_calls(s) == 0 for s in RS)
    assert len(h.client.calls) == 1


def test_complete_delete_topic_uses_fenced_client_calls_in_order() -> None:
    h = harness(["foo", "bar"])
    h.manager.enqueue_topics_for_deletion({"foo"})
    h.ctx.epoch_zk_version = 7  # what the client must be fenced with at completion time
    h.client.calls.clear()
    h.rsm.clear()

    h.manager.complete_replica_deletion(h.replicas("foo"))

    assert h.client.calls == [("mute_partition_modifications", "foo"), ("delete_topic", "foo", 7)]
    assert h.rsm.state_changes_calls(RS.NON_EXISTENT_REPLICA) == 1
    assert "foo" not in h.ctx.all_topics
    assert h.ctx.all_topics == {"bar"}


def test_nothing_restarts_while_delete_requests_are_outstanding() -> None:
    h = harness(["foo", "bar"])
    h.manager.enqueue_topics_for_deletion({"foo"})
    h.rsm.clear()
    h.psm.clear()
    sent = list(h.client.calls)

    h.manager.try_topic_deletion()
    h.manager.enqueue_topics_for_deletion({"foo"})  # the watch fires again for the same topic

    assert h.client.calls == sent
    assert all(h.rsm.state_changes_calls(s) == 0 for s in RS)
    assert all(h.psm.state_changes_calls(s) == 0 for s in PS)
    # The context's "deletion started" and the manager's "requests outstanding" are both true here;
    # after every reply the former stays true while nothing is outstanding any more.
    assert h.ctx.is_topic_deletion_in_progress("foo")


def test_restart_does_not_repeat_partition_steps() -> None:
    h = harness(["foo", "bar"])
    take_broker_offline(h, 2)
    on_broker_2 = sorted(r for r in h.replicas("foo") if r.replica == 2)
    h.rsm.handle_state_changes(on_broker_2, RS.OFFLINE_REPLICA)  # what broker failure does first
    h.rsm.clear()
    h.psm.clear()
    h.manager.enqueue_topics_for_deletion({"foo"})
    h.manager.complete_replica_deletion(h.replicas("foo") - set(on_broker_2))
    h.ctx.add_live_brokers({_broker(2): 2})
    h.manager.resume_deletion_for_topics({"foo"})  # deletion restarts for the parked replicas

    assert h.psm.state_changes_calls(PS.OFFLINE_PARTITION) == 1
    assert h.psm.state_changes_calls(PS.NON_EXISTENT_PARTITION) == 1
    assert h.rsm.state_changes_calls(RS.REPLICA_DELETION_STARTED) == 2
    assert len(h.client.calls_named("send_metadata_update")) == 2  # start and restart, leader -2 each time


def test_replicas_of_topics_not_queued_are_ignored() -> None:
    h = harness(["foo", "bar"])
    h.manager.enqueue_topics_for_deletion({"foo"})
    h.rsm.clear()
    bar_replicas = h.replicas("bar")

    h.manager.fail_replica_deletion(bar_replicas)
    assert h.rsm.state_changes_calls(RS.REPLICA_DELETION_INELIGIBLE) == 0
    h.manager.complete_replica_deletion(bar_replicas)
    assert h.rsm.state_changes_calls(RS.REPLICA_DELETION_SUCCESSFUL) == 1  # called with an empty list
    assert h.ctx.replicas_in_state("bar", RS.ONLINE_REPLICA) == bar_replicas
    h.manager.mark_topic_ineligible_for_deletion({"bar"}, reason="reassignment")
    assert h.ctx.topics_ineligible_for_deletion == set()


def test_ineligible_topic_waits_for_resume() -> None:
    h = harness(["foo", "bar"])
    h.manager.init({"foo"}, {"foo"})  # e.g. a reassignment was in progress at failover
    h.rsm.clear()
    h.psm.clear()
    h.manager.try_topic_deletion()
    assert all(h.psm.state_changes_calls(s) == 0 for s in PS)
    assert h.ctx.replicas_in_state("foo", RS.ONLINE_REPLICA) == h.replicas("foo")

    h.manager.resume_deletion_for_topics({"foo", "unknown"})
    assert h.ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == h.replicas("foo")
    assert h.topic_sets() == ({"foo"}, {"foo"}, set())


def test_many_topics_are_one_call_per_step() -> None:
    topics = [f"t{i}" for i in range(20)]
    h = harness(topics)
    h.rsm.clear()
    h.psm.clear()
    h.manager.enqueue_topics_for_deletion(topics)
    everything = set().union(*(h.replicas(t) for t in topics))
    h.manager.complete_replica_deletion(everything)
    assert h.ctx.partition_assignments == {}
    assert h.rsm.state_changes_calls(RS.OFFLINE_REPLICA) == 1
    assert h.rsm.state_changes_calls(RS.REPLICA_DELETION_STARTED) == 1
    assert h.rsm.state_changes_calls(RS.NON_EXISTENT_REPLICA) == len(topics)  # one per completed topic
    assert len(h.client.calls_named("send_metadata_update")) == 1


def test_reset_clears_deletion_bookkeeping() -> None:
    h = harness(["foo", "bar"])
    h.manager.init({"foo", "bar"}, {"bar"})
    h.ctx.begin_topic_deletion({"foo"})
    h.manager.reset()
    assert h.topic_sets() == (set(), set(), set())


def test_bad_input_is_refused_before_anything_changes() -> None:
    h = harness(["foo", "bar"])
    h.rsm.clear()
    with pytest.raises(InvalidArgumentError, match="not the string 'foo'"):
        h.manager.enqueue_topics_for_deletion("foo")
    with pytest.raises(InvalidArgumentError, match="topic names"):
        h.manager.init({"foo", 3}, set())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match=r"got \['foo'\]"):
        h.manager.mark_topic_ineligible_for_deletion([["foo"]])  # type: ignore[list-item]
    good = sorted(h.replicas("foo"))
    with pytest.raises(InvalidArgumentError, match="PartitionAndReplica"):
        h.manager.complete_replica_deletion([*good, ("foo", 1)])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError, match="PartitionAndReplica"):
        h.manager.fail_replica_deletion([[TopicPartition("foo", 0), 1]])  # type: ignore[list-item]
    assert h.topic_sets() == (set(), set(), set())
    assert all(h.rsm.state_changes_calls(s) == 0 for s in RS)
    assert h.client.calls == []


def test_replica_without_state_is_an_illegal_state() -> None:
    h = harness(["foo", "bar"])
    h.ctx.remove_replica_state(sorted(h.replicas("foo"))[0])
    with pytest.raises(IllegalControllerStateError, match="no replica state"):
        h.manager.enqueue_topics_for_deletion({"foo"})


# --------------------------------------------------------------------------- the mocks themselves
def test_mock_state_machines_raise_on_invalid_transitions() -> None:
    h = harness(["foo"])
    tp = TopicPartition("foo", 0)
    with pytest.raises(IllegalControllerStateError, match="NonExistentPartition"):
        h.psm.handle_state_changes([tp], PS.NON_EXISTENT_PARTITION)
    assert h.ctx.partition_states[tp] is PS.ONLINE_PARTITION
    replica = PartitionAndReplica(tp, 1)
    with pytest.raises(IllegalControllerStateError, match="ReplicaDeletionSuccessful"):
        h.rsm.handle_state_changes([replica], RS.REPLICA_DELETION_SUCCESSFUL)
    assert h.ctx.replica_states[replica] is RS.ONLINE_REPLICA
    assert h.psm.state_changes_calls(PS.NON_EXISTENT_PARTITION) == 1  # counted although it raised


def test_mock_partition_state_machine_elects_on_cached_leadership() -> None:
    h = harness(["foo"])  # foo-0 = [1,2,3], foo-1 = [2,3,1]; all New -> Online, no leadership yet
    tp0, tp1 = TopicPartition("foo", 0), TopicPartition("foo", 1)
    h.ctx.epoch = 3
    h.ctx.put_partition_leadership_info(tp0, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1,), 0), 3))
    h.ctx.put_partition_leadership_info(tp1, LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2,), 0), 4))
    h.ctx.remove_live_brokers([1])
    h.psm.handle_state_changes([tp0, tp1], PS.OFFLINE_PARTITION)

    clean = h.psm.handle_state_changes(
        [tp0, tp1], PS.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy()
    )
    assert "Failed to elect" in str(clean[tp0])  # the only ISR member is down and unclean is off
    assert "another controller" in str(clean[tp1])  # cached by a newer controller: aborted
    assert h.ctx.partition_states[tp0] is PS.OFFLINE_PARTITION

    unclean = h.psm.handle_state_changes(
        [tp0], PS.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(True)
    )
    assert unclean[tp0] == LeaderAndIsr(2, 5, (2,), 0)
    assert h.ctx.partition_states[tp0] is PS.ONLINE_PARTITION
    assert h.ctx.partition_leadership_info(tp0) == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 5, (2,), 0), 3)
    assert h.ctx.stats.unclean_leader_elections == 1

    preferred = h.psm.handle_state_changes(
        [tp0], PS.ONLINE_PARTITION, PreferredReplicaPartitionLeaderElectionStrategy()
    )
    assert isinstance(preferred[tp0], Exception)  # broker 1 (preferred) is down: no fallback


# --------------------------------------------------------------------------- with the real state machines
class _DictStore:
    """The smallest honest ``PartitionStateStore``: state znodes in a dict, compare-and-set on version."""

    def __init__(self) -> None:
        self.znodes: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        self.reads = 0
        self.writes = 0

    def get_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionStateRead]:
        self.reads += 1
        return {tp: self.znodes.get(tp) for tp in partitions}

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected: int
    ) -> dict[TopicPartition, MetadataStoreError | None]:
        raise AssertionError("deletion never creates partition states")

    def update_leader_and_isr(
        self, leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int, expected: int
    ) -> UpdateLeaderAndIsrResult:
        self.writes += 1
        result = UpdateLeaderAndIsrResult()
        for tp, lai in leader_and_isrs.items():
            current = self.znodes[tp].leader_and_isr
            if current.zk_version != lai.zk_version:
                result.to_retry.append(tp)
                continue
            written = lai.with_zk_version(lai.zk_version + 1)
            self.znodes[tp] = LeaderIsrAndControllerEpoch(written, controller_epoch)
            result.finished[tp] = written
        return result

    def get_log_configs(
        self, topics: Collection[str], broker_defaults: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], dict[str, MetadataStoreError]]:
        return {t: dict(broker_defaults) for t in topics}, {}


def test_deletion_through_the_real_state_machines() -> None:
    ctx = init_context([1, 2, 3], ["foo", "bar"], num_partitions=2, replication_factor=3)
    ctx.epoch = 50
    store = _DictStore()
    for tp in ctx.all_partitions:
        replicas = ctx.partition_replica_assignment(tp)
        lice = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(replicas[0], replicas), 50)
        store.znodes[tp] = lice
        ctx.put_partition_leadership_info(tp, lice)
    psm_batch, rsm_batch = RecordingRequestBatch(), RecordingRequestBatch()
    rsm = ReplicaStateMachine(1, ctx, store, rsm_batch)
    psm = PartitionStateMachine(1, ctx, store, psm_batch)
    rsm.startup()
    psm.startup()
    client = RecordingDeletionClient()
    manager = TopicDeletionManager(1, ctx, rsm, psm, client)
    manager.init(set(), set())
    foo = set(ctx.replicas_for_topic("foo"))
    rsm_batch.calls.clear()
    store.reads = store.writes = 0

    manager.enqueue_topics_for_deletion({"foo"})

    assert ctx.replicas_in_state("foo", RS.REPLICA_DELETION_STARTED) == foo
    assert set(ctx.partitions_in_state_for_topic("foo", PS.NON_EXISTENT_PARTITION)) == {
        TopicPartition("foo", 0),
        TopicPartition("foo", 1),
    }
    stops = rsm_batch.calls_named("add_stop_replica_request_for_brokers")
    assert {(c[1], c[2]) for c in stops if c[3]} == {((r.replica,), r.topic_partition) for r in foo}
    assert {(c[1], c[2]) for c in stops if not c[3]} == {((r.replica,), r.topic_partition) for r in foo}
    # ISR shrinks were written, but no LeaderAndIsr goes out for a topic queued for deletion.
    assert rsm_batch.calls_named("add_leader_and_isr_request_for_brokers") == []
    assert store.writes >= 1 and store.reads >= 1
    assert store.reads <= 2 * 3  # batched: a read per replica id per call, never per partition
    assert ctx.replicas_in_state("bar", RS.ONLINE_REPLICA) == set(ctx.replicas_for_topic("bar"))

    manager.complete_replica_deletion(foo)
    assert ctx.partitions_for_topic("foo") == []
    assert {r for r in ctx.replica_states if r.topic == "foo"} == set()
    assert client.calls[-2:] == [("mute_partition_modifications", "foo"), ("delete_topic", "foo", 0)]
    assert ctx.topics_to_be_deleted == set() and ctx.topics_with_deletion_started == set()
    assert ctx.offline_partition_count == 0
