"""ReplicaStateMachine (docs/controller-behaviour.md §4): Kafka's ReplicaStateMachineTest and the
paths it leaves out.

Ported tests keep Kafka's names in snake_case. "Expect exactly" lists are asserted as the whole
``RecordingRequestBatch.calls`` list and a strict ``ScriptedPartitionStateStore`` + ``verify()``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.replica_state_machine import AbstractReplicaStateMachine, ReplicaStateMachine
from kafka_controller.domain.audit_records import AuditRecord, ReplicaTransition
from kafka_controller.domain.errors import (
    ControllerMovedError,
    IllegalControllerStateError,
    MetadataStoreError,
    NoNodeError,
    StoreUnavailableError,
)
from kafka_controller.domain.states import ReplicaState
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.ports import AuditSink, PartitionStateRead, UpdateLeaderAndIsrResult
from kafka_controller.testing.doubles import RecordingRequestBatch, ScriptedPartitionStateStore

RS = ReplicaState
NEW, ONLINE, OFFLINE = RS.NEW_REPLICA, RS.ONLINE_REPLICA, RS.OFFLINE_REPLICA
STARTED, SUCCESSFUL = RS.REPLICA_DELETION_STARTED, RS.REPLICA_DELETION_SUCCESSFUL
INELIGIBLE, NON_EXISTENT = RS.REPLICA_DELETION_INELIGIBLE, RS.NON_EXISTENT_REPLICA

BROKER_ID = 5
CONTROLLER_EPOCH = 50
PARTITION = TopicPartition("t", 0)
REPLICA = PartitionAndReplica(PARTITION, BROKER_ID)

NEW_BATCH = ("new_batch",)
SEND = ("send_requests_to_brokers", CONTROLLER_EPOCH)


def LAI(leader: int, epoch: int, isr: Sequence[int], zk_version: int) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, tuple(isr), zk_version)


def LICE(lai: LeaderAndIsr, controller_epoch: int = CONTROLLER_EPOCH) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(lai, controller_epoch)


def RA(*replicas: int) -> ReplicaAssignment:
    return ReplicaAssignment.of(replicas)


def leader_and_isr_call(
    brokers: Sequence[int], lice: LeaderIsrAndControllerEpoch, ra: ReplicaAssignment, is_new: bool
) -> tuple[object, ...]:
    return ("add_leader_and_isr_request_for_brokers", tuple(brokers), PARTITION, lice, ra, is_new)


def stop_replica_call(
    delete: bool, broker: int = BROKER_ID, tp: TopicPartition = PARTITION
) -> tuple[object, ...]:
    return ("add_stop_replica_request_for_brokers", (broker,), tp, delete)


def broker(broker_id: int) -> Broker:
    return Broker(broker_id, (EndPoint("localhost", 9997 + broker_id - 5),))


class Harness:
    """Kafka's test setup: controller id 5, context epoch 50, strict store, recording batch."""

    def __init__(self, audit: AuditSink | None = None) -> None:
        self.ctx = ControllerContext()
        self.ctx.epoch = CONTROLLER_EPOCH
        self.store = ScriptedPartitionStateStore()
        self.batch = RecordingRequestBatch()
        self.rsm = ReplicaStateMachine(BROKER_ID, self.ctx, self.store, self.batch, audit=audit)

    def live(self, *ids: int) -> None:
        self.ctx.set_live_brokers({broker(i): 1 for i in ids})

    def assign(self, ra: ReplicaAssignment, tp: TopicPartition = PARTITION) -> None:
        self.ctx.update_partition_full_replica_assignment(tp, ra)

    def state(self, replica: PartitionAndReplica = REPLICA) -> ReplicaState | None:
        return self.ctx.replica_states.get(replica)


@pytest.fixture
def h() -> Harness:
    return Harness()


def check_invalid_transition(h: Harness, from_state: ReplicaState, to_state: ReplicaState) -> None:
    """Kafka's ``testInvalidTransition``: the state stays, no store call, only newBatch/send."""
    h.ctx.put_replica_state(REPLICA, from_state)
    h.rsm.handle_state_changes([REPLICA], to_state)
    assert h.state() is from_state
    assert h.batch.calls == [NEW_BATCH, SEND]
    assert h.store.calls == []


# ------------------------------------------------------------------ Kafka's ReplicaStateMachineTest


def test_startup_online_partition(h: Harness) -> None:
    h.live(5)
    h.assign(RA(5))
    assert h.state() is None
    h.rsm.startup()
    assert h.state() is ONLINE
    assert h.batch.calls == [NEW_BATCH, SEND]


def test_startup_offline_partition(h: Harness) -> None:
    h.assign(RA(5))
    h.rsm.startup()
    assert h.state() is OFFLINE
    # Ineligible -> Offline without leadership: StopReplica and the KAFKA-6650 UpdateMetadata.
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False),
        ("add_update_metadata_request_for_brokers", (), frozenset({PARTITION})),
        SEND,
    ]


def test_startup_with_replica_without_leader(h: Harness) -> None:
    h.live(5)
    h.assign(RA(100))
    h.rsm.startup()
    assert h.state(PartitionAndReplica(PARTITION, 100)) is OFFLINE


def test_nonexistent_replica_to_new_replica_transition(h: Harness) -> None:
    h.rsm.handle_state_changes([REPLICA], NEW)
    assert h.state() is NEW
    assert h.batch.calls == [NEW_BATCH, SEND]


def test_invalid_nonexistent_replica_to_online_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, NON_EXISTENT, ONLINE)


def test_invalid_nonexistent_replica_to_offline_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, NON_EXISTENT, OFFLINE)


def test_invalid_nonexistent_replica_to_replica_deletion_started_transition(h: Harness) -> None:
    check_invalid_transition(h, NON_EXISTENT, STARTED)


def test_invalid_nonexistent_replica_to_replica_deletion_ineligible_transition(h: Harness) -> None:
    check_invalid_transition(h, NON_EXISTENT, INELIGIBLE)


def test_invalid_nonexistent_replica_to_replica_deletion_successful_transition(h: Harness) -> None:
    check_invalid_transition(h, NON_EXISTENT, SUCCESSFUL)


def test_invalid_new_replica_to_nonexistent_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, NEW, NON_EXISTENT)


def test_new_replica_to_online_replica_transition(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, NEW)
    h.assign(RA(5))
    h.rsm.handle_state_changes([REPLICA], ONLINE)
    assert h.state() is ONLINE
    assert h.ctx.partition_full_replica_assignment(PARTITION) == RA(5)
    assert h.batch.calls == [NEW_BATCH, SEND]


def test_new_replica_to_offline_replica_transition(h: Harness) -> None:
    h.live(5)
    h.ctx.put_replica_state(REPLICA, NEW)
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False),
        ("add_update_metadata_request_for_brokers", (5,), frozenset({PARTITION})),
        SEND,
    ]
    assert h.store.calls == []
    assert h.state() is OFFLINE


def test_invalid_new_replica_to_replica_deletion_started_transition(h: Harness) -> None:
    check_invalid_transition(h, NEW, STARTED)


def test_invalid_new_replica_to_replica_deletion_ineligible_transition(h: Harness) -> None:
    check_invalid_transition(h, NEW, INELIGIBLE)


def test_invalid_new_replica_to_replica_deletion_successful_transition(h: Harness) -> None:
    check_invalid_transition(h, NEW, SUCCESSFUL)


def test_invalid_online_replica_to_nonexistent_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, ONLINE, NON_EXISTENT)


def test_invalid_online_replica_to_new_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, ONLINE, NEW)


def _to_online_with_leadership(h: Harness, from_state: ReplicaState) -> None:
    lice = LICE(LAI(5, 0, [5], 0))
    h.ctx.put_replica_state(REPLICA, from_state)
    h.assign(RA(5))
    h.ctx.put_partition_leadership_info(PARTITION, lice)
    h.rsm.handle_state_changes([REPLICA], ONLINE)
    assert h.batch.calls == [NEW_BATCH, leader_and_isr_call([5], lice, RA(5), False), SEND]
    assert h.store.calls == []
    assert h.state() is ONLINE


def test_online_replica_to_online_replica_transition(h: Harness) -> None:
    _to_online_with_leadership(h, ONLINE)


def test_online_replica_to_offline_replica_transition(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, ONLINE)
    h.assign(RA(5, 6))
    h.ctx.put_partition_leadership_info(PARTITION, LICE(LAI(5, 0, [5, 6], 0)))
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: LICE(LAI(5, 0, [5, 6], 0))})
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: LAI(-1, 1, [6], 0)},
        CONTROLLER_EPOCH,
        0,
        result=UpdateLeaderAndIsrResult({PARTITION: LAI(-1, 1, [6], 1)}, []),
    )
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False),
        leader_and_isr_call([6], LICE(LAI(-1, 1, [6], 1)), RA(5, 6), False),
        SEND,
    ]
    assert h.ctx.partition_leadership_info(PARTITION) == LICE(LAI(-1, 1, [6], 1))
    assert h.state() is OFFLINE


def test_invalid_online_replica_to_replica_deletion_started_transition(h: Harness) -> None:
    check_invalid_transition(h, ONLINE, STARTED)


def test_invalid_online_replica_to_replica_deletion_ineligible_transition(h: Harness) -> None:
    check_invalid_transition(h, ONLINE, INELIGIBLE)


def test_invalid_online_replica_to_replica_deletion_successful_transition(h: Harness) -> None:
    check_invalid_transition(h, ONLINE, SUCCESSFUL)


def test_invalid_offline_replica_to_nonexistent_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, OFFLINE, NON_EXISTENT)


def test_invalid_offline_replica_to_new_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, OFFLINE, NEW)


def test_offline_replica_to_online_replica_transition(h: Harness) -> None:
    _to_online_with_leadership(h, OFFLINE)


def test_offline_replica_to_replica_deletion_started_transition(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, OFFLINE)
    h.rsm.handle_state_changes([REPLICA], STARTED)
    assert h.batch.calls == [NEW_BATCH, stop_replica_call(True), SEND]
    assert h.state() is STARTED


def test_offline_replica_to_replica_deletion_ineligible_transition(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, OFFLINE)
    h.rsm.handle_state_changes([REPLICA], INELIGIBLE)
    assert h.state() is INELIGIBLE
    assert h.batch.calls == [NEW_BATCH, SEND]


def test_invalid_offline_replica_to_replica_deletion_successful_transition(h: Harness) -> None:
    check_invalid_transition(h, OFFLINE, SUCCESSFUL)


def test_invalid_replica_deletion_started_to_nonexistent_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, STARTED, NON_EXISTENT)


def test_invalid_replica_deletion_started_to_new_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, STARTED, NEW)


def test_invalid_replica_deletion_started_to_online_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, STARTED, ONLINE)


def test_invalid_replica_deletion_started_to_offline_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, STARTED, OFFLINE)


def test_replica_deletion_started_to_replica_deletion_ineligible_transition(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, STARTED)
    h.rsm.handle_state_changes([REPLICA], INELIGIBLE)
    assert h.state() is INELIGIBLE
    assert h.batch.calls == [NEW_BATCH, SEND]


def test_replica_deletion_started_to_replica_deletion_successful_transition(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, STARTED)
    h.rsm.handle_state_changes([REPLICA], SUCCESSFUL)
    assert h.state() is SUCCESSFUL
    assert h.batch.calls == [NEW_BATCH, SEND]


def test_replica_deletion_successful_to_nonexistent_replica_transition(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, SUCCESSFUL)
    h.assign(RA(5))
    h.rsm.handle_state_changes([REPLICA], NON_EXISTENT)
    assert h.ctx.partition_replica_assignment(PARTITION) == ()
    assert REPLICA not in h.ctx.replica_states
    assert h.batch.calls == [NEW_BATCH, SEND]


def test_invalid_replica_deletion_successful_to_new_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, SUCCESSFUL, NEW)


def test_invalid_replica_deletion_successful_to_online_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, SUCCESSFUL, ONLINE)


def test_invalid_replica_deletion_successful_to_offline_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, SUCCESSFUL, OFFLINE)


def test_invalid_replica_deletion_successful_to_replica_deletion_started_transition(h: Harness) -> None:
    check_invalid_transition(h, SUCCESSFUL, STARTED)


def test_invalid_replica_deletion_successful_to_replica_deletion_ineligible_transition(h: Harness) -> None:
    check_invalid_transition(h, SUCCESSFUL, INELIGIBLE)


def test_invalid_replica_deletion_ineligible_to_nonexistent_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, INELIGIBLE, NON_EXISTENT)


def test_invalid_replica_deletion_ineligible_to_new_replica_transition(h: Harness) -> None:
    check_invalid_transition(h, INELIGIBLE, NEW)


def test_replica_deletion_ineligible_to_online_replica_transition(h: Harness) -> None:
    _to_online_with_leadership(h, INELIGIBLE)


def test_invalid_replica_deletion_ineligible_to_replica_deletion_started_transition(h: Harness) -> None:
    check_invalid_transition(h, INELIGIBLE, STARTED)


def test_invalid_replica_deletion_ineligible_to_replica_deletion_successful_transition(h: Harness) -> None:
    check_invalid_transition(h, INELIGIBLE, SUCCESSFUL)


# ------------------------------------------------------------- paths Kafka's suite leaves untested


def _expect_offline_write(
    h: Harness, read: LeaderIsrAndControllerEpoch, written: LeaderAndIsr, new_zk_version: int
) -> None:
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: read})
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: written},
        CONTROLLER_EPOCH,
        0,
        result=UpdateLeaderAndIsrResult({PARTITION: written.with_zk_version(new_zk_version)}, []),
    )


def _online_led_by_6(h: Harness, isr: Sequence[int] = (6, 5)) -> LeaderIsrAndControllerEpoch:
    """Replica 5 Online, t-0 on [6, 5] led by 6; returns the cached leadership."""
    lice = LICE(LAI(6, 3, isr, 7), 49)
    h.ctx.put_replica_state(REPLICA, ONLINE)
    h.assign(RA(6, 5))
    h.ctx.put_partition_leadership_info(PARTITION, lice)
    return lice


def test_empty_call_touches_nothing(h: Harness) -> None:
    h.rsm.handle_state_changes([], OFFLINE)
    assert h.batch.calls == []
    assert h.store.calls == []


def test_replica_deletion_ineligible_to_offline_replica_transition(h: Harness) -> None:
    lice = _online_led_by_6(h)
    h.ctx.put_replica_state(REPLICA, INELIGIBLE)
    _expect_offline_write(h, lice, LAI(6, 4, [6], 7), 8)
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    after = LICE(LAI(6, 4, [6], 8))  # stamped with this controller's epoch (50), not the read's 49
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False),
        leader_and_isr_call([6], after, RA(6, 5), False),
        SEND,
    ]
    assert h.ctx.partition_leadership_info(PARTITION) == after
    assert h.state() is OFFLINE


def test_offline_replica_to_offline_replica_transition(h: Harness) -> None:
    h.live(5, 6)
    h.ctx.put_replica_state(REPLICA, OFFLINE)
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False),
        ("add_update_metadata_request_for_brokers", (5, 6), frozenset({PARTITION})),
        SEND,
    ]
    assert h.state() is OFFLINE


def test_nonexistent_replica_to_new_replica_transition_with_leadership(h: Harness) -> None:
    lice = LICE(LAI(6, 0, [6], 0))
    h.assign(RA(6, 5))
    h.ctx.put_partition_leadership_info(PARTITION, lice)
    h.rsm.handle_state_changes([REPLICA], NEW)
    assert h.batch.calls == [NEW_BATCH, leader_and_isr_call([5], lice, RA(6, 5), True), SEND]
    assert h.state() is NEW


def test_new_replica_refused_when_replica_is_being_requested_to_become_leader(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    h.assign(RA(5, 6))
    h.ctx.put_partition_leadership_info(PARTITION, LICE(LAI(5, 0, [5], 0)))
    with caplog.at_level(logging.ERROR, logger="kafka_controller.state_change"):
        h.rsm.handle_state_changes([REPLICA], NEW)
    assert h.state() is NON_EXISTENT
    assert h.batch.calls == [NEW_BATCH, SEND]
    assert any("being requested to become leader" in r.getMessage() for r in caplog.records)


def test_offline_replica_keeps_last_isr_member(h: Harness) -> None:
    """KAFKA-5083: an ISR of size 1 is kept even when it is the dead leader; the leader goes -1."""
    h.ctx.put_replica_state(REPLICA, ONLINE)
    h.assign(RA(5, 6))
    h.ctx.put_partition_leadership_info(PARTITION, LICE(LAI(5, 2, [5], 4)))
    _expect_offline_write(h, LICE(LAI(5, 2, [5], 4)), LAI(-1, 3, [5], 4), 5)
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    after = LICE(LAI(-1, 3, [5], 5))
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False),
        leader_and_isr_call([6], after, RA(5, 6), False),
        SEND,
    ]
    assert h.ctx.partition_leadership_info(PARTITION) == after


def test_offline_replica_not_in_isr_is_not_written_but_cache_is_refreshed(h: Harness) -> None:
    _online_led_by_6(h, isr=(6,))
    read = LICE(LAI(6, 9, [6], 12), 40)  # newer than the cache, from an older controller epoch
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: read})
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()  # no update_leader_and_isr call
    refreshed = LICE(LAI(6, 9, [6], 12))  # leader epoch unchanged, stamped with epoch 50
    assert h.ctx.partition_leadership_info(PARTITION) == refreshed
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False),
        leader_and_isr_call([6], refreshed, RA(6, 5), False),
        SEND,
    ]
    assert h.state() is OFFLINE


def test_offline_replica_retries_on_bad_version_with_a_fresh_read(h: Harness) -> None:
    lice = _online_led_by_6(h)
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: lice})
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: LAI(6, 4, [6], 7)},
        CONTROLLER_EPOCH,
        0,
        result=UpdateLeaderAndIsrResult({}, [PARTITION]),
    )
    # The leader changed the ISR meanwhile: the retry starts from what it wrote.
    fresh = LICE(LAI(6, 4, [6, 5, 7], 8), 49)
    _expect_offline_write(h, fresh, LAI(6, 5, [6, 7], 8), 9)
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    after = LICE(LAI(6, 5, [6, 7], 9))
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False),
        leader_and_isr_call([6], after, RA(6, 5), False),
        SEND,
    ]
    assert h.state() is OFFLINE


def test_controller_moved_error_propagates(h: Harness) -> None:
    lice = _online_led_by_6(h)
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: lice})
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: LAI(6, 4, [6], 7)},
        CONTROLLER_EPOCH,
        0,
        error=ControllerMovedError(),
    )
    with pytest.raises(ControllerMovedError):
        h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    assert h.batch.calls == [NEW_BATCH, stop_replica_call(False)]  # not sent
    assert h.state() is ONLINE
    assert h.ctx.partition_leadership_info(PARTITION) == lice


def test_missing_state_znode_of_topic_queued_for_deletion_is_dropped(
    h: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    lice = _online_led_by_6(h)
    h.ctx.queue_topic_deletion({"t"})
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: None})
    with caplog.at_level(logging.ERROR):
        h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    assert h.state() is ONLINE
    assert h.ctx.partition_leadership_info(PARTITION) == lice
    assert h.batch.calls == [NEW_BATCH, stop_replica_call(False), SEND]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_missing_state_znode_of_normal_topic_fails(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    _online_led_by_6(h)
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: None})
    with caplog.at_level(logging.ERROR, logger="kafka_controller.state_change"):
        h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    assert h.state() is ONLINE
    assert h.batch.calls == [NEW_BATCH, stop_replica_call(False), SEND]
    assert any("leader and isr path in zookeeper is empty" in r.getMessage() for r in caplog.records)


def test_no_node_from_the_write_is_final(h: Harness) -> None:
    lice = _online_led_by_6(h)
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: lice})
    path = "/brokers/topics/t/partitions/0/state"
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: LAI(6, 4, [6], 7)},
        CONTROLLER_EPOCH,
        0,
        result=UpdateLeaderAndIsrResult({PARTITION: NoNodeError(path)}, []),
    )
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    assert h.state() is ONLINE
    assert h.ctx.partition_leadership_info(PARTITION) == lice


def test_failed_read_is_final_and_the_batch_is_still_sent(h: Harness) -> None:
    _online_led_by_6(h)
    h.store.expect("get_partition_states", [PARTITION], error=StoreUnavailableError())
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()  # read once, never retried, never written
    assert h.state() is ONLINE
    assert h.batch.calls == [NEW_BATCH, stop_replica_call(False), SEND]


def test_controller_epoch_abort(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    lice = _online_led_by_6(h)
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: LICE(LAI(6, 3, [6, 5], 7), 51)})
    with caplog.at_level(logging.ERROR, logger="kafka_controller.state_change"):
        h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    assert h.state() is ONLINE
    assert h.ctx.partition_leadership_info(PARTITION) == lice
    assert any("written by another controller" in r.getMessage() for r in caplog.records)


def test_equal_controller_epoch_is_not_an_abort(h: Harness) -> None:
    lice = _online_led_by_6(h)
    read = LICE(lice.leader_and_isr, CONTROLLER_EPOCH)
    _expect_offline_write(h, read, LAI(6, 4, [6], 7), 8)
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    assert h.state() is OFFLINE


def test_offline_replica_of_topic_queued_for_deletion_sends_no_leader_and_isr(h: Harness) -> None:
    lice = _online_led_by_6(h)
    h.ctx.queue_topic_deletion({"t"})
    _expect_offline_write(h, lice, LAI(6, 4, [6], 7), 8)
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    h.store.verify()
    assert h.batch.calls == [NEW_BATCH, stop_replica_call(False), SEND]
    assert h.ctx.partition_leadership_info(PARTITION) == LICE(LAI(6, 4, [6], 8))
    assert h.state() is OFFLINE


def test_unexpected_errors_are_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    class BrokenBatch(RecordingRequestBatch):
        def new_batch(self) -> None:
            super().new_batch()
            raise IllegalControllerStateError("batch is not empty while creating a new one")

    h = Harness()
    h.batch = BrokenBatch()
    h.rsm = ReplicaStateMachine(BROKER_ID, h.ctx, h.store, h.batch)
    with caplog.at_level(logging.ERROR):
        h.rsm.handle_state_changes([REPLICA], NEW)
    assert h.batch.calls == [NEW_BATCH]  # nothing queued, nothing sent
    assert h.state() is None
    assert any("Error while moving some replicas" in r.getMessage() for r in caplog.records)


def test_replicas_are_grouped_by_replica_id_in_one_batch(h: Harness) -> None:
    """One batch for the call, and per replica id one read and one write for all its partitions."""
    t1 = TopicPartition("t", 1)
    for tp in (PARTITION, t1):
        h.assign(RA(5, 6), tp)
        h.ctx.put_partition_leadership_info(tp, LICE(LAI(5, 0, [5, 6], 0)))
    replicas = [REPLICA, PartitionAndReplica(PARTITION, 6), PartitionAndReplica(t1, 5)]
    for r in replicas:
        h.ctx.put_replica_state(r, ONLINE)
    h.store.expect(
        "get_partition_states",
        [PARTITION, t1],
        result={tp: LICE(LAI(5, 0, [5, 6], 0)) for tp in (PARTITION, t1)},
    )
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: LAI(-1, 1, [6], 0), t1: LAI(-1, 1, [6], 0)},
        CONTROLLER_EPOCH,
        0,
        result=UpdateLeaderAndIsrResult({PARTITION: LAI(-1, 1, [6], 1), t1: LAI(-1, 1, [6], 1)}, []),
    )
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: LICE(LAI(-1, 1, [6], 1))})
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: LAI(-1, 2, [6], 1)},
        CONTROLLER_EPOCH,
        0,
        result=UpdateLeaderAndIsrResult({PARTITION: LAI(-1, 2, [6], 2)}, []),
    )
    h.rsm.handle_state_changes(replicas, OFFLINE)
    h.store.verify()
    after_5 = LICE(LAI(-1, 1, [6], 1))
    assert h.batch.calls == [
        NEW_BATCH,
        stop_replica_call(False, 5, PARTITION),
        stop_replica_call(False, 5, t1),
        ("add_leader_and_isr_request_for_brokers", (6,), PARTITION, after_5, RA(5, 6), False),
        ("add_leader_and_isr_request_for_brokers", (6,), t1, after_5, RA(5, 6), False),
        stop_replica_call(False, 6, PARTITION),
        (
            "add_leader_and_isr_request_for_brokers",
            (5,),
            PARTITION,
            LICE(LAI(-1, 2, [6], 2)),
            RA(5, 6),
            False,
        ),
        SEND,
    ]
    assert all(h.state(r) is OFFLINE for r in replicas)


def test_leaderless_partitions_share_one_update_metadata_call(h: Harness) -> None:
    h.live(5)
    replicas = [PartitionAndReplica(TopicPartition("t", p), 5) for p in range(3)]
    for r in replicas:
        h.ctx.put_replica_state(r, ONLINE)
    h.rsm.handle_state_changes(replicas, OFFLINE)
    assert h.batch.calls == [
        NEW_BATCH,
        *(stop_replica_call(False, 5, r.topic_partition) for r in replicas),
        ("add_update_metadata_request_for_brokers", (5,), frozenset(r.topic_partition for r in replicas)),
        SEND,
    ]


def test_new_replica_to_online_appends_replica_missing_from_assignment(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, NEW)
    h.assign(ReplicaAssignment.of([6, 7], [7], []))
    h.ctx.put_partition_leadership_info(PARTITION, LICE(LAI(6, 0, [6], 0)))
    h.rsm.handle_state_changes([REPLICA], ONLINE)
    assert h.ctx.partition_full_replica_assignment(PARTITION) == ReplicaAssignment.of([6, 7, 5], [7], [])
    assert h.batch.calls == [NEW_BATCH, SEND]  # New -> Online never sends
    assert h.state() is ONLINE


def test_nonexistent_replica_removed_from_adding_and_removing_replicas(h: Harness) -> None:
    h.ctx.put_replica_state(REPLICA, SUCCESSFUL)
    h.assign(ReplicaAssignment.of([5, 6, 7], [5, 7], [5]))
    h.rsm.handle_state_changes([REPLICA], NON_EXISTENT)
    assert h.ctx.partition_full_replica_assignment(PARTITION) == ReplicaAssignment.of([6, 7], [7], [])
    assert REPLICA not in h.ctx.replica_states


def test_initialize_replica_state_marks_offline_replicas_ineligible(h: Harness) -> None:
    t1 = TopicPartition("t", 1)
    h.live(5)
    h.assign(RA(5, 6))
    h.assign(RA(5), t1)
    h.ctx.replicas_on_offline_dirs[5] = {t1}
    online, offline = h.rsm.initialize_replica_state()
    assert h.ctx.replica_states == {
        REPLICA: ONLINE,
        PartitionAndReplica(PARTITION, 6): INELIGIBLE,
        PartitionAndReplica(t1, 5): INELIGIBLE,
    }
    assert (online, sorted(offline)) == (
        [REPLICA],
        sorted([PartitionAndReplica(PARTITION, 6), PartitionAndReplica(t1, 5)]),
    )
    assert (set(online), set(offline)) == tuple(map(set, h.ctx.online_and_offline_replicas()))
    assert h.batch.calls == []


def test_startup_moves_offline_replicas_out_of_the_isr(h: Harness) -> None:
    h.live(5)
    h.assign(RA(5, 6))
    lice = LICE(LAI(5, 0, [5, 6], 0))
    h.ctx.put_partition_leadership_info(PARTITION, lice)
    _expect_offline_write(h, lice, LAI(5, 1, [5], 0), 1)
    h.rsm.startup()
    h.store.verify()
    assert h.batch.calls == [
        NEW_BATCH,
        leader_and_isr_call([5], lice, RA(5, 6), False),
        SEND,
        NEW_BATCH,
        stop_replica_call(False, 6),
        leader_and_isr_call([5], LICE(LAI(5, 1, [5], 1)), RA(5, 6), False),
        SEND,
    ]
    assert h.state() is ONLINE
    assert h.state(PartitionAndReplica(PARTITION, 6)) is OFFLINE


def test_abstract_startup_calls_handle_state_changes_even_when_empty() -> None:
    calls: list[tuple[list[PartitionAndReplica], ReplicaState]] = []

    class Counting(AbstractReplicaStateMachine):
        def handle_state_changes(self, replicas: Sequence[PartitionAndReplica], target: ReplicaState) -> None:
            calls.append((list(replicas), target))

    ctx = ControllerContext()
    ctx.update_partition_full_replica_assignment(PARTITION, RA(5))
    Counting(ctx).startup()
    assert calls == [([], ONLINE), ([REPLICA], OFFLINE)]
    assert ctx.replica_states == {REPLICA: INELIGIBLE}


# --------------------------------------------------------------------------------------------- audit


class CountingAuditSink(RecordingAuditSink):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def record(self, records: Sequence[AuditRecord]) -> None:
        self.calls += 1
        super().record(records)


def _replica_records(sink: RecordingAuditSink) -> list[ReplicaTransition]:
    out = [r for r in sink.records if isinstance(r, ReplicaTransition)]
    assert len(out) == len(sink.records)
    return out


def test_audit_records_ok_invalid_and_failed_in_one_call() -> None:
    sink = CountingAuditSink()
    h = Harness(audit=sink)
    lice = _online_led_by_6(h)
    other = PartitionAndReplica(PARTITION, 6)  # NonExistent -> Offline is invalid
    missing = PartitionAndReplica(TopicPartition("u", 0), 5)  # state znode missing: failed
    h.ctx.put_replica_state(missing, ONLINE)
    h.ctx.put_partition_leadership_info(missing.topic_partition, LICE(LAI(5, 0, [5], 0)))
    h.store.expect(
        "get_partition_states",
        [PARTITION, missing.topic_partition],
        result={PARTITION: lice, missing.topic_partition: None},
    )
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: LAI(6, 4, [6], 7)},
        CONTROLLER_EPOCH,
        0,
        result=UpdateLeaderAndIsrResult({PARTITION: LAI(6, 4, [6], 8)}, []),
    )
    h.rsm.handle_state_changes([REPLICA, other, missing], OFFLINE)
    h.store.verify()
    assert sink.calls == 1
    by_replica = {(r.topic, r.partition, r.replica): r for r in _replica_records(sink)}
    assert len(by_replica) == 3
    ok = by_replica[("t", 0, 5)]
    assert (ok.from_state, ok.to_state, ok.outcome, ok.error) == (
        "OnlineReplica",
        "OfflineReplica",
        "ok",
        None,
    )
    assert (ok.leader_before, ok.isr_before, ok.leader_epoch_before) == (6, (6, 5), 3)
    assert (ok.leader_after, ok.isr_after, ok.leader_epoch_after) == (6, (6,), 4)
    invalid = by_replica[("t", 0, 6)]
    assert (invalid.from_state, invalid.outcome) == ("NonExistentReplica", "invalid")
    assert invalid.error is not None and "NonExistentReplica" in invalid.error
    failed = by_replica[("u", 0, 5)]
    assert failed.outcome == "failed"
    assert failed.error is not None and "zookeeper is empty" in failed.error
    assert h.state(missing) is ONLINE


def test_audit_records_refusal_and_dropped_partition_as_failed() -> None:
    sink = CountingAuditSink()
    h = Harness(audit=sink)
    h.ctx.put_partition_leadership_info(PARTITION, LICE(LAI(5, 0, [5], 0)))
    h.rsm.handle_state_changes([REPLICA], NEW)
    [refused] = _replica_records(sink)
    assert (refused.to_state, refused.outcome) == ("NewReplica", "failed")
    assert refused.error is not None and "become leader" in refused.error

    _online_led_by_6(h)
    h.ctx.queue_topic_deletion({"t"})
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: None})
    h.rsm.handle_state_changes([REPLICA], OFFLINE)
    dropped = _replica_records(sink)[-1]
    assert (dropped.to_state, dropped.outcome) == ("OfflineReplica", "failed")
    assert dropped.error is not None and "queued for deletion" in dropped.error
    assert sink.calls == 2


def test_audit_records_delivered_when_controller_moved() -> None:
    sink = CountingAuditSink()
    h = Harness(audit=sink)
    lice = _online_led_by_6(h)
    h.store.expect("get_partition_states", [PARTITION], result={PARTITION: lice})
    h.store.expect(
        "update_leader_and_isr",
        {PARTITION: LAI(6, 4, [6], 7)},
        CONTROLLER_EPOCH,
        0,
        error=ControllerMovedError("moved"),
    )
    with pytest.raises(ControllerMovedError):
        h.rsm.handle_state_changes([REPLICA], OFFLINE)
    [record] = _replica_records(sink)
    assert (record.from_state, record.outcome, record.error) == ("OnlineReplica", "failed", "moved")
    assert sink.calls == 1


# ------------------------------------------------------------------------- property: the state table


class InMemoryStateStore:
    """A tiny versioned store of state znodes; ``interfere`` makes the next write hit BADVERSION."""

    def __init__(self, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]) -> None:
        self.states = dict(states)
        self.interfere = False
        self.reads = 0

    def get_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionStateRead]:
        self.reads += 1
        return {tp: self.states.get(tp) for tp in partitions}

    def create_partition_states(
        self, states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch], expected: int
    ) -> dict[TopicPartition, MetadataStoreError | None]:
        raise AssertionError("the replica state machine never creates state znodes")

    def get_log_configs(
        self, topics: Collection[str], broker_defaults: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], dict[str, MetadataStoreError]]:
        raise AssertionError("the replica state machine never reads topic configs")

    def update_leader_and_isr(
        self, leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int, expected: int
    ) -> UpdateLeaderAndIsrResult:
        result = UpdateLeaderAndIsrResult()
        for tp, lai in leader_and_isrs.items():
            current = self.states[tp]
            if self.interfere:  # another writer (a pre-AlterIsr leader) got there first
                bumped = current.leader_and_isr.with_zk_version(current.leader_and_isr.zk_version + 1)
                current = self.states[tp] = LICE(bumped, current.controller_epoch)
            if current.leader_and_isr.zk_version != lai.zk_version:
                result.to_retry.append(tp)
                continue
            written = lai.with_zk_version(lai.zk_version + 1)
            self.states[tp] = LICE(written, controller_epoch)
            result.finished[tp] = written
        self.interfere = False
        return result


_TARGETS = list(ReplicaState)
_LED = [TopicPartition("t", 0), TopicPartition("t", 1)]
_LEADERLESS = TopicPartition("t", 2)
_REPLICAS = [PartitionAndReplica(tp, r) for tp in (*_LED, _LEADERLESS) for r in (1, 2, 3)]


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.lists(st.sampled_from(_REPLICAS), min_size=1, max_size=4, unique=True),
            st.sampled_from(_TARGETS),
            st.booleans(),
        ),
        max_size=25,
    )
)
def test_transitions_follow_the_state_table(
    steps: list[tuple[list[PartitionAndReplica], ReplicaState, bool]],
) -> None:
    ctx = ControllerContext()
    ctx.epoch = CONTROLLER_EPOCH
    initial = LICE(LAI(9, 0, [9, 1, 2, 3], 0))  # leader 9 is never moved, so the ISR never empties
    for tp in _LED:
        ctx.update_partition_full_replica_assignment(tp, RA(9, 1, 2, 3))
        ctx.put_partition_leadership_info(tp, initial)
    ctx.update_partition_full_replica_assignment(_LEADERLESS, RA(1, 2, 3))
    store = InMemoryStateStore(dict.fromkeys(_LED, initial))
    batch = RecordingRequestBatch()
    rsm = ReplicaStateMachine(BROKER_ID, ctx, store, batch)
    for replicas, target, interfere in steps:
        before = {r: ctx.replica_states.get(r, NON_EXISTENT) for r in replicas}
        store.interfere = interfere
        batch.calls.clear()
        rsm.handle_state_changes(replicas, target)
        assert batch.calls[0] == NEW_BATCH and batch.calls[-1] == SEND
        assert batch.calls.count(NEW_BATCH) == 1
        for r in replicas:
            if before[r] not in target.valid_previous_states:
                assert ctx.replica_states[r] is before[r]
            elif target is NON_EXISTENT:
                assert r not in ctx.replica_states
                assert r.replica not in ctx.partition_replica_assignment(r.topic_partition)
            else:
                assert ctx.replica_states[r] is target
                if target is OFFLINE and r.topic_partition in _LED:
                    cached = ctx.partition_leadership_info(r.topic_partition)
                    assert cached is not None
                    assert r.replica not in cached.leader_and_isr.isr
        for tp in _LED:  # the cache always mirrors the store after an ISR change
            assert ctx.partition_leadership_info(tp) == store.states[tp]
