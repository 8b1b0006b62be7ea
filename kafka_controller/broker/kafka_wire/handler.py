"""Kafka's binary protocol on the broker's listener: ApiVersions, Metadata and DescribeCluster.

``KafkaProtocolHandler.handle(payload)`` takes one frame's payload (its first byte told the
listener it is not a private-protocol frame) and returns the response payload, or ``None`` to
close the connection. As Kafka does, the connection is closed on an unknown API key, on a version
outside the supported range (except ApiVersions, answered with UNSUPPORTED_VERSION in the v0
format), and on a body that cannot be decoded; a request that fails while it is being handled is
answered with the API's error response, UNKNOWN_SERVER_ERROR per topic, resource or partition
(``error_responses``), and the connection stays open. It never raises.

Answers come from the broker's metadata cache, the last UpdateMetadata from the controller: the
live brokers with the endpoints they registered in ``/brokers/ids/<id>``, the controller id, and
every partition's leader, leader epoch, replicas, ISR and offline replicas. A topic the cache does
not know is auto-created when the broker and the request allow it (``auto.create.topics.enable``,
Kafka's default true), else UNKNOWN_TOPIC_OR_PARTITION.

With an authorizer (``authz.RequestAuthorization``), Metadata is filtered as Kafka's
``handleTopicMetadataRequest`` filters it: a topic the caller may not DESCRIBE is left out of an
all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named (whether it exists is not
revealed); auto-creation needs CREATE on CLUSTER or on the topic. The authorized-operations
bitfields are filled in when the request asks for them (Metadata v8+, DescribeCluster).
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from kafka_controller.broker.kafka_wire import api_versions as av
from kafka_controller.broker.kafka_wire import authz
from kafka_controller.broker.kafka_wire import describe_cluster as dc
from kafka_controller.broker.kafka_wire import metadata as md
from kafka_controller.broker.kafka_wire.error_responses import (
    describe_cluster_error_response,
    kio_error_response,
    metadata_error_response,
)
from kafka_controller.broker.kafka_wire.header import (
    API_VERSIONS,
    DESCRIBE_CLUSTER,
    METADATA,
    SUPPORTED,
    RequestHeader,
    decode_request_header,
    encode_response_header,
)
from kafka_controller.broker.kafka_wire.kio_api import KioApi, decode_request, encode_response
from kafka_controller.broker.kafka_wire.primitives import KafkaDecodeError, Reader, Writer
from kafka_controller.broker.kafka_wire.topic_checks import ApiException
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.requests import UpdateMetadataPartitionState
from kafka_controller.security.authorizer import AclOperation, ResourceType
from kafka_controller.transport.server import current_connection
from kafka_controller.zk.paths import validate_topic_name

log = logging.getLogger(__name__)

# Kafka's error codes (org.apache.kafka.common.protocol.Errors) used here.
UNKNOWN_SERVER_ERROR = -1
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
INVALID_TOPIC_EXCEPTION = 17
TOPIC_AUTHORIZATION_FAILED = 29
REPLICA_NOT_AVAILABLE = 9
UNSUPPORTED_VERSION = 35
UNKNOWN_TOPIC_ID = 100

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
#: ``auto_create(names) -> {name: error code to answer}``: Kafka's ``AutoTopicCreationManager``.
AutoCreate = Callable[[Sequence[str]], Mapping[str, int]]
SUPPORTED_RANGES = tuple((key, lo, hi) for key, (lo, hi, _) in sorted(SUPPORTED.items()))


def supported_table(apis: Mapping[int, KioApi]) -> dict[int, tuple[int, int, int]]:
    """The project codec's APIs and the ``kio`` ones: api_key -> (min, max, first flexible)."""
    table = dict(SUPPORTED)
    for key, api in apis.items():
        table[key] = (api.min_version, api.max_version, api.first_flexible)
    return table


def new_cluster_id() -> str:
    """A random id in Kafka's ``Uuid.toString`` form (22 characters of URL-safe base64)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode("ascii")
        if not text.startswith("-"):
            return text


def topic_id_bytes(topic_id: str | None) -> bytes:
    if not topic_id:
        return md.ZERO_UUID
    try:
        raw = base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4))
    except (ValueError, TypeError):
        return md.ZERO_UUID
    return raw if len(raw) == 16 else md.ZERO_UUID


class KafkaProtocolHandler:
    """Thread-safe: it reads the metadata cache, which hands out copies, and the APIs and
    ``auto_create`` it is given are safe to call from many request threads at once."""

    def __init__(
        self,
        cache: MetadataCache,
        cluster_id: Callable[[], str | None],
        apis: Mapping[int, KioApi] | None = None,
        auto_create: AutoCreate | None = None,
        authorization: authz.RequestAuthorization | None = None,
    ) -> None:
        self.cache = cache
        self.authorization = authorization or authz.RequestAuthorization(None, cache)
        self.cluster_id = cluster_id
        self.auto_create = auto_create
        self.apis: Mapping[int, KioApi] = dict(apis or {})
        self.table = supported_table(self.apis)
        self.ranges = tuple((key, lo, hi) for key, (lo, hi, _) in sorted(self.table.items()))

    def handle(self, payload: bytes | bytearray) -> bytes | None:
        try:
            return self._handle(payload)
        except KafkaDecodeError as e:
            log.info("Closing a Kafka-protocol connection: undecodable request: %s", e)
        except Exception:
            log.exception("Closing a Kafka-protocol connection: handling the request failed")
        return None

    def _handle(self, payload: bytes | bytearray) -> bytes | None:
        reader = Reader(payload)
        header = decode_request_header(reader, self.table)
        key, version = header.api_key, header.api_version
        supported = self.table.get(key)
        if supported is None:
            log.info("Closing a Kafka-protocol connection: unknown api key %d", key)
            return None
        lo, hi, _ = supported
        writer = Writer()
        if key == API_VERSIONS and version > hi:
            encode_response_header(writer, key, 0, header.correlation_id)
            av.encode_response(writer, av.ApiVersionsResponse(UNSUPPORTED_VERSION, self.ranges), 0)
            return writer.getvalue()
        if not lo <= version <= hi:
            log.info("Closing a Kafka-protocol connection: api key %d version %d unsupported", key, version)
            return None
        encode_response_header(writer, key, version, header.correlation_id, self.table)
        api = self.apis.get(key)
        if api is not None:
            request = decode_request(key, version, reader.data, reader.pos)
            try:
                response = api.handle(header, request)
            except ApiException as e:  # Kafka's ApiException: its code, answered everywhere the API has one
                response = kio_error_response(key, version, request, e.code, e.message)
                if response is None:
                    raise
            except Exception:
                response = kio_error_response(key, version, request)
                if response is None:
                    raise
                _log_failure(header)
            return writer.getvalue() + encode_response(key, version, response)
        if key == API_VERSIONS:
            av.decode_request(reader, version)
            av.encode_response(writer, av.ApiVersionsResponse(NONE, self.ranges), version)
        elif key == METADATA:
            request = md.decode_request(reader, version)
            try:
                answer = self.metadata(request, version)
            except Exception:
                _log_failure(header)
                answer = metadata_error_response(request, UNKNOWN_SERVER_ERROR)
            md.encode_response(writer, answer, version)
        else:
            assert key == DESCRIBE_CLUSTER
            asked = dc.decode_request(reader, version)
            try:
                md_view = self.metadata(md.MetadataRequest(topics=()), 1)
                cluster = dc.DescribeClusterResponse(
                    NONE,
                    None,
                    self.cluster_id() or "",
                    md_view.controller_id,
                    md_view.brokers,
                    cluster_authorized_operations=self.authorization.cluster_operations()
                    if asked.include_cluster_authorized_operations
                    else md.AUTHORIZED_OPERATIONS_OMITTED,
                )
            except Exception:
                _log_failure(header)
                cluster = describe_cluster_error_response(UNKNOWN_SERVER_ERROR)
            dc.encode_response(writer, cluster, version)
        return writer.getvalue()

    # -- Metadata ---------------------------------------------------------------------------------------
    def brokers(self) -> tuple[md.MetadataBroker, ...]:
        """The alive brokers' endpoints of the listener the request came in on: a client on the SSL
        listener is sent to SSL endpoints; a broker without that listener is left out (Kafka's
        ``getAliveBrokerNodes(listenerName)``)."""
        conn = current_connection()
        listener = conn.listener if conn is not None and conn.listener else None
        out = []
        for b in sorted(self.cache.alive_brokers(), key=lambda b: b.id):
            if listener is None:
                ep = b.endpoint()
            else:
                ep = next((e for e in b.endpoints if e.listener_name == listener), None)
            if ep is not None:
                out.append(md.MetadataBroker(b.id, ep.host, ep.port, b.rack))
        return tuple(out)

    def metadata(self, request: md.MetadataRequest, version: int) -> md.MetadataResponse:
        """Kafka's ``KafkaApis.getTopicMetadata`` over this broker's cache: a topic named that the cache
        does not know is INVALID_TOPIC_EXCEPTION when its name is not a legal one (``Topic.validate``);
        otherwise, when the request allows auto-creation (v4+; always before) and the broker's
        ``auto.create.topics.enable`` is on, ``auto_create`` writes it and says what to answer
        (LEADER_NOT_AVAILABLE once written), else UNKNOWN_TOPIC_OR_PARTITION. A request for every
        topic creates nothing."""
        brokers = self.brokers()
        alive = {b.node_id for b in brokers}
        authorization = self.authorization
        wanted: Iterable[md.MetadataRequestTopic]
        if request.topics is None:
            by_topic = self.cache.topic_partition_states()
            wanted = (
                md.MetadataRequestTopic(name)
                for name in sorted(by_topic)
                if authorization.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            )
        else:
            wanted = dict.fromkeys(request.topics)  # asked twice, answered once
            by_topic = self.cache.topic_partition_states(t.name for t in wanted if t.name is not None)
        topics = []
        missing: list[str] = []
        for t in wanted:
            name = t.name
            if (
                name is not None
                and request.topics is not None
                and not authorization.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name)
            ):
                topics.append(
                    md.MetadataTopic(TOPIC_AUTHORIZATION_FAILED, name, is_internal=name in INTERNAL_TOPICS)
                )
                continue
            states = by_topic.get(name) if name is not None else None
            if name is None or states is None:
                if name is None:
                    error = UNKNOWN_TOPIC_ID
                elif _valid_topic_name(name):
                    error = UNKNOWN_TOPIC_OR_PARTITION
                    missing.append(name)
                else:
                    error = INVALID_TOPIC_EXCEPTION
                topics.append(
                    md.MetadataTopic(error, t.name, is_internal=name in INTERNAL_TOPICS, topic_id=t.topic_id)
                )
                continue
            partitions = tuple(_partition(s, alive, version == 0) for s in states)
            topics.append(
                md.MetadataTopic(
                    NONE,
                    t.name,
                    partitions,
                    t.name in INTERNAL_TOPICS,
                    topic_id_bytes(self.cache.topic_id(name)) if version >= 10 else md.ZERO_UUID,
                )
            )
        if missing and self.auto_create is not None and request.allow_auto_topic_creation:
            refused = set()
            if not authorization.cluster(AclOperation.CREATE):
                refused = {
                    n
                    for n in missing
                    if not authorization.allowed(AclOperation.CREATE, ResourceType.TOPIC, n)
                }
            created = (
                dict(self.auto_create([n for n in missing if n not in refused]))
                if len(refused) < len(missing)
                else {}
            )
            created.update(dict.fromkeys(refused, TOPIC_AUTHORIZATION_FAILED))
            topics = [
                dataclasses.replace(t, error_code=created[t.name])
                if t.name is not None and t.error_code == UNKNOWN_TOPIC_OR_PARTITION and t.name in created
                else t
                for t in topics
            ]
        if request.include_topic_authorized_operations:
            topics = [
                t
                if t.name is None or t.error_code == TOPIC_AUTHORIZATION_FAILED
                else dataclasses.replace(
                    t, topic_authorized_operations=authorization.operations(ResourceType.TOPIC, t.name)
                )
                for t in topics
            ]
        cluster_operations = (
            authorization.cluster_operations()
            if request.include_cluster_authorized_operations
            else md.AUTHORIZED_OPERATIONS_OMITTED
        )
        return md.MetadataResponse(
            brokers,
            self.cluster_id(),
            self.cache.controller_id,
            tuple(topics),
            cluster_authorized_operations=cluster_operations,
        )


def _valid_topic_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except InvalidArgumentError:
        return False
    return True


def _log_failure(header: RequestHeader) -> None:
    """Kafka's ``RequestHandlerHelper.handleError``: the request is answered with UNKNOWN_SERVER_ERROR
    and the connection stays open; the cause goes to the log, never to the client."""
    log.exception(
        "Kafka-protocol request failed (api key %d v%d, correlation id %d, client %r): "
        "answered UNKNOWN_SERVER_ERROR",
        header.api_key,
        header.api_version,
        header.correlation_id,
        header.client_id,
    )


def _partition(
    s: UpdateMetadataPartitionState, alive: Collection[int], filter_unavailable: bool
) -> md.MetadataPartition:
    """Kafka's rules: a leader that is not a live broker is LEADER_NOT_AVAILABLE with leader -1;
    v0 lists only live replicas and says REPLICA_NOT_AVAILABLE when some were left out."""
    replicas, isr = s.replicas, s.isr
    error = NONE
    if filter_unavailable:
        live_replicas = tuple(r for r in replicas if r in alive)
        live_isr = tuple(r for r in isr if r in alive)
        if len(live_replicas) < len(replicas) or len(live_isr) < len(isr):
            error = REPLICA_NOT_AVAILABLE
        replicas, isr = live_replicas, live_isr
    leader = s.leader
    if leader not in alive:
        error, leader = LEADER_NOT_AVAILABLE, -1
    return md.MetadataPartition(error, s.partition, leader, s.leader_epoch, replicas, isr, s.offline_replicas)
