"""ControllerBrokerRequestBatch (docs/controller-behaviour.md §6), ported from Kafka 2.8's
ControllerChannelManagerTest.

As in Kafka, a real batch runs over a fake transport (``RecordingBrokerChannel``) and an event list;
test names follow Kafka's in snake_case. The extra tests at the end pin down the batch invariants.
"""

from __future__ import annotations

import base64
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.events import (
    LeaderAndIsrResponseNotice,
    TopicDeletionStopReplicaResponseNotice,
    UpdateMetadataResponseNotice,
)
from kafka_controller.core.ibp import InterBrokerProtocolVersion
from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
from kafka_controller.core.request_batch_send import ZERO_UUID
from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.requests import (
    Errors,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import (
    EPOCH_DURING_DELETE,
    LEADER_DURING_DELETE,
    NO_EPOCH,
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel, SentRequest, default_response

CONTROLLER_ID = 1
CONTROLLER_EPOCH = 1
ALL_IBPS = InterBrokerProtocolVersion.all_versions()
parse_ibp = InterBrokerProtocolVersion.parse

FOO0, FOO1, BAR0, BAR1 = (
    TopicPartition("foo", 0),
    TopicPartition("foo", 1),
    TopicPartition("bar", 0),
    TopicPartition("bar", 1),
)


def random_topic_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def init_context(
    brokers: Sequence[int] = (1, 2, 3),
    num_partitions: int = 2,
    replication_factor: int = 3,
    topic_ids: Mapping[str, str] | None = None,
) -> ControllerContext:
    """Kafka's ``initContext``: brokers with epoch 1, topics with ids, round-robin assignment."""
    ids = dict(topic_ids) if topic_ids is not None else {t: random_topic_id() for t in ("foo", "bar")}
    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("localhost", 9900 + b),)): 1 for b in brokers})
    ctx.set_all_topics(ids)
    for name, topic_id in ids.items():
        ctx.add_topic_id(name, topic_id)
    leader_index = 0
    for topic in ids:
        for p in range(num_partitions):
            replicas = [brokers[(i + leader_index) % len(brokers)] for i in range(replication_factor)]
            ctx.update_partition_full_replica_assignment(
                TopicPartition(topic, p), ReplicaAssignment.of(replicas)
            )
            leader_index += 1
    return ctx


@dataclass
class Harness:
    ctx: ControllerContext
    channel: RecordingBrokerChannel
    batch: ControllerBrokerRequestBatch
    events: list[object] = field(default_factory=list)

    def lai_requests(self, broker_id: int) -> list[LeaderAndIsrRequest]:
        return self.channel.requests_to(broker_id, LeaderAndIsrRequest)

    def um_requests(self, broker_id: int) -> list[UpdateMetadataRequest]:
        return self.channel.requests_to(broker_id, UpdateMetadataRequest)

    def sr_requests(self, broker_id: int) -> list[StopReplicaRequest]:
        return self.channel.requests_to(broker_id, StopReplicaRequest)

    def sent_to(self, broker_id: int) -> list[SentRequest]:
        return [s for s in self.channel.sent if s.broker_id == broker_id]


def harness(
    ctx: ControllerContext | None = None, ibp: InterBrokerProtocolVersion | str = "2.8-IV1"
) -> Harness:
    ctx = ctx if ctx is not None else init_context()
    channel = RecordingBrokerChannel()
    events: list[object] = []
    batch = ControllerBrokerRequestBatch(CONTROLLER_ID, ctx, channel, events.append, ibp=ibp)
    return Harness(ctx, channel, batch, events)


def lice(leader: int, isr: Sequence[int], epoch: int = CONTROLLER_EPOCH) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(leader, isr), epoch)


def assignment(replicas: Sequence[int]) -> ReplicaAssignment:
    return ReplicaAssignment.of(replicas)


class LeaderAndDelete(NamedTuple):
    """Kafka's test helper; the leader epoch differs per leader so mix-ups show."""

    leader_and_isr: LeaderAndIsr
    delete_partition: bool

    @staticmethod
    def of(leader: int, delete_partition: bool) -> LeaderAndDelete:
        return LeaderAndDelete(LeaderAndIsr(leader, 10 + leader, (), 0), delete_partition)


def expected_stop_replica_states(
    partitions: Mapping[TopicPartition, LeaderAndDelete],
    queued_for_deletion: frozenset[str] = frozenset(),
    version: int = 3,
) -> dict[TopicPartition, StopReplicaPartitionState]:
    """Kafka's ``partitionStates``: leader epochs are on the wire only from v3."""
    out = {}
    for tp, (lai, delete) in partitions.items():
        if version < 3:
            epoch = NO_EPOCH
        elif tp.topic in queued_for_deletion:
            epoch = EPOCH_DURING_DELETE
        else:
            epoch = lai.leader_epoch
        out[tp] = StopReplicaPartitionState(tp.partition, epoch, delete)
    return out


def queue_stop_replicas(
    h: Harness, partitions: Mapping[TopicPartition, LeaderAndDelete], brokers: Sequence[int] = (2,)
) -> None:
    for tp, (lai, delete) in partitions.items():
        h.ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(lai, CONTROLLER_EPOCH))
        h.batch.add_stop_replica_request_for_brokers(brokers, tp, delete)


def expected_version(ibp: InterBrokerProtocolVersion, thresholds: Sequence[tuple[str, int]]) -> int:
    """The request version for ``ibp`` from a (minimum IBP, version) table, newest first."""
    for minimum, version in thresholds:
        if ibp >= parse_ibp(minimum):
            return version
    return 0


LAI_VERSIONS = [("3.4-IV0", 7), ("3.2-IV0", 6), ("2.8-IV1", 5), ("2.4-IV1", 4), ("2.4-IV0", 3)]
LAI_VERSIONS += [("2.2-IV0", 2), ("1.0-IV0", 1)]
UM_VERSIONS = [("3.4-IV0", 8), ("2.8-IV1", 7), ("2.4-IV1", 6), ("2.2-IV0", 5), ("1.0-IV0", 4)]
UM_VERSIONS += [("0.10.2-IV0", 3), ("0.10.0-IV1", 2), ("0.9.0", 1)]
SR_VERSIONS = [("3.4-IV0", 4), ("2.6-IV0", 3), ("2.4-IV1", 2), ("2.2-IV0", 1)]


# ---------------------------------------------------------------------------------------- LeaderAndIsr
def test_leader_and_isr_request_sent() -> None:
    h = harness()
    partitions = {FOO0: LeaderAndIsr.initial(1, [1, 2]), FOO1: LeaderAndIsr.initial(2, [2, 3])}
    partitions[BAR1] = LeaderAndIsr.initial(3, [1, 3])
    h.batch.new_batch()
    for tp, lai in partitions.items():
        leadership = LeaderIsrAndControllerEpoch(lai, CONTROLLER_EPOCH)
        h.ctx.put_partition_leadership_info(tp, leadership)
        h.batch.add_leader_and_isr_request_for_brokers([2], tp, leadership, assignment([1, 2, 3]), False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    lai_requests, um_requests = h.lai_requests(2), h.um_requests(2)
    assert len(lai_requests) == 1
    assert len(um_requests) == 1
    request = lai_requests[0]
    assert request.controller_id == CONTROLLER_ID
    assert request.controller_epoch == CONTROLLER_EPOCH
    states = {TopicPartition(s.topic, s.partition): s for s in request.partition_states}
    assert set(states) == set(partitions)
    assert {tp: s.leader for tp, s in states.items()} == {tp: lai.leader for tp, lai in partitions.items()}
    assert {tp: s.isr for tp, s in states.items()} == {tp: lai.isr for tp, lai in partitions.items()}
    assert request.topic_ids == {"foo": h.ctx.topic_ids["foo"], "bar": h.ctx.topic_ids["bar"]}

    assert h.channel.respond_all(broker_id=2) == 2  # the LeaderAndIsr and the UpdateMetadata
    lai_events = [e for e in h.events if isinstance(e, LeaderAndIsrResponseNotice)]
    assert len(lai_events) == 1
    event = lai_events[0]
    assert event.broker_id == 2
    assert set(event.response.partition_errors) == set(partitions)
    assert event.response.error is Errors.NONE


def test_leader_and_isr_request_is_new() -> None:
    h = harness()
    leadership = lice(1, [1, 2])
    h.ctx.put_partition_leadership_info(FOO0, leadership)
    h.batch.new_batch()
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, leadership, assignment([1, 2, 3]), True)
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, leadership, assignment([1, 2, 3]), False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    lai_requests = h.lai_requests(2)
    assert len(lai_requests) == 1
    assert len(h.um_requests(2)) == 1
    states = lai_requests[0].partition_states
    assert [TopicPartition(s.topic, s.partition) for s in states] == [FOO0]
    assert states[0].is_new is True


def test_leader_and_isr_request_sent_to_live_or_shutting_down_brokers() -> None:
    h = harness()
    h.ctx.shutting_down_broker_ids.add(2)
    h.ctx.remove_live_brokers({3})
    leadership = lice(1, [1, 2])
    h.ctx.put_partition_leadership_info(FOO0, leadership)
    h.batch.new_batch()
    h.batch.add_leader_and_isr_request_for_brokers([1, 2, 3], FOO0, leadership, assignment([1, 2, 3]), False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {1, 2}
    for broker_id in (1, 2):
        lai_requests = h.lai_requests(broker_id)
        assert len(lai_requests) == 1
        assert len(h.um_requests(broker_id)) == 1
        assert [TopicPartition(s.topic, s.partition) for s in lai_requests[0].partition_states] == [FOO0]


def test_leader_and_isr_inter_broker_protocol_version_latest() -> None:
    h = harness(ibp=InterBrokerProtocolVersion.parse("2.8-IV1"))
    default = ControllerBrokerRequestBatch(CONTROLLER_ID, h.ctx, h.channel, h.events.append)
    assert default.ibp == h.batch.ibp
    _leader_and_isr_follows_ibp(h, 5)


@pytest.mark.parametrize("ibp", ALL_IBPS, ids=str)
def test_leader_and_isr_inter_broker_protocol_version(ibp: InterBrokerProtocolVersion) -> None:
    _leader_and_isr_follows_ibp(harness(ibp=ibp), expected_version(ibp, LAI_VERSIONS))


def _leader_and_isr_follows_ibp(h: Harness, expected: int) -> None:
    leadership = lice(1, [1, 2])
    h.ctx.put_partition_leadership_info(FOO0, leadership)
    h.batch.new_batch()
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, leadership, assignment([1, 2, 3]), False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    requests = h.lai_requests(2)
    assert len(requests) == 1
    assert requests[0].version == expected, f"IBP {h.batch.ibp} should use version {expected}"
    # What the broker sees: real ids from v5 (2.8-IV1), zero ids for the grouped v2-v4, none before.
    if expected >= 5:
        assert requests[0].topic_ids == {"foo": h.ctx.topic_ids["foo"]}
        assert requests[0].topic_ids["foo"] != ZERO_UUID
    elif expected >= 2:
        assert requests[0].topic_ids == {"foo": ZERO_UUID}
    else:
        assert requests[0].topic_ids == {}


# ---------------------------------------------------------------------------------------- UpdateMetadata
def _three_partitions() -> dict[TopicPartition, LeaderAndIsr]:
    return {
        FOO0: LeaderAndIsr.initial(1, [1, 2]),
        FOO1: LeaderAndIsr.initial(2, [2, 3]),
        BAR1: LeaderAndIsr.initial(3, [1, 3]),
    }


def test_update_metadata_request_sent() -> None:
    topic_ids = {"foo": random_topic_id(), "bar": random_topic_id()}
    h = harness(init_context(topic_ids=topic_ids))
    partitions = _three_partitions()
    for tp, lai in partitions.items():
        h.ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(lai, CONTROLLER_EPOCH))
    h.batch.new_batch()
    h.batch.add_update_metadata_request_for_brokers([2], set(partitions))
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    requests = h.um_requests(2)
    assert len(requests) == 1
    request = requests[0]
    states = {TopicPartition(s.topic, s.partition): s for s in request.partition_states}
    assert len(request.partition_states) == 3
    assert {tp: s.leader for tp, s in states.items()} == {tp: lai.leader for tp, lai in partitions.items()}
    assert {tp: s.isr for tp, s in states.items()} == {tp: lai.isr for tp, lai in partitions.items()}
    assert request.topic_ids == topic_ids
    assert request.controller_id == CONTROLLER_ID
    assert request.controller_epoch == CONTROLLER_EPOCH
    assert len(request.live_brokers) == 3
    assert {b.id for b in request.live_brokers} == {1, 2, 3}

    assert h.channel.respond_all(error=Errors.STALE_BROKER_EPOCH) == 1
    assert len(h.events) == 1
    event = h.events[0]
    assert isinstance(event, UpdateMetadataResponseNotice)
    assert event.broker_id == 2
    assert event.response.error is Errors.STALE_BROKER_EPOCH


def test_update_metadata_does_not_include_partitions_without_leader_and_isr() -> None:
    h = harness()
    h.batch.new_batch()
    h.batch.add_update_metadata_request_for_brokers([2], {FOO0, FOO1, BAR1})
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    requests = h.um_requests(2)
    assert len(requests) == 1
    assert requests[0].partition_states == ()
    assert {b.id for b in requests[0].live_brokers} == {1, 2, 3}


def test_update_metadata_request_during_topic_deletion() -> None:
    h = harness()
    partitions = _three_partitions()
    for tp, lai in partitions.items():
        h.ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(lai, CONTROLLER_EPOCH))
    h.ctx.queue_topic_deletion({"foo"})
    h.batch.new_batch()
    h.batch.add_update_metadata_request_for_brokers([2], set(partitions))
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    requests = h.um_requests(2)
    assert len(requests) == 1
    states = {TopicPartition(s.topic, s.partition): s for s in requests[0].partition_states}
    assert len(states) == 3
    assert all(s.leader == LEADER_DURING_DELETE for tp, s in states.items() if tp.topic == "foo")
    assert {tp: s.leader for tp, s in states.items() if tp.topic == "bar"} == {BAR1: 3}
    assert {tp: s.isr for tp, s in states.items()} == {tp: lai.isr for tp, lai in partitions.items()}
    assert {b.id for b in requests[0].live_brokers} == {1, 2, 3}


def test_update_metadata_includes_live_or_shutting_down_brokers() -> None:
    h = harness()
    h.ctx.shutting_down_broker_ids.add(2)
    h.ctx.remove_live_brokers({3})
    h.batch.new_batch()
    h.batch.add_update_metadata_request_for_brokers([1, 2, 3], set())
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.channel.broker_ids() == {1, 2}
    for broker_id in (1, 2):
        requests = h.um_requests(broker_id)
        assert len(requests) == 1
        assert requests[0].partition_states == ()
        assert {b.id for b in requests[0].live_brokers} == {1, 2}


@pytest.mark.parametrize("ibp", ALL_IBPS, ids=str)
def test_update_metadata_inter_broker_protocol_version(ibp: InterBrokerProtocolVersion) -> None:
    h = harness(ibp=ibp)
    h.batch.new_batch()
    h.batch.add_update_metadata_request_for_brokers([2], set())
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    expected = expected_version(ibp, UM_VERSIONS)
    assert [r.version for r in h.um_requests(2)] == [expected]


# ---------------------------------------------------------------------------------------- StopReplica
def _foo0_foo1_bar1(delete: bool) -> dict[TopicPartition, LeaderAndDelete]:
    return {
        FOO0: LeaderAndDelete.of(1, delete),
        FOO1: LeaderAndDelete.of(2, delete),
        BAR1: LeaderAndDelete.of(3, delete),
    }


def test_stop_replica_request_sent() -> None:
    h = harness()
    partitions = _foo0_foo1_bar1(False)
    h.batch.new_batch()
    queue_stop_replicas(h, partitions)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    assert len(h.sent_to(2)) == 1
    requests = h.sr_requests(2)
    assert len(requests) == 1
    assert requests[0].partition_states == expected_stop_replica_states(partitions)
    assert requests[0].delete_partitions is False
    h.channel.respond_all()
    assert h.events == []


def test_stop_replica_request_with_already_defined_deleted_partition() -> None:
    h = harness()
    lai = LeaderAndIsr.initial(1, [1, 2])
    h.ctx.put_partition_leadership_info(FOO0, LeaderIsrAndControllerEpoch(lai, CONTROLLER_EPOCH))
    h.batch.new_batch()
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, True)
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    requests = h.sr_requests(2)
    assert len(requests) == 1
    assert requests[0].partition_states == expected_stop_replica_states({FOO0: LeaderAndDelete(lai, True)})


@pytest.mark.parametrize("ibp", ALL_IBPS, ids=str)
def test_stop_replica_requests_while_topic_queued_for_deletion(ibp: InterBrokerProtocolVersion) -> None:
    h = harness(ibp=ibp)
    partitions = _foo0_foo1_bar1(True)
    h.ctx.queue_topic_deletion({"foo"})  # queued, but deletion has not begun
    h.batch.new_batch()
    queue_stop_replicas(h, partitions)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    assert len(h.sent_to(2)) == 1
    requests = h.sr_requests(2)
    assert len(requests) == 1
    version = requests[0].version
    assert requests[0].partition_states == expected_stop_replica_states(
        partitions, frozenset({"foo"}), version
    )
    h.channel.respond_all()
    assert h.events == []  # no events: deletion has not started


@pytest.mark.parametrize("ibp", ALL_IBPS, ids=str)
def test_stop_replica_requests_while_topic_deletion_started(ibp: InterBrokerProtocolVersion) -> None:
    h = harness(ibp=ibp)
    partitions = _foo0_foo1_bar1(True)
    h.ctx.queue_topic_deletion({"foo"})
    h.ctx.begin_topic_deletion({"foo"})
    h.batch.new_batch()
    queue_stop_replicas(h, partitions)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    assert len(h.sent_to(2)) == 1
    requests = h.sr_requests(2)
    assert len(requests) == 1
    version = requests[0].version
    assert requests[0].partition_states == expected_stop_replica_states(
        partitions, frozenset({"foo"}), version
    )

    h.channel.respond_all()
    assert len(h.events) == 1
    event = h.events[0]
    assert isinstance(event, TopicDeletionStopReplicaResponseNotice)
    assert event.broker_id == 2
    assert event.error is Errors.NONE
    assert set(event.partition_errors) == {FOO0, FOO1}  # only the topic being deleted


@pytest.mark.parametrize("ibp", ALL_IBPS, ids=str)
def test_stop_replica_request_without_delete_partition_while_topic_deletion_started(
    ibp: InterBrokerProtocolVersion,
) -> None:
    h = harness(ibp=ibp)
    partitions = _foo0_foo1_bar1(False)
    h.ctx.queue_topic_deletion({"foo"})
    h.ctx.begin_topic_deletion({"foo"})
    h.batch.new_batch()
    queue_stop_replicas(h, partitions)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    requests = h.sr_requests(2)
    assert len(requests) == 1
    version = requests[0].version
    assert requests[0].partition_states == expected_stop_replica_states(
        partitions, frozenset({"foo"}), version
    )
    h.channel.respond_all()
    assert h.events == []


@pytest.mark.parametrize("ibp", ALL_IBPS, ids=str)
def test_mixed_delete_and_not_delete_stop_replica_requests(ibp: InterBrokerProtocolVersion) -> None:
    h = harness(ibp=ibp)
    delete_partitions = {FOO0: LeaderAndDelete.of(1, True), FOO1: LeaderAndDelete.of(2, True)}
    non_delete_partitions = {BAR0: LeaderAndDelete.of(1, False), BAR1: LeaderAndDelete.of(2, False)}
    h.batch.new_batch()
    queue_stop_replicas(h, delete_partitions)
    queue_stop_replicas(h, non_delete_partitions)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    requests = h.sr_requests(2)
    expected = expected_version(ibp, SR_VERSIONS)
    assert {r.version for r in requests} == {expected}
    if ibp >= parse_ibp("2.6-IV0"):  # one request with per-partition delete flags
        assert len(requests) == 1
        both = delete_partitions | non_delete_partitions
        assert requests[0].partition_states == expected_stop_replica_states(both, version=expected)
        assert requests[0].delete_partitions is False
    else:  # two requests, delete=true first
        assert len(requests) == 2
        with_delete, without_delete = requests
        assert with_delete.delete_partitions is True
        assert with_delete.partition_states == expected_stop_replica_states(
            delete_partitions, version=expected
        )
        assert without_delete.delete_partitions is False
        assert without_delete.partition_states == expected_stop_replica_states(
            non_delete_partitions, version=expected
        )


def test_stop_replica_groups_by_broker() -> None:
    h = harness()
    partitions = _foo0_foo1_bar1(False)
    h.batch.new_batch()
    queue_stop_replicas(h, partitions, brokers=(2, 3))
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2, 3}
    for broker_id in (2, 3):
        assert len(h.sent_to(broker_id)) == 1
        requests = h.sr_requests(broker_id)
        assert len(requests) == 1
        assert requests[0].partition_states == expected_stop_replica_states(partitions)
    h.channel.respond_all()
    assert h.events == []


def test_stop_replica_sent_only_to_live_and_shutting_down_brokers() -> None:
    h = harness()
    h.ctx.shutting_down_broker_ids.add(2)
    h.ctx.remove_live_brokers({3})
    partitions = _foo0_foo1_bar1(False)
    h.batch.new_batch()
    queue_stop_replicas(h, partitions, brokers=(2, 3))
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    requests = h.sr_requests(2)
    assert len(requests) == 1
    assert requests[0].partition_states == expected_stop_replica_states(partitions)


@pytest.mark.parametrize("ibp", ALL_IBPS, ids=str)
def test_stop_replica_inter_broker_protocol_version(ibp: InterBrokerProtocolVersion) -> None:
    h = harness(init_context(topic_ids={"foo": random_topic_id()}), ibp=ibp)
    h.ctx.put_partition_leadership_info(FOO0, lice(1, [1, 2]))
    h.batch.new_batch()
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    assert h.events == []
    assert h.channel.broker_ids() == {2}
    expected = expected_version(ibp, SR_VERSIONS)
    assert [r.version for r in h.sr_requests(2)] == [expected]


# ---------------------------------------------------------------------------------------- batch invariants
def _pending_leader_and_isr(h: Harness) -> None:
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, lice(1, [1, 2]), assignment([1, 2, 3]), False)


def _pending_stop_replica(h: Harness) -> None:
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, False)


def _pending_update_metadata_brokers(h: Harness) -> None:
    h.batch.add_update_metadata_request_for_brokers([2], set())


@pytest.mark.parametrize(
    ("pending", "named"),
    [
        (_pending_leader_and_isr, "LeaderAndIsr"),
        (_pending_stop_replica, "StopReplica"),
        (_pending_update_metadata_brokers, "UpdateMetadata"),
    ],
)
def test_new_batch_raises_when_previous_batch_not_empty(pending: object, named: str) -> None:
    h = harness()
    h.batch.new_batch()
    pending(h)  # type: ignore[operator]
    with pytest.raises(IllegalControllerStateError, match=f"not empty.*{named}") as info:
        h.batch.new_batch()
    assert "\n" not in str(info.value)
    # new_batch clears nothing: the pending requests are still there and still raise.
    with pytest.raises(IllegalControllerStateError):
        h.batch.new_batch()
    h.batch.clear()
    h.batch.new_batch()


def test_new_batch_ignores_update_metadata_partition_map() -> None:
    h = harness()
    h.ctx.put_partition_leadership_info(FOO0, lice(1, [1, 2]))
    h.batch.add_update_metadata_request_for_brokers([-1], {FOO0})
    assert set(h.batch.update_metadata_request_partition_info_map) == {FOO0}
    assert not h.batch.update_metadata_request_broker_set
    h.batch.new_batch()  # does not raise
    assert set(h.batch.update_metadata_request_partition_info_map) == {FOO0}  # and does not clear


def test_clear_empties_all_four_structures() -> None:
    h = harness()
    h.ctx.put_partition_leadership_info(FOO0, lice(1, [1, 2]))
    _pending_leader_and_isr(h)
    _pending_stop_replica(h)
    assert h.batch.leader_and_isr_request_map and h.batch.stop_replica_request_map
    assert h.batch.update_metadata_request_broker_set and h.batch.update_metadata_request_partition_info_map
    h.batch.clear()
    assert not h.batch.leader_and_isr_request_map
    assert not h.batch.stop_replica_request_map
    assert not h.batch.update_metadata_request_broker_set
    assert not h.batch.update_metadata_request_partition_info_map
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert h.channel.sent == []


def test_is_new_is_sticky_per_broker_in_either_order() -> None:
    h = harness()
    leadership = lice(1, [1, 2])
    h.batch.add_leader_and_isr_request_for_brokers([2, 3], FOO0, leadership, assignment([1, 2, 3]), False)
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, leadership, assignment([1, 2, 3]), True)
    h.batch.add_leader_and_isr_request_for_brokers([2, 3], FOO0, leadership, assignment([1, 2, 3]), False)
    requests = h.batch.leader_and_isr_request_map
    assert requests[2][FOO0].is_new is True
    assert requests[3][FOO0].is_new is False  # broker 3 never had it queued as new


def test_delete_partition_is_sticky_per_broker() -> None:
    h = harness()
    h.batch.add_stop_replica_request_for_brokers([2, 3], FOO0, False)
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, True)
    h.batch.add_stop_replica_request_for_brokers([2, 3], FOO0, False)
    requests = h.batch.stop_replica_request_map
    assert requests[2][FOO0].delete_partition is True
    assert requests[3][FOO0].delete_partition is False


def test_negative_broker_ids_are_ignored() -> None:
    h = harness()
    h.batch.add_update_metadata_request_for_brokers([-1, 1], set())
    h.batch.add_stop_replica_request_for_brokers([-1], FOO1, True)
    assert set(h.batch.update_metadata_request_broker_set) == {1}
    assert not h.batch.stop_replica_request_map
    h.batch.add_leader_and_isr_request_for_brokers([-1], FOO1, lice(2, [2]), assignment([2]), False)
    assert not h.batch.leader_and_isr_request_map
    # The LeaderAndIsr still queues UpdateMetadata to every live broker, as in Kafka.
    assert set(h.batch.update_metadata_request_broker_set) == {1, 2, 3}


def test_negative_broker_ids_are_ignored_when_queued_with_valid_ones() -> None:
    h = harness()
    h.batch.add_leader_and_isr_request_for_brokers(
        [-1, 2], FOO0, lice(1, [1, 2]), assignment([1, 2, 3]), False
    )
    h.batch.add_stop_replica_request_for_brokers([-2, 3], FOO0, False)
    h.batch.add_update_metadata_request_for_brokers([-5], set())
    assert set(h.batch.leader_and_isr_request_map) == {2}
    assert set(h.batch.stop_replica_request_map) == {3}
    assert set(h.batch.update_metadata_request_broker_set) == {1, 2, 3}


def test_leader_and_isr_takes_controller_epoch_from_leadership() -> None:
    h = harness()
    leadership = lice(1, [1, 2], epoch=5)
    h.ctx.put_partition_leadership_info(FOO0, leadership)
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, leadership, assignment([1, 2, 3]), False)
    h.batch.send_requests_to_brokers(7)

    (request,) = h.lai_requests(2)
    assert request.controller_epoch == 7
    assert request.partition_states[0].controller_epoch == 5
    (metadata,) = h.um_requests(2)
    assert metadata.controller_epoch == 7
    assert metadata.partition_states[0].controller_epoch == 5


def test_leader_and_isr_partition_state_carries_the_full_assignment() -> None:
    h = harness()
    reassigning = ReplicaAssignment.of([4, 2, 5, 3, 1], [5], [1])
    leadership = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 7, (2, 3), 11), CONTROLLER_EPOCH)
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, leadership, reassigning, True)
    state = h.batch.leader_and_isr_request_map[2][FOO0]
    assert (state.topic, state.partition, state.leader, state.leader_epoch, state.zk_version) == (
        "foo",
        0,
        2,
        7,
        11,
    )
    assert (state.isr, state.replicas) == ((2, 3), (4, 2, 5, 3, 1))
    assert (state.adding_replicas, state.removing_replicas, state.is_new) == ((5,), (1,), True)


def test_leader_and_isr_adds_update_metadata_for_all_live_or_shutting_down_brokers() -> None:
    h = harness()
    h.ctx.shutting_down_broker_ids.add(3)
    leadership = lice(1, [1, 2])
    h.ctx.put_partition_leadership_info(FOO0, leadership)
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, leadership, assignment([1, 2, 3]), False)
    assert set(h.batch.update_metadata_request_broker_set) == {1, 2, 3}
    assert set(h.batch.update_metadata_request_partition_info_map) == {FOO0}
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    for broker_id in (1, 2, 3):
        (metadata,) = h.um_requests(broker_id)
        assert [(s.topic, s.partition, s.leader) for s in metadata.partition_states] == [("foo", 0, 1)]


def test_leader_and_isr_request_carries_broker_epoch_and_live_leaders() -> None:
    ctx = init_context(brokers=(1, 2, 3, 4))
    ctx.set_live_brokers({Broker(b, (EndPoint("h", 9000 + b),), f"rack{b}"): 100 + b for b in (1, 2, 3, 4)})
    ctx.remove_live_brokers({3})  # leader of bar-1 is dead
    h = harness(ctx)
    for tp, leadership in ((FOO0, lice(1, [1, 2])), (FOO1, lice(2, [2])), (BAR1, lice(3, [3]))):
        h.batch.add_leader_and_isr_request_for_brokers([2, 4], tp, leadership, assignment([1, 2, 3]), False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)

    for broker_id in (2, 4):
        (request,) = h.lai_requests(broker_id)
        assert request.broker_epoch == 100 + broker_id
        assert request.live_leaders == (
            ctx.live_or_shutting_down_broker(1),
            ctx.live_or_shutting_down_broker(2),
        )
        (metadata,) = h.um_requests(broker_id)
        assert metadata.broker_epoch == 100 + broker_id


def test_live_leaders_use_the_inter_broker_listener() -> None:
    ctx = init_context()
    internal = {b: EndPoint("internal", 19000 + b, "INTERNAL", "SSL") for b in (1, 2, 3)}
    ctx.set_live_brokers(
        {Broker(b, (EndPoint("external", 9000 + b), internal[b]), "r1"): 1 for b in (1, 2, 3)}
    )
    channel = RecordingBrokerChannel()
    batch = ControllerBrokerRequestBatch(
        1, ctx, channel, lambda e: None, inter_broker_listener_name="INTERNAL"
    )
    batch.add_leader_and_isr_request_for_brokers([2], FOO0, lice(1, [1, 2]), assignment([1, 2, 3]), False)
    batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    (request,) = channel.requests_to(2, LeaderAndIsrRequest)
    assert request.live_leaders == (Broker(1, (internal[1],), "r1"),)


def test_leader_and_isr_unknown_topic_id_is_zero_uuid() -> None:
    h = harness()
    h.ctx.all_topics.add("baz")  # a topic without an id
    h.batch.add_leader_and_isr_request_for_brokers(
        [2], TopicPartition("baz", 0), lice(1, [1]), assignment([1]), False
    )
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    (request,) = h.lai_requests(2)
    assert request.topic_ids == {"baz": ZERO_UUID}


def test_update_metadata_computes_offline_replicas() -> None:
    h = harness()
    h.ctx.remove_live_brokers({3})
    h.ctx.shutting_down_broker_ids.add(1)  # shutting-down brokers count as offline
    h.ctx.replicas_on_offline_dirs[2] = {FOO0}
    h.ctx.put_partition_leadership_info(FOO0, lice(2, [1, 2, 3]))
    h.ctx.put_partition_leadership_info(FOO1, lice(2, [2]))
    h.batch.add_update_metadata_request_for_brokers([2], {FOO0, FOO1})
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    (metadata,) = h.um_requests(2)
    states = {TopicPartition(s.topic, s.partition): s for s in metadata.partition_states}
    assert states[FOO0].replicas == (1, 2, 3)
    assert states[FOO0].offline_replicas == (1, 2, 3)
    assert states[FOO1].replicas == (2, 3, 1)
    assert states[FOO1].offline_replicas == (3, 1)


def test_update_metadata_during_deletion_zeroes_leader_epoch_and_zk_version() -> None:
    h = harness()
    h.ctx.put_partition_leadership_info(FOO0, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 9, (1, 2), 4), 3))
    h.ctx.put_partition_leadership_info(BAR0, LeaderIsrAndControllerEpoch(LeaderAndIsr(3, 9, (3,), 4), 3))
    h.ctx.queue_topic_deletion({"foo"})
    h.batch.add_update_metadata_request_for_brokers([2], [FOO0, BAR0])
    state = h.batch.update_metadata_request_partition_info_map[FOO0]
    assert (state.leader, state.leader_epoch, state.zk_version, state.isr) == (
        LEADER_DURING_DELETE,
        0,
        0,
        (1, 2),
    )
    assert state.controller_epoch == 3
    other = h.batch.update_metadata_request_partition_info_map[BAR0]
    assert (other.leader, other.leader_epoch, other.zk_version, other.isr) == (3, 9, 4, (3,))


@pytest.mark.parametrize(("ibp", "with_ids"), [("2.8-IV0", False), ("2.8-IV1", True), ("3.4-IV0", True)])
def test_update_metadata_topic_ids_only_from_v7(ibp: str, with_ids: bool) -> None:
    h = harness(ibp=ibp)
    h.ctx.put_partition_leadership_info(FOO0, lice(1, [1]))
    h.ctx.all_topics.add("baz")
    h.ctx.update_partition_full_replica_assignment(TopicPartition("baz", 0), assignment([1]))
    h.ctx.put_partition_leadership_info(TopicPartition("baz", 0), lice(1, [1]))
    h.batch.add_update_metadata_request_for_brokers([2], [FOO0, TopicPartition("baz", 0)])
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    (metadata,) = h.um_requests(2)
    assert metadata.topic_ids == ({"foo": h.ctx.topic_ids["foo"]} if with_ids else {})


def test_update_metadata_v0_carries_only_plaintext_endpoints() -> None:
    ctx = init_context()
    ssl = EndPoint("h", 9443, "SSL", "SSL")
    ctx.set_live_brokers({Broker(b, (ssl, EndPoint("h", 9000 + b)), "r"): 1 for b in (1, 2, 3)})
    h = harness(ctx, ibp="0.8.2")
    h.batch.add_update_metadata_request_for_brokers([2], set())
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    (metadata,) = h.um_requests(2)
    assert metadata.version == 0
    assert {b.id: b.endpoints for b in metadata.live_brokers} == {
        b: (EndPoint("h", 9000 + b),) for b in (1, 2, 3)
    }
    assert all(b.rack == "r" for b in metadata.live_brokers)


def test_update_metadata_requests_share_one_partition_list() -> None:
    h = harness()
    h.ctx.put_partition_leadership_info(FOO0, lice(1, [1, 2]))
    h.batch.add_update_metadata_request_for_brokers([1, 2, 3], {FOO0})
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    requests = [r for b in (1, 2, 3) for r in h.um_requests(b)]
    assert len(requests) == 3
    assert requests[0].partition_states is requests[1].partition_states is requests[2].partition_states
    assert len(requests[0].partition_states) == 1


def test_stop_replica_leader_epoch_is_no_epoch_without_leadership() -> None:
    h = harness()
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, False)
    assert h.batch.stop_replica_request_map[2][FOO0] == StopReplicaPartitionState(0, NO_EPOCH, False)


def test_stop_replica_partitions_grouped_by_topic() -> None:
    h = harness()
    for tp in (FOO0, BAR1, FOO1, BAR0):
        h.batch.add_stop_replica_request_for_brokers([2], tp, False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    (request,) = h.sr_requests(2)
    assert list(request.partition_states) == [FOO0, FOO1, BAR1, BAR0]


def test_requests_sent_in_order_leader_and_isr_update_metadata_stop_replica() -> None:
    h = harness()
    h.batch.add_stop_replica_request_for_brokers([2], FOO1, False)
    h.batch.add_update_metadata_request_for_brokers([2], set())
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, lice(1, [1, 2]), assignment([1, 2, 3]), False)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    kinds = [type(s.request) for s in h.sent_to(2)]
    assert kinds == [LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest]


def test_entries_for_dead_brokers_are_dropped_after_send() -> None:
    h = harness()
    h.ctx.remove_live_brokers({3})
    h.batch.add_leader_and_isr_request_for_brokers([3], FOO0, lice(1, [1]), assignment([1, 2, 3]), False)
    h.batch.add_stop_replica_request_for_brokers([3], FOO1, True)
    h.batch.add_update_metadata_request_for_brokers([3], set())
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert 3 not in h.channel.broker_ids()
    assert not h.batch.leader_and_isr_request_map and not h.batch.stop_replica_request_map
    assert not h.batch.update_metadata_request_broker_set
    h.batch.new_batch()


def test_send_failure_leaves_batch_uncleared() -> None:
    h = harness()
    h.ctx.put_partition_leadership_info(FOO0, lice(1, [1, 2]))
    _pending_leader_and_isr(h)
    _pending_stop_replica(h)
    boom = RuntimeError("connection refused")
    h.channel.fail_sends(boom)
    with pytest.raises(IllegalControllerStateError, match="connection refused") as info:
        h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert info.value.__cause__ is boom
    assert set(h.batch.leader_and_isr_request_map) == {2}
    assert set(h.batch.stop_replica_request_map) == {2}
    assert set(h.batch.update_metadata_request_broker_set) == {1, 2, 3}
    assert set(h.batch.update_metadata_request_partition_info_map) == {FOO0}
    with pytest.raises(IllegalControllerStateError):
        h.batch.new_batch()
    h.batch.clear()  # what the controller's handle_illegal_state does
    h.batch.new_batch()


def test_send_failure_midway_keeps_unsent_structures() -> None:
    h = harness()
    _pending_leader_and_isr(h)
    _pending_stop_replica(h)
    h.channel.fail_sends(RuntimeError("broken pipe"), after=2)  # LeaderAndIsr and one UpdateMetadata go out
    with pytest.raises(IllegalControllerStateError):
        h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert len(h.channel.sent) == 2
    assert not h.batch.leader_and_isr_request_map  # sent, so cleared (as in Kafka)
    assert set(h.batch.update_metadata_request_broker_set) == {1, 2, 3}
    assert set(h.batch.stop_replica_request_map) == {2}


def test_stop_replica_error_response_reports_every_deleted_partition() -> None:
    h = harness()
    h.ctx.queue_topic_deletion({"foo"})
    h.ctx.begin_topic_deletion({"foo"})
    for tp in (FOO0, FOO1, BAR1):
        h.batch.add_stop_replica_request_for_brokers([2], tp, True)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert h.channel.respond(0, StopReplicaResponse(Errors.STALE_BROKER_EPOCH)) is True
    (event,) = h.events
    assert event == TopicDeletionStopReplicaResponseNotice(
        2, Errors.STALE_BROKER_EPOCH, {FOO0: Errors.STALE_BROKER_EPOCH, FOO1: Errors.STALE_BROKER_EPOCH}
    )


def test_stop_replica_event_carries_per_partition_errors() -> None:
    h = harness()
    h.ctx.queue_topic_deletion({"foo"})
    h.ctx.begin_topic_deletion({"foo"})
    h.batch.add_stop_replica_request_for_brokers([2], FOO0, True)
    h.batch.add_stop_replica_request_for_brokers([2], FOO1, True)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    errors = {FOO0: Errors.KAFKA_STORAGE_ERROR, FOO1: Errors.NONE}
    h.channel.respond(0, StopReplicaResponse(Errors.NONE, errors))
    assert h.events == [TopicDeletionStopReplicaResponseNotice(2, Errors.NONE, errors)]


def test_response_callback_rejects_a_response_of_another_kind() -> None:
    h = harness()
    _pending_leader_and_isr(h)
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    with pytest.raises(TypeError, match="LeaderAndIsrResponse"):
        h.channel.respond(0, UpdateMetadataResponse(Errors.NONE))
    assert h.events == []
    h.channel.respond(0, LeaderAndIsrResponse(Errors.NONE))
    assert h.events == [LeaderAndIsrResponseNotice(LeaderAndIsrResponse(Errors.NONE), 2)]


def test_bad_ibp_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match=r"2\.9"):
        ControllerBrokerRequestBatch(1, init_context(), RecordingBrokerChannel(), lambda e: None, ibp="2.9")


def test_leader_and_isr_update_metadata_computes_offline_replicas() -> None:
    h = harness()
    h.ctx.remove_live_brokers({3})
    h.ctx.replicas_on_offline_dirs[1] = {FOO0}
    leadership = lice(2, [1, 2, 3])
    h.ctx.put_partition_leadership_info(FOO0, leadership)
    h.ctx.put_partition_leadership_info(FOO1, leadership)
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, leadership, assignment([1, 2, 3]), False)
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO1, leadership, assignment([2, 3, 1]), False)
    states = h.batch.update_metadata_request_partition_info_map
    assert states[FOO0].offline_replicas == (1, 3)
    assert states[FOO1].offline_replicas == (3,)


def test_update_metadata_brokers_of_leader_and_isr_resolved_on_inspection() -> None:
    """The "all live-or-shutting-down brokers" of a LeaderAndIsr entry are those of the moment
    the batch is next inspected or sent (the same event, in the controller)."""
    h = harness(init_context(brokers=(1, 2)))
    h.batch.add_leader_and_isr_request_for_brokers([2], FOO0, lice(1, [1, 2]), assignment([1, 2]), False)
    h.ctx.add_live_brokers({Broker(4, (EndPoint("localhost", 9904),)): 1})
    assert set(h.batch.update_metadata_request_broker_set) == {1, 2, 4}
    h.ctx.remove_live_brokers({4})
    assert set(h.batch.update_metadata_request_broker_set) == {1, 2, 4}  # resolved once, kept
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert h.channel.broker_ids() == {1, 2}  # only live brokers are sent to


# ------------------------------------------------------------------------------ the recording channel
def test_recording_channel_answers_each_request_once() -> None:
    h = harness()
    _pending_leader_and_isr(h)
    _pending_stop_replica(h)  # delete=false: sent without a callback
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert [s.callback is None for s in h.sent_to(2)] == [False, False, True]
    assert h.channel.respond_all(broker_id=1) == 1  # broker 1's UpdateMetadata
    assert h.channel.respond_all() == 3  # LeaderAndIsr and UpdateMetadata to 2, UpdateMetadata to 3
    assert h.channel.respond_all() == 0
    assert len(h.events) == 4
    h.channel.clear()
    assert h.channel.sent == [] and h.channel.broker_ids() == set()


def test_recording_channel_default_responses() -> None:
    lai = LeaderAndIsrRequest(5, 1, 1, 1, (), {}, ())
    assert default_response(lai, Errors.NOT_CONTROLLER) == LeaderAndIsrResponse(Errors.NOT_CONTROLLER, {})
    sr = StopReplicaRequest(3, 1, 1, 1, False, {FOO0: StopReplicaPartitionState(0, 1, True)})
    assert default_response(sr) == StopReplicaResponse(Errors.NONE, {FOO0: Errors.NONE})


def test_recording_channel_wait_for_sees_sends_from_another_thread() -> None:
    h = harness()
    _pending_leader_and_isr(h)
    sender = threading.Thread(target=h.batch.send_requests_to_brokers, args=(CONTROLLER_EPOCH,))
    sender.start()
    assert h.channel.wait_for(lambda sent: len(sent) == 4, timeout=10.0)  # 1 LeaderAndIsr + 3 UpdateMetadata
    sender.join(timeout=10.0)
    assert not h.channel.wait_for(lambda sent: len(sent) > 4, timeout=0.01)


def test_response_events_name_kafka_controller_states() -> None:
    from kafka_controller.controller.controller_state import ControllerState

    names = {s.kafka_name for s in ControllerState}
    events = (
        LeaderAndIsrResponseNotice,
        UpdateMetadataResponseNotice,
        TopicDeletionStopReplicaResponseNotice,
    )
    assert [e.controller_state for e in events] == [
        "LeaderAndIsrResponseReceived",
        "UpdateMetadataResponseReceived",
        "TopicDeletion",
    ]
    assert all(e.controller_state in names for e in events)
