"""ControllerChannelManager: the controller's outbound queues to brokers (docs/controller-behaviour.md §6,
``BrokerChannel``; Kafka's ``ControllerChannelManager.scala``).

One FIFO queue and one send thread per live or shutting-down broker, as in Kafka: requests to one
broker leave in the order they were queued, and a slow broker delays only itself. Each thread
sends one request at a time and retries it after ``retry_backoff_s`` (100 ms, on the injected
clock) until it gets an answer or the broker is removed; control requests carry epochs, so a
repeated one is harmless. The callback then runs on that thread with the decoded response; it
must only enqueue (docs/rules.md, callbacks only enqueue). Two outcomes are not retried, because
retrying cannot change
them: the broker answered with an error envelope (the callback gets Kafka's error response,
with that error on every partition), or the bytes broke the protocol (logged, dropped).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError, UnansweredRequestError
from kafka_controller.domain.requests import ControlRequest, ControlResponse, Errors
from kafka_controller.domain.values import Broker
from kafka_controller.ports import Clock, ResponseCallback, SystemClock
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.codec import API_BY_REQUEST_TYPE, error_response
from kafka_controller.transport.errors import RemoteError, TransportConnectionError, TransportError

logger = logging.getLogger(__name__)
_REMOVE_JOIN_S = 5.0


class RequestClient(Protocol):
    """What a send thread needs from a connection (``TransportClient``, or an in-memory fake)."""

    def request(self, api: str, body: Any) -> Any: ...

    def close(self) -> None: ...


#: ``client_factory(host, port, timeout_s)``.
ClientFactory = Callable[[str, int, float], RequestClient]


def _transport_client(host: str, port: int, timeout_s: float) -> RequestClient:
    return TransportClient(host, port, timeout_s=timeout_s)


#: ``handler(api, request) -> response``: the broker's own request handler, as its server calls it.
LocalHandler = Callable[[str, Any], Any]


class LocalClient:
    """Requests from a controller to the broker hosting it: the handler is called directly.

    The request object is what the broker would decode, and the response what the controller
    would decode, so encoding both for a loopback socket only costs CPU under the same GIL: after
    a 100,000-partition failover, ~0.6 s of it. Failures map as the wire's would: the handler
    raising is the broker answering with an error envelope (``RemoteError``), or, for
    ``UnansweredRequestError``, closing the connection (``TransportConnectionError``: sent again).
    """

    def __init__(self, handler: LocalHandler) -> None:
        self._handler = handler

    def request(self, api: str, body: Any) -> Any:
        try:
            return self._handler(api, body)
        except UnansweredRequestError as e:  # a server would close the connection: sent again
            raise TransportConnectionError(f"the local broker left {api} unanswered: {e}") from e
        except Exception as e:  # the server's answer to a failed handler (``TransportServer._answer``)
            logger.exception("Local broker handler failed on %s", api)
            raise RemoteError(Errors.UNKNOWN_SERVER_ERROR.value, f"{type(e).__name__}: {e}") from e

    def close(self) -> None:
        pass


@dataclass(eq=False)
class _BrokerQueue:
    broker: Broker
    client: RequestClient
    queue: deque[tuple[ControlRequest, ResponseCallback | None]] = field(default_factory=deque)
    cond: threading.Condition = field(default_factory=threading.Condition)
    running: bool = True
    thread: threading.Thread | None = None


class ControllerChannelManager:
    """Implements ``kafka_controller.ports.BrokerChannel``; add, remove and shut down brokers."""

    def __init__(
        self,
        controller_id: int,
        *,
        clock: Clock | None = None,
        timeout_s: float = 30.0,
        retry_backoff_s: float = 0.1,
        listener_name: str = "PLAINTEXT",
        client_factory: ClientFactory = _transport_client,
        local_handler: LocalHandler | None = None,
    ) -> None:
        """``local_handler``: the request handler of the broker hosting this controller (id
        ``controller_id``); requests to it skip the socket (``LocalClient``)."""
        self.controller_id = controller_id
        self._clock: Clock = clock or SystemClock()
        self._timeout_s = timeout_s  # Kafka's controller.socket.timeout.ms
        self._backoff_s = retry_backoff_s
        self._listener_name = listener_name
        self._client_factory = client_factory
        self._local_handler = local_handler
        self._lock = threading.Lock()
        self._brokers: dict[int, _BrokerQueue] = {}

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self, brokers: Iterable[Broker]) -> None:
        for broker in brokers:
            self.add_broker(broker)

    def shutdown(self) -> None:
        with self._lock:
            ids = list(self._brokers)
        for broker_id in ids:
            self.remove_broker(broker_id)

    def add_broker(self, broker: Broker) -> None:
        """Create the broker's queue and send thread; a broker already present is left as is."""
        endpoint = broker.endpoint(self._listener_name)
        if endpoint is None:
            raise InvalidArgumentError(f"broker {broker.id} has no endpoint to send requests to")
        with self._lock:
            if broker.id in self._brokers:
                return
            if broker.id == self.controller_id and self._local_handler is not None:
                client: RequestClient = LocalClient(self._local_handler)
            else:
                client = self._client_factory(endpoint.host, endpoint.port, self._timeout_s)
            state = _BrokerQueue(broker, client)
            state.thread = threading.Thread(
                target=self._send_loop,
                args=(state,),
                name=f"Controller-{self.controller_id}-to-broker-{broker.id}-send-thread",
                daemon=True,
            )
            self._brokers[broker.id] = state
        state.thread.start()
        logger.info("Added broker %d (%s) to the channel manager", broker.id, endpoint.connection_string())

    def remove_broker(self, broker_id: int) -> None:
        """Stop the broker's thread, dropping what is queued and aborting a request in flight."""
        with self._lock:
            state = self._brokers.pop(broker_id, None)
        if state is None:
            return
        with state.cond:
            state.running = False
            dropped = len(state.queue)
            state.queue.clear()
            state.cond.notify_all()
        state.client.close()
        if state.thread is not None and state.thread is not threading.current_thread():
            # Bounded: a connect() in progress cannot be interrupted; the thread then exits by
            # itself when it fails, and never calls a callback once the broker is removed.
            state.thread.join(_REMOVE_JOIN_S)
            if state.thread.is_alive():
                logger.warning(
                    "Send thread for broker %d is still connecting; it will exit by itself", broker_id
                )
        logger.info(
            "Removed broker %d from the channel manager (%d queued requests dropped)", broker_id, dropped
        )

    # -- BrokerChannel ---------------------------------------------------------------------------

    def send_request(
        self, broker_id: int, request: ControlRequest, callback: ResponseCallback | None = None
    ) -> None:
        if type(request) not in API_BY_REQUEST_TYPE:
            raise InvalidArgumentError(f"{type(request).__name__} is not a controller-to-broker request")
        with self._lock:
            state = self._brokers.get(broker_id)
        if state is None:
            logger.warning(
                "Not sending %s to broker %d: it has no queue (not live, or removed)",
                type(request).__name__,
                broker_id,
            )
            return
        with state.cond:
            if not state.running:
                return
            state.queue.append((request, callback))
            state.cond.notify()

    def queue_size(self, broker_id: int) -> int:
        """Requests waiting for the broker (Kafka's per-broker ``QueueSize`` gauge); 0 if unknown."""
        with self._lock:
            state = self._brokers.get(broker_id)
        return len(state.queue) if state is not None else 0

    @property
    def broker_ids(self) -> list[int]:
        with self._lock:
            return sorted(self._brokers)

    # -- the send thread -------------------------------------------------------------------------

    def _send_loop(self, state: _BrokerQueue) -> None:
        while True:
            with state.cond:
                state.cond.wait_for(lambda: state.queue or not state.running)
                if not state.running:
                    return
                request, callback = state.queue.popleft()
            response = self._send_until_answered(state, request)
            if response is not None and callback is not None and state.running:
                try:
                    callback(response)
                except Exception:
                    logger.exception("Response callback for broker %d failed", state.broker.id)

    def _send_until_answered(self, state: _BrokerQueue, request: ControlRequest) -> ControlResponse | None:
        api = API_BY_REQUEST_TYPE[type(request)]
        broker_id = state.broker.id
        attempts = 0
        while state.running:
            attempts += 1
            try:
                response: ControlResponse = state.client.request(api, request)
                return response
            except TransportError as e:
                if not state.running:
                    break
                log = logger.warning if attempts == 1 else logger.debug
                log("%s to broker %d failed (attempt %d), retrying: %s", api, broker_id, attempts, e)
                self._clock.sleep(self._backoff_s)
            except RemoteError as e:
                logger.warning("Broker %d answered %s with an error: %s", broker_id, api, e)
                code = e.code if e.code in Errors.__members__ else Errors.UNKNOWN_SERVER_ERROR
                return error_response(request, Errors(code))
            except KafkaControllerError as e:
                logger.error("Dropping %s to broker %d: %s", api, broker_id, e)
                return None
        logger.info("Dropping %s to broker %d: the broker was removed", api, broker_id)
        return None
