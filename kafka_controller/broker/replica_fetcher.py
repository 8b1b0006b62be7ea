"""One follower's fetching from one leader (Kafka's ``ReplicaFetcherThread``), in a fetch session.

Every ``sim.fetch.interval.ms`` the thread sends one Fetch: a full one (every partition it follows
from that leader, as columns) to start a session or after a failed round trip, otherwise an
incremental one that names only the partitions added to the session or followed at a new leader
epoch since the last fetch, and those it no longer follows there (Kafka's ``FetchSessionHandler``:
after a failover only the moved partitions travel, not every partition of every changed
fetcher); in the steady state it names none. The answer moves the fetcher's ``FetcherClock``, and
with it the log end of every partition attached to it (``fetch_session`` explains the model). The
replica manager's lock is held only to build a request and to apply its answer, never while
waiting on the network.

After a failed round trip (the leader died, say) the thread waits ``fetch_backoff_s`` (Kafka's
``replica.fetch.backoff.ms``) instead of the fetch interval, cut short when a LeaderAndIsr moves
partitions to or from it (Kafka's ``partitionMapCond``), and resends the full request it already
built while nothing changed: a dead leader costs a connection attempt per second, not a request
of every partition five times a second until the controller moves them away.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from operator import attrgetter, itemgetter
from typing import Any

from kafka_controller.broker import apis as A
from kafka_controller.broker.fetch_session import FetcherClock
from kafka_controller.broker.partition import Partition
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import Broker, TopicPartition
from kafka_controller.transport.client import TransportClient

log = logging.getLogger(__name__)

#: ``client_factory(host, port, timeout_s)`` -> something with ``request(api, body)`` and ``close()``.
ClientFactory = Callable[[str, int, float], Any]
_NONE = str(Errors.NONE)
_tp = attrgetter("tp")
_leader_epoch = attrgetter("leader_epoch")
_topic = itemgetter(0)  # of a TopicPartition
_partition = itemgetter(1)


def transport_client(host: str, port: int, timeout_s: float) -> Any:
    return TransportClient(host, port, timeout_s=timeout_s)


class ReplicaFetcher:
    """One thread fetching every partition this broker follows from one leader.

    It is given the replica manager whose partitions it moves and the data plane's settings it
    uses (the ``DataPlane`` that owns it builds one per leader), never the data plane itself: the
    plane imports this module, and this module does not import it back."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        leader: Broker,
        *,
        listener_name: str,
        client_factory: ClientFactory,
        timeout_s: float,
        fetch_interval_s: float,
        fetch_backoff_s: float,
    ) -> None:
        self.replica_manager = replica_manager
        self.leader = leader
        self.fetch_interval_s = fetch_interval_s
        self.fetch_backoff_s = fetch_backoff_s
        self.partitions: dict[TopicPartition, Partition] = {}
        self.stopped = threading.Event()
        #: Set when the partition set changes (or at close): cuts a backoff short.
        self.changed = threading.Event()
        self.thread = threading.Thread(
            target=self._run,
            name=f"ReplicaFetcherThread-{replica_manager.broker_id}-from-{leader.id}",
            daemon=True,
        )
        endpoint = leader.endpoint(listener_name)
        self.client = None if endpoint is None else client_factory(endpoint.host, endpoint.port, timeout_s)
        self.fetches = 0
        self.needs_full = True  # no session (or a test forces one): the next fetch lists every partition
        #: The partition set or an epoch changed: the next fetch names what changed.
        self.set_changed = False
        #: What the leader's session holds of ours, each at the leader epoch it was last sent with
        #: and answered without error (an answered error leaves it out: named again next time).
        self.in_session: dict[TopicPartition, int] = {}
        #: The last full request and its partitions, while nothing changed and no answer came.
        self._unanswered: tuple[list[Partition], A.FetchRequest] | None = None
        self.session_id = 0
        self.session_epoch = 0
        self.clock = FetcherClock()

    def _run(self) -> None:
        while not self.stopped.is_set():
            self.changed.clear()
            try:
                self.fetch_once()
            except KafkaControllerError as e:
                log.debug("fetch from broker %d failed: %s", self.leader.id, e)
            except Exception:
                log.exception("fetch from broker %d failed", self.leader.id)
            else:
                self.stopped.wait(self.fetch_interval_s)
                continue
            self.changed.wait(self.fetch_backoff_s)

    def mark_changed(self) -> None:
        """The partition set changed (under the replica manager's lock): name the change next time."""
        self.set_changed = True
        self.changed.set()

    def fetch_once(self) -> int:
        """One Fetch round trip; returns how many partitions advanced."""
        if self.client is None:
            return 0
        rm = self.replica_manager
        with rm.lock:
            full = self.needs_full or self.session_id == 0
            parts: list[Partition] = []
            if full and self._unanswered is not None and not self.needs_full and not self.set_changed:
                # Unchanged since it went unanswered: a follower's log moves only with answers.
                parts, request = self._unanswered
            elif full:
                parts = self._followed()
                self.set_changed = False
                if not parts:
                    return 0
                self.needs_full = False
                request = self._request(parts, rm.now_ms(), 0, 0, [])
            elif self.set_changed:
                self.set_changed = False
                followed = self._followed()
                in_session = self.in_session
                parts = [p for p in followed if in_session.get(p.tp) != p.leader_epoch]
                kept = {p.tp for p in followed}
                forgotten = [tp for tp in in_session if tp not in kept]
                for tp in forgotten:
                    del in_session[tp]
                    p = rm.get(tp)
                    if p is not None and p.follows(self.clock):
                        p.detach_from_leader()  # it moved to another leader, or leads now
                request = self._request(parts, rm.now_ms(), self.session_id, self.session_epoch, forgotten)
            else:
                request = A.FetchRequest(rm.broker_id, (), (), (), (), self.session_id, self.session_epoch)
        try:
            response: A.FetchResponse = self.client.request(A.FETCH, request)
        except Exception:
            self.session_id = 0  # the leader may have counted a fetch we never saw: start over
            self._unanswered = (parts, request) if full else None
            raise
        self._unanswered = None
        self.fetches += 1
        if response.error != _NONE:
            self.session_id = 0
            return 0
        with rm.lock:
            if full:
                return self._take_full(parts, request.leader_epochs, response)
            return self._take_incremental(parts, request.leader_epochs, response)

    def _followed(self) -> list[Partition]:
        """The partitions this fetcher follows now (under the replica manager's lock)."""
        leader = self.leader.id
        return [p for p in self.partitions.values() if not p.is_leader and p.leader == leader]

    def _request(
        self,
        parts: list[Partition],
        now: int,
        session_id: int,
        session_epoch: int,
        forgotten: list[TopicPartition],
    ) -> A.FetchRequest:
        tps = list(map(_tp, parts))  # columns by C-level maps: a failover's first fetches
        return A.FetchRequest(  # list tens of thousands of partitions
            self.replica_manager.broker_id,
            tuple(map(_topic, tps)),
            tuple(map(_partition, tps)),
            tuple([p.log_end_offset(now) for p in parts]),
            tuple(map(_leader_epoch, parts)),
            session_id,
            session_epoch,
            tuple(map(_topic, forgotten)),
            tuple(map(_partition, forgotten)),
        )

    def _take_full(self, parts: list[Partition], epochs: tuple[int, ...], response: A.FetchResponse) -> int:
        clock = self.clock = FetcherClock()  # partitions still on the old clock stay where they were
        clock.leader_now_ms, clock.hw_ms = response.now_ms, response.hw_ms
        self.session_id, self.session_epoch = response.session_id, 1
        rate = response.rate_per_ms
        in_session = self.in_session = {}
        advanced = 0
        for p, epoch, error, hw, leo, base, base_ms in zip(
            parts,
            epochs,
            response.errors,
            response.high_watermarks,
            response.log_end_offsets,
            response.log_base_offsets,
            response.log_base_ms,
            strict=True,
        ):
            if error == _NONE:
                in_session[p.tp] = epoch
                if p.leader_epoch == epoch and not p.is_leader:  # unchanged meanwhile
                    p.follow_from_full_fetch(clock, leo, hw, base, base_ms, rate)
                    advanced += 1
        # A partition refused (the leader has not taken its LeaderAndIsr yet, say), or changed
        # meanwhile, is named again by the next fetch.
        self.set_changed = self.set_changed or advanced < len(parts)
        return advanced

    def _take_incremental(
        self, named: list[Partition], epochs: tuple[int, ...], response: A.FetchResponse
    ) -> int:
        """An incremental answer: first the ``named`` partitions (added or at a new epoch), in
        request order, answered as a full fetch answers them; then those the leader tells one by
        one."""
        clock = self.clock
        in_session = self.in_session
        rate = response.rate_per_ms
        failed = 0
        rows = zip(
            response.topics,
            response.partitions,
            response.errors,
            response.high_watermarks,
            response.log_end_offsets,
            response.log_base_offsets,
            response.log_base_ms,
            strict=True,
        )
        # ``named`` first: zip stops there without taking a row of the rest
        answered = 0
        for p, epoch, row in zip(named, epochs, rows, strict=False):
            answered += 1
            tp: TopicPartition = p.tp
            _, _, error, hw, leo, base, base_ms = row
            if error != _NONE or tp != row[:2]:
                in_session.pop(tp, None)
                self.set_changed = True  # named again next time
                failed += 1
                continue
            in_session[tp] = epoch
            if p.leader_epoch == epoch and not p.is_leader and self.partitions.get(tp) is p:
                p.follow_from_full_fetch(clock, leo, hw, base, base_ms, rate)
            else:
                self.set_changed = True  # changed meanwhile: named again next time
        if answered < len(named):
            # A leader that answers none of them (one of a version that only reads the session's
            # own partitions from an incremental fetch): a full fetch names them, as it always did.
            self.needs_full = True
        for topic, partition, error, hw, leo, _, _ in rows:  # the rest: told one by one
            # a plain tuple finds the TopicPartition key (equal, hashed alike) without building one
            p = self.partitions.get((topic, partition))  # type: ignore[call-overload]
            if p is None or not p.follows(clock):
                continue
            if error == _NONE:
                p.on_fetch_response(leo, hw)
            else:
                p.detach_from_leader()  # keeps what the last answer gave
                failed += 1
                in_session.pop(p.tp, None)
                self.set_changed = True  # the next fetch names it again
        clock.leader_now_ms = response.now_ms
        # A leader's high watermark never goes down, so every lower bound stays one: keep the best.
        clock.hw_ms = max(clock.hw_ms, response.hw_ms)
        self.session_epoch += 1
        return len(self.partitions) - failed

    def close(self) -> None:
        self.stopped.set()
        self.changed.set()
        if self.client is not None:
            self.client.close()
