"""Fuzz of the admin APIs' decoders through ``KafkaProtocolHandler.handle``: any bytes after a valid
request header (random, or a valid body with bytes changed) give either a closed connection (None) or
a response that decodes as that API's response of that version — never an exception, and nothing
half-written is left behind by a request that could not be decoded."""

from __future__ import annotations

import datetime
import logging
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader
from kio.static.primitive import i32Timedelta

from kafka_controller.broker.kafka_wire.header import decode_response_header
from kafka_controller.broker.kafka_wire.kio_api import response_schema
from kafka_controller.broker.kafka_wire.primitives import Reader
from tests.broker.admin_wire import Env, body, header_bytes, req_nested

RANGES = {19: (0, 7), 20: (0, 6), 37: (0, 3), 32: (0, 4), 33: (0, 2), 44: (0, 1)}
KEY_VERSIONS = [(k, v) for k, (lo, hi) in RANGES.items() for v in range(lo, hi + 1)]
ZERO = i32Timedelta.parse(datetime.timedelta(0))


def valid_body(key: int, v: int) -> bytes:
    """A small valid request of each API (a topic "t", a broker "1")."""
    if key == 19:
        t = req_nested(
            19,
            v,
            "CreatableTopic",
            name="t",
            num_partitions=2,
            replication_factor=1,
            assignments=(),
            configs=(),
        )
        return body(19, v, topics=(t,), timeout=ZERO, validate_only=False)
    if key == 20:
        if v >= 6:
            return body(
                20, v, topics=(req_nested(20, v, "DeleteTopicState", name="t", topic_id=None),), timeout=ZERO
            )
        return body(20, v, topic_names=("t",), timeout=ZERO)
    if key == 37:
        t = req_nested(37, v, "CreatePartitionsTopic", name="t", count=3, assignments=None)
        return body(37, v, topics=(t,), timeout=ZERO, validate_only=False)
    if key == 32:
        r = req_nested(
            32, v, "DescribeConfigsResource", resource_type=2, resource_name="t", configuration_keys=None
        )
        return body(32, v, resources=(r,), include_synonyms=True, include_documentation=False)
    c = req_nested(key, v, "AlterableConfig", name="retention.ms", value="1", config_operation=0)
    r = req_nested(key, v, "AlterConfigsResource", resource_type=2, resource_name="t", configs=(c,))
    return body(key, v, resources=(r,), validate_only=False)


@pytest.fixture(scope="module")
def env() -> Iterator[Env]:
    e = Env()
    e.store.create_topic("t", {0: [1]})
    e.sync()
    stop = e.run_controller()
    yield e
    stop.set()


def check(env: Env, key: int, v: int, data: bytes) -> None:
    answer = env.handler.handle(header_bytes(env.handler, key, v) + data)
    if answer is None:
        return
    reader = Reader(answer)
    assert decode_response_header(reader, key, v, env.handler.table) == 11
    _, size = entity_reader(response_schema(key, v))(reader.data, reader.pos)
    assert reader.pos + size == len(answer)


@pytest.mark.parametrize(("key", "v"), KEY_VERSIONS)
def test_valid_bodies_are_answered(env: Env, key: int, v: int) -> None:
    answer = env.handler.handle(header_bytes(env.handler, key, v) + valid_body(key, v))
    assert answer is not None
    check(env, key, v, valid_body(key, v))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kv=st.sampled_from(KEY_VERSIONS), data=st.binary(max_size=200))
def test_random_bodies_never_raise(
    env: Env, caplog: pytest.LogCaptureFixture, kv: tuple[int, int], data: bytes
) -> None:
    caplog.clear()  # one fixture for every example
    with caplog.at_level(logging.ERROR, logger="kafka_controller.broker.kafka_wire"):
        check(env, *kv, data)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], (
        "the handler hit an unexpected exception"
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    kv=st.sampled_from(KEY_VERSIONS),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, 10_000),
)
def test_mutated_bodies_never_raise(
    env: Env, caplog: pytest.LogCaptureFixture, kv: tuple[int, int], edits: list[tuple[int, int]], cut: int
) -> None:
    data = bytearray(valid_body(*kv))
    for pos, value in edits:
        data[pos % len(data)] = value
    data = data[: max(1, cut % (len(data) + 8))]
    caplog.clear()  # one fixture for every example
    with caplog.at_level(logging.ERROR, logger="kafka_controller.broker.kafka_wire"):
        check(env, *kv, bytes(data))
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], (
        "the handler hit an unexpected exception"
    )
