"""The simulated data plane: followers fetch from leaders, leaders keep the ISR honest.

* **Fetchers** (Kafka's ``ReplicaFetcherManager``): one thread per leader broker. Every
  ``sim.fetch.interval.ms`` it sends **one** Fetch for all the partitions it follows from that
  leader, in a fetch session (``fetch_session``): a full one (columns, not one object per
  partition) when the set changed, otherwise an incremental one that names no partition at all.
* **Fetch handling** on the leader: the session's clock advances, which is every in-sync
  follower's progress at once; only the partitions in the session's ``explicit`` set (follower out
  of the ISR, or the partition changed) go one by one: leader-epoch fencing, then
  ``Partition.on_follower_fetch``; a follower that caught up with the high watermark is proposed
  for the ISR through AlterIsr. So the steady state costs per fetch, not per partition. A full
  fetch's in-sync partitions (a failover's tens of thousands) are answered inline (``_fetch_full``).
* **ISR shrink** (Kafka's ``isr-expiration`` task): every half ``replica.lag.time.max.ms``, ISR
  followers that have not caught up for that long are proposed for removal through AlterIsr.

This class is the replica manager's ``ReplicaListener``: leadership changes move partitions
between fetchers in whole batches. Fetch threads hold the replica manager's lock only to build a
request and to apply its answer, never while waiting on the network.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Iterable
from operator import attrgetter
from typing import Any, cast

from kafka_controller.broker import apis as A
from kafka_controller.broker.alter_isr import AlterIsrManager
from kafka_controller.broker.fetch_session import (
    FETCH_SESSION_ID_NOT_FOUND,
    INVALID_FETCH_SESSION_EPOCH,
    NO_TIME,
    FetchSession,
)
from kafka_controller.broker.partition import Partition
from kafka_controller.broker.replica_fetcher import ClientFactory, ReplicaFetcher, transport_client
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import Broker, TopicPartition
from kafka_controller.transport.columns import gc_paused

log = logging.getLogger(__name__)

_NONE = str(Errors.NONE)
_NOT_LEADER = A.NOT_LEADER_OR_FOLLOWER
_FENCED = str(Errors.FENCED_LEADER_EPOCH)
_tp = attrgetter("tp")


class DataPlane:
    """Fetchers, fetch handling and ISR expiry for one broker; see the module docstring."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        alter_isr: AlterIsrManager,
        *,
        fetch_interval_ms: int = 200,
        fetch_backoff_ms: int = 1000,
        replica_lag_time_max_ms: int = 30000,
        listener_name: str = "PLAINTEXT",
        timeout_s: float = 10.0,
        client_factory: ClientFactory = transport_client,
        start_threads: bool = True,
    ) -> None:
        self.replica_manager = replica_manager
        self.broker_id = replica_manager.broker_id
        self.alter_isr = alter_isr
        self.fetch_interval_s = fetch_interval_ms / 1000.0
        #: After a failed round trip (Kafka's replica.fetch.backoff.ms), never shorter than the interval.
        self.fetch_backoff_s = max(fetch_backoff_ms, fetch_interval_ms) / 1000.0
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.listener_name = listener_name
        self.timeout_s = timeout_s
        self.client_factory = client_factory
        self.start_threads = start_threads
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._fetched_from: dict[TopicPartition, int] = {}  # partition -> the leader it is fetched from
        self.sessions: dict[int, FetchSession] = {}  # follower broker id -> its fetch session here
        self._session_ids = itertools.count(1)
        self._stopped = threading.Event()  # fetching stopped
        self._expiry_stopped = threading.Event()
        self._expiry_thread: threading.Thread | None = None
        replica_manager.listener = self

    # -- lifecycle -----------------------------------------------------------------------------------
    def start(self) -> None:
        if self.start_threads:
            self._expiry_thread = threading.Thread(
                target=self._expiry_loop, name=f"isr-expiration-{self.broker_id}", daemon=True
            )
            self._expiry_thread.start()

    def stop(self) -> None:
        self._expiry_stopped.set()
        self.stop_fetching()

    def stop_fetching(self) -> None:
        """Stop following (and never start again), but keep serving fetches and expiring ISRs.

        A broker in controlled shutdown calls this before it asks the controller: a follower that
        keeps fetching would be added back to the ISR of the partitions it just gave up (Kafka
        2.8's race, closed on the controller's side by KIP-841 in 3.3)."""
        self._stopped.set()
        with self.replica_manager.lock:
            fetchers, self.fetchers = list(self.fetchers.values()), {}
            self._fetched_from.clear()
        for f in fetchers:
            f.close()
        for f in fetchers:
            if f.thread.is_alive():
                f.thread.join(self.timeout_s)

    # -- ReplicaListener (called under the replica manager's lock) -------------------------------------
    def on_become_leaders(self, partitions: list[Partition]) -> None:
        self._remove(map(_tp, partitions))

    def on_become_followers(self, by_leader: dict[int, list[Partition]], leaders: dict[int, Broker]) -> None:
        for leader_id, parts in by_leader.items():
            broker = leaders.get(leader_id)
            fetcher = self.fetchers.get(leader_id)
            if fetcher is not None and broker is not None and broker != fetcher.leader:
                fetcher.close()  # the leader moved to a new address: start over
                for tp in fetcher.partitions:
                    self._fetched_from.pop(tp, None)
                del self.fetchers[leader_id]
                fetcher = None
            if fetcher is None and broker is not None:
                fetcher = self.fetchers[leader_id] = ReplicaFetcher(
                    self.replica_manager,
                    broker,
                    listener_name=self.listener_name,
                    client_factory=self.client_factory,
                    timeout_s=self.timeout_s,
                    fetch_interval_s=self.fetch_interval_s,
                    fetch_backoff_s=self.fetch_backoff_s,
                )
                if self.start_threads and not self._stopped.is_set():
                    fetcher.thread.start()
            if fetcher is None:  # no leader (-1), or the controller sent no address for it
                if leader_id >= 0:
                    log.warning(
                        "No address for leader %d of %d partitions; not fetching", leader_id, len(parts)
                    )
                self._remove(p.tp for p in parts)
                continue
            index = self._fetched_from
            followed = fetcher.partitions
            moved_from: set[int] = set()
            for p in parts:
                tp = p.tp
                previous = index.get(tp)
                if previous is not None and previous != leader_id:
                    self.fetchers[previous].partitions.pop(tp, None)
                    moved_from.add(previous)
                followed[tp] = p
                index[tp] = leader_id
            for previous in moved_from:
                self.fetchers[previous].mark_changed()
            fetcher.mark_changed()

    def on_stop_replicas(self, partitions: list[TopicPartition]) -> None:
        self._remove(partitions)
        for session in self.sessions.values():  # followers still fetching them hear of it one by one
            session.explicit.update(tp for tp in partitions if tp in session.partitions)

    def _remove(self, tps: Iterable[TopicPartition]) -> None:
        index = self._fetched_from
        if not index:
            return
        fetchers = self.fetchers
        changed: set[int] = set()
        for tp in tps:
            leader_id = index.pop(tp, None)
            if leader_id is not None:
                fetchers[leader_id].partitions.pop(tp, None)
                changed.add(leader_id)
        for leader_id in changed:
            fetchers[leader_id].mark_changed()

    # -- leader side -----------------------------------------------------------------------------------
    def handle_fetch(self, request: A.FetchRequest) -> A.FetchResponse:
        rm = self.replica_manager
        replica = request.replica_id
        proposals: list[tuple[TopicPartition, Any]] = []
        with rm.lock, gc_paused(len(request.topics)):
            now = rm.now_ms()
            if request.session_id == 0:
                session = self._new_session(replica, now)
                session.record_fetch(now)
                # Plain (topic, partition) tuples: equal to, and hashed as, the TopicPartition keys.
                keys = cast(
                    "list[TopicPartition]", list(zip(request.topics, request.partitions, strict=True))
                )
                session.partitions = dict(zip(keys, request.leader_epochs, strict=True))
                columns = self._fetch_full(
                    session, keys, request.leader_epochs, request.fetch_offsets, now, proposals
                )
                answered: tuple[str, ...] = ()
                numbers: tuple[int, ...] = ()
            else:
                session = self.sessions.get(replica)  # type: ignore[assignment]
                if session is None or session.session_id != request.session_id:
                    return A.FetchResponse(FETCH_SESSION_ID_NOT_FOUND)
                if request.session_epoch != session.epoch:
                    return A.FetchResponse(INVALID_FETCH_SESSION_EPOCH)
                # Partitions added to the session, or fetched at a new leader epoch: answered as a
                # full fetch answers them (first, in request order), then the session's explicit
                # ones. Those it names or forgets stop being steady before this fetch counts.
                added = cast(
                    "list[TopicPartition]", list(zip(request.topics, request.partitions, strict=True))
                )
                forgotten = zip(request.forgotten_topics, request.forgotten_partitions, strict=True)
                self._leave(session, cast("Iterable[TopicPartition]", forgotten), forget=True)
                self._leave(session, added, forget=False)
                session.record_fetch(now)
                epochs = session.partitions
                epochs.update(zip(added, request.leader_epochs, strict=True))
                explicit, session.explicit = session.explicit, set()  # what this fetch answers
                named_columns = self._fetch_full(
                    session, added, request.leader_epochs, request.fetch_offsets, now, proposals
                )
                named = set(added)
                tps = [tp for tp in explicit if tp in epochs and tp not in named]
                rows = [self._fetch_one(session, tp, epochs[tp], None, now, proposals) for tp in tps]
                told = tuple(map(tuple, zip(*rows, strict=True))) if rows else ((),) * 5
                columns = tuple(a + b for a, b in zip(named_columns, told, strict=True))
                answered = (*request.topics, *(tp[0] for tp in tps))
                numbers = (*request.partitions, *(tp[1] for tp in tps))
            hw_ms = self._high_watermark_ms(now)
        for tp, proposal in proposals:
            log.info("Expanding the ISR of %s to %s", tp, list(proposal.isr))
            self.alter_isr.submit(tp, proposal)
        errors, hws, leos, bases, base_ms = columns
        return A.FetchResponse(
            _NONE,
            errors,
            hws,
            leos,
            bases,
            base_ms,
            topics=answered,
            partitions=numbers,
            session_id=session.session_id,
            now_ms=now,
            hw_ms=hw_ms,
            rate_per_ms=rm.produce_rate_per_s / 1000.0,
        )

    def _fetch_full(
        self,
        session: FetchSession,
        keys: list[TopicPartition],
        epochs: tuple[int, ...],
        offsets: tuple[int, ...],
        now: int,
        proposals: list[tuple[TopicPartition, Any]],
    ) -> tuple[tuple[Any, ...], ...]:
        """The partitions a fetch names (every one of a full fetch, those an incremental one adds
        or names at a new epoch), answered as columns ``(errors, hws, leos, bases, base times)``.

        A failover's fetches name thousands to tens of thousands of partitions, nearly all led here
        with the follower in the ISR: for those, ``Partition.on_follower_fetch`` (for an in-sync
        follower, which may not join: ``FollowerState.update_fetch_state``, the one both share, and
        the high watermark) and the session attach are done inline, without the three
        calls and the row tuple per partition of ``_fetch_one``; any other partition (not led,
        fenced, follower out of the ISR or unknown, ISR change pending) goes through ``_fetch_one``.
        Same state, same answer: only the Python per partition is less."""
        get = self.replica_manager.partitions.get
        replica = session.replica_id
        fetches = session.fetches
        errors: list[str] = []
        hws: list[int] = []
        leos: list[int] = []
        bases: list[int] = []
        base_times: list[int] = []
        for key, epoch, offset in zip(keys, epochs, offsets, strict=True):
            p = get(key)
            f = None if p is None else p.followers.get(replica)
            if (
                f is None
                or f.session is not None
                or not p.is_leader  # type: ignore[union-attr]
                or epoch != p.leader_epoch  # type: ignore[union-attr]
                or p.pending_isr is not None  # type: ignore[union-attr]
                or replica not in p.isr  # type: ignore[union-attr]
            ):
                row = self._fetch_one(session, key, epoch, offset, now, proposals)
                errors.append(row[0])
                hws.append(row[1])
                leos.append(row[2])
                bases.append(row[3])
                base_times.append(row[4])
                continue
            assert p is not None
            leo = p.log_end_offset(now)  # on_follower_fetch, for a follower already in the ISR
            f.update_fetch_state(offset, leo, now)
            hw = f.last_fetch_hw = p._leader_high_watermark(leo)
            f.session = session  # FollowerState.attach: steady from now on
            f.steady_fetches = fetches
            base, base_ms = p.leader_log()
            errors.append(_NONE)
            hws.append(hw)
            leos.append(leo)
            bases.append(base)
            base_times.append(base_ms)
        return tuple(errors), tuple(hws), tuple(leos), tuple(bases), tuple(base_times)

    def _fetch_one(
        self,
        session: FetchSession,
        tp: TopicPartition,
        epoch: int,
        offset: int | None,
        now: int,
        proposals: list[tuple[TopicPartition, Any]],
    ) -> tuple[str, int, int, int, int]:
        """One partition of a fetch: ``(error, hw, leo, log base offset, log base time)``. Without
        ``offset`` (incremental fetch) the follower is where the previous answer left it."""
        p = self.replica_manager.partitions.get(tp)
        replica = session.replica_id
        if p is None or not p.is_leader:
            return _NOT_LEADER, -1, -1, -1, -1
        if epoch != p.leader_epoch:
            return (_FENCED if epoch < p.leader_epoch else A.UNKNOWN_LEADER_EPOCH), -1, -1, -1, -1
        f = p.followers.get(replica)
        if offset is None:
            if f is not None:
                f.refresh(p)
            offset = max(0, f.last_fetch_leader_leo) if f is not None else 0
        hw, leo, may_join = p.on_follower_fetch(replica, offset, now)
        if may_join:
            proposals.append((p.tp, p.propose_isr((*p.isr, replica))))
        f = p.followers[replica]
        if replica in p.isr and p.pending_isr is None:
            f.attach(session)  # in sync: from now on derived from the session's clock
        else:
            f.session = None
            session.explicit.add(p.tp)
        base, base_ms = p.leader_log()
        return _NONE, hw, leo, base, base_ms

    def _leave(self, session: FetchSession, tps: Iterable[TopicPartition], *, forget: bool) -> None:
        """The follower states of ``tps`` stop being derived from ``session``'s clock (named again
        in an incremental fetch, or the session replaced, they are answered as in a full one);
        with ``forget`` the partitions leave the session altogether (the follower no longer
        fetches them here: ``tps`` must then not be a view of the session's own partitions)."""
        get = self.replica_manager.partitions.get
        replica = session.replica_id
        for tp in tps:
            p = get(tp)
            f = None if p is None or not p.is_leader else p.followers.get(replica)
            if f is not None and f.session is session:
                f.detach(p)  # type: ignore[arg-type]
            if forget:
                session.partitions.pop(tp, None)
                session.explicit.discard(tp)

    def _new_session(self, replica: int, now: int) -> FetchSession:
        """A full fetch: the follower's previous session ends (its steady partitions are detached)."""
        old = self.sessions.get(replica)
        if old is not None:
            self._leave(old, old.partitions, forget=False)
        session = self.sessions[replica] = FetchSession(replica, next(self._session_ids), now)
        return session

    def _high_watermark_ms(self, now: int) -> int:
        """The oldest previous fetch among the sessions heard from within the lag time: a follower's
        high watermark in the steady state is the leader's log end then (see ``fetch_session``)."""
        live = [
            s.prev_ms if s.fetches > 1 else NO_TIME  # after a full fetch only: not known yet
            for s in self.sessions.values()
            if now - s.last_ms <= self.replica_lag_time_max_ms
        ]
        return min(live, default=now)

    def maybe_shrink_isr(self) -> int:
        """Propose removing out-of-sync followers from every ISR this broker leads."""
        rm = self.replica_manager
        proposals = []
        with rm.lock:
            now = rm.now_ms()
            for p in rm.partitions.values():
                if not p.is_leader:
                    continue
                out = p.out_of_sync_replicas(now, self.replica_lag_time_max_ms)
                if out:
                    proposals.append((p.tp, p.propose_isr(tuple(r for r in p.isr if r not in out)), out))
        for tp, proposal, out in proposals:
            log.info("Shrinking the ISR of %s to %s: %s out of sync", tp, list(proposal.isr), list(out))
            self.alter_isr.submit(tp, proposal)
        return len(proposals)

    def _expiry_loop(self) -> None:
        interval = max(0.05, self.replica_lag_time_max_ms / 2000.0)
        while not self._expiry_stopped.wait(interval):
            try:
                self.maybe_shrink_isr()
            except Exception:
                log.exception("ISR expiry check failed")
