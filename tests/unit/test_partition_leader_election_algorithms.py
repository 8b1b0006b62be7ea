"""Kafka's PartitionLeaderElectionAlgorithmsTest, all 13 cases, in Kafka's names.

Where Kafka asserts the ``UncleanLeaderElectionsPerSec`` meter, the pure algorithm's unclean flag
is asserted and the same election is run through ``leader_for_offline`` on a fresh context, whose
``stats.unclean_leader_elections`` must move exactly as Kafka's meter does.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.election import (
    controlled_shutdown_partition_leader_election,
    leader_for_offline,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)
from kafka_controller.domain.values import Broker, EndPoint, LeaderAndIsr, ReplicaAssignment, TopicPartition

TP = TopicPartition("t", 0)


def _context_with(assignment: list[int], live: set[int]) -> ControllerContext:
    """A fresh context (unclean count 0, as Kafka's test re-creates the meter) for ``TP``."""
    ctx = ControllerContext()
    ctx.set_live_brokers({Broker(b, (EndPoint("localhost", 9000 + b),)): 1 for b in live})
    ctx.update_partition_full_replica_assignment(TP, ReplicaAssignment.of(assignment))
    return ctx


def _offline_via_wrapper(
    assignment: list[int], isr: list[int], live: set[int], unclean: bool
) -> tuple[int | None, int]:
    ctx = _context_with(assignment, live)
    assert ctx.stats.unclean_leader_elections == 0
    [result] = leader_for_offline(ctx, [(TP, LeaderAndIsr(isr[0] if isr else -1, 0, tuple(isr), 0), unclean)])
    leader = result.leader_and_isr.leader if result.leader_and_isr is not None else None
    return leader, ctx.stats.unclean_leader_elections


def test_offline_partition_leader_election() -> None:
    assert offline_partition_leader_election([2, 4], [2, 4], {4}, False) == (4, False)
    assert _offline_via_wrapper([2, 4], [2, 4], {4}, False) == (4, 0)


def test_offline_partition_leader_election_last_isr_offline_unclean_leader_election_disabled() -> None:
    assert offline_partition_leader_election([2, 4], [2], {4}, False) == (None, False)
    assert _offline_via_wrapper([2, 4], [2], {4}, False) == (None, 0)


def test_offline_partition_leader_election_last_isr_offline_unclean_leader_election_enabled() -> None:
    assert offline_partition_leader_election([2, 4], [2], {4}, True) == (4, True)
    assert _offline_via_wrapper([2, 4], [2], {4}, True) == (4, 1)


def test_reassign_partition_leader_election() -> None:
    assert reassign_partition_leader_election([2, 4], [2, 4], {4}) == 4


def test_reassign_partition_leader_election_with_no_live_isr() -> None:
    assert reassign_partition_leader_election([2, 4], [2], set()) is None


def test_reassign_partition_leader_election_with_empty_isr() -> None:
    assert reassign_partition_leader_election([2, 4], [], {2}) is None


def test_preferred_replica_partition_leader_election() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [2, 4], {2, 4}) == 2


def test_preferred_replica_partition_leader_election_preferred_replica_in_isr_not_live() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [2], set()) is None


def test_preferred_replica_partition_leader_election_preferred_replica_not_in_isr_live() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [4], {2, 4}) is None


def test_preferred_replica_partition_leader_election_preferred_replica_not_in_isr_not_live() -> None:
    assert preferred_replica_partition_leader_election([2, 4], [], set()) is None


def test_controlled_shutdown_partition_leader_election() -> None:
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, {2}) == 4


def test_controlled_shutdown_partition_leader_election_last_isr_shutting_down() -> None:
    assert controlled_shutdown_partition_leader_election([2, 4], [2], {2, 4}, {2}) is None


def test_controlled_shutdown_partition_leader_election_all_isr_simultaneously_shutdown() -> None:
    assert controlled_shutdown_partition_leader_election([2, 4], [2, 4], {2, 4}, {2, 4}) is None


# --------------------------------------------------------------------------- beyond Kafka's table
def test_offline_election_prefers_a_clean_leader_even_when_unclean_is_enabled() -> None:
    assert offline_partition_leader_election([1, 2, 3], [3], {1, 2, 3}, True) == (3, False)
    assert _offline_via_wrapper([1, 2, 3], [3], {1, 2, 3}, True) == (3, 0)


def test_preferred_election_of_an_empty_assignment_finds_no_leader() -> None:
    assert preferred_replica_partition_leader_election([], [1], {1}) is None


_ids = st.lists(st.integers(0, 6), unique=True, max_size=6)


@given(_ids, _ids, _ids, st.booleans())
def test_offline_election_picks_the_first_eligible_replica_in_assignment_order(
    assignment: list[int], isr: list[int], live: list[int], unclean: bool
) -> None:
    leader, was_unclean = offline_partition_leader_election(assignment, isr, set(live), unclean)
    clean = [r for r in assignment if r in live and r in isr]
    dirty = [r for r in assignment if r in live]
    if clean:
        assert (leader, was_unclean) == (clean[0], False)
    elif unclean and dirty:
        assert (leader, was_unclean) == (dirty[0], True)
    else:
        assert (leader, was_unclean) == (None, False)


@given(_ids, _ids, _ids, _ids)
def test_controlled_shutdown_election_never_picks_a_shutting_down_or_out_of_sync_replica(
    assignment: list[int], isr: list[int], live: list[int], shutting_down: list[int]
) -> None:
    leader = controlled_shutdown_partition_leader_election(assignment, isr, set(live), set(shutting_down))
    eligible = [r for r in assignment if r in live and r in isr and r not in shutting_down]
    assert leader == (eligible[0] if eligible else None)
