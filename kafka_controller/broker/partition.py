"""One local replica: its leadership state and its simulated log (Kafka's ``Partition``).

The log holds no messages, only offsets. A leader's log-end offset grows at the produce rate and is
computed when read (``base + rate * elapsed``), so ten thousand idle leaders cost nothing between
reads. A follower's log-end offset is whatever its last fetch returned from the leader (in a fetch
session, computed from the leader's log at the time of the last answer: ``fetch_session``). The high
watermark is the smallest log-end offset over the ISR, as Kafka's; on the leader it never goes
down. All times are milliseconds from the caller's (injected) clock, so this module is pure and
every rule is unit-testable on a fake clock.

Follower bookkeeping on the leader follows Kafka 2.8's ``Replica.updateFetchState``: a follower is
caught up at the time of a fetch that reached the leader's log end, or at the time of its previous
fetch if this one reached where the log ended back then. A follower not caught up for
``replica.lag.time.max.ms`` is out of sync. A follower outside the ISR may join it once it has
reached the start of the current leader epoch and the high watermark — the one the leader told it
at its previous fetch: Kafka compares with the current one, which a continuously growing simulated
log (an ISR of the leader alone has its high watermark at the log end *now*) would never let a
follower reach.

Not thread-safe on its own: the replica manager's lock guards every partition.
"""

from __future__ import annotations

from kafka_controller.broker.fetch_session import FetcherClock, FetchSession
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition


class FollowerState:
    """What a leader knows about one follower (Kafka's remote ``Replica``).

    While *steady* in a ``FetchSession`` (the follower is in the ISR and takes all it is told), the
    fields are stale between reads and ``refresh`` brings them up to the session's last fetch."""

    __slots__ = (
        "last_caught_up_ms",
        "last_fetch_hw",
        "last_fetch_leader_leo",
        "last_fetch_ms",
        "log_end_offset",
        "session",
        "steady_fetches",
    )

    def __init__(self, caught_up_ms: int) -> None:
        self.log_end_offset = -1  # unknown until the first fetch
        self.last_caught_up_ms = caught_up_ms
        self.last_fetch_leader_leo = -1
        self.last_fetch_hw = -1  # the high watermark this follower was told at its last fetch
        self.last_fetch_ms = caught_up_ms
        self.session: FetchSession | None = None
        self.steady_fetches = 0  # the session's fetch count the fields are up to date with

    def refresh(self, p: Partition) -> None:
        """Record the fetches since the fields were last written, as ``on_follower_fetch`` would
        have one by one: at each, the follower asked for the log end of its previous fetch."""
        s = self.session
        if s is None or s.fetches == self.steady_fetches:
            return
        if p.is_leader:  # always, in a session: ``log_end_offset``'s leader arm, without 2 calls
            base, base_ms, rate = p._base_leo, p._base_ms, p.rate_per_ms
            offset = base + int((s.prev_ms - base_ms) * rate)
            leo = base + int((s.last_ms - base_ms) * rate)
        else:
            offset, leo = p.log_end_offset(s.prev_ms), p.log_end_offset(s.last_ms)
        caught_up = s.last_ms if offset >= leo else s.prev_ms
        if caught_up > self.last_caught_up_ms:
            self.last_caught_up_ms = caught_up
        self.log_end_offset = offset
        self.last_fetch_leader_leo = leo
        self.last_fetch_ms = s.last_ms
        self.steady_fetches = s.fetches

    def update_fetch_state(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> int:
        """Kafka's ``Replica.updateFetchState`` for a fetch from ``fetch_offset`` when the leader's
        log ended at ``leader_log_end_offset``; returns the follower's log end (never past the
        leader's). Shared by ``Partition.on_follower_fetch`` and the full fetch's inline path
        (``DataPlane._fetch_full``)."""
        leo = leader_log_end_offset
        if fetch_offset >= leo:
            self.last_caught_up_ms = now_ms
            fetch_offset = leo
        elif fetch_offset >= self.last_fetch_leader_leo >= 0 and self.last_fetch_ms > self.last_caught_up_ms:
            self.last_caught_up_ms = self.last_fetch_ms
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_leo = leo
        self.last_fetch_ms = now_ms
        return fetch_offset

    def attach(self, session: FetchSession) -> None:
        self.session = session
        self.steady_fetches = session.fetches

    def detach(self, p: Partition) -> None:
        """Stop deriving; the session answers the partition one by one from its next fetch."""
        s = self.session
        if s is not None:
            self.refresh(p)
            self.session = None
            s.explicit.add(p.tp)


class Partition:
    """A replica of ``tp`` on ``broker_id``: the LeaderAndIsr it last accepted, and its log."""

    __slots__ = (
        "_base_leo",
        "_base_ms",
        "_clock",
        "_hw",
        "_leader_base_leo",
        "_leader_base_ms",
        "_leader_rate_per_ms",
        "broker_id",
        "controller_epoch",
        "followers",
        "is_leader",
        "isr",
        "leader",
        "leader_epoch",
        "leader_epoch_start_offset",
        "pending_isr",
        "rate_per_ms",
        "replicas",
        "tp",
        "zk_version",
    )

    def __init__(self, tp: TopicPartition, broker_id: int, rate_per_s: float) -> None:
        self.tp = tp
        self.broker_id = broker_id
        self.rate_per_ms = rate_per_s / 1000.0
        self.leader = -1
        self.leader_epoch = -1  # Kafka's "no epoch yet": the first LeaderAndIsr (epoch 0) is newer
        self.isr: tuple[int, ...] = ()
        self.zk_version = 0
        self.replicas: tuple[int, ...] = ()
        self.controller_epoch = -1
        self.is_leader = False
        self.followers: dict[int, FollowerState] = {}
        #: An ISR change sent to the controller and not answered yet (Kafka's pending ISR state).
        self.pending_isr: tuple[int, ...] | None = None
        self.leader_epoch_start_offset = 0
        self._base_leo = 0
        self._base_ms = 0
        self._hw = 0
        # A follower attached to its fetcher's clock: the leader's log, to compute ours from.
        self._clock: FetcherClock | None = None
        self._leader_base_leo = 0
        self._leader_base_ms = 0
        self._leader_rate_per_ms = 0.0

    # -- the log ---------------------------------------------------------------------------------
    def log_end_offset(self, now_ms: int) -> int:
        if self.is_leader:
            return self._base_leo + int((now_ms - self._base_ms) * self.rate_per_ms)
        clock = self._clock
        if clock is not None:
            return self._leader_log_end(clock.leader_now_ms)
        return self._base_leo

    def _leader_log_end(self, leader_ms: int) -> int:
        return self._leader_base_leo + int((leader_ms - self._leader_base_ms) * self._leader_rate_per_ms)

    def high_watermark(self, now_ms: int) -> int:
        """The leader recomputes it (monotonic); a follower reports what its leader last said."""
        if self.is_leader:
            return self._leader_high_watermark(self.log_end_offset(now_ms))
        clock = self._clock
        if clock is not None:
            leo = self._leader_log_end(clock.leader_now_ms)
            if clock.hw_ms < 0:
                return min(self._hw, leo)
            return min(max(self._hw, self._leader_log_end(min(clock.hw_ms, clock.leader_now_ms))), leo)
        return self._hw

    def _leader_high_watermark(self, log_end_offset: int) -> int:
        """``high_watermark`` on the leader, its log end given: the smallest log end over the
        maximal ISR, never going down. Computed at every partition of a full fetch."""
        hw = log_end_offset
        me = self.broker_id
        followers = self.followers
        for r in self.isr if self.pending_isr is None else self.maximal_isr():
            if r != me:
                follower = followers.get(r)
                if follower is None:
                    continue
                if follower.session is not None:
                    follower.refresh(self)
                if follower.log_end_offset < hw:
                    hw = follower.log_end_offset
        if hw > self._hw:
            self._hw = hw
        return self._hw

    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR the high watermark must respect: the current one plus a pending expansion."""
        pending = self.pending_isr
        if pending is None:
            return self.isr
        return self.isr + tuple(r for r in pending if r not in self.isr)

    # -- leadership (from LeaderAndIsr) ------------------------------------------------------------
    def apply_state(
        self,
        state_leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        zk_version: int,
        replicas: tuple[int, ...],
        controller_epoch: int,
        now_ms: int,
    ) -> bool:
        """Take a newer LeaderAndIsr; True if this broker became leader or stayed leader.

        Called for every partition of a failover's LeaderAndIsr (100,000 and more): the checks
        that usually find nothing (a follower's fetch session, the fetcher's clock) are made
        here, not in a call each."""
        me = self.broker_id
        becomes_leader = state_leader == me
        if self.followers:
            # The sessions answer this partition one by one again. A leader that stays one keeps
            # its followers' states, brought up to date first (``FollowerState.detach``); a
            # leadership change drops them below, so there is nothing to bring up to date.
            tp = self.tp
            kept = becomes_leader == self.is_leader
            for follower in self.followers.values():
                s = follower.session
                if s is not None:
                    if kept:
                        follower.refresh(self)
                    follower.session = None
                    s.explicit.add(tp)
        if self._clock is not None:
            self.detach_from_leader()
        if becomes_leader and not self.is_leader:
            # Not leader and no fetcher clock (detached above): the log end is ``_base_leo``.
            self._base_ms = now_ms
            self.leader_epoch_start_offset = self._base_leo
            self.followers = {}
        elif not becomes_leader and self.is_leader:
            self._base_leo = self.log_end_offset(now_ms)  # stop producing; keep what we have
            self._hw = min(self._hw, self._base_leo)
            self.followers = {}
        self.is_leader = becomes_leader
        self.leader = state_leader
        self.leader_epoch = leader_epoch
        self.isr = isr
        self.zk_version = zk_version
        self.replicas = replicas
        self.controller_epoch = controller_epoch
        self.pending_isr = None
        if becomes_leader:
            known = self.followers
            followers = self.followers = {}
            for r in replicas:
                if r == me:
                    continue
                f = known.get(r)
                if f is None:
                    f = FollowerState(now_ms if r in isr else 0)
                elif r in isr and f.last_caught_up_ms < now_ms:
                    # Kafka resets the ISR members' caught-up time on every leader change
                    f.last_caught_up_ms = now_ms
                followers[r] = f
        return becomes_leader

    def apply_isr_update(self, new: LeaderAndIsr) -> bool:
        """The controller's answer to our AlterIsr; ignored when the leader epoch moved on."""
        self.pending_isr = None
        if not self.is_leader or new.leader_epoch != self.leader_epoch or new.leader != self.broker_id:
            return False
        self.isr = tuple(new.isr)
        self.zk_version = new.zk_version
        for r, follower in self.followers.items():
            if r not in self.isr:
                follower.detach(self)  # out of the ISR: checked one by one for joining again
        return True

    # -- leader side of a fetch ----------------------------------------------------------------------
    def on_follower_fetch(self, replica: int, fetch_offset: int, now_ms: int) -> tuple[int, int, bool]:
        """Record a follower's fetch; returns ``(high_watermark, log_end_offset, may_join_isr)``."""
        leo = self.log_end_offset(now_ms)
        f = self.followers.get(replica)
        if f is None:
            f = self.followers[replica] = FollowerState(0)
        elif f.session is not None:
            f.refresh(self)
        offset = f.update_fetch_state(fetch_offset, leo, now_ms)
        previous_hw = f.last_fetch_hw
        hw = self._leader_high_watermark(leo) if self.is_leader else self.high_watermark(now_ms)
        f.last_fetch_hw = hw
        may_join = (
            self.pending_isr is None
            and replica not in self.isr
            and replica in self.replicas
            and 0 <= previous_hw <= offset
            and offset >= self.leader_epoch_start_offset
        )
        return hw, leo, may_join

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> tuple[int, ...]:
        """ISR followers not caught up within ``max_lag_ms`` (none while an ISR change is pending)."""
        if not self.is_leader or self.pending_isr is not None or len(self.isr) <= 1:
            return ()
        out = []
        for r in self.isr:
            if r == self.broker_id:
                continue
            f = self.followers.get(r)
            if f is not None:
                f.refresh(self)
            if f is None or now_ms - f.last_caught_up_ms > max_lag_ms:
                out.append(r)
        return tuple(out)

    def propose_isr(self, isr: tuple[int, ...]) -> LeaderAndIsr:
        """Mark an ISR change as pending and return the AlterIsr proposal for it."""
        self.pending_isr = isr
        return LeaderAndIsr(self.broker_id, self.leader_epoch, isr, self.zk_version)

    # -- follower side of a fetch --------------------------------------------------------------------
    def on_fetch_response(self, leader_log_end_offset: int, leader_high_watermark: int) -> None:
        """Fetch everything the leader has (truncating first if we are ahead of it)."""
        if self.is_leader:
            return
        self._base_leo = leader_log_end_offset
        self._hw = min(leader_high_watermark, leader_log_end_offset)

    def follow_leader_log(
        self, clock: FetcherClock, base_offset: int, base_ms: int, rate_per_ms: float
    ) -> None:
        """From now on take the leader's log end at each of the fetcher's answers (``clock``)."""
        if self.is_leader:
            return
        self._leader_base_leo, self._leader_base_ms = base_offset, base_ms
        self._leader_rate_per_ms = rate_per_ms
        self._clock = clock

    def follow_from_full_fetch(
        self,
        clock: FetcherClock,
        leader_log_end_offset: int,
        leader_high_watermark: int,
        base_offset: int,
        base_ms: int,
        rate_per_ms: float,
    ) -> None:
        """A full fetch's answer in one call, for each of its partitions: ``detach_from_leader``,
        ``on_fetch_response`` and ``follow_leader_log`` (what the detach would keep, the answer
        replaces)."""
        if self.is_leader:
            self.detach_from_leader()
            return
        leo, hw = leader_log_end_offset, leader_high_watermark
        self._base_leo = leo
        self._hw = hw if hw < leo else leo
        self._leader_base_leo, self._leader_base_ms = base_offset, base_ms
        self._leader_rate_per_ms = rate_per_ms
        self._clock = clock

    def follows(self, clock: FetcherClock) -> bool:
        return self._clock is clock

    def detach_from_leader(self) -> None:
        """Keep the log end and high watermark of the fetcher's last answer, and stop following."""
        clock = self._clock
        if clock is None:
            return
        if self.is_leader:  # never attached to a clock, but keep the general rule
            self._base_leo = self.log_end_offset(0)
            self._hw = self.high_watermark(0)
        else:
            # ``log_end_offset`` and ``high_watermark``'s follower arms, inlined: a failover's
            # LeaderAndIsr detaches tens of thousands of followers (5 calls each saved).
            now, hw_ms = clock.leader_now_ms, clock.hw_ms
            base, base_ms, rate = self._leader_base_leo, self._leader_base_ms, self._leader_rate_per_ms
            leo = base + int((now - base_ms) * rate)
            hw = self._hw
            if hw_ms >= 0:
                at_hw = base + int(((hw_ms if hw_ms < now else now) - base_ms) * rate)
                if at_hw > hw:
                    hw = at_hw
            self._base_leo = leo
            self._hw = hw if hw < leo else leo
        self._clock = None

    def leader_log(self) -> tuple[int, int]:
        """The leader's log as a function of time: ``(base offset, base time)`` (rate: the broker's)."""
        return self._base_leo, self._base_ms

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader}"
        return f"Partition({self.tp}, {role}, epoch {self.leader_epoch}, isr {list(self.isr)})"
