"""Stateful property test of the core: random controller flows, invariants after every step.

Random sequences of topic creation, broker failures and restarts, AlterIsr shrinks and expansions,
elections of every strategy (offline via trigger-online and unclean-enable, preferred, unclean,
controlled shutdown, reassign), controlled shutdowns, reassignments and raw state-machine calls
run over ``CoreHarness`` (real context, state machines, request batches and in-memory store).
After every step ``InvariantChecker`` compares the store, the context and the audit trail; some
rules also assert what their own flow promises (spec section named in each).

Size: ``CORE_PROPERTY_EXAMPLES`` / ``CORE_PROPERTY_STEPS`` override; the defaults keep the suite
around 30-60 s under the CI profile and a few seconds locally.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafka_controller.core.strategies import (
    ControlledShutdownPartitionLeaderElectionStrategy,
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
    ReassignPartitionLeaderElectionStrategy,
)
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.testing.core_harness import CoreHarness

from .invariants import InvariantChecker

CI = bool(os.environ.get("CI"))
EXAMPLES = int(os.environ.get("CORE_PROPERTY_EXAMPLES", "500" if CI else "60"))
STEPS = int(os.environ.get("CORE_PROPERTY_STEPS", "40"))
BROKER_DEFAULTS = {UNCLEAN_LEADER_ELECTION_ENABLE: "false"}

STRATEGIES: list[PartitionLeaderElectionStrategy] = [
    OfflinePartitionLeaderElectionStrategy(False),
    OfflinePartitionLeaderElectionStrategy(True),
    PreferredReplicaPartitionLeaderElectionStrategy(),
    ControlledShutdownPartitionLeaderElectionStrategy(),
    ReassignPartitionLeaderElectionStrategy(),
]


class CoreInvariants(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.brokers: list[int] = []
        self.h: CoreHarness = None  # type: ignore[assignment]  # set by the initialize rule
        self.checker: InvariantChecker | None = None
        self.forced_unclean: set[TopicPartition] = set()
        self.topic_seq = 0

    @initialize(n=st.integers(3, 5))
    def start_cluster(self, n: int) -> None:
        self.brokers = list(range(1, n + 1))
        self.h = CoreHarness(self.brokers, broker_config=BROKER_DEFAULTS)
        self.checker = InvariantChecker(self.h, BROKER_DEFAULTS)

    # ------------------------------------------------------------------------------ helpers
    def registered(self) -> list[int]:
        return sorted(self.h.context.live_or_shutting_down_broker_ids)

    def dead(self) -> list[int]:
        return [b for b in self.brokers if not self.h.context.is_live_or_shutting_down(b)]

    def partitions(self) -> list[TopicPartition]:
        return sorted(self.h.context.all_partitions)

    def stored(self, tps: list[TopicPartition]) -> dict[TopicPartition, LeaderAndIsr]:
        reads = self.h.store.get_partition_states(tps)
        return {tp: r.leader_and_isr for tp, r in reads.items() if isinstance(r, LeaderIsrAndControllerEpoch)}

    def snapshot(self) -> tuple[Any, ...]:
        """Everything a refused call must leave alone: every znode (data and stat), the context's
        states, assignments and leadership, and what was sent and audited."""
        h, ctx = self.h, self.h.context
        tree = {p: h.store.tree.get(p) for p in h.store.tree.paths()}
        return (
            tree,
            dict(ctx.partition_states),
            dict(ctx.replica_states),
            {t: dict(a) for t, a in ctx.partition_assignments.items()},
            dict(ctx.partitions_leadership_info),
            set(ctx.partitions_being_reassigned),
            len(h.channel.sent),
            len(h.audit.records),  # type: ignore[attr-defined]
        )

    def orphan(self, replica: PartitionAndReplica) -> bool:
        """A KAFKA-5083 remnant a reassignment re-added as a replica without a replica state
        (complete at once, so no NewReplica): Kafka can then neither start nor stop it."""
        assert self.checker is not None
        state = self.h.context.replica_states.get(replica, ReplicaState.NON_EXISTENT_REPLICA)
        return replica in self.checker.remnants and state is ReplicaState.NON_EXISTENT_REPLICA

    def assert_nothing_electable(self, topic: str | None = None) -> None:
        """After trigger-online (docs/controller-behaviour.md §3.2) of ``topic`` (or all): a
        New/Offline partition is left only if
        no leader exists for it: no live replica (New); no live replica in the ISR and, when unclean
        is enabled, no live replica at all unless some ISR member is live
        (Offline, docs/controller-behaviour.md §3.6)."""
        ctx = self.h.context
        stored = self.stored(self.partitions())
        configs, _ = self.h.store.get_log_configs(ctx.all_topics, BROKER_DEFAULTS)
        for tp, state in ctx.partition_states.items():
            if topic is not None and tp.topic != topic:
                continue
            if state is PartitionState.NEW_PARTITION:
                live_replicas = self.electable(tp, None)[0]
                assert not live_replicas, f"{tp} stayed New with live replicas {live_replicas}"
            elif state is PartitionState.OFFLINE_PARTITION and tp in stored:
                unclean = configs[tp.topic].get(UNCLEAN_LEADER_ELECTION_ENABLE) == "true"
                self.assert_no_leader(tp, stored[tp], unclean, "stayed Offline")

    def electable(
        self, tp: TopicPartition, lai: LeaderAndIsr | None
    ) -> tuple[list[int], list[int], list[int]]:
        """(live replicas, clean candidates, live ISR members). Kafka's "live ISR member" is any
        live broker in the ISR, a replica or not: a KAFKA-5083 remnant counts, and blocks unclean."""
        live = self.h.context.live_broker_ids
        live_replicas = [r for r in self.h.context.partition_replica_assignment(tp) if r in live]
        isr = lai.isr if lai is not None else ()
        return live_replicas, [r for r in live_replicas if r in isr], [r for r in isr if r in live]

    def assert_no_leader(self, tp: TopicPartition, lai: LeaderAndIsr, unclean: bool, what: str) -> None:
        live_replicas, clean, live_isr = self.electable(tp, lai)
        assert not clean, f"{tp} {what} with live ISR replicas {clean}"
        assert not (unclean and live_replicas and not live_isr), f"{tp} {what} although unclean is allowed"
        if live_isr and live_replicas:
            event("a live ISR member outside the replicas blocked an unclean election")

    # ------------------------------------------------------------------------------ topics
    @precondition(lambda self: len(self.h.context.all_topics) < 6)
    @rule(data=st.data())
    def create_topic(self, data: st.DataObject) -> None:
        n_partitions = data.draw(st.integers(1, 4), label="partitions")
        rf = data.draw(st.integers(1, min(3, len(self.brokers))), label="rf")
        assignment = [list(data.draw(st.permutations(self.brokers)))[:rf] for _ in range(n_partitions)]
        unclean = data.draw(st.sampled_from([None, "false", "true"]), label="unclean")
        topic = f"t{self.topic_seq}"
        self.topic_seq += 1
        tps = self.h.create_topic(
            topic, assignment, {} if unclean is None else {UNCLEAN_LEADER_ELECTION_ENABLE: unclean}
        )
        stored = self.stored(tps)
        live = self.h.context.live_broker_ids
        for tp, replicas in zip(tps, assignment, strict=True):
            live_replicas = tuple(r for r in replicas if r in live)
            # docs/controller-behaviour.md §3.5: first live replica leads, live replicas form the ISR
            if live_replicas:
                assert self.h.context.partition_states[tp] is PartitionState.ONLINE_PARTITION
                assert stored[tp] == LeaderAndIsr(live_replicas[0], 0, live_replicas, 0)
            else:
                assert self.h.context.partition_states[tp] is PartitionState.NEW_PARTITION
                assert tp not in stored

    @precondition(lambda self: self.h.context.all_topics)
    @rule(data=st.data())
    def enable_unclean(self, data: st.DataObject) -> None:
        topic = data.draw(st.sampled_from(sorted(self.h.context.all_topics)), label="topic")
        self.h.enable_unclean_leader_election(topic)
        self.assert_nothing_electable(topic)

    @rule()
    def trigger_online(self) -> None:
        self.h.trigger_online()
        self.assert_nothing_electable()

    # ------------------------------------------------------------------------------ brokers
    @precondition(lambda self: self.h.context.live_or_shutting_down_broker_ids)
    @rule(data=st.data())
    def fail_brokers(self, data: st.DataObject) -> None:
        failed = data.draw(st.lists(st.sampled_from(self.registered()), min_size=1, max_size=2, unique=True))
        self.h.fail_brokers(failed)
        led = {
            tp: lai.leader
            for tp, lai in self.stored(self.partitions()).items()
            # Kafka: a leader without a replica state (see ``orphan``) cannot go offline
            if lai.leader in failed and not self.orphan(PartitionAndReplica(tp, lai.leader))
        }
        assert not led, f"partitions still led by failed brokers: {led}"
        self.assert_nothing_electable()

    @precondition(lambda self: len(self.h.context.live_or_shutting_down_broker_ids) < len(self.brokers))
    @rule(data=st.data())
    def start_brokers(self, data: st.DataObject) -> None:
        started = data.draw(st.lists(st.sampled_from(self.dead()), min_size=1, max_size=2, unique=True))
        self.h.start_brokers(started)
        states = self.h.context.replica_states
        assert self.checker is not None
        for replica in self.h.context.replicas_on_brokers(started):
            if self.orphan(replica):
                event("KAFKA-5083 remnant re-added without a replica state")
                continue
            assert states.get(replica) is ReplicaState.ONLINE_REPLICA, f"{replica} is {states.get(replica)}"
        self.assert_nothing_electable()

    @precondition(lambda self: self.h.context.live_or_shutting_down_broker_ids)
    @rule(data=st.data())
    def controlled_shutdown(self, data: st.DataObject) -> None:
        broker = data.draw(st.sampled_from(self.registered()), label="broker")
        still_led = self.h.controlled_shutdown(broker)
        event("controlled shutdown left partitions led" if still_led else "controlled shutdown moved all")
        ctx = self.h.context
        stored = self.stored(self.partitions())
        live = ctx.live_broker_ids
        for tp, lai in stored.items():
            replicas = ctx.partition_replica_assignment(tp)
            if lai.leader != broker or len(replicas) < 2:
                continue
            # docs/controller-behaviour.md §8.7: a partition stays led only when no other live,
            # not-shutting-down ISR member exists
            assert tp in still_led, f"{tp} is led by {broker} but not reported"
            movable = [r for r in replicas if r in live and r in lai.isr]
            assert not movable, f"{tp} kept leader {broker} although {movable} could lead"
        assert still_led == {tp for tp in still_led if stored[tp].leader == broker}

    # ------------------------------------------------------------------------------ ISR changes
    def _alter_isr_candidates(self) -> list[TopicPartition]:
        ctx = self.h.context
        registered = ctx.live_or_shutting_down_broker_ids
        return sorted(
            tp
            for tp, info in ctx.partitions_leadership_info.items()
            if info.leader_and_isr.leader != NO_LEADER and info.leader_and_isr.leader in registered
        )

    @precondition(lambda self: self._alter_isr_candidates())
    @rule(data=st.data())
    def alter_isr(self, data: st.DataObject) -> None:
        ctx = self.h.context
        tp = data.draw(st.sampled_from(self._alter_isr_candidates()), label="partition")
        current = ctx.partitions_leadership_info[tp].leader_and_isr
        pool = [
            r
            for r in ctx.partition_replica_assignment(tp)
            if r != current.leader and (r in current.isr or r in ctx.live_broker_ids)
        ]
        others = data.draw(st.lists(st.sampled_from(pool), unique=True), label="others") if pool else []
        reassigning = tp in ctx.partitions_being_reassigned
        written = self.h.set_isr(tp, [current.leader, *others])
        if reassigning and tp not in ctx.partitions_being_reassigned:
            event("reassignment completed by AlterIsr")
        assert written.leader_epoch == current.leader_epoch  # AlterIsr keeps the leader's epoch
        assert written.zk_version == current.zk_version + 1

    # ------------------------------------------------------------------------------ elections
    @precondition(lambda self: self.h.context.all_topics)
    @rule(data=st.data())
    def preferred_election(self, data: st.DataObject) -> None:
        tps = data.draw(st.lists(st.sampled_from(self.partitions()), min_size=1, max_size=4, unique=True))
        results = self.h.preferred_election(tps)
        event(
            f"preferred elections succeeded: {sum(isinstance(o, LeaderAndIsr) for o in results.values()) > 0}"
        )
        ctx = self.h.context
        for tp, outcome in results.items():
            preferred = ctx.partition_replica_assignment(tp)[0]
            # docs/controller-behaviour.md §2.2: RS[0] or nothing, never a fallback
            if isinstance(outcome, LeaderAndIsr):
                assert outcome.leader == preferred
            else:
                lai = ctx.partitions_leadership_info[tp].leader_and_isr
                assert preferred not in ctx.live_broker_ids or preferred not in lai.isr

    @precondition(lambda self: self.h.context.all_topics)
    @rule(data=st.data())
    def unclean_election(self, data: st.DataObject) -> None:
        tps = data.draw(st.lists(st.sampled_from(self.partitions()), min_size=1, max_size=4, unique=True))
        self.forced_unclean.update(tps)
        results = self.h.unclean_election(tps)
        event(
            f"unclean elections succeeded: {sum(isinstance(o, LeaderAndIsr) for o in results.values()) > 0}"
        )
        live = self.h.context.live_broker_ids
        for tp, outcome in results.items():
            if isinstance(outcome, LeaderAndIsr):
                assert outcome.leader in live, f"{tp}: unclean election chose dead broker {outcome.leader}"
            else:
                self.assert_no_leader(tp, self.stored([tp])[tp], True, "got no unclean leader")

    @precondition(lambda self: self.h.context.all_topics)
    @rule(data=st.data())
    def direct_transition(self, data: st.DataObject) -> None:
        """Raw state-machine calls, valid or not: invalid ones must be skipped and audited."""
        tps = data.draw(st.lists(st.sampled_from(self.partitions()), min_size=1, max_size=3, unique=True))
        if data.draw(st.booleans(), label="partition machine"):
            # NewPartition is never valid here (every partition exists), so it is audited as invalid.
            target = data.draw(
                st.sampled_from(
                    [
                        PartitionState.ONLINE_PARTITION,
                        PartitionState.OFFLINE_PARTITION,
                        PartitionState.NEW_PARTITION,
                    ]
                )
            )
            strategy = data.draw(st.sampled_from(STRATEGIES), label="strategy")
            self.h.psm.handle_state_changes(tps, target, strategy)
            if strategy == OfflinePartitionLeaderElectionStrategy(True):
                self.forced_unclean.update(tps)
        else:
            replicas = self.h.context.replicas_for_partition(tps)
            target_r = data.draw(
                st.sampled_from(
                    [
                        ReplicaState.ONLINE_REPLICA,
                        ReplicaState.OFFLINE_REPLICA,
                        ReplicaState.NEW_REPLICA,
                        ReplicaState.REPLICA_DELETION_INELIGIBLE,
                    ]
                )
            )
            self.h.rsm.handle_state_changes(replicas, target_r)

    # ------------------------------------------------------------------------------ reassignment
    @precondition(lambda self: self.h.context.all_topics)
    @rule(data=st.data())
    def reassign(self, data: st.DataObject) -> None:
        ctx = self.h.context
        tp = data.draw(st.sampled_from(self.partitions()), label="partition")
        size = data.draw(st.integers(1, 3), label="size")
        target = list(data.draw(st.permutations(self.brokers)))[:size]
        expected = ctx.partition_full_replica_assignment(tp).reassign_to(target)
        acceptable = (
            ctx.partition_leadership_info(tp) is not None
            and set(expected.adding_replicas) <= ctx.live_broker_ids
        )
        before = self.snapshot()
        try:
            result = self.h.reassign(tp, target)
        except InvalidArgumentError:
            event("reassignment refused")
            assert not acceptable, f"reassigning {tp} to {target} was refused"
            assert self.snapshot() == before, "a refused reassignment changed something"
            return
        assert acceptable, f"reassigning {tp} to {target} should have been refused"
        event("reassignment in phase A" if result.is_being_reassigned else "reassignment completed at once")
        if result.is_being_reassigned:  # phase A: the targets are not all in the ISR yet
            assert result == expected and tp in ctx.partitions_being_reassigned
        else:  # phase B ran: RS = TRS
            assert result == ReplicaAssignment(tuple(target)) and tp not in ctx.partitions_being_reassigned
            for r in expected.removing_replicas:
                assert PartitionAndReplica(tp, r) not in ctx.replica_states

    # ------------------------------------------------------------------------------ the invariants
    @invariant()
    def invariants_hold(self) -> None:
        if self.checker is None:
            return
        violations = self.checker.check(self.forced_unclean)
        self.forced_unclean = set()
        assert not violations, "\n".join(violations)
        if self.checker.remnants:
            event("KAFKA-5083 remnant in an ISR")
        for kind in ("invalid", "failed", "unclean"):
            if self.checker.step_summary.get(kind):
                event(f"step audited {kind} transitions")


TestCoreInvariants = CoreInvariants.TestCase
TestCoreInvariants.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    # No "explain" phase: it re-runs failing cases under a tracer, minutes for this machine.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
