"""A client for the controller's and the brokers' APIs: finds the controller, retries when it moves.

The controller is whichever broker ``/controller`` names; its address is in that broker's
registration. Any broker answers the controller APIs, but only the active controller answers them
with anything other than NOT_CONTROLLER, so the client asks ZooKeeper, sends, and on
NOT_CONTROLLER or a connection failure asks again and retries after a back-off, until a deadline
(Kafka's admin client does the same with its metadata). A broker uses the same class to send
AlterIsr and ControlledShutdown, with a locator that asks its metadata cache first.

Only the request's top-level error is interpreted here; per-partition errors are the caller's.

What this client is for: the requests only this project's brokers answer, in its private protocol
(a broker's own AlterIsr and ControlledShutdown to the controller; ShutdownBroker,
DescribeControllerContext, DescribeReplicas and the metadata-cache read for operators). Operators'
elections and reassignments go through ``broker.kafka_admin.KafkaAdmin`` instead, so they work
against an Apache Kafka cluster too; this client's ``elect_leaders`` and reassignment calls serve the
private API's own tests and benchmarks (docs/design.md, "Two admin clients, two jobs").
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kafka_controller.broker import apis as A
from kafka_controller.broker.controller_apis import TIMEOUT_MS_MAX
from kafka_controller.broker.wire import operation_id_
from kafka_controller.domain.errors import (
    InvalidArgumentError,
    KafkaControllerError,
    MetadataStoreError,
    brief,
)
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import TopicPartition
from kafka_controller.ports import MetadataStore
from kafka_controller.transport.client import TransportClient
from kafka_controller.transport.errors import RemoteError, TransportError, TransportTimeoutError

log = logging.getLogger(__name__)

#: ``locate(fresh) -> (broker_id, host, port)`` of the controller, or None if there is none now.
#: ``fresh`` asks for the authoritative answer (ZooKeeper) after the last one proved wrong.
Locator = Callable[[bool], "tuple[int, str, int] | None"]
R = TypeVar("R")
_RETRIABLE = frozenset({Errors.NOT_CONTROLLER, Errors.REQUEST_TIMED_OUT})


class ControllerNotAvailableError(TransportTimeoutError):
    """No active controller answered within the deadline; the message says what was seen last."""


def zk_locator(store: MetadataStore, listener_name: str = "PLAINTEXT") -> Locator:
    """The controller from ``/controller`` and its endpoint from ``/brokers/ids/<id>``."""

    def locate(fresh: bool) -> tuple[int, str, int] | None:
        try:
            controller_id = store.get_controller_id()
            if controller_id is None:
                return None
            broker = store.get_broker(controller_id)
        except MetadataStoreError as e:
            log.debug("cannot read the controller from ZooKeeper: %s", e)
            return None
        endpoint = None if broker is None else broker.endpoint(listener_name)
        return None if endpoint is None else (controller_id, endpoint.host, endpoint.port)

    return locate


class AdminClient:
    """Requests to the active controller (retried as it moves) and to named brokers."""

    def __init__(
        self,
        store: MetadataStore,
        *,
        locator: Locator | None = None,
        timeout_s: float = 30.0,
        retry_backoff_s: float = 0.2,
        listener_name: str = "PLAINTEXT",
        ssl_context: ssl.SSLContext | None = None,
        authenticate: Callable[[socket.socket], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.timeout_s = timeout_s
        self.retry_backoff_s = retry_backoff_s
        self.listener_name = listener_name
        self.ssl_context = ssl_context  # TLS when the listener is SSL or SASL_SSL
        self.authenticate = authenticate  # SASL when it is SASL_PLAINTEXT or SASL_SSL
        self._locate = locator or zk_locator(store, listener_name)
        self._sleep = sleep
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._clients: dict[tuple[str, int], TransportClient] = {}
        self._closed = False

    # -- plumbing ------------------------------------------------------------------------------------
    def _client(self, host: str, port: int) -> TransportClient:
        with self._lock:
            if self._closed:
                raise TransportError("the admin client is closed")
            client = self._clients.get((host, port))
            if client is None:
                client = self._clients[(host, port)] = TransportClient(
                    host,
                    port,
                    timeout_s=self.timeout_s,
                    ssl_context=self.ssl_context,
                    authenticate=self.authenticate,
                )
            return client

    def _drop(self, host: str, port: int) -> None:
        with self._lock:
            client = self._clients.pop((host, port), None)
        if client is not None:
            client.close()

    def send_to_controller_once(self, api: str, body: Any, *, fresh: bool = False) -> Any:
        """One attempt: locate the controller and send. Raises ``TransportError`` (no controller,
        or the connection failed) or ``RemoteError``; the response may still say NOT_CONTROLLER."""
        where = self._locate(fresh)
        if where is None:
            raise TransportError("no controller is registered in /controller")
        _, host, port = where
        try:
            return self._client(host, port).request(api, body)
        except TransportError:
            self._drop(host, port)
            raise

    def send_to_controller(self, api: str, body: Any, *, max_wait_s: float | None = None) -> Any:
        """Send until a controller answers with something other than NOT_CONTROLLER, or time out."""
        deadline = self._monotonic() + (self.timeout_s if max_wait_s is None else max_wait_s)
        fresh = False
        last = "no attempt made"
        while True:
            try:
                response = self.send_to_controller_once(api, body, fresh=fresh)
                error = getattr(response, "error", Errors.NONE)
                if error not in _RETRIABLE:
                    return response
                last = f"the broker answered {error}"
            except (TransportError, RemoteError) as e:
                last = str(e)
            fresh = True
            if self._monotonic() + self.retry_backoff_s > deadline:
                raise ControllerNotAvailableError(f"{api}: no active controller answered in time ({last})")
            log.debug("%s: retrying after %s", api, last)
            self._sleep(self.retry_backoff_s)

    def send_to_broker(self, broker_id: int, api: str, body: Any) -> Any:
        """One request to the broker registered as ``broker_id`` (no retry)."""
        try:
            broker = self.store.get_broker(broker_id)
        except MetadataStoreError as e:
            raise TransportError(f"cannot look up broker {broker_id}: {e}") from None
        endpoint = None if broker is None else broker.endpoint(self.listener_name)
        if endpoint is None:
            raise InvalidArgumentError(f"broker {broker_id} is not registered")
        try:
            return self._client(endpoint.host, endpoint.port).request(api, body)
        except TransportError:
            self._drop(endpoint.host, endpoint.port)
            raise

    def close(self) -> None:
        with self._lock:
            self._closed = True
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- controller APIs -------------------------------------------------------------------------------
    def elect_leaders(
        self,
        election_type: str,
        partitions: Iterable[TopicPartition] | None = None,
        operation_id: str | None = None,
    ) -> A.ElectLeadersResponse:
        """Preferred or unclean election for ``partitions`` (None: every partition).

        ``operation_id`` (here and in the other mutating calls) links the transitions the request
        causes to that row of the audit store's ``operations`` table."""
        kind = str(election_type).strip().lower()
        if kind not in ("preferred", "unclean"):
            raise InvalidArgumentError(
                f"invalid election type {brief(election_type)}: expected preferred or unclean"
            )
        tps = None if partitions is None else tuple(partitions)
        return self._ok(
            self.send_to_controller(A.ELECT_LEADERS, A.ElectLeadersRequest(kind, tps, _op(operation_id))),
            A.ElectLeadersResponse,
        )

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        operation_id: str | None = None,
    ) -> A.AlterPartitionReassignmentsResponse:
        """Start (target replicas) or cancel (None) reassignments."""
        body = A.AlterPartitionReassignmentsRequest(
            {tp: None if r is None else tuple(r) for tp, r in reassignments.items()}, _op(operation_id)
        )
        return self._ok(
            self.send_to_controller(A.ALTER_PARTITION_REASSIGNMENTS, body),
            A.AlterPartitionReassignmentsResponse,
        )

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> A.ListPartitionReassignmentsResponse:
        tps = None if partitions is None else tuple(partitions)
        return self._ok(
            self.send_to_controller(A.LIST_PARTITION_REASSIGNMENTS, A.ListPartitionReassignmentsRequest(tps)),
            A.ListPartitionReassignmentsResponse,
        )

    def describe_controller_context(
        self, timeout_s: float | None = None
    ) -> A.DescribeControllerContextResponse:
        """The active controller's whole context as one columnar document taken on its event thread
        (``core.context_description``), for reconciliation snapshots.

        ``timeout_s`` (default: the client's) bounds the wait for the controller's event queue and
        the retries as the controller moves; ``ControllerNotAvailableError`` when it passes. A
        controller that stops answering mid-request is still waited for up to the client's own
        ``timeout_s`` (the socket's), so give the client a timeout no longer than you can wait."""
        wait = self.timeout_s if timeout_s is None else timeout_s
        if not wait > 0:
            raise InvalidArgumentError(f"timeout must be positive, got {brief(timeout_s)}")
        body = A.DescribeControllerContextRequest(min(max(1, int(wait * 1000)), TIMEOUT_MS_MAX))
        return self._ok(
            self.send_to_controller(A.DESCRIBE_CONTROLLER_CONTEXT, body, max_wait_s=wait),
            A.DescribeControllerContextResponse,
        )

    def controlled_shutdown(
        self, broker_id: int, broker_epoch: int = -1, operation_id: str | None = None
    ) -> A.ControlledShutdownResponse:
        """Ask the controller to move leadership off ``broker_id``; the answer lists what it still leads."""
        return self._ok(
            self.send_to_controller(
                A.CONTROLLED_SHUTDOWN, A.ControlledShutdownRequest(broker_id, broker_epoch, _op(operation_id))
            ),
            A.ControlledShutdownResponse,
        )

    # -- broker APIs -----------------------------------------------------------------------------------
    def describe_replicas(
        self, broker_id: int, partitions: Iterable[TopicPartition] | None = None
    ) -> A.DescribeReplicasResponse:
        """The broker's own replicas: leadership as it knows it, log-end offset, high watermark."""
        tps = None if partitions is None else tuple(partitions)
        return self._ok(self.send_to_broker(broker_id, A.DESCRIBE_REPLICAS, tps), A.DescribeReplicasResponse)

    def metadata(self, broker_id: int) -> A.MetadataCacheResponse:
        """The broker's metadata cache (controller id, live brokers, partition states)."""
        return self._ok(self.send_to_broker(broker_id, A.METADATA, None), A.MetadataCacheResponse)

    def shutdown_broker(self, broker_id: int, operation_id: str | None = None) -> A.SimpleResponse:
        """Ask a running broker to do a controlled shutdown and exit (as SIGTERM does)."""
        request = A.ShutdownBrokerRequest(_op(operation_id))
        return self._ok(self.send_to_broker(broker_id, A.SHUTDOWN_BROKER, request), A.SimpleResponse)

    @staticmethod
    def _ok(response: Any, kind: type[R]) -> R:
        if not isinstance(response, kind):
            raise AdminRequestError(Errors.UNKNOWN_SERVER_ERROR, f"unexpected response {brief(response)}")
        error = getattr(response, "error", Errors.NONE)
        if error != Errors.NONE:
            raise AdminRequestError(str(error), getattr(response, "message", None))
        return response


class AdminRequestError(KafkaControllerError):
    """The request was answered with a top-level error; ``code`` is the Kafka error name."""

    def __init__(self, code: str, message: str | None = None) -> None:
        super().__init__(code if not message else f"{code}: {message}")
        self.code = code


def _op(operation_id: str | None) -> str | None:
    """Check an operation id before it goes out: the broker would refuse the whole request."""
    if operation_id is None:
        return None
    try:
        return operation_id_({"operation_id": operation_id})
    except ValueError as e:
        raise InvalidArgumentError(str(e)) from None
