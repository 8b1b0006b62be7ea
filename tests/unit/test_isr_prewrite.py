"""A new controller's startup starts its ISR-removal write and the election's write of the
partitions it leaves to the election while its online replicas move (README deviation 21).

Each is the write a later step would make from the cached states; started on a thread of its own,
ZooKeeper works through it while the event thread builds the online replicas' requests. Each seeded
scenario (``test_offline_leaders_left_to_election``'s) runs the startup with and without them over
the same store: the store, the cache, every state, every request in order and every audit record
must come out identical.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from kafka_controller.core.early_write import EARLY_WRITE_NOT_TAKEN
from kafka_controller.domain.audit_records import PartitionTransition
from kafka_controller.domain.errors import ControllerMovedError
from kafka_controller.domain.requests import LeaderAndIsrRequest
from kafka_controller.domain.states import ReplicaState
from kafka_controller.domain.values import LeaderAndIsr, PartitionAndReplica, TopicPartition
from kafka_controller.ports import UpdateLeaderAndIsrResult
from kafka_controller.testing.core_harness import CoreHarness
from tests.unit.test_offline_leaders_left_to_election import _outcome, _startup, _versions

_Write = Callable[[Mapping[TopicPartition, LeaderAndIsr], int, int], UpdateLeaderAndIsrResult]


def _writes_by_thread(h: CoreHarness) -> list[tuple[str, int]]:
    """Wrap the store's state writes: each call's thread name and partition count, in order."""
    calls: list[tuple[str, int]] = []
    write: _Write = h.store.update_leader_and_isr

    def recorded(
        states: Mapping[TopicPartition, LeaderAndIsr], epoch: int, version: int
    ) -> UpdateLeaderAndIsrResult:
        calls.append((threading.current_thread().name, len(states)))
        return write(states, epoch, version)

    h.store.update_leader_and_isr = recorded  # type: ignore[method-assign]
    return calls


def _run(seed: int, prewrite: bool) -> tuple[CoreHarness, int, list[tuple[str, int]]]:
    """The seed's startup, its state writes recorded from the new controller's on."""
    writes: list[list[tuple[str, int]]] = []

    def before_startup(h: CoreHarness) -> None:
        _write_early(h, prewrite)
        writes.append(_writes_by_thread(h))

    h, start = _startup(seed, True, before_startup)
    # each taken by its step
    assert h.rsm._isr_removal.prewrite is None and h.psm._elector.early_election is None
    return h, start, writes[0]


def _write_early(h: CoreHarness, on: bool = True, *, leave: bool = True) -> None:
    """A new controller's state machines, wired as ``KafkaController`` wires them (``leave``: the
    offline leaders left to the election)."""
    h.build_state_machines(leave_offline_leaders_to_election=leave, write_early=on)


def _a_new_controller(h: CoreHarness, dead: int) -> None:
    """A controller about to start up with ``dead`` gone, wired as ``KafkaController`` wires it."""
    ctx = h.context
    ctx.remove_live_brokers([dead])
    ctx.replica_states.clear()
    ctx.partition_states.clear()
    _write_early(h)


def _requests(h: CoreHarness, start: int) -> list[tuple[int, Any]]:
    return [(s.broker_id, s.request) for s in h.channel.sent[start:]]


@pytest.mark.parametrize("seed", range(150))
def test_the_early_write_changes_nothing_but_when_it_is_made(seed: int) -> None:
    (early, early_start, early_writes), (late, late_start, late_writes) = _run(seed, True), _run(seed, False)
    assert _outcome(early, early_start) == _outcome(late, late_start)
    assert _versions(early) == _versions(late)  # the same writes: the same epochs and zk versions
    assert _requests(early, early_start) == _requests(late, late_start)
    assert early.audit.records == late.audit.records  # type: ignore[attr-defined]
    # the same states written (an election covering more than the early write writes the rest itself)
    assert sum(n for _, n in early_writes) == sum(n for _, n in late_writes)
    assert all(name == "MainThread" for name, _ in late_writes)


def test_the_scenarios_write_early() -> None:
    """Without the early writes the test above compares a startup with itself."""
    names = [{name for name, _ in _run(seed, True)[2]} for seed in range(150)]
    assert sum("isr-prewrite" in n for n in names) >= 40  # 49 of these seeds: one broker dead
    assert sum("election-prewrite" in n for n in names) >= 40


def test_the_write_runs_while_the_online_replicas_move() -> None:
    """The early write waits, in the store, until the online replicas' requests are sent: the
    startup finishes only if the write does not stand in the event thread's way."""
    h = CoreHarness([1, 2, 3], broker_config={"unclean.leader.election.enable": "false"})
    tps = h.create_topic("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2], [1, 3, 2]])
    online_sent = threading.Event()
    send = h.channel.send_request

    def sending(broker_id: int, request: Any, callback: Any = None) -> None:
        if isinstance(request, LeaderAndIsrRequest):
            online_sent.set()
        send(broker_id, request, callback)

    h.channel.send_request = sending  # type: ignore[method-assign]
    calls = _writes_by_thread(h)
    write = h.store.update_leader_and_isr
    waited: list[bool] = []

    def held(
        states: Mapping[TopicPartition, LeaderAndIsr], epoch: int, version: int
    ) -> UpdateLeaderAndIsrResult:
        if threading.current_thread().name != "MainThread":
            waited.append(online_sent.wait(30))
        return write(states, epoch, version)

    h.store.update_leader_and_isr = held  # type: ignore[method-assign]
    _a_new_controller(h, dead=3)
    h.rsm.startup()
    h.psm.startup()
    assert waited == [True, True]
    # broker 3 followed t-0, t-1 and t-3 (removed from their ISRs early) and led t-2 (elected early)
    assert sorted(calls) == [("election-prewrite", 1), ("isr-prewrite", 3)]
    states = h.store.get_partition_states(tps)
    assert {tp.partition: s.leader_and_isr.isr for tp, s in states.items()} == {  # type: ignore[union-attr]
        0: (1, 2),
        1: (2, 1),
        2: (1, 2),
        3: (1, 2),
    }
    assert all(s.leader_and_isr.leader_epoch == 1 for s in states.values())  # type: ignore[union-attr]


def test_a_controller_moved_error_of_the_early_write_surfaces_where_kafkas_would() -> None:
    h = CoreHarness([1, 2, 3])
    h.create_topic("t", [[1, 2, 3], [2, 3, 1]])
    ctx = h.context
    ctx.epoch_zk_version += 1  # /controller_epoch is not where this controller left it: fenced
    ctx.remove_live_brokers([3])
    ctx.replica_states.clear()
    ctx.partition_states.clear()
    _write_early(h, leave=False)
    with pytest.raises(ControllerMovedError):
        h.rsm.startup()
    assert h.rsm._isr_removal.prewrite is None
    # the online replicas moved first, as in Kafka; the offline ones stayed where startup put them
    assert ctx.replica_states[PartitionAndReplica(TopicPartition("t", 0), 1)] is ReplicaState.ONLINE_REPLICA
    assert (
        ctx.replica_states[PartitionAndReplica(TopicPartition("t", 0), 3)] is not ReplicaState.OFFLINE_REPLICA
    )


def test_a_startup_that_fails_before_the_offline_step_waits_for_the_early_write() -> None:
    h = CoreHarness([1, 2, 3])
    tps = h.create_topic("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    ctx = h.context
    _a_new_controller(h, dead=3)
    moves = h.rsm.handle_state_changes

    def moved(replicas: Any, target: ReplicaState) -> None:
        if target is ReplicaState.ONLINE_REPLICA:
            raise ControllerMovedError("controller moved while the online replicas moved")
        moves(replicas, target)

    h.rsm.handle_state_changes = moved  # type: ignore[method-assign]
    with pytest.raises(ControllerMovedError):
        h.rsm.startup()
    h.psm.abandon_election_prewrite()  # as the failover does once its state machines' startup ends
    assert h.rsm._isr_removal.prewrite is None and h.psm._elector.early_election is None
    assert not any(t.name.endswith("-prewrite") for t in threading.enumerate())
    # the writes were made: ZooKeeper has them, and so does the cache (as after a failure past
    # Kafka's own write): t-0 and t-1 without broker 3 in their ISRs, t-2 led by broker 1
    stored = h.store.get_partition_states(tps)
    assert {tp.partition: (s.leader_and_isr.leader, s.leader_and_isr.isr) for tp, s in stored.items()} == {  # type: ignore[union-attr]
        0: (1, (1, 2)),
        1: (2, (2, 1)),
        2: (1, (1, 2)),
    }
    assert {tp: ctx.partition_leadership_info(tp) for tp in tps} == stored
    # and the audit has them (the states their live leaders give: the partition state machine
    # never started), so replaying it gives each partition's leader and epoch in the store
    records = [r for r in h.audit.records if isinstance(r, PartitionTransition)]  # type: ignore[attr-defined]
    online = "OnlinePartition"
    assert {
        TopicPartition(r.topic, r.partition): (r.leader_after, r.leader_epoch_after, r.from_state, r.to_state)
        for r in records
        if r.election_strategy == EARLY_WRITE_NOT_TAKEN
    } == {
        tp: (s.leader_and_isr.leader, s.leader_and_isr.leader_epoch, online, online)  # type: ignore[union-attr]
        for tp, s in stored.items()
    }
