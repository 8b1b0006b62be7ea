"""The scripted scenario behind ``kafka-controller demo``: the controller's main jobs, one step at a
time, on a real ``LocalCluster`` (ZooKeeper + 3 broker processes) auditing into SQLite.

Each step acts the way an operator or a failure would (a topic create, SIGKILL, SIGTERM, an admin
API call), then waits by polling ZooKeeper until the outcome is visible and says what it saw: who
leads, which epochs moved, how long it took. Every fact printed is read back from ZooKeeper or from
the audit store, never assumed, so the demo doubles as an end-to-end check (a step that does not
reach its outcome in time fails the demo).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.admin.describe import ClusterView
from kafka_controller.admin.election import group_election_results
from kafka_controller.admin.topics import assign_replicas_to_brokers
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.cluster.waits import ClusterError
from kafka_controller.domain.values import TopicPartition

#: Topic -> (partitions, replication factor, placement start index): RF 1 shows offline partitions.
TOPICS: dict[str, tuple[int, int, int]] = {"orders": (6, 3, 0), "payments": (3, 2, 1), "clicks": (3, 1, 2)}
STEP_TIMEOUT_S = 60.0


@dataclass
class Step:
    name: str
    title: str
    seconds: float = 0.0
    facts: dict[str, Any] = field(default_factory=dict)


class DemoScenario:
    """Runs the steps on a started cluster; ``say`` prints one line of narration."""

    def __init__(self, cluster: LocalCluster, say: Callable[[str], None]) -> None:
        self.c = cluster
        self.say = say
        self.steps: list[Step] = []
        self.killed: int | None = None

    # -- plumbing ----------------------------------------------------------------------------------
    def _step(self, name: str, title: str, body: Callable[[Step], None]) -> Step:
        step = Step(name, title)
        self.say("")
        self.say(f"== {len(self.steps) + 1}. {title}")
        started = time.monotonic()
        body(step)
        step.seconds = round(time.monotonic() - started, 3)
        self.steps.append(step)
        return step

    def _view(self) -> ClusterView:
        return self.c.waits.describe()

    def _summary_line(self, view: ClusterView) -> str:
        s = view.summary
        leaders = ", ".join(f"broker {b.id}: {b.leaders}" for b in view.brokers)
        return (
            f"   {s['partitions']} partitions: offline {s['offline']}, "
            f"under-replicated {s['under_replicated']}, not on preferred leader "
            f"{s['not_preferred_leader']}; leaders per broker: {leaders}"
        )

    def _wait(self, probe: Callable[[], Any], what: str) -> Any:
        return self.c.waits.wait_until(probe, STEP_TIMEOUT_S, what)

    def _view_if(self, predicate: Callable[[ClusterView], bool]) -> Callable[[], ClusterView | None]:
        def probe() -> ClusterView | None:
            view = self._view()
            return view if predicate(view) else None

        return probe

    def _all_healthy(self) -> ClusterView | None:
        return self._view_if(lambda v: all(not p.offline and not p.under_replicated for p in v.partitions))()

    # -- the scenario -------------------------------------------------------------------------------
    def run(self) -> list[Step]:
        self._step("cluster", "A cluster: ZooKeeper and 3 broker processes", self.show_cluster)
        self._step("create_topics", "Create topics", self.create_topics)
        self._step("hard_kill", "Hard-kill a broker (SIGKILL)", self.hard_kill)
        self._step("restart", "Restart it: it rejoins every ISR", self.restart_killed)
        self._step(
            "controlled_shutdown", "Controlled shutdown of the busiest broker (SIGTERM)", self.controlled
        )
        self._step("preferred_election", "Preferred-replica election: leaders back", self.preferred_election)
        self._step("reassignment", "Reassign a partition to another broker", self.reassignment)
        self._step("failover", "Controller failover drill (SIGKILL the controller)", self.failover)
        self._step("delete_topic", "Delete a topic", self.delete_topic)
        return self.steps

    def show_cluster(self, step: Step) -> None:
        info = self.c.info()
        cid, epoch = self.c.controller()
        self.say(f"   ZooKeeper {info['zookeeper']}; audit store {info['audit_url']}")
        for b in info["brokers"]:
            self.say(f"   broker {b['id']} listening on {b['listener']} (pid {b['pid']})")
        self.say(
            f"   controller: broker {cid}, controller epoch {epoch} "
            "(the first controller of a tree has epoch 1)"
        )
        step.facts.update(controller=cid, controller_epoch=epoch, brokers=list(self.c.broker_ids))

    def create_topics(self, step: Step) -> None:
        brokers = list(self.c.broker_ids)
        for topic, (partitions, rf, start) in TOPICS.items():
            assignment = assign_replicas_to_brokers(partitions, rf, brokers, start_index=start)
            self.c.create_topic(topic, assignment)
            placed = " ".join(f"{p}:{list(rs)}" for p, rs in assignment.items())
            self.say(f"   created {topic}: {partitions} partitions, RF {rf}, replicas {placed}")
        view = self._wait(self._all_healthy, "every new partition to have a leader and a full ISR")
        self.say("   the controller elected a leader for each (first live replica) and wrote epoch 0:")
        self.say(self._summary_line(view))
        step.facts.update(
            topics={t: {"partitions": p, "replication_factor": r} for t, (p, r, _) in TOPICS.items()}
        )
        step.facts["summary"] = view.summary

    def _busiest(self, view: ClusterView, *, avoid: int | None) -> int:
        ranked = sorted(view.brokers, key=lambda b: (b.id == avoid, -b.leaders, b.id))
        return ranked[0].id

    def hard_kill(self, step: Step) -> None:
        view = self._view()
        cid = self.c.controller()[0]
        victim = self._busiest(view, avoid=cid)
        led = view.leaders_on(victim)
        self.say(
            f"   broker {victim} leads {len(led)} partitions; kill -9 it (the controller is broker {cid})"
        )
        started = time.monotonic()
        self.c.kill_broker(victim)
        self.c.waits.wait_deregistered(victim, timeout=STEP_TIMEOUT_S)
        lapsed = time.monotonic() - started
        self.say(f"   its ZooKeeper session lapsed after {lapsed:.1f}s; /brokers/ids/{victim} is gone")
        view = self._wait(self._view_if(lambda v: not v.leaders_on(victim)), "leaders to move")
        moved = time.monotonic() - started
        offline = [p for p in view.partitions if p.offline]
        self.say(f"   {len(led)} leaderships moved off broker {victim} {moved - lapsed:.2f}s after that")
        self.say(
            f"   offline partitions: {len(offline)} "
            f"({', '.join(str(p.topic_partition) for p in offline) or 'none'}: their only replica was on it)"
        )
        self.say(self._summary_line(view))
        self.killed = victim
        step.facts.update(
            broker=victim,
            leaders_before=len(led),
            session_lapsed_s=round(lapsed, 3),
            leaders_moved_s=round(moved, 3),
            offline_partitions=[str(p.topic_partition) for p in offline],
        )

    def restart_killed(self, step: Step) -> None:
        victim = self.killed
        assert victim is not None
        started = time.monotonic()
        epoch = self.c.start_broker(victim, timeout=STEP_TIMEOUT_S)
        view = self._wait(self._all_healthy, f"broker {victim} to rejoin every ISR")
        hosted = sum(1 for p in view.partitions if victim in p.replicas)
        self.say(
            f"   broker {victim} registered again with a new broker epoch {epoch}; back in the ISR of all "
            f"{hosted} of its partitions after {time.monotonic() - started:.1f}s"
        )
        self.say(self._summary_line(view))
        step.facts.update(broker=victim, broker_epoch=epoch, partitions_hosted=hosted, summary=view.summary)

    def controlled(self, step: Step) -> None:
        view = self._view()
        victim = self._busiest(view, avoid=self.c.controller()[0])
        report = self.c.controlled_shutdown(victim, timeout=STEP_TIMEOUT_S)
        sizes = {p.topic_partition: len(p.replicas) for p in view.partitions}
        movable = [tp for tp in report.led_at_exit if sizes.get(tp, 0) > 1]
        single = [tp for tp in report.led_at_exit if sizes.get(tp, 0) <= 1]
        self.say(
            f"   broker {victim} led {len(report.led_before)} partitions; SIGTERM -> it asked the "
            f"controller to move them, then deregistered and exited {report.exit_code} "
            f"after {report.seconds:.2f}s"
        )
        self.say(f"   leaderships it still held at exit (RF > 1): {len(movable)}")
        if single:
            self.say(
                f"   single-replica partitions cannot move and went offline: {', '.join(map(str, single))}"
            )
        self.c.start_broker(victim, timeout=STEP_TIMEOUT_S)
        view = self._wait(self._all_healthy, f"broker {victim} to rejoin every ISR")
        self.say(f"   restarted broker {victim}; every ISR is full again")
        self.say(self._summary_line(view))
        step.facts.update(
            broker=victim,
            led_before=len(report.led_before),
            led_at_exit_movable=len(movable),
            single_replica_offline=[str(tp) for tp in single],
            seconds=round(report.seconds, 3),
            exit_code=report.exit_code,
        )

    def preferred_election(self, step: Step) -> None:
        before = self._view()
        self.say(
            f"   {before.summary['not_preferred_leader']} partitions are not led by their preferred replica"
        )
        response = self.c.admin().elect_leaders("preferred", None)
        outcome = group_election_results(
            {tp: (r.error, r.leader, r.message) for tp, r in response.results.items()}
        )
        self.say(
            f"   ElectLeaders(PREFERRED, all partitions): {len(outcome.succeeded)} elected, "
            f"{len(outcome.not_needed)} already on their preferred leader, {len(outcome.failed)} failed"
        )
        after = self._view()
        self.say(self._summary_line(after))
        step.facts.update(
            elected=len(outcome.succeeded),
            not_needed=len(outcome.not_needed),
            failed={str(tp): e for tp, (e, _m) in outcome.failed.items()},
            not_preferred_before=before.summary["not_preferred_leader"],
            not_preferred_after=after.summary["not_preferred_leader"],
        )

    def reassignment(self, step: Step) -> None:
        tp = TopicPartition("clicks", 0)
        view = self._view()
        part = view.partition(tp.topic, tp.partition)
        assert part is not None
        source = part.replicas[0]
        target = next(b for b in self.c.broker_ids if b != source)
        self.say(f"   {tp} lives on [{source}] with leader epoch {part.leader_epoch}; move it to [{target}]")
        seen: list[tuple[int, int, tuple[int, ...], tuple[int, ...]]] = []

        def look() -> bool:
            p = self._view().partition(tp.topic, tp.partition)
            if p is None:
                return False
            key = (p.leader, p.leader_epoch, p.isr, p.replicas)
            if not seen or seen[-1] != key:
                seen.append(key)
            return p.replicas == (target,) and not p.reassigning and p.leader == target

        look()
        started = time.monotonic()
        response = self.c.admin().alter_partition_reassignments({tp: [target]})
        errors = {str(k): r.error for k, r in response.results.items() if r.error != "NONE"}
        if errors:
            raise ClusterError(f"reassignment of {tp} refused: {errors}")
        self._wait(look, f"{tp} to end on [{target}]")
        for leader, epoch, isr, replicas in seen:
            self.say(
                f"   seen: replicas {list(replicas)}, leader {leader}, ISR {list(isr)}, leader epoch {epoch}"
            )
        first, last = seen[0][1], seen[-1][1]
        self.say(
            f"   done in {time.monotonic() - started:.2f}s; leader epoch {first} -> {last} "
            "(Kafka: +1 adding the new replica, +1 moving leadership, "
            "+1 dropping the old replica from the ISR)"
        )
        step.facts.update(
            partition=str(tp),
            source=[source],
            target=[target],
            leader_epoch_before=first,
            leader_epoch_after=last,
        )

    def failover(self, step: Step) -> None:
        old, epoch = self.c.controller()
        assert old is not None and epoch is not None
        self.say(f"   the controller is broker {old} at epoch {epoch}; kill -9 it")
        started = time.monotonic()
        self.c.kill_broker(old)
        new, new_epoch = self.c.waits.wait_for_controller(STEP_TIMEOUT_S, exclude=[old], min_epoch=epoch + 1)
        elected = time.monotonic() - started
        view = self._wait(
            self._view_if(lambda v: all(not p.offline for p in v.partitions if set(p.replicas) - {old})),
            "every partition with a live replica to have a live leader",
        )
        recovered = time.monotonic() - started
        offline = [str(p.topic_partition) for p in view.partitions if p.offline]
        self.say(
            f"   broker {new} became controller with epoch {new_epoch} after {elected:.1f}s (session timeout)"
        )
        self.say(f"   every partition with a live replica had a live leader {recovered:.1f}s after the kill")
        self.say(f"   still offline (no live replica): {', '.join(offline) or 'none'}")
        self.c.start_broker(old, timeout=STEP_TIMEOUT_S)
        view = self._wait(self._all_healthy, f"broker {old} to rejoin every ISR")
        self.say(f"   restarted broker {old}; it is now an ordinary broker (the controller stays on {new})")
        step.facts.update(
            old_controller=old,
            old_epoch=epoch,
            new_controller=new,
            new_epoch=new_epoch,
            new_controller_s=round(elected, 3),
            recovered_s=round(recovered, 3),
        )

    def delete_topic(self, step: Step) -> None:
        topic = "clicks"
        started = time.monotonic()
        self.c.store.create_delete_topic_path(topic)
        self._wait(
            lambda: (
                not self.c.store.topic_exists(topic) and not self.c.store.is_topic_marked_for_deletion(topic)
            ),
            f"topic {topic} to be deleted",
        )
        left = sorted(self.c.store.get_all_topics())
        self.say(
            f"   /admin/delete_topics/{topic} created; the controller stopped and deleted every replica and"
        )
        self.say(
            f"   removed the topic's znodes in {time.monotonic() - started:.2f}s; "
            f"topics now: {', '.join(left)}"
        )
        step.facts.update(topic=topic, remaining_topics=left)
