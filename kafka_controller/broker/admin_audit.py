"""Who changed what: an ``operations`` row for every admin request that changes the cluster and
arrives at a broker's listener outside any operation (a Kafka client, ``kafka-topics.sh``, a script
with the private admin client).

An Airflow task or an audited CLI command records its operation itself and sends the id along (in
the client id, ``kafka-controller-ops/op=<id>``, or in the private request's ``operation_id``);
such a request is left alone here. Any other request of the APIs below gets a fresh operation id
on arrival, which travels on with the request exactly as an operation's does (the header's
``operation_id`` for Kafka's protocol, the private request's field for the private one), so the
controller stamps the transitions it causes; the row names the API, the client id, the peer's
address and the principal (``User:ANONYMOUS`` until the listener authenticates), and ends
``succeeded`` or ``failed`` with the per-resource error counts. Requests that change nothing
(``validate_only``, reads) are not recorded. Config values never reach the row (they may be
passwords): only names.

Recording is in one place, the dispatch (``kafka_apis`` wraps the API table
``KafkaProtocolHandler`` dispatches on; ``private`` wraps the handler the listener calls, not the
one the Kafka-protocol APIs and the channel manager call internally, so nothing is recorded
twice), and off the request's path: rows
go through a bounded queue to one thread with its own ``OperationLog``. The audit store being down
delays no request; the thread retries a row with backoff for ``retry_for_s`` and then drops it
with a warning naming the operation, as it does (counted, once per interval) when the queue is
full. Kafka's own brokers have no such record (their request log at DEBUG is the nearest thing).
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire.controller_admin_apis import parse_operation_id
from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_api import KioApi
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.requests import Errors
from kafka_controller.transport import server as transport

log = logging.getLogger(__name__)

#: Kafka's principal of a peer that did not authenticate (``KafkaPrincipal.ANONYMOUS``).
ANONYMOUS = "User:ANONYMOUS"

#: The Kafka APIs a broker serves that change the cluster, by api key (Kafka's names).
KAFKA_APIS: dict[int, str] = {
    19: "CreateTopics",
    20: "DeleteTopics",
    30: "CreateAcls",
    31: "DeleteAcls",
    33: "AlterConfigs",
    37: "CreatePartitions",
    43: "ElectLeaders",
    44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments",
}
#: The private APIs an admin client sends that change the cluster. ControlledShutdown and AlterIsr
#: are a broker's own requests to its controller, not an admin's.
PRIVATE_APIS: dict[str, str] = {
    A.ELECT_LEADERS: "ElectLeaders",
    A.ALTER_PARTITION_REASSIGNMENTS: "AlterPartitionReassignments",
    A.SHUTDOWN_BROKER: "ShutdownBroker",
}
#: Fields never copied into an operation's parameters: config values may be secrets.
SECRET_FIELDS = frozenset({"value", "values", "password", "secret"})
#: The most values of a request copied into its row (the rest is counted); the row is bounded too.
MAX_VALUES = 2000
#: The most characters of one string copied (a name can be as long as the client makes it).
MAX_TEXT = 256
QUEUE_SIZE = 1000
WARN_INTERVAL_S = 60.0

#: Answers that are not failures: the cluster was already as asked.
NOT_FAILURES = frozenset({Errors.NONE, "ELECTION_NOT_NEEDED"})

KafkaHandle = Callable[[RequestHeader, Any], Any]
PrivateHandle = Callable[[str, Any], Any]


def audited_cluster_id(cluster_id: str | None) -> str | None:
    """The broker's ``/cluster/id`` as the audit stores it, or None (with a warning) for an id the
    audit cannot hold (another tool may have written anything there): rows are then not tied to
    the cluster, but still written."""
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from kafka_controller.audit.schema import checked_cluster_id

    try:
        return checked_cluster_id(cluster_id)
    except InvalidArgumentError as e:
        log.warning("Auditing without a cluster id: /cluster/id holds a %s", e)
        return None


def _request_origin() -> tuple[str | None, str]:
    """(peer ``host:port``, principal) of the request the calling thread handles."""
    peer = transport.current_peer()
    current = getattr(transport, "current_connection", None)  # the listener's authenticated peer
    connection = current() if callable(current) else None
    principal = getattr(connection, "principal", None)
    return peer, principal if isinstance(principal, str) and principal else ANONYMOUS


class AdminAudit:
    """Records operations for ``operation_log()`` (made on the recording thread, on first use).

    ``operation_log`` returns an object with ``OperationLog``'s ``start_operation`` and
    ``finish_operation``; ``cluster_id`` the broker's ``/cluster/id`` (None before it is read).
    """

    def __init__(
        self,
        operation_log: Callable[[], Any],
        cluster_id: Callable[[], str | None],
        *,
        now_ms: Callable[[], int] | None = None,
        queue_size: int = QUEUE_SIZE,
        retry_for_s: float = 60.0,
        name: str = "admin-audit",
    ) -> None:
        self._make_log = operation_log
        self._cluster_id = cluster_id
        self._now_ms = now_ms or (lambda: int(time.time() * 1000))
        self._queue: queue.Queue[_Item | None] = queue.Queue(queue_size)
        self._retry_for_s = retry_for_s
        self._lock = threading.Lock()
        self._dropped = 0
        self._last_warning = float("-inf")
        self._failed_starts: set[str] = set()
        self.recorded = 0  #: rows started and finished (for tests and metrics)
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # -- the dispatch -------------------------------------------------------------------------
    def kafka_apis(self, apis: Mapping[int, KioApi]) -> dict[int, KioApi]:
        """``apis`` with each API that changes the cluster recorded (``kafka``)."""

        def audited(api: KioApi) -> KioApi:
            def handle(header: RequestHeader, request: Any) -> Any:
                return self.kafka(header, request, api.handle)

            return dataclasses.replace(api, handle=handle)

        return {key: audited(api) if key in KAFKA_APIS else api for key, api in apis.items()}

    def kafka(self, header: RequestHeader, request: Any, handle: KafkaHandle) -> Any:
        """``handle(header, request)``, recorded as an operation when it changes the cluster outside one."""
        api = KAFKA_APIS.get(header.api_key)
        if (
            api is None
            or parse_operation_id(header.client_id) is not None
            or header.operation_id is not None
            or getattr(request, "validate_only", False) is True
        ):
            return handle(header, request)
        op = self._start(api, header.api_version, header.client_id, request)
        try:
            response = handle(dataclasses.replace(header, operation_id=op), request)
        except BaseException as e:
            self._finish(op, "failed", f"{type(e).__name__} while handling the request", None)
            raise
        self._finish(op, *_outcome(response))
        return response

    def private(self, handle: PrivateHandle) -> PrivateHandle:
        """The listener's private-protocol handler: ``handle``, recording what changes the cluster."""

        def audited(api: str, request: Any) -> Any:
            name = PRIVATE_APIS.get(api)
            if name is None or getattr(request, "operation_id", None) is not None:
                return handle(api, request)
            op = self._start(name, None, None, request)
            if dataclasses.is_dataclass(request) and any(
                f.name == "operation_id" for f in dataclasses.fields(request)
            ):
                request = dataclasses.replace(request, operation_id=op)  # type: ignore[type-var]
            try:
                response = handle(api, request)
            except BaseException as e:
                self._finish(op, "failed", f"{type(e).__name__} while handling the request", None)
                raise
            self._finish(op, *_outcome(response))
            return response

        return audited

    # -- recording ------------------------------------------------------------------------------
    def _start(self, api: str, version: int | None, client_id: str | None, request: Any) -> str:
        op = str(uuid.uuid4())
        peer, principal = _request_origin()
        started = self._now_ms()
        parameters: dict[str, Any] = {"api": api, "request": _plain(request, [MAX_VALUES])}
        if version is not None:
            parameters["api_version"] = version
        client = _printable(client_id)
        cluster = self._cluster_id()
        where = f" from {peer}" if peer else ""
        reason = f"{api} request{where} (client id {client!r}), outside any operation"

        def start(operation_log: Any) -> None:
            operation_log.start_operation(
                api,
                principal,
                reason,
                parameters,
                False,
                cluster_id=cluster,
                principal=principal,
                client_id=client,
                client_address=peer,
                operation_id=op,
                started_ms=started,
            )

        self._submit(_Item(op, "start", start))
        return op

    def _finish(self, op: str, status: str, error: str | None, result: Any) -> None:
        finished = self._now_ms()

        def finish(operation_log: Any) -> None:
            operation_log.finish_operation(op, status, error, result, finished_ms=finished)
            self.recorded += 1

        self._submit(_Item(op, "end", finish))

    def _submit(self, item: _Item) -> None:
        try:
            self._queue.put_nowait(item)
        except queue.Full:
            self._warn(f"audit queue full: the {item.part} of operation {item.operation_id} is not recorded")
            if item.part == "start":
                with self._lock:
                    self._failed_starts.add(item.operation_id)

    def _warn(self, message: str) -> None:
        """Once per interval, with how many were dropped since: a flood must not flood the log."""
        with self._lock:
            self._dropped += 1
            now = time.monotonic()
            if now - self._last_warning < WARN_INTERVAL_S:
                return
            self._last_warning, dropped, self._dropped = now, self._dropped, 0
        log.warning("%s (%d dropped since the last warning)", message, dropped)

    def _run(self) -> None:
        operation_log: Any = None
        while (item := self._queue.get()) is not None:
            with self._lock:
                if item.part == "end" and item.operation_id in self._failed_starts:
                    self._failed_starts.discard(item.operation_id)  # no row to finish
                    continue
            deadline = time.monotonic() + self._retry_for_s
            backoff = 0.25
            while True:
                try:
                    if operation_log is None:
                        operation_log = self._make_log()
                    item.record(operation_log)
                    break
                except Exception as e:  # the store's errors are typed and one line; keep serving
                    if _is_refusal(e) or time.monotonic() + backoff > deadline:
                        self._give_up(item, e)
                        break
                    time.sleep(backoff)  # this thread's own pace; no request waits for it
                    backoff = min(backoff * 2, 5.0)
        if operation_log is not None and hasattr(operation_log, "close"):
            operation_log.close()

    def _give_up(self, item: _Item, e: Exception) -> None:
        if item.part == "start":
            with self._lock:
                self._failed_starts.add(item.operation_id)
        self._warn(f"cannot record the {item.part} of operation {item.operation_id} in the audit store: {e}")

    def close(self, timeout_s: float = 5.0) -> None:
        """Record what is queued (for at most ``timeout_s``), then stop the thread."""
        try:
            self._queue.put(None, timeout=timeout_s)
        except queue.Full:
            return
        self._thread.join(timeout_s)


@dataclasses.dataclass(frozen=True, slots=True)
class _Item:
    operation_id: str
    part: str  # "start" | "end"
    record: Callable[[Any], None]


def _is_refusal(e: Exception) -> bool:
    """Errors that no retry mends (a bad field, an unknown id): drop at once."""
    return isinstance(e, InvalidArgumentError)


def _printable(text: str | None, limit: int = 255) -> str | None:
    if text is None:
        return None
    clean = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return clean or None


def _plain(value: Any, budget: list[int]) -> Any:
    """A request entity as JSON-ready data, without secret fields, at most ``MAX_VALUES`` values."""
    budget[0] -= 1
    if budget[0] < 0:
        return "..."
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else f"{value[:MAX_TEXT]}... ({len(value)} characters)"
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, bytes | bytearray | memoryview):
        return f"<{len(value)} bytes>"
    if isinstance(value, Mapping):
        return {str(k): _plain(v, budget) for k, v in list(value.items())[: max(budget[0], 0)]}
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        out = [_plain(v, budget) for v in items[: max(budget[0], 0)]]
        if len(out) < len(items):
            out.append(f"... {len(items) - len(out)} more")
        return out
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _plain(getattr(value, f.name), budget)
            for f in dataclasses.fields(value)
            if f.name not in SECRET_FIELDS and f.name != "operation_id"
        }
    return str(type(value).__name__)


def _error_name(value: Any) -> str:
    """Kafka's error name: kio's ``ErrorCode`` members are Kafka's names in lower case; a bare code
    0 is NONE; the private protocol already answers names."""
    if isinstance(value, enum.Enum):
        return value.name.upper()
    if type(value) is int:
        return Errors.NONE if value == 0 else f"error code {value}"
    return str(value)


def _outcome(response: Any) -> tuple[str, str | None, dict[str, Any]]:
    """(status, error, result) from an answer's error codes: every Kafka error code and private
    error name in it, counted; ``succeeded`` when all are NONE."""
    counts: dict[str, int] = {}
    budget = [100_000]

    def walk(value: Any) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            return
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                v = getattr(value, f.name)
                if f.name in ("error_code", "error") and v is not None:
                    name = _error_name(v)
                    counts[name] = counts.get(name, 0) + 1
                else:
                    walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif isinstance(value, Mapping):
            for v in value.values():
                walk(v)

    walk(response)
    failed = {k: n for k, n in counts.items() if k not in NOT_FAILURES}
    result = {"errors": counts}
    if not failed:
        return "succeeded", None, result
    text = ", ".join(f"{k} x{n}" for k, n in sorted(failed.items()))
    return "failed", f"the request answered {text}", result
