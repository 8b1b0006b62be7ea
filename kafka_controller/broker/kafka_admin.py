"""Elections and partition reassignments through Kafka's own protocol, with kafka-python's
``KafkaAdminClient`` (a maintained client, not this project's private one), so the same operations
run against this project's brokers and against any Apache Kafka 2.4+ cluster in ZooKeeper mode.

``KafkaAdmin`` answers with the response values of the private admin client (``broker.apis``), so
callers read per-partition errors the same way whichever path sent the request. The operation id
that links an operation's transitions to its ``operations`` row travels in the request header's
client id, ``kafka-controller-ops/op=<id>`` (a Kafka broker shows it in its request log): one
kafka-python client per operation id, made on first use.

The brokers come from ``bootstrap_servers`` when given, else from ZooKeeper (the controller).
A Kafka ElectLeaders answer carries no leader: the new leaders are read back from the partition
state znodes when a ZooKeeper store is at hand (-1 otherwise). kafka-python errors stay here: the
caller sees ``KafkaAdminError`` (or ``InvalidArgumentError`` for bad input).

What this client is for: the elections and reassignments operators run (the CLI, the Airflow
hooks), so they work unchanged against any ZooKeeper-mode Kafka cluster. ``broker.admin_client.AdminClient``
is only for what Kafka's protocol cannot say and this project's brokers answer (ShutdownBroker,
DescribeControllerContext, DescribeReplicas, the brokers' own AlterIsr and ControlledShutdown);
docs/design.md, "Two admin clients, two jobs".
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from kafka_controller.broker import apis as A
from kafka_controller.broker.bootstrap import parse_bootstrap_servers
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError, brief
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kafka_controller.ports import MetadataStore
from kafka_controller.security.client_config import ClientSecurity

log = logging.getLogger(__name__)

CLIENT_ID = "kafka-controller-ops"
#: What follows ``CLIENT_ID`` in the client id of a request that belongs to an operation.
OPERATION_MARK = "/op="
ELECTION_TYPES = {"preferred": 0, "unclean": 1}
ANSWER_MARGIN_MS = 5000
R = TypeVar("R")


class KafkaAdminError(KafkaControllerError):
    """A Kafka admin request failed as a whole; ``code`` is the Kafka error name when there is one."""

    def __init__(self, message: str, code: str = Errors.UNKNOWN_SERVER_ERROR) -> None:
        super().__init__(message)
        self.code = code


def client_id(operation_id: str | None) -> str:
    """``kafka-controller-ops/op=<operation id>``, or ``kafka-controller-ops`` without one."""
    if operation_id is None:
        return CLIENT_ID
    if not 0 < len(operation_id) <= 36 or not operation_id.isprintable():
        raise InvalidArgumentError(
            f"operation id must be 1-36 printable characters, got {brief(operation_id)}"
        )
    return CLIENT_ID + OPERATION_MARK + operation_id


def brokers_from_zookeeper(store: MetadataStore, listener_name: str = "PLAINTEXT") -> tuple[str, ...]:
    """``host:port`` of the active controller (from ``/controller`` and its ``/brokers/ids``
    registration), else of every registered broker.

    The controller alone when there is one: the admin requests go there anyway, and kafka-python
    bootstraps from one server picked at random and waits its whole timeout on one that accepts
    connections but does not answer (a stopped broker), failing requests the controller could serve."""
    registered = {b.id: b for b in store.get_all_brokers_and_epochs()}
    controller = store.get_controller_id()
    chosen = (
        [registered[controller]]
        if controller in registered
        else sorted(registered.values(), key=lambda b: b.id)
    )
    found = []
    for broker in chosen:
        ep = broker.endpoint(listener_name)
        if ep is not None:
            found.append(f"{ep.host}:{ep.port}")
    if not found:
        raise KafkaAdminError("no broker is registered in /brokers/ids to bootstrap from")
    return tuple(found)


def error_name(code: int) -> str:
    from kio.schema.errors import ErrorCode

    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


class KafkaAdmin:
    """ElectLeaders and Alter/ListPartitionReassignments over Kafka's protocol (kafka-python)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        store: MetadataStore | None = None,
        *,
        timeout_s: float = 30.0,
        client_factory: Callable[..., Any] | None = None,
        security: ClientSecurity | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not timeout_s > 0:
            raise InvalidArgumentError(f"timeout must be positive, got {brief(timeout_s)}")
        self.bootstrap = parse_bootstrap_servers(bootstrap_servers)
        if self.bootstrap is None and store is None:
            raise InvalidArgumentError(
                "no brokers to connect to: give bootstrap servers or a ZooKeeper store"
            )
        self.store = store
        self.timeout_s = timeout_s
        self._factory = client_factory
        #: TLS and SASL for every client made (``security.client_config``); PLAINTEXT without.
        self.security = security
        self._clock, self._sleep = clock, sleep
        self._clients: dict[str | None, Any] = {}

    # -- clients ------------------------------------------------------------------------------------------
    def servers(self) -> tuple[str, ...]:
        if self.bootstrap is not None:
            return self.bootstrap
        assert self.store is not None
        listener = "PLAINTEXT" if self.security is None else self.security.listener_name
        return brokers_from_zookeeper(self.store, listener)

    def client(self, operation_id: str | None = None) -> Any:
        """The kafka-python admin client whose client id carries ``operation_id``."""
        cid = client_id(operation_id)
        admin = self._clients.get(operation_id)
        if admin is None:
            factory = self._factory
            if factory is None:
                from kafka.admin import KafkaAdminClient

                factory = KafkaAdminClient
            timeout_ms = max(1000, int(self.timeout_s * 1000))
            try:
                admin = factory(
                    bootstrap_servers=list(self.servers()),
                    client_id=cid,
                    # ElectLeaders carries timeout_ms and is answered when it runs out: leave
                    # the answer time to arrive.
                    request_timeout_ms=timeout_ms + ANSWER_MARGIN_MS,
                    bootstrap_timeout_ms=timeout_ms,
                    **(self.security.kafka_python() if self.security is not None else {}),
                )
            except KafkaControllerError:
                raise
            except Exception as e:
                raise KafkaAdminError(
                    f"cannot connect to {','.join(self.servers())}{self._no_controller()}: {_describe(e)}"
                ) from None
            self._seed_controller(admin)
            self._clients[operation_id] = admin
        return admin

    def _no_controller(self) -> str:
        if self.store is None or self.bootstrap is not None:
            return ""
        try:
            none = self.store.get_controller_id() is None
        except KafkaControllerError:
            return ""
        return " (no controller is registered in /controller)" if none else ""

    def _seed_controller(self, admin: Any) -> None:
        """Tell kafka-python which broker is the controller, as ZooKeeper says: it would otherwise
        ask a random broker (Metadata), and wait its whole request timeout on one that accepts
        connections but does not answer. kafka-python 3.0.12 keeps it in ``_controller_id`` and
        looks again on NOT_CONTROLLER, so a stale seed costs one retry."""
        if self.store is None or not hasattr(admin, "_controller_id"):
            return
        try:
            controller = self.store.get_controller_id()
        except KafkaControllerError:
            return
        if controller is not None and controller >= 0:
            admin._controller_id = controller

    def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for admin in clients:
            try:
                admin.close()
            except Exception as e:  # closing is best effort
                log.debug("closing a Kafka admin client failed: %s", e)

    def __enter__(self) -> KafkaAdmin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _retrying(self, what: str, operation_id: str | None, call: Callable[[Any], R]) -> R:
        """``call(client)`` until it answers or the timeout passes. After a failure the client is
        dropped and the next attempt bootstraps a new one (kafka-python retries NOT_CONTROLLER once,
        but keeps a controller id or broker list that a restart made stale: UnknownBrokerIdError)."""
        deadline = self._clock() + self.timeout_s
        delay = 0.2
        while True:
            admin = self.client(operation_id)
            try:
                return call(admin)
            except KafkaControllerError:
                raise
            except (ValueError, TypeError) as e:
                raise InvalidArgumentError(f"{what}: {e}") from None
            except Exception as e:
                self._drop(operation_id)
                if self._clock() + delay >= deadline:
                    raise KafkaAdminError(
                        f"{what} failed after {self.timeout_s:g}s: {_describe(e)}"
                    ) from None
                log.info("%s failed (%s); retrying in %.1fs with a new client", what, _describe(e), delay)
                self._sleep(delay)
                delay = min(delay * 2, 2.0)

    def _drop(self, operation_id: str | None) -> None:
        admin = self._clients.pop(operation_id, None)
        if admin is not None:
            try:
                admin.close()
            except Exception as e:  # closing is best effort
                log.debug("closing a Kafka admin client failed: %s", e)

    # -- ElectLeaders --------------------------------------------------------------------------------------
    def elect_leaders(
        self,
        election_type: str,
        partitions: Iterable[TopicPartition] | None = None,
        operation_id: str | None = None,
    ) -> A.ElectLeadersResponse:
        """Preferred or unclean election for ``partitions`` (None: every partition; as Kafka's tool
        shows for that case, partitions that needed no election are left out)."""
        kind = str(election_type).strip().lower()
        if kind not in ELECTION_TYPES:
            raise InvalidArgumentError(
                f"invalid election type {brief(election_type)}: expected preferred or unclean"
            )
        wanted = None if partitions is None else _by_topic(partitions)
        if wanted == {}:
            return A.ElectLeadersResponse(Errors.NONE, {})
        response = self._retrying(
            f"{kind} election",
            operation_id,
            lambda admin: admin.elect_leaders(
                ELECTION_TYPES[kind], wanted, timeout_ms=self._timeout_ms(), raise_errors=False
            ),
        )
        top = getattr(response, "error_code", 0) or 0
        if top:
            raise KafkaAdminError(f"{kind} election refused: {error_name(top)}", error_name(top))
        raw: dict[TopicPartition, tuple[str, str | None]] = {}
        for result in response.replica_election_results:
            for p in result.partition_result:
                raw[TopicPartition(result.topic, p.partition_id)] = (
                    error_name(p.error_code),
                    p.error_message,
                )
        if partitions is None:
            raw = {tp: r for tp, r in raw.items() if r[0] != Errors.ELECTION_NOT_NEEDED}
        leaders = self._leaders([tp for tp, (error, _) in raw.items() if error == Errors.NONE])
        return A.ElectLeadersResponse(
            Errors.NONE,
            {
                tp: A.PartitionElectionResult(error, leaders.get(tp, -1), message)
                for tp, (error, message) in raw.items()
            },
        )

    def _leaders(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        if not tps or self.store is None:
            return {}
        out = {}
        for tp, s in self.store.get_partition_states(tps).items():
            if isinstance(s, LeaderIsrAndControllerEpoch):
                out[tp] = s.leader_and_isr.leader
        return out

    # -- partition reassignments ---------------------------------------------------------------------------
    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        operation_id: str | None = None,
    ) -> A.AlterPartitionReassignmentsResponse:
        """Start (target replicas) or cancel (None) reassignments; per-partition errors in the answer."""
        if not reassignments:
            return A.AlterPartitionReassignmentsResponse(Errors.NONE, {})
        from kafka import TopicPartition as KTopicPartition

        plan = {
            KTopicPartition(tp.topic, tp.partition): None if r is None else [int(b) for b in r]
            for tp, r in reassignments.items()
        }
        answer = self._retrying(
            "reassignment",
            operation_id,
            lambda admin: admin.alter_partition_reassignments(plan, timeout_ms=self._timeout_ms()),
        )
        results = {}
        for ktp, err in answer.items():
            name = Errors.NONE if err is None else error_name(int(err.errno))
            results[TopicPartition(ktp.topic, ktp.partition)] = A.ReassignmentResult(
                name, None if err is None else err.description
            )
        return A.AlterPartitionReassignmentsResponse(Errors.NONE, results)

    def list_partition_reassignments(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> A.ListPartitionReassignmentsResponse:
        wanted = None if partitions is None else _by_topic(partitions)
        if wanted == {}:
            return A.ListPartitionReassignmentsResponse(Errors.NONE, {})
        listed = self._retrying(
            "listing reassignments",
            None,
            lambda admin: admin.list_partition_reassignments(wanted, timeout_ms=self._timeout_ms()),
        )
        return A.ListPartitionReassignmentsResponse(
            Errors.NONE,
            {
                TopicPartition(ktp.topic, ktp.partition): ReplicaAssignment(
                    tuple(v["replicas"]), tuple(v["adding_replicas"]), tuple(v["removing_replicas"])
                )
                for ktp, v in listed.items()
            },
        )

    def _timeout_ms(self) -> int:
        return max(1000, min(int(self.timeout_s * 1000), 2**31 - 1))


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in dict.fromkeys(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out


#: kafka-python's text for a refused admin request: the whole request and response reprs.
_REQUEST_FAILED = re.compile(r"Request '.*' failed with response '(?P<response>.*)'", re.DOTALL)
#: The broker's own messages inside such a response repr.
_ERROR_MESSAGE = re.compile(r"""error_message=(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")""")
#: A described error is at most this long (one line of a terminal or a log).
DESCRIBED_LIMIT = 300


def describe_kafka_error(e: BaseException) -> str:
    """One line from a kafka-python error: Kafka's error name for a broker's error
    (``INVALID_PARTITIONS: Topic currently has 4 partitions, ...``), the class name for the
    client's own (``KafkaTimeoutError: ...``).

    kafka-python words a refused admin request as ``Request '<repr>' failed with response
    '<repr>'``: the broker's ``error_message`` is taken out of it, or Kafka's description of the
    error when the broker sent none; the reprs themselves are never shown."""
    cls = type(e).__name__
    text = str(e).strip()
    if text.startswith("[Error"):  # kafka-python's "[Error 37] InvalidPartitionsError: message"
        text = text.split("] ", 1)[-1]
    if text.startswith(cls):
        text = text[len(cls) :].lstrip(":").strip()
    kafka_name = getattr(type(e), "message", None) if getattr(e, "errno", None) is not None else None
    name = kafka_name if isinstance(kafka_name, str) and kafka_name else cls
    failed = _REQUEST_FAILED.search(text)
    if failed is not None:
        messages = [a or b for a, b in _ERROR_MESSAGE.findall(failed.group("response")) if a or b]
        text = "; ".join(dict.fromkeys(messages))
    if not text and name != cls:
        text = str(getattr(type(e), "description", "") or "")
    text = " ".join(text.split())  # one line
    if len(text) > DESCRIBED_LIMIT:
        text = text[: DESCRIBED_LIMIT - 3] + "..."
    return f"{name}: {text}" if text else name


_describe = describe_kafka_error
