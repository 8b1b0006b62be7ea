"""Kafka's PartitionStateMachineTest (its first 21 tests) plus the reachable paths Kafka leaves untested.

Kafka's replayed EasyMock mocks become ``ScriptedPartitionStateStore`` (strict, ``verify()``) and
``RecordingRequestBatch`` (exact call list). Mapping of Kafka's ZooKeeper responses:
``CreateResponse(OK)`` -> ``{tp: None}``, ``NODEEXISTS`` -> ``{tp: NodeExistsError(path)}``, a
thrown ZooKeeperClientException -> ``error=StoreUnavailableError(...)``, ``GetDataResponse(NONODE)``
-> ``{tp: None}``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.strategies import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
)
from kafka_controller.domain.audit_records import AuditRecord, PartitionTransition
from kafka_controller.domain.errors import (
    ControllerMovedError,
    InvalidArgumentError,
    MetadataStoreError,
    NodeExistsError,
    NoNodeError,
    StateChangeFailedError,
    StoreUnavailableError,
    ZNodeDecodeError,
)
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import UpdateLeaderAndIsrResult
from kafka_controller.testing.doubles import RecordingRequestBatch, ScriptedPartitionStateStore

NEW = PartitionState.NEW_PARTITION
ONLINE = PartitionState.ONLINE_PARTITION
OFFLINE = PartitionState.OFFLINE_PARTITION
NON_EXISTENT = PartitionState.NON_EXISTENT_PARTITION
CONTROLLER_ID = 5
BROKER_CONFIG = {"broker.id": "5", "zookeeper.connect": "zkConnect"}
TP = TopicPartition("t", 0)
RA = ReplicaAssignment.of
LAI = LeaderAndIsr


def LICE(lai: LeaderAndIsr, controller_epoch: int = 50) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(lai, controller_epoch)


def lai(leader: int, epoch: int, isr: Sequence[int], zk_version: int) -> LeaderAndIsr:
    return LAI(leader, epoch, tuple(isr), zk_version)


OFFLINE_CLEAN = OfflinePartitionLeaderElectionStrategy(allow_unclean=False)
OFFLINE_UNCLEAN = OfflinePartitionLeaderElectionStrategy(allow_unclean=True)
PREFERRED = PreferredReplicaPartitionLeaderElectionStrategy()
SHUTDOWN = ControlledShutdownPartitionLeaderElectionStrategy()


class CountingAuditSink:
    """Keeps each ``record`` call separately, to check there is exactly one per call."""

    def __init__(self) -> None:
        self.calls: list[list[PartitionTransition]] = []

    def record(self, records: Sequence[AuditRecord]) -> None:
        transitions = [r for r in records if isinstance(r, PartitionTransition)]
        assert len(transitions) == len(records), (
            "the partition state machine audits only PartitionTransitions"
        )
        self.calls.append(transitions)


@dataclass
class Env:
    ctx: ControllerContext
    store: ScriptedPartitionStateStore
    batch: RecordingRequestBatch
    psm: PartitionStateMachine
    audit: CountingAuditSink

    def live(self, *broker_ids: int) -> None:
        self.ctx.set_live_brokers({Broker(b, (EndPoint("host", 0),)): 0 for b in broker_ids})

    def setup(
        self,
        tp: TopicPartition,
        assignment: ReplicaAssignment,
        state: PartitionState | None = None,
        leadership: LeaderIsrAndControllerEpoch | None = None,
    ) -> None:
        self.ctx.update_partition_full_replica_assignment(tp, assignment)
        if state is not None:
            self.ctx.put_partition_state(tp, state)
        if leadership is not None:
            self.ctx.put_partition_leadership_info(tp, leadership)

    def state(self, tp: TopicPartition = TP) -> PartitionState:
        return self.ctx.partition_states[tp]


@pytest.fixture
def env() -> Env:
    ctx = ControllerContext()
    ctx.epoch = 50
    store = ScriptedPartitionStateStore()
    batch = RecordingRequestBatch()
    audit = CountingAuditSink()
    psm = PartitionStateMachine(CONTROLLER_ID, ctx, store, batch, broker_config=BROKER_CONFIG, audit=audit)
    return Env(ctx, store, batch, psm, audit)


BATCH_ONLY = [("new_batch",), ("send_requests_to_brokers", 50)]


def _invalid_transition(env: Env, start: PartitionState | None, target: PartitionState) -> None:
    if start is not None:
        env.ctx.put_partition_state(TP, start)
    assert env.psm.handle_state_changes([TP], target, OFFLINE_CLEAN) == {}
    assert env.state() is (start or NON_EXISTENT)
    assert env.batch.calls == BATCH_ONLY
    assert env.store.calls == []


# ============================================================================ Kafka's tests 1-21
def test_nonexistent_partition_to_new_partition_transition(env: Env) -> None:
    assert env.psm.handle_state_changes([TP], NEW) == {}
    assert env.state() is NEW
    assert env.batch.calls == BATCH_ONLY


def test_invalid_nonexistent_partition_to_online_partition_transition(env: Env) -> None:
    _invalid_transition(env, None, ONLINE)


def test_invalid_nonexistent_partition_to_offline_partition_transition(env: Env) -> None:
    _invalid_transition(env, None, OFFLINE)


def test_new_partition_to_online_partition_transition(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), NEW)
    leadership = LICE(lai(5, 0, [5], 0))
    env.store.expect("create_partition_states", {TP: leadership}, 0, result={TP: None})
    assert env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN) == {}
    env.store.verify()
    assert env.batch.calls == [
        ("new_batch",),
        ("add_leader_and_isr_request_for_brokers", (5,), TP, leadership, RA([5]), True),
        ("send_requests_to_brokers", 50),
    ]
    assert env.state() is ONLINE
    assert env.ctx.partition_leadership_info(TP) == leadership


def test_new_partition_to_online_partition_transition_zoo_keeper_client_exception_from_create_states(
    env: Env,
) -> None:
    env.live(5)
    env.setup(TP, RA([5]), NEW)
    env.store.expect(
        "create_partition_states",
        {TP: LICE(lai(5, 0, [5], 0))},
        0,
        error=StoreUnavailableError("connection lost"),
    )
    assert env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN) == {}
    env.store.verify()
    assert env.batch.calls == BATCH_ONLY
    assert env.state() is NEW
    assert env.ctx.partition_leadership_info(TP) is None


def test_new_partition_to_online_partition_transition_error_code_from_create_states(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), NEW)
    exists = NodeExistsError("/brokers/topics/t/partitions/0/state")
    env.store.expect("create_partition_states", {TP: LICE(lai(5, 0, [5], 0))}, 0, result={TP: exists})
    assert env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN) == {}
    env.store.verify()
    assert env.batch.calls == BATCH_ONLY
    assert env.state() is NEW


def test_new_partition_to_offline_partition_transition(env: Env) -> None:
    env.ctx.put_partition_state(TP, NEW)
    assert env.psm.handle_state_changes([TP], OFFLINE) == {}
    assert env.state() is OFFLINE
    assert env.batch.calls == BATCH_ONLY


def test_invalid_new_partition_to_nonexistent_partition_transition(env: Env) -> None:
    _invalid_transition(env, NEW, NON_EXISTENT)


def test_online_partition_to_online_transition(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), ONLINE, LICE(lai(5, 0, [5], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(5, 0, [5], 0))})
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({TP: lai(5, 1, [5], 2)}, []),
    )
    result = env.psm.handle_state_changes([TP], ONLINE, PREFERRED)
    env.store.verify()
    assert result == {TP: lai(5, 1, [5], 2)}
    assert env.batch.calls == [
        ("new_batch",),
        ("add_leader_and_isr_request_for_brokers", (5,), TP, LICE(lai(5, 1, [5], 2)), RA([5]), False),
        ("send_requests_to_brokers", 50),
    ]
    assert env.state() is ONLINE
    assert env.ctx.partition_leadership_info(TP) == LICE(lai(5, 1, [5], 2))


def test_online_partition_to_online_transition_for_controlled_shutdown(env: Env) -> None:
    env.live(5, 6)
    env.ctx.shutting_down_broker_ids.add(5)
    env.setup(TP, RA([5, 6]), ONLINE, LICE(lai(5, 0, [5, 6], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(5, 0, [5, 6], 0))})
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(6, 1, [6], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({TP: lai(6, 1, [6], 2)}, []),
    )
    result = env.psm.handle_state_changes([TP], ONLINE, SHUTDOWN)
    env.store.verify()
    assert result == {TP: lai(6, 1, [6], 2)}
    assert env.batch.calls == [
        ("new_batch",),
        ("add_leader_and_isr_request_for_brokers", (5, 6), TP, LICE(lai(6, 1, [6], 2)), RA([5, 6]), False),
        ("send_requests_to_brokers", 50),
    ]
    assert env.state() is ONLINE


def test_online_partition_to_offline_transition(env: Env) -> None:
    env.ctx.put_partition_state(TP, ONLINE)
    assert env.psm.handle_state_changes([TP], OFFLINE) == {}
    assert env.state() is OFFLINE
    assert env.batch.calls == BATCH_ONLY


def test_invalid_online_partition_to_nonexistent_partition_transition(env: Env) -> None:
    _invalid_transition(env, ONLINE, NON_EXISTENT)


def test_invalid_online_partition_to_new_partition_transition(env: Env) -> None:
    _invalid_transition(env, ONLINE, NEW)


def test_offline_partition_to_online_partition_transition(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), OFFLINE, LICE(lai(-1, 0, [5], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(-1, 0, [5], 0))})
    env.store.expect("get_log_configs", set(), BROKER_CONFIG, result=({"t": {}}, {}))
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({TP: lai(5, 1, [5], 2)}, []),
    )
    result = env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert result == {TP: lai(5, 1, [5], 2)}
    assert env.batch.calls == [
        ("new_batch",),
        ("add_leader_and_isr_request_for_brokers", (5,), TP, LICE(lai(5, 1, [5], 2)), RA([5]), False),
        ("send_requests_to_brokers", 50),
    ]
    assert env.state() is ONLINE
    assert env.ctx.stats.unclean_leader_elections == 0


def test_offline_partition_to_unclean_online_partition_transition(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([6, 5]), OFFLINE, LICE(lai(6, 0, [6], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(6, 0, [6], 0))})
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({TP: lai(5, 1, [5], 2)}, []),
    )
    result = env.psm.handle_state_changes([TP], ONLINE, OFFLINE_UNCLEAN)
    env.store.verify()
    assert result == {TP: lai(5, 1, [5], 2)}
    assert env.batch.calls == [
        ("new_batch",),
        ("add_leader_and_isr_request_for_brokers", (5,), TP, LICE(lai(5, 1, [5], 2)), RA([6, 5]), False),
        ("send_requests_to_brokers", 50),
    ]
    assert env.state() is ONLINE
    assert env.ctx.stats.unclean_leader_elections == 1


def test_offline_partition_to_online_partition_transition_zoo_keeper_client_exception_from_state_lookup(
    env: Env,
) -> None:
    env.live(5)
    env.setup(TP, RA([5]), OFFLINE, LICE(lai(-1, 0, [5], 0)))
    lost = StoreUnavailableError("connection lost")
    env.store.expect("get_partition_states", [TP], error=lost)
    assert env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN) == {TP: lost}
    env.store.verify()
    assert env.batch.calls == BATCH_ONLY
    assert env.state() is OFFLINE


def test_offline_partition_to_online_partition_transition_error_code_from_state_lookup(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), OFFLINE, LICE(lai(-1, 0, [5], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: None})
    result = env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert isinstance(result[TP], StateChangeFailedError)
    assert "LeaderAndIsr information doesn't exist for partition t-0" in str(result[TP])
    assert env.batch.calls == BATCH_ONLY
    assert env.state() is OFFLINE


def test_offline_partition_to_nonexistent_partition_transition(env: Env) -> None:
    env.ctx.put_partition_state(TP, OFFLINE)
    assert env.psm.handle_state_changes([TP], NON_EXISTENT) == {}
    assert env.state() is NON_EXISTENT
    assert env.batch.calls == BATCH_ONLY


def test_invalid_offline_partition_to_new_partition_transition(env: Env) -> None:
    _invalid_transition(env, OFFLINE, NEW)


def test_updating_offline_partitions_count(env: Env) -> None:
    env.live(5)
    partitions = [TopicPartition("test", p) for p in range(4)]
    for tp in partitions:
        env.setup(tp, RA([5]))
    env.store.expect(
        "get_partition_states", partitions, result={tp: LICE(lai(5, 0, [5], 0)) for tp in partitions}
    )
    env.store.expect("get_log_configs", set(), BROKER_CONFIG, result=({}, {}))
    env.store.expect(
        "update_leader_and_isr",
        {tp: lai(5, 1, [5], 0) for tp in partitions},
        50,
        0,
        result=UpdateLeaderAndIsrResult({tp: lai(5, 1, [5], 0) for tp in partitions}, []),
    )
    env.psm.handle_state_changes(partitions, NEW)
    env.psm.handle_state_changes(partitions, OFFLINE)
    assert env.ctx.offline_partition_count == 4
    env.psm.handle_state_changes(partitions, ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert env.ctx.offline_partition_count == 0
    assert all(env.state(tp) is ONLINE for tp in partitions)


def test_no_offline_partitions_change_for_topics_being_deleted(env: Env) -> None:
    partitions = [TopicPartition("test", p) for p in range(4)]
    env.ctx.topics_to_be_deleted.add("test")
    env.ctx.topics_with_deletion_started.add("test")
    env.psm.handle_state_changes(partitions, NEW)
    env.psm.handle_state_changes(partitions, OFFLINE)
    assert all(env.state(tp) is OFFLINE for tp in partitions)
    assert env.ctx.offline_partition_count == 0


# ============================================================================ paths Kafka leaves untested
def test_bad_version_is_retried_after_a_fresh_read_and_only_for_that_partition(env: Env) -> None:
    env.live(5, 6)
    tp1 = TopicPartition("t", 1)
    for tp in (TP, tp1):
        env.setup(tp, RA([5, 6]), ONLINE, LICE(lai(6, 0, [5, 6], 0)))
    env.store.expect(
        "get_partition_states", [TP, tp1], result={tp: LICE(lai(6, 0, [5, 6], 0)) for tp in (TP, tp1)}
    )
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(5, 1, [5, 6], 0), tp1: lai(5, 1, [5, 6], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({tp1: lai(5, 1, [5, 6], 1)}, [TP]),
    )
    # Someone else (a leader shrinking the ISR) wrote TP meanwhile: the retry must start from that.
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(6, 3, [5], 4))})
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(5, 4, [5], 4)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({TP: lai(5, 4, [5], 5)}, []),
    )
    result = env.psm.handle_state_changes([TP, tp1], ONLINE, PREFERRED)
    env.store.verify()
    assert result == {TP: lai(5, 4, [5], 5), tp1: lai(5, 1, [5, 6], 1)}
    assert env.batch.calls == [
        ("new_batch",),
        (
            "add_leader_and_isr_request_for_brokers",
            (5, 6),
            tp1,
            LICE(lai(5, 1, [5, 6], 1)),
            RA([5, 6]),
            False,
        ),
        ("add_leader_and_isr_request_for_brokers", (5, 6), TP, LICE(lai(5, 4, [5], 5)), RA([5, 6]), False),
        ("send_requests_to_brokers", 50),
    ]
    assert env.ctx.partition_leadership_info(TP) == LICE(lai(5, 4, [5], 5))


def test_offline_strategy_reads_topic_configs_again_on_each_retry_round(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), OFFLINE, LICE(lai(-1, 0, [5], 0)))
    for zk_version in (0, 1):
        env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(-1, 0, [5], zk_version))})
        env.store.expect("get_log_configs", set(), BROKER_CONFIG, result=({}, {}))
        retry = [TP] if zk_version == 0 else []
        finished: dict[TopicPartition, LeaderAndIsr | MetadataStoreError] = (
            {} if zk_version == 0 else {TP: lai(5, 1, [5], 2)}
        )
        env.store.expect(
            "update_leader_and_isr",
            {TP: lai(5, 1, [5], zk_version)},
            50,
            0,
            result=UpdateLeaderAndIsrResult(finished, retry),
        )
    assert env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN) == {TP: lai(5, 1, [5], 2)}
    env.store.verify()
    assert env.state() is ONLINE


def test_controller_moved_error_propagates_and_the_batch_is_not_sent(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), ONLINE, LICE(lai(5, 0, [5], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(5, 0, [5], 0))})
    env.store.expect(
        "update_leader_and_isr", {TP: lai(5, 1, [5], 0)}, 50, 0, error=ControllerMovedError("fenced")
    )
    with pytest.raises(ControllerMovedError):
        env.psm.handle_state_changes([TP], ONLINE, PREFERRED)
    env.store.verify()
    assert env.batch.calls == [("new_batch",)]
    assert env.state() is ONLINE
    assert env.ctx.partition_leadership_info(TP) == LICE(lai(5, 0, [5], 0))
    [records] = env.audit.calls
    assert [(r.outcome, r.error) for r in records] == [("failed", "ControllerMovedError: fenced")]


def test_controller_moved_error_from_create_states_propagates(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), NEW)
    env.store.expect(
        "create_partition_states", {TP: LICE(lai(5, 0, [5], 0))}, 0, error=ControllerMovedError("fenced")
    )
    with pytest.raises(ControllerMovedError):
        env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN)
    assert env.batch.calls == [("new_batch",)]
    assert env.state() is NEW


@pytest.mark.parametrize(("zk_controller_epoch", "aborted"), [(51, True), (50, False), (49, False)])
def test_state_written_by_a_newer_controller_aborts_the_election(
    env: Env, zk_controller_epoch: int, aborted: bool
) -> None:
    env.live(5)
    env.setup(TP, RA([5]), ONLINE, LICE(lai(5, 0, [5], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(5, 0, [5], 0), zk_controller_epoch)})
    if not aborted:
        env.store.expect(
            "update_leader_and_isr",
            {TP: lai(5, 1, [5], 0)},
            50,
            0,
            result=UpdateLeaderAndIsrResult({TP: lai(5, 1, [5], 1)}, []),
        )
    result = env.psm.handle_state_changes([TP], ONLINE, PREFERRED)
    env.store.verify()
    if aborted:
        assert isinstance(result[TP], StateChangeFailedError)
        assert "controller epoch 51" in str(result[TP])
        assert env.batch.calls == BATCH_ONLY
    else:
        assert result == {TP: lai(5, 1, [5], 1)}
        assert len(env.batch.calls_named("add_leader_and_isr_request_for_brokers")) == 1


def test_missing_strategy_fails_every_partition_after_new_ones_were_initialised(env: Env) -> None:
    env.live(5)
    new_tp = TopicPartition("t", 1)
    env.setup(TP, RA([5]), OFFLINE, LICE(lai(-1, 0, [5], 0)))
    env.setup(new_tp, RA([5]), NEW)
    env.store.expect("create_partition_states", {new_tp: LICE(lai(5, 0, [5], 0))}, 0, result={new_tp: None})
    result = env.psm.handle_state_changes([TP, new_tp], ONLINE)
    env.store.verify()
    assert set(result) == {TP, new_tp}
    assert all(isinstance(e, InvalidArgumentError) for e in result.values())
    # As in Kafka: the initialisation already happened, but the batch is neither sent nor cleared.
    assert env.state(new_tp) is ONLINE
    assert env.state(TP) is OFFLINE
    assert env.batch.calls[0] == ("new_batch",)
    assert ("send_requests_to_brokers", 50) not in env.batch.calls


def test_config_lookup_failure_fails_only_that_topics_partitions(env: Env) -> None:
    env.live(5)
    a0, b0 = TopicPartition("a", 0), TopicPartition("b", 0)
    for tp in (a0, b0):
        env.setup(tp, RA([6, 5]), OFFLINE, LICE(lai(6, 0, [6], 0)))
    env.store.expect(
        "get_partition_states", [a0, b0], result={tp: LICE(lai(6, 0, [6], 0)) for tp in (a0, b0)}
    )
    broken = MetadataStoreError("cannot read /config/topics/a")
    env.store.expect(
        "get_log_configs",
        {"a", "b"},
        BROKER_CONFIG,
        result=({"b": {"unclean.leader.election.enable": "true"}}, {"a": broken}),
    )
    env.store.expect(
        "update_leader_and_isr",
        {b0: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({b0: lai(5, 1, [5], 1)}, []),
    )
    result = env.psm.handle_state_changes([a0, b0], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert result[b0] == lai(5, 1, [5], 1)
    assert isinstance(result[a0], StateChangeFailedError)
    assert "cannot read /config/topics/a" in str(result[a0])
    assert (env.state(a0), env.state(b0)) == (OFFLINE, ONLINE)
    assert env.ctx.stats.unclean_leader_elections == 1


@pytest.mark.parametrize(("value", "elected"), [("TRUE", True), (" true ", True), ("False", False)])
def test_unclean_election_enabled_by_topic_config(env: Env, value: str, elected: bool) -> None:
    env.live(5)
    env.setup(TP, RA([6, 5]), OFFLINE, LICE(lai(6, 0, [6], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(6, 0, [6], 0))})
    merged = {**BROKER_CONFIG, "unclean.leader.election.enable": value}
    env.store.expect("get_log_configs", {"t"}, BROKER_CONFIG, result=({"t": merged}, {}))
    if elected:
        env.store.expect(
            "update_leader_and_isr",
            {TP: lai(5, 1, [5], 0)},
            50,
            0,
            result=UpdateLeaderAndIsrResult({TP: lai(5, 1, [5], 1)}, []),
        )
    result = env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert (result[TP] == lai(5, 1, [5], 1)) is elected
    assert env.ctx.stats.unclean_leader_elections == int(elected)


def test_invalid_unclean_config_value_fails_the_partition_with_a_clear_error(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([6, 5]), OFFLINE, LICE(lai(6, 0, [6], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(6, 0, [6], 0))})
    bad = {"unclean.leader.election.enable": "yes"}
    env.store.expect("get_log_configs", {"t"}, BROKER_CONFIG, result=({"t": bad}, {}))
    result = env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert "invalid unclean.leader.election.enable='yes' for topic t" in str(result[TP])
    assert env.state() is OFFLINE


def test_invalid_config_value_fails_only_that_topics_partitions(env: Env) -> None:
    """A deviation from Kafka 2.8 (README, "Deviations"): Kafka's config parse error fails the whole
    state-change call; here topic a's invalid value fails a's partitions and b is still elected."""
    env.live(5)
    a0, a1, b0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)
    for tp in (a0, a1, b0):
        env.setup(tp, RA([6, 5]), OFFLINE, LICE(lai(6, 0, [6], 0)))
    env.store.expect(
        "get_partition_states", [a0, a1, b0], result={tp: LICE(lai(6, 0, [6], 0)) for tp in (a0, a1, b0)}
    )
    env.store.expect(
        "get_log_configs",
        {"a", "b"},
        BROKER_CONFIG,
        result=(
            {"a": {"unclean.leader.election.enable": "yes"}, "b": {"unclean.leader.election.enable": "true"}},
            {},
        ),
    )
    env.store.expect(
        "update_leader_and_isr",
        {b0: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({b0: lai(5, 1, [5], 1)}, []),
    )
    result = env.psm.handle_state_changes([a0, a1, b0], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert result[b0] == lai(5, 1, [5], 1)
    for tp in (a0, a1):
        assert isinstance(result[tp], StateChangeFailedError)
        assert "invalid unclean.leader.election.enable='yes' for topic a" in str(result[tp])
    assert (env.state(a0), env.state(a1), env.state(b0)) == (OFFLINE, OFFLINE, ONLINE)


def test_leaderless_offline_election_fails_without_writing(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([6, 5]), OFFLINE, LICE(lai(6, 0, [6], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(6, 0, [6], 0))})
    env.store.expect("get_log_configs", {"t"}, BROKER_CONFIG, result=({"t": {}}, {}))
    result = env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert str(result[TP]) == (
        "Failed to elect leader for partition t-0 under strategy "
        "OfflinePartitionLeaderElectionStrategy(false)"
    )
    assert env.batch.calls == BATCH_ONLY
    assert env.state() is OFFLINE


def test_undecodable_state_znode_fails_that_partition(env: Env) -> None:
    env.live(5)
    tp1 = TopicPartition("t", 1)
    for tp in (TP, tp1):
        env.setup(tp, RA([5]), OFFLINE)
    corrupt = ZNodeDecodeError("/brokers/topics/t/partitions/0/state", "not JSON")
    env.store.expect("get_partition_states", [TP, tp1], result={TP: corrupt, tp1: LICE(lai(-1, 0, [5], 0))})
    env.store.expect("get_log_configs", set(), BROKER_CONFIG, result=({}, {}))
    env.store.expect(
        "update_leader_and_isr",
        {tp1: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({tp1: lai(5, 1, [5], 1)}, []),
    )
    result = env.psm.handle_state_changes([TP, tp1], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    assert result == {TP: corrupt, tp1: lai(5, 1, [5], 1)}
    assert (env.state(TP), env.state(tp1)) == (OFFLINE, ONLINE)


def test_per_partition_write_failure_is_final(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), ONLINE, LICE(lai(5, 0, [5], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(5, 0, [5], 0))})
    gone = NoNodeError("/brokers/topics/t/partitions/0/state")
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({TP: gone}, []),
    )
    assert env.psm.handle_state_changes([TP], ONLINE, PREFERRED) == {TP: gone}
    env.store.verify()
    assert env.batch.calls == BATCH_ONLY


def test_failed_write_call_fails_every_elected_partition_without_retry(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), ONLINE, LICE(lai(5, 0, [5], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(5, 0, [5], 0))})
    lost = StoreUnavailableError("connection lost")
    env.store.expect("update_leader_and_isr", {TP: lai(5, 1, [5], 0)}, 50, 0, error=lost)
    assert env.psm.handle_state_changes([TP], ONLINE, PREFERRED) == {TP: lost}
    env.store.verify()
    assert env.batch.calls == BATCH_ONLY


def test_reassign_strategy_sends_to_all_target_replicas(env: Env) -> None:
    env.live(1, 3)
    assignment = RA([1, 2, 3], adding=[3], removing=[1])
    env.setup(TP, assignment, ONLINE, LICE(lai(1, 0, [1, 2, 3], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(1, 0, [1, 2, 3], 0))})
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(3, 1, [1, 2, 3], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({TP: lai(3, 1, [1, 2, 3], 1)}, []),
    )
    env.psm.handle_state_changes([TP], ONLINE, ReassignPartitionLeaderElectionStrategy())
    env.store.verify()
    assert env.batch.calls[1] == (
        "add_leader_and_isr_request_for_brokers",
        (2, 3),
        TP,
        LICE(lai(3, 1, [1, 2, 3], 1)),
        assignment,
        False,
    )


def test_new_partition_without_live_replica_stays_new_without_store_call(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([6]), NEW)
    assert env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN) == {}
    assert env.store.calls == []
    assert env.batch.calls == BATCH_ONLY
    assert env.state() is NEW
    [records] = env.audit.calls
    assert records[0].outcome == "failed"
    assert records[0].error is not None and "No assigned replica is alive" in records[0].error


def test_empty_partition_list_does_nothing(env: Env) -> None:
    assert env.psm.handle_state_changes([], ONLINE, OFFLINE_CLEAN) == {}
    assert env.batch.calls == []
    assert env.audit.calls == []


def test_startup_initialises_states_and_elects_new_and_offline_partitions_except_deleted_topics(
    env: Env,
) -> None:
    env.live(5)
    a0, a1, a2, gone = (
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("a", 2),
        TopicPartition("gone", 0),
    )
    env.setup(a0, RA([5]), leadership=LICE(lai(5, 0, [5], 0)))
    env.setup(a1, RA([5]), leadership=LICE(lai(-1, 0, [5], 0)))
    env.setup(a2, RA([5]))
    env.setup(gone, RA([5]))
    env.ctx.topics_to_be_deleted.add("gone")
    env.store.expect("create_partition_states", {a2: LICE(lai(5, 0, [5], 0))}, 0, result={a2: None})
    env.store.expect("get_partition_states", [a1], result={a1: LICE(lai(-1, 0, [5], 0))})
    env.store.expect("get_log_configs", set(), BROKER_CONFIG, result=({}, {}))
    env.store.expect(
        "update_leader_and_isr",
        {a1: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({a1: lai(5, 1, [5], 1)}, []),
    )
    env.psm.startup()
    env.store.verify()
    assert [env.state(tp) for tp in (a0, a1, a2, gone)] == [ONLINE, ONLINE, ONLINE, NEW]
    assert env.batch.calls == [
        ("new_batch",),
        ("add_leader_and_isr_request_for_brokers", (5,), a2, LICE(lai(5, 0, [5], 0)), RA([5]), True),
        ("add_leader_and_isr_request_for_brokers", (5,), a1, LICE(lai(5, 1, [5], 1)), RA([5]), False),
        ("send_requests_to_brokers", 50),
    ]


def test_trigger_online_partition_state_change_for_one_topic(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]), NEW)
    env.setup(TopicPartition("other", 0), RA([5]), NEW)
    env.store.expect("create_partition_states", {TP: LICE(lai(5, 0, [5], 0))}, 0, result={TP: None})
    assert env.psm.trigger_online_partition_state_change("t") == {}
    env.store.verify()
    assert env.state() is ONLINE
    assert env.state(TopicPartition("other", 0)) is NEW


# ============================================================================ audit
def test_audit_records_ok_invalid_and_failed_transitions_in_one_call(env: Env) -> None:
    env.live(5)
    ok_tp, failed_tp, invalid_tp = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    env.setup(ok_tp, RA([5]), OFFLINE, LICE(lai(-1, 0, [5], 0)))
    env.setup(failed_tp, RA([6, 5]), OFFLINE, LICE(lai(6, 0, [6], 0)))
    env.store.expect(
        "get_partition_states",
        [ok_tp, failed_tp],
        result={ok_tp: LICE(lai(-1, 3, [5], 7)), failed_tp: LICE(lai(6, 2, [6], 0))},
    )
    env.store.expect("get_log_configs", {"t"}, BROKER_CONFIG, result=({"t": {}}, {}))
    env.store.expect(
        "update_leader_and_isr",
        {ok_tp: lai(5, 4, [5], 7)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({ok_tp: lai(5, 4, [5], 8)}, []),
    )
    env.psm.handle_state_changes([ok_tp, failed_tp, invalid_tp], ONLINE, OFFLINE_CLEAN)
    env.store.verify()
    [records] = env.audit.calls
    by_partition = {r.partition: r for r in records if isinstance(r, PartitionTransition)}
    assert len(records) == 3
    ok, failed, invalid = by_partition[0], by_partition[1], by_partition[2]
    assert (ok.outcome, ok.from_state, ok.to_state) == ("ok", "OfflinePartition", "OnlinePartition")
    assert (ok.leader_before, ok.leader_after, ok.isr_after) == (-1, 5, (5,))
    assert (ok.leader_epoch_before, ok.leader_epoch_after) == (3, 4)
    assert ok.election_strategy == "OfflinePartitionLeaderElectionStrategy(false)"
    assert ok.unclean is False
    assert (failed.outcome, failed.leader_before, failed.leader_epoch_before) == ("failed", 6, 2)
    assert failed.error is not None and "Failed to elect leader for partition t-1" in failed.error
    assert (invalid.outcome, invalid.from_state) == ("invalid", "NonExistentPartition")
    assert invalid.error is not None and "Instead it is in NonExistentPartition state" in invalid.error


def test_audit_records_unclean_elections(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([6, 5]), OFFLINE, LICE(lai(6, 0, [6], 0)))
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(6, 0, [6], 0))})
    env.store.expect(
        "update_leader_and_isr",
        {TP: lai(5, 1, [5], 0)},
        50,
        0,
        result=UpdateLeaderAndIsrResult({TP: lai(5, 1, [5], 1)}, []),
    )
    env.psm.handle_state_changes([TP], ONLINE, OFFLINE_UNCLEAN)
    [[record]] = env.audit.calls
    assert isinstance(record, PartitionTransition)
    assert (record.outcome, record.unclean, record.leader_after) == ("ok", True, 5)
    assert record.election_strategy == "OfflinePartitionLeaderElectionStrategy(true)"


def test_audit_records_plain_transitions_and_new_partition_initialisation(env: Env) -> None:
    env.live(5)
    env.setup(TP, RA([5]))
    env.store.expect("create_partition_states", {TP: LICE(lai(5, 0, [5], 0))}, 0, result={TP: None})
    env.psm.handle_state_changes([TP], NEW)
    env.psm.handle_state_changes([TP], ONLINE, OFFLINE_CLEAN)
    env.psm.handle_state_changes([TP], OFFLINE)
    assert len(env.audit.calls) == 3
    steps = [
        (r.from_state, r.to_state, r.outcome, r.leader_after)
        for call in env.audit.calls
        for r in call
        if isinstance(r, PartitionTransition)
    ]
    assert steps == [
        ("NonExistentPartition", "NewPartition", "ok", None),
        ("NewPartition", "OnlinePartition", "ok", 5),
        ("OnlinePartition", "OfflinePartition", "ok", 5),
    ]


def test_null_audit_sink_is_the_default() -> None:
    ctx = ControllerContext()
    psm = PartitionStateMachine(1, ctx, ScriptedPartitionStateStore(), RecordingRequestBatch())
    assert psm.handle_state_changes([TP], NEW) == {}
    assert ctx.partition_states[TP] is NEW


def test_partition_missing_from_the_stores_answers_fails_instead_of_vanishing(env: Env) -> None:
    env.live(5)
    new_tp = TopicPartition("t", 1)
    env.setup(TP, RA([5]), ONLINE, LICE(lai(5, 0, [5], 0)))
    env.setup(new_tp, RA([5]), NEW)
    env.store.expect("create_partition_states", {new_tp: LICE(lai(5, 0, [5], 0))}, 0, result={})
    env.store.expect("get_partition_states", [TP], result={TP: LICE(lai(5, 0, [5], 0))})
    env.store.expect(
        "update_leader_and_isr", {TP: lai(5, 1, [5], 0)}, 50, 0, result=UpdateLeaderAndIsrResult({}, [])
    )
    result = env.psm.handle_state_changes([TP, new_tp], ONLINE, PREFERRED)
    env.store.verify()
    assert list(result) == [TP]
    assert "no update result for t-0" in str(result[TP])
    assert (env.state(TP), env.state(new_tp)) == (ONLINE, NEW)
    assert env.batch.calls == BATCH_ONLY
    [records] = env.audit.calls
    assert sorted((r.partition, r.outcome) for r in records) == [(0, "failed"), (1, "failed")]


def test_invalid_transition_is_logged_to_the_state_change_log_with_the_current_state(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    env.ctx.put_partition_state(TP, ONLINE)
    with caplog.at_level(logging.ERROR, logger="kafka_controller.state_change"):
        assert env.psm.handle_state_changes([TP], NEW) == {}
    [message] = [r.getMessage() for r in caplog.records if r.name == "kafka_controller.state_change"]
    assert "partition t-0 from OnlinePartition to NewPartition" in message
    assert "Instead it is in OnlinePartition state" in message
