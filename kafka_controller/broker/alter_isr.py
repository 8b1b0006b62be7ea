"""AlterIsr from partition leaders to the controller, batched and retried (Kafka 2.8's ``AlterIsrManager``).

A leader that wants to shrink or expand an ISR marks the change pending on the partition (so it
proposes nothing else for it meanwhile, and its high watermark respects the larger ISR) and
submits it here. One thread sends everything pending as **one** AlterIsr request, one request in
flight at a time, and settles the answers under the replica manager's lock:

* success: the partition takes the ISR and zk version the controller wrote;
* INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION: the proposal is dropped
  (the controller knows better; a LeaderAndIsr will follow), as Kafka does;
* anything else, a top-level error (NOT_CONTROLLER, STALE_BROKER_EPOCH) or no answer at all: the
  proposal is sent again after ``retry_backoff_s``, unless the partition moved on meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kafka_controller.broker.controller_apis import AlterIsrRequest, AlterIsrResponse
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import LeaderAndIsr, TopicPartition

log = logging.getLogger(__name__)

#: ``send(request, fresh)``: deliver to the active controller; ``fresh`` after the last try failed.
AlterIsrSender = Callable[[AlterIsrRequest, bool], AlterIsrResponse]
_GIVE_UP = frozenset(
    {Errors.INVALID_UPDATE_VERSION, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION}
)


class AlterIsrManager:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        broker_epoch: Callable[[], int],
        send: AlterIsrSender,
        *,
        retry_backoff_s: float = 0.2,
    ) -> None:
        self.replica_manager = replica_manager
        self.broker_id = replica_manager.broker_id
        self._broker_epoch = broker_epoch
        self._send = send
        self.retry_backoff_s = retry_backoff_s
        self._cond = threading.Condition()
        self._pending: dict[TopicPartition, LeaderAndIsr] = {}
        self._running = False
        self._thread: threading.Thread | None = None
        self.sent_requests = 0  # observable in tests: batching means few requests
        #: told (old ISR, new LeaderAndIsr) of each committed change: the IsrShrinks/Expands meters
        self.on_committed: Callable[[tuple[int, ...], LeaderAndIsr], None] | None = None
        # The last answer re-queued partitions with a retriable error: back off before resending.
        self._partitions_to_retry = False

    def submit(self, tp: TopicPartition, proposal: LeaderAndIsr) -> None:
        """Queue a proposal (the partition already marked it pending); returns at once."""
        with self._cond:
            self._pending[tp] = proposal
            self._cond.notify()

    @property
    def pending_count(self) -> int:
        with self._cond:
            return len(self._pending)

    def start(self) -> None:
        self._running = True
        self._thread = threading.Thread(target=self._run, name=f"alter-isr-{self.broker_id}", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        with self._cond:
            self._running = False
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _run(self) -> None:
        fresh = False
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or not self._running)
                if not self._running:
                    return
            ok = self.send_pending(fresh)
            fresh = not ok
            if not ok or self._partitions_to_retry:
                with self._cond:
                    self._cond.wait_for(lambda: not self._running, self.retry_backoff_s)

    def send_pending(self, fresh: bool = False) -> bool:
        """Send everything pending as one request (the thread's step; tests call it directly)."""
        with self._cond:
            batch, self._pending = self._pending, {}
        return self.send_once(batch, fresh)

    def send_once(self, batch: dict[TopicPartition, LeaderAndIsr], fresh: bool = False) -> bool:
        """Send ``batch`` and settle the answers; False when it must be retried as a whole."""
        self._partitions_to_retry = False
        batch = self._still_wanted(batch)
        if not batch:
            return True
        self.sent_requests += 1
        try:
            response = self._send(AlterIsrRequest(self.broker_id, self._broker_epoch(), batch), fresh)
        except KafkaControllerError as e:
            log.info("AlterIsr for %d partitions not delivered (%s); will retry", len(batch), e)
            self._requeue(batch)
            return False
        if response.error != Errors.NONE:
            log.info("AlterIsr for %d partitions refused with %s; will retry", len(batch), response.error)
            self._requeue(batch)
            return False
        retry: dict[TopicPartition, LeaderAndIsr] = {}
        rm = self.replica_manager
        with rm.lock:
            for tp, proposal in batch.items():
                outcome = response.partitions.get(tp, Errors.UNKNOWN_SERVER_ERROR)
                p = rm.get(tp)
                if p is None:
                    continue
                if isinstance(outcome, LeaderAndIsr):
                    old_isr = p.isr
                    if p.apply_isr_update(outcome):
                        if self.on_committed is not None:
                            self.on_committed(old_isr, outcome)
                        log.info(
                            "ISR of %s is now %s (zk version %d)", tp, list(outcome.isr), outcome.zk_version
                        )
                elif outcome in _GIVE_UP:
                    log.info(
                        "AlterIsr of %s to %s failed with %s; waiting for the controller",
                        tp,
                        list(proposal.isr),
                        outcome,
                    )
                    if p.pending_isr == proposal.isr:
                        p.pending_isr = None
                else:
                    retry[tp] = proposal
        if retry:
            # A partition the controller could not update (its ZooKeeper session is suspended, say)
            # waits the backoff too: resent at once, it would spin against the controller.
            self._partitions_to_retry = True
            self._requeue(retry)
        return True

    def _still_wanted(self, batch: dict[TopicPartition, LeaderAndIsr]) -> dict[TopicPartition, LeaderAndIsr]:
        """Drop proposals whose partition changed leader epoch or gave up the change meanwhile."""
        rm = self.replica_manager
        with rm.lock:
            wanted = {}
            for tp, proposal in batch.items():
                p = rm.get(tp)
                if (
                    p is not None
                    and p.is_leader
                    and p.leader_epoch == proposal.leader_epoch
                    and p.pending_isr == proposal.isr
                ):
                    wanted[tp] = proposal
            return wanted

    def _requeue(self, batch: dict[TopicPartition, LeaderAndIsr]) -> None:
        with self._cond:
            for tp, proposal in batch.items():
                self._pending.setdefault(tp, proposal)
