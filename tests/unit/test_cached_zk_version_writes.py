"""Writing from the cached states (``write_on_cached_zk_version``) gives Kafka's outcome.

The state machines may skip Kafka's re-read of a partition state and write conditionally on the zk
version cached in the context (``core.replica_isr``, ``core.partition_election``). Each seeded
scenario runs twice, with the shortcut on and off (off = Kafka's read-then-write), over the same
flows and the same writes made behind the controller's back (an ISR changed by a broker, a state
znode deleted): the store, the context and the requests sent must come out the same.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import pytest

from kafka_controller.domain.audit_records import OUTCOME_FAILED, PartitionTransition
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.testing.core_harness import CoreHarness
from kafka_controller.testing.doubles import ScriptedPartitionStateStore
from kafka_controller.zk.paths import topic_partition_state_path

BROKERS = [1, 2, 3, 4, 5]
DEFAULTS = {UNCLEAN_LEADER_ELECTION_ENABLE: "false"}
Step = Callable[[CoreHarness], Any]
_NO_LEADER = "StateChangeFailedError: Failed to elect leader for partition"


def _foreign_isr(tp: TopicPartition, pick: int) -> Step:
    """A broker (IBP < 2.7) rewrites the ISR in the store; the controller's cache is not told."""

    def step(h: CoreHarness) -> None:
        read = h.store.get_partition_states([tp])[tp]
        if not hasattr(read, "leader_and_isr"):
            return
        lai = read.leader_and_isr
        replicas = h.context.partition_replica_assignment(tp)
        live = [b for b in replicas if h.context.is_live_or_shutting_down(b)]
        if lai.leader < 0 or not live:
            return
        others = [b for b in live if b != lai.leader]
        isr = (lai.leader, *others[: pick % (len(others) + 1)])
        changed = LeaderAndIsr(lai.leader, lai.leader_epoch, isr, lai.zk_version)
        h.store.update_leader_and_isr({tp: changed}, h.context.epoch, h.context.epoch_zk_version)

    return step


def _foreign_delete(tp: TopicPartition) -> Step:
    def step(h: CoreHarness) -> None:
        path = topic_partition_state_path(tp)
        if h.store.session.exists(path) is not None:
            h.store.session.delete(path)

    return step


def _scenario(seed: int) -> tuple[dict[str, list[list[int]]], list[Step]]:
    rnd = random.Random(seed)
    rfs = [rnd.choice((2, 3)) for _ in range(rnd.randint(2, 4))]
    topics = {
        f"t{i}": [rnd.sample(BROKERS, rf) for _ in range(rnd.randint(1, 4))] for i, rf in enumerate(rfs)
    }
    tps = [TopicPartition(t, p) for t, parts in topics.items() for p in range(len(parts))]
    steps: list[Step] = []
    alive = list(BROKERS)
    for _ in range(rnd.randint(3, 7)):
        kind = rnd.random()
        if kind < 0.35:
            for tp in rnd.sample(tps, rnd.randint(1, len(tps))):
                steps.append(_foreign_isr(tp, rnd.randint(0, 3)))
        elif kind < 0.45:
            steps.append(_foreign_delete(rnd.choice(tps)))
        elif kind < 0.7 and len(alive) > 2:
            dead = alive.pop(rnd.randrange(len(alive)))
            steps.append(lambda h, b=dead: h.fail_brokers([b]))
        elif kind < 0.8 and len(alive) < len(BROKERS):
            back = rnd.choice([b for b in BROKERS if b not in alive])
            alive.append(back)
            steps.append(lambda h, b=back: h.start_brokers([b]))
        elif kind < 0.85 and len(alive) > 2:
            leaving = rnd.choice(alive)
            steps.append(lambda h, b=leaving: h.controlled_shutdown(b))
        elif kind < 0.9:
            chosen = rnd.sample(tps, rnd.randint(1, len(tps)))
            steps.append(lambda h, c=chosen: h.preferred_election(c))
            steps.append(lambda h, c=chosen: h.unclean_election(c))
        elif kind < 0.95:
            tp, target = rnd.choice(tps), rnd.sample(BROKERS, len(topics[tps[0].topic][0]))
            steps.append(lambda h, tp=tp, t=target: h.reassign(tp, t))
        else:
            steps.append(lambda h: h.trigger_online())
    return topics, steps


def _snapshot(h: CoreHarness) -> dict[str, Any]:
    ctx = h.context
    tps = sorted(ctx.all_partitions)
    sent = []
    for s in h.channel.sent:
        states = s.request.partition_states
        items = states.items() if isinstance(states, dict) else states
        sent.append((s.broker_id, type(s.request).__name__, sorted(map(repr, items))))
    return {
        "store": {tp: repr(r) for tp, r in h.store.get_partition_states(tps).items()},
        "leadership": dict(ctx.partitions_leadership_info),
        "replica_states": dict(ctx.replica_states),
        "partition_states": dict(ctx.partition_states),
        "counts": (ctx.offline_partition_count, ctx.preferred_replica_imbalance_count),
        # Which broker a send reaches first follows the batch's insertion order (Kafka's is a hash
        # map's): the requests are compared as a multiset, each with its partition states sorted.
        "sent": sorted(sent),
    }


def _run(seed: int, cached: bool) -> list[dict[str, Any]]:
    topics, steps = _scenario(seed)
    h = CoreHarness(BROKERS, broker_config=DEFAULTS, write_on_cached_zk_version=cached)
    for topic, parts in topics.items():
        h.create_topic(topic, parts)
    snapshots = [_snapshot(h)]
    for step in steps:
        try:
            outcomes = step(h)
        except KafkaControllerError as e:  # a refused flow must be refused either way
            snapshots.append({"refused": type(e).__name__})
        else:  # an election's result per partition: the new leadership, or the kind of failure
            if isinstance(outcomes, dict):
                snapshots.append(
                    {tp: o if isinstance(o, LeaderAndIsr) else type(o).__name__ for tp, o in outcomes.items()}
                )
        snapshots.append(_snapshot(h))
    return snapshots


@pytest.mark.parametrize("seed", range(100))
def test_cached_writes_give_kafkas_outcome(seed: int) -> None:
    with_cache, kafka = _run(seed, True), _run(seed, False)
    assert len(with_cache) == len(kafka)
    for i, (a, b) in enumerate(zip(with_cache, kafka, strict=True)):
        assert a == b, f"seed {seed}, after step {i}"


def test_stale_cache_is_rewritten_from_a_fresh_read() -> None:
    """The ISR removal's conditional write on a stale version fails; the re-read's ISR is used."""
    h = CoreHarness(BROKERS, broker_config=DEFAULTS)
    (tp,) = h.create_topic("t", [[1, 2, 3]])
    _foreign_isr(tp, 1)(h)  # ISR [1, 2]: broker 3 left it behind the controller's back
    cached = h.context.partition_leadership_info(tp)
    assert cached is not None and cached.leader_and_isr.isr == (1, 2, 3)
    h.fail_brokers([2])
    stored = h.store.get_partition_states([tp])[tp]
    assert stored.leader_and_isr.isr == (1,)  # type: ignore[union-attr]
    assert h.context.partition_leadership_info(tp) is not None
    assert h.context.partition_leadership_info(tp).leader_and_isr.isr == (1,)  # type: ignore[union-attr]


@pytest.mark.parametrize("cached", [True, False])
def test_fresh_cache_saves_the_reads(cached: bool) -> None:
    """With a current cache, a broker failure reads only what Kafka's ISR removal would merely
    refresh the cache from (t-0: the election just took broker 1 out of its ISR, so no write)."""
    reads: list[list[TopicPartition]] = []
    h = CoreHarness(BROKERS, broker_config=DEFAULTS, write_on_cached_zk_version=cached)
    t0, t1, t2 = h.create_topic("t", [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    real = h.store.get_partition_states

    def recording(partitions: Any) -> Any:
        reads.append(list(partitions))
        return real(partitions)

    h.store.get_partition_states = recording  # type: ignore[method-assign]
    h.fail_brokers([1])
    assert reads == ([[t0]] if cached else [[t0], [t0, t1, t2]])
    led = {tp: i.leader_and_isr for tp, i in h.context.partitions_leadership_info.items()}
    assert all(lai.leader in (2, 3) and 1 not in lai.isr for lai in led.values()), led


def test_off_by_default_in_the_state_machines() -> None:
    """Constructed directly (as Kafka's ported tests do), the machines keep Kafka's reads."""
    from kafka_controller.core.context import ControllerContext
    from kafka_controller.core.partition_state_machine import PartitionStateMachine
    from kafka_controller.core.replica_state_machine import ReplicaStateMachine
    from kafka_controller.testing.doubles import RecordingRequestBatch

    ctx, store = ControllerContext(), ScriptedPartitionStateStore()
    assert not ReplicaStateMachine(1, ctx, store, RecordingRequestBatch()).write_on_cached_zk_version
    assert not PartitionStateMachine(1, ctx, store, RecordingRequestBatch()).write_on_cached_zk_version


@pytest.mark.parametrize("cached", [True, False])
def test_no_online_replica_reads_neither_state_nor_config_from_the_cache(cached: bool) -> None:
    """Partitions whose replicas are all dead get no leader whatever their state and their topic's
    config say. Kafka's sequence reads their states (the election's read round, then the ISR
    removal's) and their topic's config, and fails them; the cached one fails them at once, reading
    neither, and the failures audited are the same (Kafka's message, the state as ``before``)."""
    configs: list[set[str]] = []
    reads: list[list[TopicPartition]] = []
    audit = RecordingAuditSink()
    h = CoreHarness(BROKERS, broker_config=DEFAULTS, write_on_cached_zk_version=cached, audit=audit)
    solo = h.create_topic("solo", [[1], [1]])
    h.create_topic("t", [[2, 3]])
    real_configs, real_reads = h.store.get_log_configs, h.store.get_partition_states

    def recording_configs(topics: Any, defaults: Any) -> Any:
        configs.append(set(topics))
        return real_configs(topics, defaults)

    def recording_reads(partitions: Any) -> Any:
        reads.append(list(partitions))
        return real_reads(partitions)

    h.store.get_log_configs = recording_configs  # type: ignore[method-assign, assignment]
    h.store.get_partition_states = recording_reads  # type: ignore[method-assign]
    h.fail_brokers([1])
    assert [c for c in configs if c] == ([] if cached else [{"solo"}])
    assert [r for r in reads if set(r) & set(solo)] == ([] if cached else [solo, solo])
    failed = [r for r in audit.records if isinstance(r, PartitionTransition) and r.outcome == OUTCOME_FAILED]
    assert [(r.topic, r.partition, r.leader_before, r.error) for r in failed] == [
        (
            tp.topic,
            tp.partition,
            1,
            f"{_NO_LEADER} {tp} under strategy OfflinePartitionLeaderElectionStrategy(false)",
        )
        for tp in solo
    ]
