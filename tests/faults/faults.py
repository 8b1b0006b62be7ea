"""The faults a trial injects, each followed by its own repair so that the workload can finish:

* ``kill_controller`` / ``kill_broker`` — SIGKILL (its ZooKeeper session lapses), then a restart;
* ``pause_controller`` — SIGSTOP past the session timeout, a new controller takes over, SIGCONT:
  the old one wakes up a zombie and must be fenced (docs/controller-behaviour.md §7.3);
* ``zk_restart`` — the ZooKeeper server restarts on the same port and data;
* ``audit_outage`` — the trial's private PostgreSQL crashes (``immediate``) and comes back;
* ``bounce_storm`` — one broker restarted again and again, hard or controlled, at random;
* ``crash_supervised`` — SIGKILL from outside the cluster (an OOM kill) of the controller or a
  broker: the cluster's supervisor sees the exit and closes the session, so the registration (and
  ``/controller``) go at once, not after the session timeout.

* ``zk_leader_kill`` — on a 3-server ensemble: the ZooKeeper leader SIGKILLed, a new one elected,
  the old one restarted a moment later;
* ``zk_quorum_loss`` — on a 3-server ensemble: two servers (the leader among them) stopped or
  killed for 8-12 s, past the brokers' session timeout, then started again;
* ``controller_zk_partition`` — hosts in network namespaces: the active controller's host cut from
  every ZooKeeper host (not from the brokers) until a new controller is elected, and a while
  more; after the heal the old one finds its session expired, resigns and re-registers;
* ``broker_zk_partition`` — hosts in network namespaces: another broker's host cut from every
  ZooKeeper host until its registration lapses (the controller treats it as failed), then healed:
  it re-registers;
* ``broker_controller_partition`` — hosts in network namespaces: another broker's host cut from the
  controller's (not from ZooKeeper) for 3-8 s: it stays registered, and nothing else stalls (a
  topic on the other brokers is created and led meanwhile);
* ``zk_minority_partition`` — hosts in network namespaces: one ZooKeeper server (the leader or a
  follower, at random) taken off the network for 3-8 s: the majority keeps (or elects) a leader
  and the cluster keeps working (a topic is created and led meanwhile); the server rejoins.
* ``slow_link`` — hosts in network namespaces, under a controlled shutdown or a reassignment: the
  controller's or another broker's link capped at 64-256 kbit/s both ways for 4-10 s, with a
  4 KiB queue: delay while packets wait for the cap, loss when they overflow it (``tc tbf``; this
  kernel has no netem for fixed delays and random loss).

The ensemble faults time the convergence after the heal (every running broker registered, a
controller, every partition of ``w`` with a registered ISR replica led by a registered broker) and
fail the trial past ``CONVERGE_BOUND_S``; the trial then checks the rest as after any fault.

Every choice (victim, durations, kind of bounce) comes from the trial's seeded ``rng``.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

from kafka_controller.cluster.waits import ClusterError
from kafka_controller.domain.requests import Errors, UpdateMetadataRequest
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import UPDATE_METADATA
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from kafka_controller.zk.session_close import CloseOutcome
from tests.faults.context import TrialContext, TrialFailed
from tests.faults.workloads import partitions

#: The broker config every trial uses: short sessions so faults are noticed in seconds.
SESSION_TIMEOUT_MS = 4000
#: The stated bound on convergence after a heal (README's reliability table).
CONVERGE_BOUND_S = 60.0


def _pause(seconds: float) -> None:
    """A deliberate stretch of fault time (not a wait for anything)."""
    threading.Event().wait(seconds)


def ensure_running(t: TrialContext, broker: int) -> None:
    """Start ``broker`` unless it runs (a rolling-restart workload may have started it already).
    ``start_broker`` first waits for a killed incarnation's session to lapse."""
    with t.lifecycle:
        if broker not in t.cluster.running_broker_ids():
            t.cluster.start_broker(broker, timeout=t.left())


def _leader_epochs(t: TrialContext) -> dict[TopicPartition, int]:
    states = t.cluster.store.get_partition_states(partitions())
    return {
        tp: s.leader_and_isr.leader_epoch
        for tp, s in states.items()
        if isinstance(s, LeaderIsrAndControllerEpoch)
    }


def kill_controller(t: TrialContext) -> None:
    """Half the time at a random moment. Otherwise while another broker shuts down (SIGTERM): the
    controller is killed the moment the first leader moves in ZooKeeper, while its audit rows for
    that move may still be on their way to the database."""
    victim = t.controller()
    leaving = None
    with t.lifecycle:
        if t.rng.random() < 0.5:
            others = [b for b in t.running() if b != victim]
            if others:
                leaving = t.rng.choice(others)
                before = _leader_epochs(t)
                t.cluster.processes[leaving].terminate()
                try:
                    t.cluster.waits.wait_until(
                        lambda: _leader_epochs(t) != before,
                        min(5.0, t.left()),
                        "a leader change",
                        interval=0.01,
                    )
                except ClusterError:
                    t.note("no leader moved within 5s")
        victim = t.controller()
        how = f"as broker {leaving} shuts down" if leaving is not None else "at a random moment"
        t.note(f"kill -9 controller {victim} {how}")
        t.kill(victim)
    t.wait(lambda: (c := t.cluster.controller()[0]) is not None and c != victim, "a new controller")
    ensure_running(t, victim)
    if leaving is not None:
        t.cluster.processes[leaving].wait(t.left())
        ensure_running(t, leaving)


def kill_broker(t: TrialContext) -> None:
    controller = t.controller()
    victim = t.rng.choice([b for b in t.cluster.broker_ids if b != controller])
    t.note(f"kill -9 broker {victim}")
    t.kill(victim)
    ensure_running(t, victim)


def pause_controller(t: TrialContext) -> None:
    victim = t.controller()
    epoch = t.cluster.registered()[victim]
    extra = t.rng.uniform(0.5, 2.0)
    t.note(f"SIGSTOP controller {victim}, resumed {extra:.1f}s after a new controller took over")
    t.paused.add(victim)
    t.cluster.pause_broker(victim)
    try:
        t.wait(lambda: (c := t.cluster.controller()[0]) is not None and c != victim, "a new controller")
        _pause(extra)
    finally:
        t.cluster.resume_broker(victim)
        t.paused.discard(victim)
    t.wait(lambda: t.cluster.registered().get(victim, epoch) > epoch, f"broker {victim} re-registered")


def zk_restart(t: TrialContext) -> None:
    t.note("ZooKeeper server restart")
    t.zk.restart(timeout=t.left())
    # The fault is over once clients are back: until its kazoo client reconnects, the trial's own
    # store fails fast (session suspended), and the trial's next reads would fail with it.
    t.wait(lambda: isinstance(t.cluster.registered(), dict), "the trial's ZooKeeper session to reconnect")


def audit_outage(t: TrialContext) -> None:
    assert t.postgres is not None, "audit outage trials run on a private PostgreSQL"
    outage = t.rng.uniform(1.5, 4.0)
    t.note(f"audit database crash, {outage:.1f}s outage")
    t.postgres.stop("immediate")
    try:
        _pause(outage)
    finally:
        t.postgres.start()


def bounce_storm(t: TrialContext) -> None:
    victim = t.rng.choice(t.cluster.broker_ids)
    kinds = [t.rng.choice(["kill", "stop"]) for _ in range(3)]
    t.note(f"bounce storm of broker {victim}: {', '.join(kinds)}")
    for kind in kinds:
        with t.lifecycle:
            if kind == "kill":
                t.kill(victim)
            else:
                t.cluster.stop_broker(victim, timeout=t.left())
            ensure_running(t, victim)


def crash_supervised(t: TrialContext) -> None:
    controller = t.controller()
    others = [b for b in t.running() if b != controller]
    victim = controller if not others or t.rng.random() < 0.5 else t.rng.choice(others)
    with t.lifecycle:
        pid = t.cluster.processes[victim].pid
        role = "controller" if victim == controller else "broker"
        started = time.monotonic()
        t.crash(victim)
        t.wait(lambda: victim not in t.cluster.registered(), f"broker {victim}'s registration to go")
        t.note(f"kill -9 of {role} {victim} from outside: deregistered in {time.monotonic() - started:.2f}s")
        closer = t.cluster.session_closer
        if closer is None:
            raise TrialFailed("the cluster has no exit supervisor")
        closed = (victim, pid, CloseOutcome.CLOSED)
        # the outcome is recorded once the close is read back, a moment after the znode went
        t.wait(
            lambda: closed in closer.outcomes, f"the supervisor to report closing broker {victim}'s session"
        )
    if victim == controller:
        t.wait(lambda: (c := t.cluster.controller()[0]) is not None and c != victim, "a new controller")
    ensure_running(t, victim)


def _ensemble(t: TrialContext) -> ZooKeeperEnsemble:
    if not isinstance(t.zk, ZooKeeperEnsemble):
        raise TrialFailed("this fault needs the trial to run on a ZooKeeper ensemble")
    return t.zk


def _all_led(t: TrialContext) -> bool:
    live = set(t.cluster.registered())
    if not set(t.running()) <= live or t.cluster.controller()[0] not in live:
        return False
    for state in t.cluster.store.get_partition_states(partitions()).values():
        if not isinstance(state, LeaderIsrAndControllerEpoch):
            return False
        lai = state.leader_and_isr
        if set(lai.isr) & live and lai.leader not in live:
            return False
    return True


def _converged(t: TrialContext, healed_at: float) -> None:
    """Wait for the cluster to converge after a heal and record how long it took."""
    t.wait(lambda: _all_led(t), "convergence after the heal", timeout=CONVERGE_BOUND_S + 30.0)
    t.convergence_s = round(time.monotonic() - healed_at, 2)
    t.note(f"converged {t.convergence_s:.1f}s after the heal")
    if t.convergence_s > CONVERGE_BOUND_S:
        raise TrialFailed(
            f"converged only {t.convergence_s:.1f}s after the heal (bound {CONVERGE_BOUND_S:g}s)"
        )


def zk_leader_kill(t: TrialContext) -> None:
    """Convergence is timed from the kill: the survivors' election is part of the outage."""
    ensemble = _ensemble(t)
    leader = ensemble.kill_leader(timeout=t.left())
    killed_at = time.monotonic()
    down = t.rng.uniform(0.5, 3.0)
    t.note(f"kill -9 ZooKeeper leader {leader}, restarted after {down:.1f}s")
    ensemble.wait_quorum(timeout=t.left())
    _converged(t, killed_at)
    _pause(down)
    ensemble.member(leader).start(timeout=t.left())


def zk_quorum_loss(t: TrialContext) -> None:
    ensemble = _ensemble(t)
    outage = t.rng.uniform(8.0, 12.0)
    kill = t.rng.random() < 0.5
    keep = t.rng.choice([m.server_id for m in ensemble if m.mode() == "follower"])
    stopped = ensemble.lose_quorum(kill=kill, keep=keep)
    t.note(f"ZooKeeper quorum lost for {outage:.1f}s: servers {stopped} {'killed' if kill else 'stopped'}")
    _pause(outage)
    ensemble.start_members(stopped, timeout=t.left())
    healed_at = time.monotonic()
    ensemble.wait_quorum(timeout=t.left())
    _converged(t, healed_at)


def controller_zk_partition(t: TrialContext) -> None:
    victim, epoch = t.cluster.controller()
    if victim is None or epoch is None:
        raise TrialFailed("no controller to partition")
    broker_epoch = t.cluster.registered()[victim]
    extra = t.rng.uniform(0.5, 3.0)
    t.note(f"controller {victim} cut from ZooKeeper (not from brokers), healed {extra:.1f}s after a new one")

    def while_cut() -> None:
        t.wait(lambda: _moved(t, victim, epoch), "a new controller with a higher epoch")
        _brokers_refuse_epoch(t, victim, epoch)

    _cut_from_zookeeper(t, victim, broker_epoch, extra, while_cut)
    now_epoch = t.cluster.controller()[1]
    if now_epoch is None or now_epoch <= epoch:
        raise TrialFailed(f"controller epoch {now_epoch} after the heal, not above {epoch}")


def _brokers_refuse_epoch(t: TrialContext, old: int, epoch: int) -> None:
    """Once a broker has learnt of the new controller, a request at the old epoch — what the cut-off
    controller would still send — must be refused with STALE_CONTROLLER_EPOCH."""
    new = t.cluster.controller()[0]
    registered = t.cluster.registered()
    for b in [b for b in t.running() if b not in (old, new) and b in registered]:
        t.wait(functools.partial(_knows_controller, t, b, new), f"broker {b} to learn of {new}")
        client = TransportClient(t.cluster.addresses.broker_host(b), t.cluster.ports[b], timeout_s=5.0)
        try:
            response = client.request(
                UPDATE_METADATA, UpdateMetadataRequest(7, old, epoch, registered[b], (), ())
            )
        finally:
            client.close()
        if response.error != Errors.STALE_CONTROLLER_EPOCH:
            raise TrialFailed(
                f"broker {b} answered {response.error} to controller {old} at old epoch {epoch}"
            )
    t.note(f"brokers refused controller {old}'s epoch {epoch} once they knew of controller {new}")


def _knows_controller(t: TrialContext, broker: int, controller: int | None) -> bool:
    return bool(t.cluster.admin().metadata(broker).controller_id == controller)


def _moved(t: TrialContext, old: int, epoch: int) -> bool:
    now, now_epoch = t.cluster.controller()
    return now is not None and now != old and now_epoch is not None and now_epoch > epoch


def broker_zk_partition(t: TrialContext) -> None:
    controller = t.controller()
    victim = t.rng.choice([b for b in t.running() if b != controller] or [controller])
    broker_epoch = t.cluster.registered().get(victim, 0)
    extra = t.rng.uniform(0.5, 3.0)
    t.note(f"broker {victim} cut from ZooKeeper, healed {extra:.1f}s after its registration lapsed")
    _cut_from_zookeeper(
        t,
        victim,
        broker_epoch,
        extra,
        lambda: t.wait(
            lambda: victim not in t.cluster.registered(), f"broker {victim}'s registration to lapse"
        ),
    )


def _cut_from_zookeeper(
    t: TrialContext, victim: int, broker_epoch: int, extra: float, while_cut: Callable[[], object]
) -> None:
    """Cut ``victim``'s host from every ZooKeeper host, run ``while_cut``, wait ``extra`` more, heal;
    then ``victim`` must re-register (a newer broker epoch) and the cluster converge."""
    t.net.lab.partition([t.net.broker_host(victim)], t.net.zk_hosts)
    try:
        while_cut()
        _pause(extra)
    finally:
        t.net.lab.heal()
    healed_at = time.monotonic()
    t.wait(lambda: t.cluster.registered().get(victim, broker_epoch) > broker_epoch, f"{victim} re-registered")
    _converged(t, healed_at)


def _all_running_registered(t: TrialContext) -> dict[int, int] | None:
    registered = t.cluster.registered()
    return registered if set(t.running()) <= set(registered) else None


def broker_controller_partition(t: TrialContext) -> None:
    """Held under ``t.lifecycle``: the workload bounces no broker while the partition lasts, so a
    changed registration can only be the fault's doing."""
    with t.lifecycle:
        controller = t.controller()
        registered = t.wait(lambda: _all_running_registered(t), "every running broker registered")
        others = [b for b in t.running() if b != controller]
        if not others:
            raise TrialFailed("no broker besides the controller is running")
        victim = t.rng.choice(others)
        hold = t.rng.uniform(3.0, 8.0)
        side = f"side{t.seed}"
        t.note(f"broker {victim} cut from controller {controller} (not from ZooKeeper) for {hold:.1f}s")
        t.net.lab.partition([t.net.broker_host(victim)], [t.net.broker_host(controller)])
        try:
            started = time.monotonic()
            rest = [b for b in t.cluster.broker_ids if b != victim]
            t.cluster.create_topic(side, {0: rest, 1: rest[::-1]})
            t.wait(lambda: t.cluster.wait_topic_healthy(side, timeout=t.left()), f"topic {side} healthy")
            t.note(f"topic {side} on brokers {rest} led {time.monotonic() - started:.1f}s into the partition")
            _pause(max(0.0, hold - (time.monotonic() - started)))
            if t.cluster.registered().get(victim) != registered[victim]:
                raise TrialFailed(f"broker {victim} lost its registration while cut only from the controller")
        finally:
            t.net.lab.heal()
        _converged(t, time.monotonic())


def zk_minority_partition(t: TrialContext) -> None:
    ensemble = _ensemble(t)
    leader = ensemble.leader(timeout=t.left())
    victim = leader if t.rng.random() < 0.5 else t.rng.choice([m for m in ensemble if m is not leader])
    hold = t.rng.uniform(3.0, 8.0)
    side = f"side{t.seed}"
    role = "leader" if victim is leader else "follower"
    t.note(f"ZooKeeper {role} {victim.server_id} cut off from every host for {hold:.1f}s")
    t.net.lab.isolate(t.net.zk_hosts[victim.server_id - 1])
    try:
        started = time.monotonic()
        t.wait(lambda: _create_once(t, side), f"topic {side} created on the majority")
        t.wait(lambda: _led(t, side), f"topic {side} led")
        t.note(f"topic {side} led {time.monotonic() - started:.1f}s into the partition")
        _pause(max(0.0, hold - (time.monotonic() - started)))
    finally:
        t.net.lab.heal()
    healed_at = time.monotonic()
    _converged(t, healed_at)
    # The cut-off server's own return is ZooKeeper's business, not the cluster's convergence: a
    # server left alone backs off its election notifications (up to 60 s) and may take that long.
    t.wait(lambda: victim.mode() in ("leader", "follower"), f"ZooKeeper server {victim.server_id} back")
    t.note(f"ZooKeeper server {victim.server_id} back {time.monotonic() - healed_at:.1f}s after the heal")


def slow_link(t: TrialContext) -> None:
    controller = t.controller()
    others = [b for b in t.running() if b != controller]
    victim = controller if not others or t.rng.random() < 0.5 else t.rng.choice(others)
    rate_kbit = t.rng.choice((64, 128, 256))
    hold = t.rng.uniform(4.0, 10.0)
    role = "controller" if victim == controller else "broker"
    t.note(f"{role} {victim}'s link capped at {rate_kbit} kbit/s (4 KiB queue) for {hold:.1f}s")
    t.net.lab.throttle(t.net.broker_host(victim), rate_kbit, queue_bytes=4096)
    try:
        _pause(hold)
    finally:
        t.net.lab.heal()
    _converged(t, time.monotonic())


def _led(t: TrialContext, topic: str) -> bool:
    """Every partition of ``topic`` has a registered leader (a full ISR may wait for a broker that
    the workload is restarting)."""
    live = set(t.cluster.registered())
    states = t.cluster.store.get_partition_states(partitions(topic, 2)).values()
    return all(isinstance(s, LeaderIsrAndControllerEpoch) and s.leader_and_isr.leader in live for s in states)


def _create_once(t: TrialContext, topic: str) -> bool:
    """Create ``topic`` on brokers 1-3 unless it exists (a retried create may have gone through)."""
    found = t.cluster.store.get_replica_assignment_and_topic_ids([topic]).get(topic)
    if found is not None and not isinstance(found, Exception):
        return True
    ids = t.cluster.broker_ids
    t.cluster.create_topic(topic, {0: [ids[0], ids[1]], 1: [ids[1], ids[2]]})
    return True


FAULTS: dict[str, Callable[[TrialContext], None]] = {
    "kill_controller": kill_controller,
    "kill_broker": kill_broker,
    "pause_controller": pause_controller,
    "zk_restart": zk_restart,
    "audit_outage": audit_outage,
    "bounce_storm": bounce_storm,
    "crash_supervised": crash_supervised,
    "zk_leader_kill": zk_leader_kill,
    "zk_quorum_loss": zk_quorum_loss,
    "controller_zk_partition": controller_zk_partition,
    "broker_zk_partition": broker_zk_partition,
    "broker_controller_partition": broker_controller_partition,
    "zk_minority_partition": zk_minority_partition,
    "slow_link": slow_link,
}
#: Faults that only make sense under some workloads (a slow link matters under a controlled
#: shutdown and a reassignment); the others run under any.
FAULT_WORKLOADS: dict[str, tuple[str, ...]] = {"slow_link": ("reassignment", "rolling_shutdown")}
#: Faults of ZooKeeper's own quorum: their trials run on the suite's 3-server ensemble.
ENSEMBLE_FAULTS = frozenset({"zk_leader_kill", "zk_quorum_loss"})
#: Network faults: their trials run every host (ZooKeeper servers, brokers) in its own namespace.
NETWORK_FAULTS = frozenset(
    {
        "controller_zk_partition",
        "broker_zk_partition",
        "broker_controller_partition",
        "zk_minority_partition",
        "slow_link",
    }
)
FAULT_KINDS: tuple[str, ...] = tuple(FAULTS)
