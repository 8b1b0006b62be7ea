"""RecordingBrokerChannel: a ``BrokerChannel`` that records what the controller sends
(docs/rules.md, fakes are part of the product).

Kafka's ``ControllerChannelManagerTest`` overrides ``sendRequest`` to keep ``(request, callback)``
per broker and then applies canned responses to the callbacks; this is the same thing as a
reusable fake. Tests answer requests explicitly (``respond`` / ``respond_all``), so nothing happens
behind their back, and a controller running on its own thread can be awaited with ``wait_for``
(a condition variable, not a sleep).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from kafka_controller.domain.requests import (
    ControlRequest,
    ControlResponse,
    Errors,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import Broker, TopicPartition
from kafka_controller.ports import ResponseCallback

_Req = TypeVar("_Req", LeaderAndIsrRequest, UpdateMetadataRequest, StopReplicaRequest)


@dataclass(frozen=True, slots=True)
class SentRequest:
    """One ``send_request`` call, in the order the controller made it."""

    broker_id: int
    request: ControlRequest
    callback: ResponseCallback | None


def default_response(request: ControlRequest, error: Errors = Errors.NONE) -> ControlResponse:
    """The response a broker gives when everything in ``request`` ends with ``error``."""
    if isinstance(request, LeaderAndIsrRequest):
        return LeaderAndIsrResponse(
            error, {TopicPartition(s.topic, s.partition): error for s in request.partition_states}
        )
    if isinstance(request, UpdateMetadataRequest):
        return UpdateMetadataResponse(error)
    return StopReplicaResponse(error, dict.fromkeys(request.partition_states, error))


class RecordingBrokerChannel:
    """Records ``(broker_id, request, callback)`` per send; thread-safe, never blocks the sender.

    ``fail_sends(error, after=n)`` makes every send after the first ``n`` raise ``error`` (to test
    how the batch handles a broken channel).

    It is also a ``BrokerChannelManager`` (the controller's channel manager port): ``startup``,
    ``add_broker``, ``remove_broker`` and ``shutdown`` keep the set of brokers that would have a
    queue and log every change in ``membership_changes``. Sending is not gated by that set: every
    request is recorded, so tests see exactly what the controller sent.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._brokers: dict[int, Broker] = {}
        self._membership: list[tuple[str, int | None]] = []
        self._started = False
        self._sent: list[SentRequest] = []
        self._answered: set[int] = set()
        self._fail_error: BaseException | None = None
        self._fail_after = 0

    # ------------------------------------------------------------------ the port
    def send_request(
        self, broker_id: int, request: ControlRequest, callback: ResponseCallback | None = None
    ) -> None:
        with self._cond:
            if self._fail_error is not None:
                if self._fail_after <= 0:
                    raise self._fail_error
                self._fail_after -= 1
            self._sent.append(SentRequest(broker_id, request, callback))
            self._cond.notify_all()

    # ------------------------------------------------------------------ broker queues (bookkeeping only)
    def startup(self, brokers: Iterable[Broker]) -> None:
        with self._cond:
            self._started = True
            self._brokers = {b.id: b for b in brokers}
            self._membership.append(("startup", None))
            self._membership.extend(("add", b) for b in sorted(self._brokers))

    def shutdown(self) -> None:
        with self._cond:
            self._started = False
            self._brokers.clear()
            self._membership.append(("shutdown", None))

    def add_broker(self, broker: Broker) -> None:
        with self._cond:
            self._brokers[broker.id] = broker
            self._membership.append(("add", broker.id))

    def remove_broker(self, broker_id: int) -> None:
        with self._cond:
            self._brokers.pop(broker_id, None)
            self._membership.append(("remove", broker_id))

    @property
    def is_started(self) -> bool:
        return self._started

    @property
    def brokers(self) -> dict[int, Broker]:
        """The brokers that currently have a (virtual) queue."""
        with self._cond:
            return dict(self._brokers)

    @property
    def membership_changes(self) -> list[tuple[str, int | None]]:
        """``("startup", None)``, ``("add", id)``, ``("remove", id)``, ``("shutdown", None)``, in order."""
        with self._cond:
            return list(self._membership)

    # ------------------------------------------------------------------ inspection
    @property
    def sent(self) -> list[SentRequest]:
        """A copy of everything sent so far, in order."""
        with self._cond:
            return list(self._sent)

    def broker_ids(self) -> set[int]:
        """Every broker that was sent at least one request (Kafka's ``sentRequests.keySet``)."""
        with self._cond:
            return {s.broker_id for s in self._sent}

    @overload
    def requests_to(self, broker_id: int) -> list[ControlRequest]: ...

    @overload
    def requests_to(self, broker_id: int, type: type[_Req]) -> list[_Req]: ...

    def requests_to(self, broker_id: int, type: type[Any] | None = None) -> list[Any]:
        """Requests sent to ``broker_id``, in order, optionally only those of one request class."""
        with self._cond:
            return [
                s.request
                for s in self._sent
                if s.broker_id == broker_id and (type is None or isinstance(s.request, type))
            ]

    def wait_for(self, predicate: Callable[[list[SentRequest]], bool], timeout: float = 10.0) -> bool:
        """Block until ``predicate(sent)`` holds or ``timeout`` seconds pass; returns whether it held."""
        with self._cond:
            return self._cond.wait_for(lambda: predicate(list(self._sent)), timeout)

    # ------------------------------------------------------------------ answering
    def respond(self, index: int, response: ControlResponse) -> bool:
        """Run the callback of the ``index``-th sent request with ``response``; False if it has none."""
        with self._cond:
            sent = self._sent[index]
            self._answered.add(index if index >= 0 else len(self._sent) + index)
        if sent.callback is None:
            return False
        sent.callback(response)
        return True

    def respond_all(
        self,
        responder: Callable[[SentRequest], ControlResponse] | None = None,
        *,
        error: Errors = Errors.NONE,
        broker_id: int | None = None,
    ) -> int:
        """Answer every not-yet-answered request (of ``broker_id``, if given) that has a callback.

        The response is ``responder(sent)`` or else ``default_response(request, error)``. Returns how
        many callbacks ran. Callbacks run outside the lock, in send order.
        """
        with self._cond:
            pending = [
                (i, s)
                for i, s in enumerate(self._sent)
                if i not in self._answered and (broker_id is None or s.broker_id == broker_id)
            ]
            self._answered.update(i for i, _ in pending)
        ran = 0
        for _, s in pending:
            if s.callback is None:
                continue
            s.callback(responder(s) if responder is not None else default_response(s.request, error))
            ran += 1
        return ran

    # ------------------------------------------------------------------ control
    def fail_sends(self, error: BaseException | None, *, after: int = 0) -> None:
        """Make sends raise ``error`` after ``after`` more successful ones (``None`` to stop failing)."""
        with self._cond:
            self._fail_error = error
            self._fail_after = after

    def clear(self) -> None:
        with self._cond:
            self._sent.clear()
            self._answered.clear()
