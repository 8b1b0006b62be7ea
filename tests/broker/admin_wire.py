"""A broker's admin APIs over an in-memory ZooKeeper, driven through ``KafkaProtocolHandler.handle``
with requests encoded by ``kio``; ``Env.sync()`` plays the controller (topic znodes -> UpdateMetadata,
deletion markers -> topic gone), so the waits of CreateTopics/DeleteTopics can be answered."""

from __future__ import annotations

import io
import threading
import time
from types import SimpleNamespace
from typing import Any

from kio.serial import entity_reader, entity_writer

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.kafka_wire.admin_apis import admin_apis
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler
from kafka_controller.broker.kafka_wire.header import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
)
from kafka_controller.broker.kafka_wire.kio_api import request_schema, response_schema
from kafka_controller.broker.kafka_wire.kio_build import build, nested
from kafka_controller.broker.kafka_wire.primitives import Reader, Writer
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.requests import UpdateMetadataPartitionState, UpdateMetadataRequest
from kafka_controller.domain.values import LEADER_DURING_DELETE, Broker, EndPoint
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore

DEADLINE_S = 20.0


class Env:
    def __init__(
        self, brokers: int = 3, *, racks: bool = False, config: dict[str, str] | None = None
    ) -> None:
        self.store = InMemoryMetadataStore()
        self.brokers = [
            Broker(i, (EndPoint("127.0.0.1", 9090 + i),), f"r{i % 2}" if racks else None)
            for i in range(1, brokers + 1)
        ]
        for b in self.brokers:
            self.store.register_broker(b)
        self.cache = MetadataCache(1)
        self.controller = SimpleNamespace(is_active=True)
        server = SimpleNamespace(
            store=self.store,
            metadata_cache=self.cache,
            controller=self.controller,
            config=BrokerConfig.of(1, config or {}),
        )
        self.handler = KafkaProtocolHandler(self.cache, lambda: "cluster", admin_apis(server))
        self.sync()

    def sync(self) -> None:
        """What the controller would send: every topic's partitions led by their first replica; a
        topic marked for deletion is deleted (znode and config gone, leader -2 in UpdateMetadata)."""
        states = []
        deleted = set(self.store.get_topic_deletions())
        topics = self.store.get_all_topics()
        read = self.store.get_replica_assignment_and_topic_ids(sorted(topics))
        ids = {}
        for topic, r in read.items():
            assert not isinstance(r, Exception)
            if r.topic_id:
                ids[topic] = r.topic_id
            for tp, ra in r.assignment.items():
                leader = LEADER_DURING_DELETE if topic in deleted else ra.replicas[0]
                states.append(
                    UpdateMetadataPartitionState(
                        topic, tp.partition, 1, leader, 0, ra.replicas, 0, ra.replicas, ()
                    )
                )
        for topic in deleted:
            self.store.delete_topic_recursively(topic, -1)
            self.store.delete_topic_configs([topic], -1)
        if deleted:
            self.store.delete_topic_deletions(sorted(deleted), -1)
        self.cache.update_metadata(UpdateMetadataRequest(7, 1, 1, 1, tuple(states), tuple(self.brokers), ids))

    def controller_in_background(self) -> threading.Thread:
        """Syncs once ZooKeeper changes (a topic created, extended or marked), like a controller would."""
        before = (self.store.get_all_topics(), self._partition_count(), self.store.get_topic_deletions())

        def run() -> None:
            deadline = time.monotonic() + DEADLINE_S
            while time.monotonic() < deadline:
                now = (self.store.get_all_topics(), self._partition_count(), self.store.get_topic_deletions())
                if now != before:
                    self.sync()
                    return
                time.sleep(0.01)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def run_controller(self) -> threading.Event:
        """Sync every few milliseconds until the returned event is set (for fuzzing: requests whose
        timeouts are days long must still be answered)."""
        stop = threading.Event()
        self.sync_errors: list[Exception] = []

        def run() -> None:
            while not stop.wait(0.005):
                try:
                    self.sync()
                except Exception as e:  # a race with a request being handled: next round
                    self.sync_errors.append(e)

        threading.Thread(target=run, daemon=True).start()
        return stop

    def _partition_count(self) -> int:
        read = self.store.get_replica_assignment_and_topic_ids(sorted(self.store.get_all_topics()))
        return sum(len(r.assignment) for r in read.values() if not isinstance(r, Exception))

    def call(self, key: int, version: int, client: str = "test", **fields: Any) -> Any:
        """Encode the request with kio, answer it, decode the response."""
        # a bytearray, as the listener hands frames over
        answer = self.handler.handle(bytearray(payload(self.handler, key, version, client, **fields)))
        assert answer is not None, f"api {key} v{version}: connection closed"
        reader = Reader(answer)
        assert decode_response_header(reader, key, version, self.handler.table) == 11
        response, size = entity_reader(response_schema(key, version))(reader.data, reader.pos)
        assert reader.pos + size == len(answer)
        return response

    def assignment(self, topic: str) -> dict[int, tuple[int, ...]]:
        r = self.store.get_replica_assignment_and_topic_ids([topic]).get(topic)
        if r is None:
            return {}
        assert not isinstance(r, Exception)
        return {tp.partition: ra.replicas for tp, ra in r.assignment.items()}


def request(key: int, version: int, **fields: Any) -> Any:
    return build(request_schema(key, version), **fields)


def req_nested(key: int, version: int, entity: str, /, **fields: Any) -> Any:
    return build(nested(request_schema(key, version), entity), **fields)


def body(key: int, version: int, **fields: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(request_schema(key, version))(buf, request(key, version, **fields))
    return buf.getvalue()


def header_bytes(handler: KafkaProtocolHandler, key: int, version: int, client: str = "test") -> bytes:
    w = Writer()
    encode_request_header(w, RequestHeader(key, version, 11, client), handler.table)
    return w.getvalue()


def payload(
    handler: KafkaProtocolHandler, key: int, version: int, client: str = "test", **fields: Any
) -> bytes:
    return header_bytes(handler, key, version, client) + body(key, version, **fields)
