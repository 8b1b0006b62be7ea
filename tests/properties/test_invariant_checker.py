"""The invariant checker can fail: each test corrupts one thing and expects the checker to say so.

Also pins down two behaviours the stateful test relies on: a clean history has no violations, and
the one place where Kafka itself leaves an ISR outside the replicas (KAFKA-5083's "last ISR member
stays" meeting a cancelled reassignment) is reproduced and tolerated — only that shape of it.
"""

from __future__ import annotations

import pytest

from kafka_controller.core.strategies import OfflinePartitionLeaderElectionStrategy
from kafka_controller.domain.audit_records import (
    OUTCOME_INVALID,
    OUTCOME_OK,
    PartitionTransition,
    ReplicaTransition,
)
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.testing.core_harness import CoreHarness
from kafka_controller.zk import paths as P

from .invariants import SPEC_VALID_PREVIOUS, InvariantChecker

TP = TopicPartition("t", 0)
DEFAULTS = {UNCLEAN_LEADER_ELECTION_ENABLE: "false"}


@pytest.fixture
def h() -> CoreHarness:
    harness = CoreHarness([1, 2, 3], broker_config=DEFAULTS)
    harness.create_topic("t", [[1, 2, 3], [2, 3, 1]])
    return harness


@pytest.fixture
def checker(h: CoreHarness) -> InvariantChecker:
    c = InvariantChecker(h, DEFAULTS)
    assert c.check() == []
    return c


def stored(h: CoreHarness, tp: TopicPartition = TP) -> LeaderAndIsr:
    read = h.store.get_partition_states([tp])[tp]
    assert isinstance(read, LeaderIsrAndControllerEpoch)
    return read.leader_and_isr


def write(h: CoreHarness, lai: LeaderAndIsr, tp: TopicPartition = TP, *, cache: bool = True) -> None:
    """A write behind the state machines' back (fenced like theirs), optionally cached too."""
    ctx = h.context
    result = h.store.update_leader_and_isr({tp: lai}, ctx.epoch, ctx.epoch_zk_version)
    written = result.finished[tp]
    assert isinstance(written, LeaderAndIsr)
    if cache:
        ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(written, ctx.epoch))


def reported(violations: list[str], *fragments: str) -> bool:
    return any(all(f in v for f in fragments) for v in violations)


def test_spec_tables_equal_the_domain_valid_previous_states() -> None:
    for state, previous in SPEC_VALID_PREVIOUS.items():
        assert state.valid_previous_states == previous


def test_a_clean_history_has_no_violations(h: CoreHarness, checker: InvariantChecker) -> None:
    h.fail_brokers([1])
    assert checker.check() == []
    h.start_brokers([1])
    h.set_isr(TP, [2, 3, 1])  # broker 1 caught up
    assert checker.check() == []
    h.preferred_election([TP])
    assert stored(h).leader == 1
    assert checker.check() == []
    assert h.controlled_shutdown(2) == set()
    assert checker.check() == []


def test_reports_a_leader_outside_the_isr(h: CoreHarness, checker: InvariantChecker) -> None:
    current = stored(h)
    write(h, LeaderAndIsr(1, current.leader_epoch + 1, (2, 3), current.zk_version))
    assert reported(checker.check(), "t-0: leader 1 is not in the ISR [2, 3]")


def test_reports_an_empty_isr(h: CoreHarness, checker: InvariantChecker) -> None:
    current = stored(h)
    write(h, LeaderAndIsr(-1, current.leader_epoch + 1, (), current.zk_version))
    assert reported(checker.check(), "t-0: the ISR is empty")


def test_reports_an_isr_outside_the_replicas(h: CoreHarness, checker: InvariantChecker) -> None:
    current = stored(h)
    write(h, LeaderAndIsr(1, current.leader_epoch + 1, (1, 4), current.zk_version))
    assert reported(checker.check(), "t-0: ISR [1, 4] is not within the replicas [1, 2, 3]")


def test_reports_a_leader_epoch_going_down(h: CoreHarness, checker: InvariantChecker) -> None:
    h.controlled_shutdown(1)  # epoch 0 -> 1
    assert checker.check() == []
    current = stored(h)
    write(h, LeaderAndIsr(current.leader, current.leader_epoch - 1, current.isr, current.zk_version))
    assert reported(checker.check(), "t-0: leader epoch went down from 1 to 0")


def test_reports_a_zk_version_going_down(h: CoreHarness, checker: InvariantChecker) -> None:
    h.controlled_shutdown(1)
    assert checker.check() == []
    current = LeaderIsrAndControllerEpoch(stored(h), h.context.epoch)
    h.store.session.delete(P.topic_partition_state_path(TP))  # recreated: data version 0 again
    h.store.create_partition_states({TP: current}, h.context.epoch_zk_version)
    h.context.put_partition_leadership_info(TP, LeaderIsrAndControllerEpoch(stored(h), h.context.epoch))
    assert reported(checker.check(), "t-0: zk version went down from 1 to 0")


def test_reports_a_state_change_nobody_audited(h: CoreHarness, checker: InvariantChecker) -> None:
    h.context.put_partition_state(TP, PartitionState.OFFLINE_PARTITION)
    assert reported(checker.check(), "partition t-0: state is OfflinePartition", "lead to OnlinePartition")


def test_reports_an_invalid_transition_recorded_as_ok(h: CoreHarness, checker: InvariantChecker) -> None:
    h.audit.records.append(PartitionTransition("t", 0, "OnlinePartition", "NewPartition", OUTCOME_OK))  # type: ignore[attr-defined]
    h.context.partition_states[TP] = PartitionState.NEW_PARTITION
    assert reported(checker.check(), "invalid transition OnlinePartition -> NewPartition recorded as ok")


def test_reports_a_valid_transition_recorded_as_invalid(h: CoreHarness, checker: InvariantChecker) -> None:
    record = PartitionTransition("t", 0, "OnlinePartition", "OfflinePartition", OUTCOME_INVALID)
    h.audit.records.append(record)  # type: ignore[attr-defined]
    assert reported(
        checker.check(), "valid transition OnlinePartition -> OfflinePartition recorded as invalid"
    )


def test_reports_an_invalid_attempt_that_changed_the_state(h: CoreHarness, checker: InvariantChecker) -> None:
    h.psm.handle_state_changes([TP], PartitionState.NEW_PARTITION)  # invalid: audited, skipped
    assert checker.check() == []
    h.audit.records.append(PartitionTransition("t", 0, "OnlinePartition", "NewPartition", OUTCOME_INVALID))  # type: ignore[attr-defined]
    h.context.partition_states[TP] = PartitionState.NEW_PARTITION  # ...but the state moved
    assert reported(checker.check(), "partition t-0: state is NewPartition", "lead to OnlinePartition")


def test_reports_a_replica_record_that_does_not_follow_the_state(
    h: CoreHarness, checker: InvariantChecker
) -> None:
    h.audit.records.append(ReplicaTransition("t", 0, 1, "OfflineReplica", "OnlineReplica"))  # type: ignore[attr-defined]
    assert reported(checker.check(), "audit record says OfflineReplica -> OnlineReplica", "was OnlineReplica")


def test_reports_a_leader_change_outside_the_isr_without_an_election(
    h: CoreHarness, checker: InvariantChecker
) -> None:
    h.fail_brokers([2, 3])  # ISR shrinks to [1]
    assert checker.check() == []
    current = stored(h)
    write(h, LeaderAndIsr(2, current.leader_epoch + 1, (2,), current.zk_version))
    h.start_brokers([2, 3])
    violations = checker.check()
    assert reported(violations, "t-0: leader moved 1 -> 2, outside the ISR [1]", "no audited election")


def test_reports_an_unclean_election_the_topic_does_not_allow(
    h: CoreHarness, checker: InvariantChecker
) -> None:
    h.fail_brokers([2, 3])
    h.fail_brokers([1])  # t-0: leader -1, ISR [1]
    h.start_brokers([2])
    assert checker.check() == []
    h.psm.handle_state_changes(
        [TP], PartitionState.ONLINE_PARTITION, OfflinePartitionLeaderElectionStrategy(True)
    )
    assert stored(h).leader == 2
    violations = checker.check()  # not declared as forced
    assert reported(violations, "t-0: unclean leader 2 although unclean election is disabled")


def test_accepts_the_same_unclean_election_when_forced_or_configured(h: CoreHarness) -> None:
    h.fail_brokers([2, 3])
    h.fail_brokers([1])
    h.start_brokers([2])
    checker = InvariantChecker(h, DEFAULTS)
    h.unclean_election([TP])
    # epochs: 2 and 3 leave the ISR (1, 2), 1 is kept as the last member with no leader (3), then
    # the unclean election (4)
    assert stored(h) == LeaderAndIsr(2, 4, (2,), 4)
    assert checker.check(forced_unclean={TP}) == []
    assert checker.step_summary["unclean"] == 1
    h.start_brokers([3])
    assert checker.check() == []
    assert checker.step_summary["unclean"] == 0
    h.enable_unclean_leader_election("t")  # t-1 (leader -1, ISR [1]) goes unclean via its config
    assert stored(h, TopicPartition("t", 1)) == LeaderAndIsr(2, 3, (2,), 3)
    assert checker.check() == []
    assert checker.step_summary["unclean"] == 1


def test_reports_a_context_that_disagrees_with_the_store(h: CoreHarness, checker: InvariantChecker) -> None:
    current = stored(h)
    write(h, LeaderAndIsr(1, current.leader_epoch + 1, (1, 2), current.zk_version), cache=False)
    assert reported(checker.check(), "t-0: Online, but the context has")


def test_reports_an_assignment_the_store_does_not_have(h: CoreHarness, checker: InvariantChecker) -> None:
    h.context.update_partition_full_replica_assignment(TP, ReplicaAssignment((1, 2, 3, 4)))
    assert reported(checker.check(), "topic t: context assignment differs from the store's")


def test_reports_counters_that_drifted(h: CoreHarness, checker: InvariantChecker) -> None:
    h.context.offline_partition_count += 1
    h.context.preferred_replica_imbalance_count -= 1
    violations = checker.check()
    assert reported(violations, "offline_partition_count is 1, recomputed 0")
    assert reported(violations, "preferred_replica_imbalance_count is -1, recomputed 0")


def test_reports_an_unclean_meter_that_does_not_match_the_audit(
    h: CoreHarness, checker: InvariantChecker
) -> None:
    h.context.stats.mark_unclean_leader_election()
    assert reported(checker.check(), "unclean election meter moved by 1, audited unclean elections: 0")


def test_cancelled_reassignment_keeps_its_last_isr_member_outside_the_replicas() -> None:
    """Kafka-faithful, found by the stateful test: an adding replica that became the only ISR
    member (and leader) stays in the ISR when the reassignment is cancelled (U3 takes it offline;
    KAFKA-5083 keeps the last member), so the ISR names a broker that is no longer a replica."""
    h = CoreHarness([1, 2, 3, 4, 5], broker_config=DEFAULTS)
    h.create_topic("t", [[1]])
    checker = InvariantChecker(h, DEFAULTS)
    h.reassign(TP, [4])  # phase A: RS [4, 1], adding [4], removing [1]
    h.fail_brokers([1])  # leader -1, ISR [1]
    h.unclean_election([TP])  # 4 (an adding replica) leads, ISR [4]
    assert stored(h) == LeaderAndIsr(4, 3, (4,), 3)
    assert checker.check(forced_unclean={TP}) == []
    h.reassign(TP, [1])  # cancel: back to the origin replicas
    assert h.context.partition_full_replica_assignment(TP) == ReplicaAssignment((1,))
    assert stored(h) == LeaderAndIsr(-1, 4, (4,), 4)
    assert checker.check() == []  # tolerated: 4 went offline as the last ISR member
    assert checker.remnants == {PartitionAndReplica(TP, 4)}
    write(h, LeaderAndIsr(4, 5, (4, 2), 4))  # another outsider is not tolerated
    assert reported(checker.check(), "t-0: ISR [4, 2] is not within the replicas [1]")
