"""The simulated data plane: followers fetch from leaders, leaders keep the ISR honest.

* **Fetchers** (Kafka's ``ReplicaFetcherManager``): one thread per leader broker. Every
  ``sim.fetch.interval.ms`` it sends **one** Fetch for all the partitions it follows from that
  leader (columns, not one object per partition) and takes the leader's log end and high watermark.
* **Fetch handling** on the leader: per partition, leader-epoch fencing, then the follower's
  progress is recorded (``Partition.on_follower_fetch``); a follower that caught up with the high
  watermark is proposed for the ISR through AlterIsr.
* **ISR shrink** (Kafka's ``isr-expiration`` task): every half ``replica.lag.time.max.ms``, ISR
  followers that have not caught up for that long are proposed for removal through AlterIsr.

This class is the replica manager's ``ReplicaListener``: leadership changes move partitions
between fetchers in whole batches. Fetch threads hold the replica manager's lock only to build a
request and to apply its answer, never while waiting on the network.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from kafka_controller.broker import apis as A
from kafka_controller.broker.alter_isr import AlterIsrManager
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
_NOT_LEADER = A.NOT_LEADER_OR_FOLLOWER
_FENCED = str(Errors.FENCED_LEADER_EPOCH)


def _transport_client(host: str, port: int, timeout_s: float) -> Any:
    return TransportClient(host, port, timeout_s=timeout_s)


class _Fetcher:
    """One thread fetching every partition this broker follows from one leader."""

    def __init__(self, plane: DataPlane, leader: Broker) -> None:
        self.plane = plane
        self.leader = leader
        self.partitions: dict[TopicPartition, Partition] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name=f"ReplicaFetcherThread-{plane.broker_id}-from-{leader.id}", daemon=True
        )
        endpoint = leader.endpoint(plane.listener_name)
        self.client = (
            None if endpoint is None else plane.client_factory(endpoint.host, endpoint.port, plane.timeout_s)
        )
        self.fetches = 0

    def _run(self) -> None:
        plane = self.plane
        while not self.stopped.is_set():
            try:
                self.fetch_once()
            except KafkaControllerError as e:
                log.debug("fetch from broker %d failed: %s", self.leader.id, e)
            except Exception:
                log.exception("fetch from broker %d failed", self.leader.id)
            self.stopped.wait(plane.fetch_interval_s)

    def fetch_once(self) -> int:
        """One Fetch round trip; returns how many partitions advanced."""
        if self.client is None:
            return 0
        rm = self.plane.replica_manager
        with rm.lock:
            now = rm.now_ms()
            parts = [p for p in self.partitions.values() if not p.is_leader and p.leader == self.leader.id]
            if not parts:
                return 0
            epochs = tuple(p.leader_epoch for p in parts)
            request = A.FetchRequest(
                rm.broker_id,
                tuple(p.tp.topic for p in parts),
                tuple(p.tp.partition for p in parts),
                tuple(p.log_end_offset(now) for p in parts),
                epochs,
            )
        response: A.FetchResponse = self.client.request(A.FETCH, request)
        self.fetches += 1
        if response.error != _NONE:
            return 0
        advanced = 0
        with rm.lock:
            for p, epoch, error, hw, leo in zip(
                parts,
                epochs,
                response.errors,
                response.high_watermarks,
                response.log_end_offsets,
                strict=True,
            ):
                if error == _NONE and p.leader_epoch == epoch and not p.is_leader:  # unchanged meanwhile
                    p.on_fetch_response(leo, hw)
                    advanced += 1
        return advanced

    def close(self) -> None:
        self.stopped.set()
        if self.client is not None:
            self.client.close()


class DataPlane:
    """Fetchers, fetch handling and ISR expiry for one broker; see the module docstring."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        alter_isr: AlterIsrManager,
        *,
        fetch_interval_ms: int = 200,
        replica_lag_time_max_ms: int = 30000,
        listener_name: str = "PLAINTEXT",
        timeout_s: float = 10.0,
        client_factory: ClientFactory = _transport_client,
        start_threads: bool = True,
    ) -> None:
        self.replica_manager = replica_manager
        self.broker_id = replica_manager.broker_id
        self.alter_isr = alter_isr
        self.fetch_interval_s = fetch_interval_ms / 1000.0
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.listener_name = listener_name
        self.timeout_s = timeout_s
        self.client_factory = client_factory
        self.start_threads = start_threads
        self.fetchers: dict[int, _Fetcher] = {}
        self._fetched_from: dict[TopicPartition, int] = {}  # partition -> the leader it is fetched from
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
        self._remove(p.tp for p in partitions)

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
                fetcher = self.fetchers[leader_id] = _Fetcher(self, broker)
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
            for p in parts:
                previous = index.get(p.tp)
                if previous is not None and previous != leader_id:
                    self.fetchers[previous].partitions.pop(p.tp, None)
                fetcher.partitions[p.tp] = p
                index[p.tp] = leader_id

    def on_stop_replicas(self, partitions: list[TopicPartition]) -> None:
        self._remove(partitions)

    def _remove(self, tps: Iterable[TopicPartition]) -> None:
        index = self._fetched_from
        if not index:
            return
        fetchers = self.fetchers
        for tp in tps:
            leader_id = index.pop(tp, None)
            if leader_id is not None:
                fetchers[leader_id].partitions.pop(tp, None)

    # -- leader side -----------------------------------------------------------------------------------
    def handle_fetch(self, request: A.FetchRequest) -> A.FetchResponse:
        rm = self.replica_manager
        replica = request.replica_id
        errors: list[str] = []
        hws: list[int] = []
        leos: list[int] = []
        proposals = []
        with rm.lock:
            now = rm.now_ms()
            get = rm.partitions.get
            for topic, partition, offset, epoch in zip(
                request.topics, request.partitions, request.fetch_offsets, request.leader_epochs, strict=True
            ):
                p = get(TopicPartition(topic, partition))
                if p is None or not p.is_leader:
                    errors.append(_NOT_LEADER)
                elif epoch != p.leader_epoch:
                    errors.append(_FENCED if epoch < p.leader_epoch else A.UNKNOWN_LEADER_EPOCH)
                else:
                    hw, leo, may_join = p.on_follower_fetch(replica, offset, now)
                    errors.append(_NONE)
                    hws.append(hw)
                    leos.append(leo)
                    if may_join:
                        proposals.append((p.tp, p.propose_isr((*p.isr, replica))))
                    continue
                hws.append(-1)
                leos.append(-1)
        for tp, proposal in proposals:
            log.info("Expanding the ISR of %s to %s", tp, list(proposal.isr))
            self.alter_isr.submit(tp, proposal)
        return A.FetchResponse(_NONE, tuple(errors), tuple(hws), tuple(leos))

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
