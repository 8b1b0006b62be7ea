"""The performance changes keep behaviour: bounded per-partition log lines (every result and audit
record still there), fast constructors build the very objects the classes build, bulk leadership
loading keeps the imbalance count, and decoded topic znodes share assignments safely."""

from __future__ import annotations

import logging

import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.log_budget import MAX_PARTITION_LOG_LINES, LogBudget
from kafka_controller.core.partition_state_machine import PartitionStateMachine
from kafka_controller.core.replica_state_machine import ReplicaStateMachine
from kafka_controller.core.strategies import OfflinePartitionLeaderElectionStrategy
from kafka_controller.domain.audit_records import PartitionTransition, ReplicaTransition
from kafka_controller.domain.errors import StateChangeFailedError
from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    StopReplicaPartitionState,
    UpdateMetadataPartitionState,
    build_leader_and_isr_partition_state,
    build_stop_replica_partition_state,
    build_update_metadata_partition_state,
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
    build_leader_and_isr,
    build_leader_isr_and_controller_epoch,
)
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.testing.doubles import RecordingRequestBatch
from kafka_controller.zk.codecs import decode_topic, encode_topic
from tests.unit.offline_cluster import offline_cluster

STATE_CHANGE = "kafka_controller.state_change"
MANY = MAX_PARTITION_LOG_LINES + 37


# -- LogBudget ------------------------------------------------------------------------------------
def test_log_budget_takes_up_to_its_limit_then_counts_and_summarises_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    budget = LogBudget(3)
    assert [budget.take() for _ in range(5)] == [True, True, True, False, False]
    log = logging.getLogger("test.budget")
    with caplog.at_level(logging.INFO, logger="test.budget"):
        budget.summarize(log, logging.INFO, "things")
        budget.summarize(log, logging.INFO, "things")  # reset by the first: nothing more to say
    [line] = [r.getMessage() for r in caplog.records]
    assert "2 more things" in line and "first 3" in line
    assert budget.take()  # the budget is full again


def test_log_budget_says_nothing_when_nothing_was_skipped(caplog: pytest.LogCaptureFixture) -> None:
    budget = LogBudget(3)
    budget.take()
    with caplog.at_level(logging.DEBUG):
        budget.summarize(logging.getLogger("test.budget"), logging.ERROR, "things")
    assert caplog.records == []


# -- bounded state-change logging keeps every result and record --------------------------------------
def _offline_partitions(n: int) -> tuple[ControllerContext, InMemoryMetadataStore, list[TopicPartition]]:
    """``n`` partitions led by dead broker 1 (ISR [1]), broker 2 alive: no clean election possible."""
    tps = [TopicPartition("t", p) for p in range(n)]
    return offline_cluster({tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1,), 0), 1) for tp in tps})


def test_many_failed_elections_log_a_bounded_number_of_lines_but_return_and_audit_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx, store, tps = _offline_partitions(MANY)
    audit = RecordingAuditSink()
    psm = PartitionStateMachine(7, ctx, store, RecordingRequestBatch(), audit=audit)
    with caplog.at_level(logging.ERROR, logger=STATE_CHANGE):
        results = psm.handle_state_changes(
            tps, PartitionState.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(False)
        )
    assert set(results) == set(tps)
    assert all(isinstance(e, StateChangeFailedError) for e in results.values())
    lines = [r.getMessage() for r in caplog.records if r.name == STATE_CHANGE]
    per_partition = [m for m in lines if "failed to change state for partition" in m]
    assert len(per_partition) == MAX_PARTITION_LOG_LINES
    [summary] = [m for m in lines if m.startswith("... and")]
    assert f"{MANY - MAX_PARTITION_LOG_LINES} more partitions failed" in summary
    records = [r for r in audit.records if isinstance(r, PartitionTransition)]
    assert sorted(r.partition for r in records) == list(range(MANY))
    assert {r.outcome for r in records} == {"failed"}


def test_many_isr_shrinks_log_a_bounded_number_of_lines_but_write_and_audit_all(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ctx, store, tps = _offline_partitions(MANY)
    audit = RecordingAuditSink()
    rsm = ReplicaStateMachine(7, ctx, store, RecordingRequestBatch(), audit=audit)
    replicas = [PartitionAndReplica(tp, 1) for tp in tps]
    for r in replicas:
        ctx.put_replica_state(r, ReplicaState.ONLINE_REPLICA)
    with caplog.at_level(logging.INFO, logger=STATE_CHANGE):
        rsm.handle_state_changes(replicas, ReplicaState.OFFLINE_REPLICA)
    lines = [r.getMessage() for r in caplog.records if r.name == STATE_CHANGE]
    assert len([m for m in lines if "after removing replica 1" in m]) == MAX_PARTITION_LOG_LINES
    assert any(f"{MANY - MAX_PARTITION_LOG_LINES} more partitions had a replica removed" in m for m in lines)
    assert all(ctx.replica_states[r] is ReplicaState.OFFLINE_REPLICA for r in replicas)
    written = store.get_partition_states(tps)
    assert all(s.leader_and_isr.leader == -1 for s in written.values())  # type: ignore[union-attr]
    records = [r for r in audit.records if isinstance(r, ReplicaTransition)]
    assert len(records) == MANY
    first = next(r for r in records if r.partition == 0)
    assert (first.replica, first.from_state, first.to_state, first.outcome) == (
        1,
        "OnlineReplica",
        "OfflineReplica",
        "ok",
    )
    assert (first.leader_before, first.leader_after, first.isr_before, first.isr_after) == (1, -1, (1,), (1,))
    assert (first.leader_epoch_before, first.leader_epoch_after, first.error) == (3, 4, None)


# -- fast constructors --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("cls", "build", "values"),
    [
        (LeaderAndIsr, build_leader_and_isr, (1, 2, (1, 3), 4)),
        (
            LeaderIsrAndControllerEpoch,
            build_leader_isr_and_controller_epoch,
            (LeaderAndIsr(1, 2, (1,), 3), 9),
        ),
        (
            LeaderAndIsrPartitionState,
            build_leader_and_isr_partition_state,
            ("t", 0, 1, 2, 3, (2, 3), 4, (2, 3), (), (3,), True),
        ),
        (
            UpdateMetadataPartitionState,
            build_update_metadata_partition_state,
            ("t", 0, 1, 2, 3, (2,), 4, (2, 3), (3,)),
        ),
        (StopReplicaPartitionState, build_stop_replica_partition_state, (5, -2, True)),
    ],
)
def test_fast_constructors_build_what_the_class_builds(
    cls: type, build: object, values: tuple[object, ...]
) -> None:
    """The hot-path builders return the very object ``cls(*values)`` builds: same type, equal, same
    hash and repr, same fields; and it is immutable."""
    fast = build(*values)  # type: ignore[operator]
    slow = cls(*values)
    assert type(fast) is cls
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert fast._asdict() == slow._asdict() == dict(zip(cls._fields, values, strict=True))  # type: ignore[attr-defined]
    assert {fast: 1}[slow] == 1
    with pytest.raises(AttributeError):
        setattr(fast, cls._fields[0], values[0])  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        fast.__dict__  # noqa: B018  -- slotted: no per-instance dict to smuggle state into


def test_fast_constructors_refuse_a_wrong_number_of_fields() -> None:
    """Every field is given, positionally: a missing or extra value is an error, as with ``cls``."""
    with pytest.raises(TypeError):
        build_leader_and_isr(1, 2, (1,))  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        build_stop_replica_partition_state(5, -2, True, 1)  # type: ignore[call-arg]


# -- bulk leadership load -------------------------------------------------------------------------------
def test_bulk_leadership_load_keeps_the_same_cache_and_imbalance_count_as_one_by_one() -> None:
    def context() -> ControllerContext:
        ctx = ControllerContext()
        ctx.partition_assignments["a"] = {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))}
        ctx.partition_assignments["gone"] = {0: ReplicaAssignment((1, 2))}
        ctx.queue_topic_deletion(["gone"])
        return ctx

    first = [
        (
            TopicPartition("a", 0),
            LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 1, (1, 2), 0), 1),
        ),  # off preferred
        (TopicPartition("a", 1), LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 1, (1, 2), 0), 1)),
        (TopicPartition("gone", 0), LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 1, (1, 2), 0), 1)),
        (
            TopicPartition("x", 0),
            LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 1, (2,), 0), 1),
        ),  # no assignment
    ]
    second = [(TopicPartition("a", 0), LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 2, (1, 2), 1), 1))]
    one_by_one, bulk = context(), context()
    for tp, info in first + second:
        one_by_one.put_partition_leadership_info(tp, info)
    bulk.put_partition_leadership_infos(first)
    assert bulk.preferred_replica_imbalance_count == 1
    bulk.put_partition_leadership_infos(second)
    assert bulk.partitions_leadership_info == one_by_one.partitions_leadership_info
    assert bulk.preferred_replica_imbalance_count == one_by_one.preferred_replica_imbalance_count == 0


# -- topic decoding ---------------------------------------------------------------------------------------
def test_decoded_topic_shares_equal_assignments_but_keeps_reassignments_apart() -> None:
    assignment = {
        0: ReplicaAssignment((1, 2)),
        1: ReplicaAssignment((1, 2)),
        2: ReplicaAssignment((2, 3, 1), (3,), (1,)),
        3: ReplicaAssignment((2, 3)),
    }
    _, decoded = decode_topic("t", encode_topic(assignment))
    assert decoded == {TopicPartition("t", p): a for p, a in assignment.items()}
    assert decoded[TopicPartition("t", 0)] is decoded[TopicPartition("t", 1)]
    assert decoded[TopicPartition("t", 2)].adding_replicas == (3,)


def test_topic_partition_keys_beyond_the_int_digit_limit_are_decode_errors() -> None:
    from kafka_controller.domain.errors import ZNodeDecodeError

    huge = "9" * 5000
    with pytest.raises(ZNodeDecodeError, match="/brokers/topics/t"):
        decode_topic("t", b'{"version":3,"partitions":{"' + huge.encode() + b'":[1]}}')


# -- request batch: one state per partition, rebuilt when an input changes -------------------------------
def test_request_batch_shares_a_partitions_states_across_its_replicas_until_an_input_changes() -> None:
    from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
    from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel

    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("h", b),)): b for b in (1, 2, 3)})
    tp, assignment = TopicPartition("t", 0), ReplicaAssignment((1, 2, 3))
    ctx.partition_assignments["t"] = {0: assignment}
    info = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (1, 2, 3), 0), 1)
    ctx.put_partition_leadership_info(tp, info)
    batch = ControllerBrokerRequestBatch(1, ctx, RecordingBrokerChannel(), lambda _event: None)
    batch.new_batch()
    for b in (1, 2, 3):  # what the replica state machine does: one call per replica
        batch.add_leader_and_isr_request_for_brokers((b,), tp, info, assignment, False)
    lai = batch.leader_and_isr_request_map
    assert lai[1][tp] is lai[2][tp] is lai[3][tp]
    first_um = batch.update_metadata_request_partition_info_map[tp]
    assert (first_um.leader, first_um.offline_replicas) == (1, ())

    moved = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 2, (2, 3), 0), 1)
    ctx.put_partition_leadership_info(tp, moved)
    batch.add_leader_and_isr_request_for_brokers((2,), tp, moved, assignment, False)
    assert lai[2][tp].leader == 2 and lai[3][tp].leader == 1
    assert batch.update_metadata_request_partition_info_map[tp].leader == 2

    ctx.remove_live_brokers([3])  # same leadership, different liveness: the metadata is rebuilt
    batch.add_leader_and_isr_request_for_brokers((2,), tp, moved, assignment, False)
    assert batch.update_metadata_request_partition_info_map[tp].offline_replicas == (3,)
    batch.clear()


@pytest.mark.parametrize("seed", range(40))
def test_bulk_leader_and_isr_queueing_matches_kafkas_per_entry_rules(seed: int) -> None:
    """``add_leader_and_isr_requests`` against an oracle written from Kafka's rules, not from the
    batch: per broker the last entry's state (``is_new`` sticky); UpdateMetadata from the context's
    leadership and assignment, offline = not ``is_replica_online``, leader -2 while deleting."""
    import random

    from kafka_controller.core.request_batch import ControllerBrokerRequestBatch
    from kafka_controller.dryrun.recording_channel import RecordingBrokerChannel

    rng = random.Random(seed)
    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("h", b),)): b for b in (1, 2, 3, 4) if rng.random() < 0.8})
    ctx.shutting_down_broker_ids.update(b for b in (1, 2, 3, 4) if rng.random() < 0.2)
    tps = [TopicPartition(f"t{t}", p) for t in range(3) for p in range(4)]
    for tp in tps:
        replicas = tuple(rng.sample([1, 2, 3, 4, 5], rng.randint(1, 3)))
        ctx.partition_assignments.setdefault(tp.topic, {})[tp.partition] = ReplicaAssignment(replicas)
        if rng.random() < 0.85:
            isr = replicas[: rng.randint(1, len(replicas))]
            ctx.put_partition_leadership_info(
                tp, LeaderIsrAndControllerEpoch(LeaderAndIsr(isr[0], rng.randint(0, 3), isr, 0), 1)
            )
    if rng.random() < 0.5:
        ctx.replicas_on_offline_dirs[rng.choice([1, 2, 3])] = {rng.choice(tps) for _ in range(3)}
    if rng.random() < 0.5:
        ctx.topics_to_be_deleted.add("t1")
    batch = ControllerBrokerRequestBatch(1, ctx, RecordingBrokerChannel(), lambda _e: None)
    want_lai: dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]] = {}
    queued: set[TopicPartition] = set()
    for _ in range(3):
        is_new = rng.random() < 0.3
        part = []
        for _ in range(10):
            tp = rng.choice(tps)
            info = ctx.partition_leadership_info(tp) or LeaderIsrAndControllerEpoch(
                LeaderAndIsr(1, 0, (1,), 0), 1
            )
            a = ctx.partition_full_replica_assignment(tp)
            recipients = tuple(rng.sample([-1, 1, 2, 3, 4, 5], rng.randint(0, 3)))
            part.append((recipients, tp, info, a))
            queued.add(tp)
            for b in recipients:
                if b < 0:
                    continue
                previous = want_lai.setdefault(b, {}).get(tp)
                new = is_new or (previous is not None and previous.is_new)
                lai = info.leader_and_isr
                want_lai[b][tp] = build_leader_and_isr_partition_state(
                    tp.topic, tp.partition, info.controller_epoch, lai.leader, lai.leader_epoch,
                    lai.isr, lai.zk_version, a.replicas, a.adding_replicas, a.removing_replicas, new,
                )  # fmt: skip
        batch.add_leader_and_isr_requests(part, is_new)

    want_um = {}
    for tp in queued:
        info = ctx.partition_leadership_info(tp)
        if info is None:
            continue
        replicas = ctx.partition_replica_assignment(tp)
        lai = info.leader_and_isr
        deleting = tp.topic in ctx.topics_to_be_deleted
        want_um[tp] = build_update_metadata_partition_state(
            tp.topic, tp.partition, info.controller_epoch, -2 if deleting else lai.leader,
            0 if deleting else lai.leader_epoch, lai.isr, 0 if deleting else lai.zk_version, replicas,
            tuple(r for r in replicas if not ctx.is_replica_online(r, tp)),
        )  # fmt: skip
    assert {b: dict(m) for b, m in batch.leader_and_isr_request_map.items()} == want_lai
    assert dict(batch.update_metadata_request_partition_info_map) == want_um
    want_brokers = ctx.live_or_shutting_down_broker_ids if queued else set()
    assert set(batch.update_metadata_request_broker_set) == want_brokers


def test_recording_batch_records_bulk_queueing_as_the_per_entry_calls() -> None:
    tp = TopicPartition("t", 0)
    info = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 1, (1, 2), 0), 1)
    assignment = ReplicaAssignment((1, 2))
    batch = RecordingRequestBatch()
    batch.add_leader_and_isr_requests([((1,), tp, info, assignment), ((2,), tp, info, assignment)], True)
    assert batch.calls == [
        ("add_leader_and_isr_request_for_brokers", (1,), tp, info, assignment, True),
        ("add_leader_and_isr_request_for_brokers", (2,), tp, info, assignment, True),
    ]
