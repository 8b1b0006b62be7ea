"""A new controller's startup leaves the offline leaders' ISR removal to the election (deviation 20).

Kafka's startup takes each dead replica out of its ISR (a partition it led is written leaderless,
leader epoch + 1), then elects (written again, + 1). With ``leave_offline_leaders_to_election``
(``KafkaController`` sets it) a partition the election will elect cleanly is written once, by the
election. Each seeded scenario runs a controller's startup twice, with the flag on and off, over
the same store: ISRs shrunk, writes behind the controller's back, partitions left leaderless,
unclean topics, topics queued for deletion, one or two brokers dead, sometimes a live broker's
failed log dir. Leaders, ISRs, states and what every broker is last told must come out the same,
with no leader epoch above Kafka's.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import pytest

from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.requests import LeaderAndIsrRequest, UpdateMetadataRequest
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
)
from kafka_controller.testing.core_harness import CoreHarness

BROKERS = [1, 2, 3, 4, 5]
DEFAULTS = {UNCLEAN_LEADER_ELECTION_ENABLE: "false"}


def _layout(seed: int) -> tuple[dict[str, list[list[int]]], random.Random]:
    rnd = random.Random(seed)
    topics = {
        f"t{i}": [rnd.sample(BROKERS, rf) for _ in range(rnd.randint(1, 5))]
        for i, rf in enumerate(rnd.choice((1, 2, 3)) for _ in range(rnd.randint(2, 5)))
    }
    return topics, rnd


def _startup(
    seed: int, leave: bool, before_startup: Callable[[CoreHarness], None] | None = None
) -> tuple[CoreHarness, int]:
    """The seed's cluster, then a new controller's startup with brokers dead; returns the harness
    and where the startup's requests begin in ``channel.sent``."""
    topics, rnd = _layout(seed)
    h = CoreHarness(BROKERS, broker_config=DEFAULTS)
    for topic, parts in topics.items():
        h.create_topic(topic, parts)
    ctx = h.context
    tps = sorted(ctx.all_partitions)
    for tp in rnd.sample(tps, rnd.randint(0, len(tps))):  # the leader shrinks its ISR
        lai = ctx.partition_leadership_info(tp).leader_and_isr  # type: ignore[union-attr]
        others = [b for b in lai.isr if b != lai.leader]
        h.set_isr(tp, [lai.leader, *rnd.sample(others, rnd.randint(0, len(others)))])
    for tp in rnd.sample(tps, rnd.randint(0, min(3, len(tps)))):  # written behind the controller's back
        lai = h.store.get_partition_states([tp])[tp].leader_and_isr  # type: ignore[union-attr]
        isr = tuple(rnd.sample(h.context.partition_replica_assignment(tp), 1))
        changed = LeaderAndIsr(lai.leader, lai.leader_epoch, isr, lai.zk_version)
        h.store.update_leader_and_isr({tp: changed}, ctx.epoch, ctx.epoch_zk_version)
    for tp in rnd.sample(tps, rnd.randint(0, min(2, len(tps)))):  # left leaderless by a dead controller
        lai = h.store.get_partition_states([tp])[tp].leader_and_isr  # type: ignore[union-attr]
        leaderless = LeaderAndIsr(NO_LEADER, lai.leader_epoch + 1, lai.isr, lai.zk_version)
        written = h.store.update_leader_and_isr({tp: leaderless}, ctx.epoch, ctx.epoch_zk_version)
        after = written.finished.get(tp)
        if isinstance(after, LeaderAndIsr):  # the new controller's context load reads it
            ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(after, ctx.epoch))
    for topic in rnd.sample(sorted(topics), rnd.randint(0, 1)):
        h.store.change_topic_config(topic, {UNCLEAN_LEADER_ELECTION_ENABLE: "true"})
    ctx.queue_topic_deletion(set(rnd.sample(sorted(topics), rnd.randint(0, 1))))
    # The new controller: the dead brokers are gone before it loads; states start over. Its cached
    # leaderships are the harness's, stale where written behind its back (its writes then hit
    # BADVERSION and go Kafka's read-first way).
    dead = rnd.sample(BROKERS, rnd.randint(1, 2))
    ctx.remove_live_brokers(dead)
    if rnd.random() < 0.3:  # a live broker's log dir failed: its replicas there are offline too
        failed_dir = rnd.choice([b for b in BROKERS if b not in dead])
        ctx.replicas_on_offline_dirs[failed_dir] = set(rnd.sample(tps, rnd.randint(1, len(tps))))
    ctx.replica_states.clear()
    ctx.partition_states.clear()
    h.build_state_machines(leave_offline_leaders_to_election=leave)  # the new controller's
    if before_startup is not None:
        before_startup(h)
    start = len(h.channel.sent)
    h.rsm.startup()
    h.psm.startup()
    h.rsm.finish_offline_left_to_election()
    return h, start


def _last_told(h: CoreHarness, start: int) -> dict[tuple[str, int, str, int], tuple[int, tuple[int, ...]]]:
    """What each broker was last told of each partition's leader and ISR, per request kind."""
    told: dict[tuple[str, int, str, int], tuple[int, tuple[int, ...]]] = {}
    for s in h.channel.sent[start:]:
        if isinstance(s.request, LeaderAndIsrRequest | UpdateMetadataRequest):
            kind = type(s.request).__name__
            for p in s.request.partition_states:
                told[(kind, s.broker_id, p.topic, p.partition)] = (p.leader, tuple(p.isr))
    return told


def _outcome(h: CoreHarness, start: int) -> dict[str, Any]:
    ctx = h.context
    tps = sorted(ctx.all_partitions)
    stored = h.store.get_partition_states(tps)
    return {
        "store": {tp: (r.leader_and_isr.leader, r.leader_and_isr.isr) for tp, r in stored.items()},  # type: ignore[union-attr]
        "cache": {
            tp: (i.leader_and_isr.leader, i.leader_and_isr.isr)
            for tp, i in ctx.partitions_leadership_info.items()
        },
        "partition_states": dict(ctx.partition_states),
        "replica_states": dict(ctx.replica_states),
        "told": _last_told(h, start),
    }


def _versions(h: CoreHarness) -> dict[TopicPartition, tuple[int, int]]:
    stored = h.store.get_partition_states(sorted(h.context.all_partitions))
    return {tp: (r.leader_and_isr.leader_epoch, r.leader_and_isr.zk_version) for tp, r in stored.items()}  # type: ignore[union-attr]


@pytest.mark.parametrize("seed", range(150))
def test_leaving_offline_leaders_to_the_election_gives_kafkas_outcome(seed: int) -> None:
    (left, left_start), (kafka, kafka_start) = _startup(seed, True), _startup(seed, False)
    assert _outcome(left, left_start) == _outcome(kafka, kafka_start)
    ours, theirs = _versions(left), _versions(kafka)
    for tp, (epoch, zk_version) in ours.items():
        assert epoch <= theirs[tp][0] and zk_version <= theirs[tp][1], tp


@pytest.mark.parametrize("seed", range(20))
def test_the_same_with_each_transition_logged(seed: int, caplog: pytest.LogCaptureFixture) -> None:
    """Debug logging moves replicas one at a time (no bulk path): the same outcome."""
    caplog.set_level(logging.DEBUG, logger="kafka_controller.state_change")
    (left, left_start), (kafka, kafka_start) = _startup(seed, True), _startup(seed, False)
    assert _outcome(left, left_start) == _outcome(kafka, kafka_start)


@pytest.mark.parametrize("logged", [False, True], ids=["bulk", "one_at_a_time"])
def test_a_partition_led_by_a_dead_broker_is_written_once_and_told_only_its_new_leader(
    logged: bool, caplog: pytest.LogCaptureFixture
) -> None:
    if logged:  # debug logging moves replicas one at a time
        caplog.set_level(logging.DEBUG, logger="kafka_controller.state_change")
    h = CoreHarness(BROKERS, broker_config=DEFAULTS)
    (a,) = h.create_topic("a", [[1, 2, 3]])
    (b,) = h.create_topic("b", [[2, 1, 3]])
    before = {tp: h.store.get_partition_states([tp])[tp].leader_and_isr for tp in (a, b)}  # type: ignore[union-attr]
    h.context.remove_live_brokers([1])
    h.context.replica_states.clear()
    h.context.partition_states.clear()
    h.build_state_machines(leave_offline_leaders_to_election=True)
    start = len(h.channel.sent)
    h.rsm.startup()
    h.psm.startup()
    h.rsm.finish_offline_left_to_election()
    after = {tp: h.store.get_partition_states([tp])[tp].leader_and_isr for tp in (a, b)}  # type: ignore[union-attr]
    # a: led by the dead broker, elected in one write (Kafka: two, epoch + 2)
    assert (after[a].leader, after[a].isr) == (2, (2, 3))
    assert after[a].leader_epoch == before[a].leader_epoch + 1
    assert after[a].zk_version == before[a].zk_version + 1
    # b: followed by the dead broker, its ISR removal as in Kafka
    assert (after[b].leader, after[b].isr) == (2, (2, 3))
    assert after[b].leader_epoch == before[b].leader_epoch + 1
    told = [
        p.leader
        for s in h.channel.sent[start:]
        if isinstance(s.request, LeaderAndIsrRequest | UpdateMetadataRequest)
        for p in s.request.partition_states
        if (p.topic, p.partition) == ("a", 0)
    ]
    # Neither leaderless (Kafka's ISR removal) nor the dead leader (Kafka's OnlineReplica requests):
    # only the election's state reaches the brokers.
    assert told and set(told) == {2}
    assert h.context.replica_states[PartitionAndReplica(a, 1)] is ReplicaState.OFFLINE_REPLICA
    assert h.context.partition_states[a] is PartitionState.ONLINE_PARTITION


def test_a_left_partition_the_election_cannot_lead_goes_through_kafkas_isr_removal() -> None:
    """The cache says a live replica is in the ISR; the store, written behind the controller's back,
    says only the dead leader is: the election fails, and the ISR removal then writes leaderless."""
    h = CoreHarness(BROKERS, broker_config=DEFAULTS)
    (a,) = h.create_topic("a", [[1, 2]])
    lai = h.store.get_partition_states([a])[a].leader_and_isr  # type: ignore[union-attr]
    shrunk = LeaderAndIsr(lai.leader, lai.leader_epoch, (1,), lai.zk_version)
    h.store.update_leader_and_isr({a: shrunk}, h.context.epoch, h.context.epoch_zk_version)
    h.context.remove_live_brokers([1])
    h.context.replica_states.clear()
    h.context.partition_states.clear()
    h.build_state_machines(leave_offline_leaders_to_election=True)
    h.rsm.startup()
    assert h.store.get_partition_states([a])[a].leader_and_isr.leader == 1  # type: ignore[union-attr]
    h.psm.startup()
    h.rsm.finish_offline_left_to_election()
    after = h.store.get_partition_states([a])[a].leader_and_isr  # type: ignore[union-attr]
    assert (after.leader, after.isr) == (NO_LEADER, (1,))
    assert h.context.partition_states[a] is PartitionState.OFFLINE_PARTITION
