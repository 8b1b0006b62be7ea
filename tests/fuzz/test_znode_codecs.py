"""Every znode decoder, fed what others may write: a value of the right shape, or a
``ZNodeDecodeError`` that names the path in one line — never another exception
(docs/controller-behaviour.md §7.1).

The store reads through these decoders on every failover, so any other exception escaping one of
them stops every controller candidate from loading the cluster (see the huge-number examples).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.domain.errors import ZNodeDecodeError
from kafka_controller.domain.values import Broker, LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.ports import FeatureZNode
from kafka_controller.zk import admin_codecs as A
from kafka_controller.zk import codecs as C
from tests.fuzz import strategies as S

HUGE = "9" * 5000  # more digits than int() accepts from a string (Python >= 3.11)


def decodes_or_names_path(decode: Callable[[], Any], path: str) -> Any:
    """Run ``decode``; a failure must be a one-line ``ZNodeDecodeError`` about ``path``."""
    try:
        return decode()
    except ZNodeDecodeError as e:
        assert e.path == path, f"error names {e.path!r}, not {path!r}"
        assert path in str(e) and "\n" not in str(e), str(e)
        return e
    except Exception as e:  # the property under test: nothing else escapes a decoder
        raise AssertionError(f"{type(e).__name__} escaped the decoder for {path}: {e}") from e


def _ints(value: Any) -> bool:
    return isinstance(value, tuple) and all(type(x) is int for x in value)


@given(S.corrupt_payloads(S.VALID_CONTROLLER))
def test_controller(data: bytes | None) -> None:
    out = decodes_or_names_path(lambda: C.decode_controller(data, "/controller"), "/controller")
    assert out is None or type(out) is int or isinstance(out, ZNodeDecodeError)


@given(st.one_of(st.binary(max_size=40), S.TRICKY_STRINGS.map(str.encode)))
def test_controller_epoch(data: bytes) -> None:
    out = decodes_or_names_path(lambda: C.decode_controller_epoch(data), "/controller_epoch")
    assert type(out) is int or isinstance(out, ZNodeDecodeError)


@given(S.corrupt_payloads(S.VALID_PARTITION_STATE), st.integers(0, 2**31 - 1))
def test_partition_state(data: bytes | None, zk_version: int) -> None:
    path = "/brokers/topics/good/partitions/0/state"
    out = decodes_or_names_path(lambda: C.decode_partition_state(data, zk_version, path), path)
    if isinstance(out, LeaderIsrAndControllerEpoch):
        lai = out.leader_and_isr
        assert type(lai.leader) is int and type(lai.leader_epoch) is int and _ints(lai.isr)
        assert lai.zk_version == zk_version
    else:
        assert out is None or isinstance(out, ZNodeDecodeError)


@given(S.corrupt_payloads(S.VALID_TOPIC))
def test_topic(data: bytes | None) -> None:
    path = "/brokers/topics/good"
    out = decodes_or_names_path(lambda: C.decode_topic("good", data, path), path)
    if not isinstance(out, ZNodeDecodeError):
        topic_id, assignment = out
        assert topic_id is None or C.is_topic_id(topic_id)
        for tp, ra in assignment.items():
            assert tp.topic == "good" and type(tp.partition) is int
            assert _ints(ra.replicas) and _ints(ra.adding_replicas) and _ints(ra.removing_replicas)


@given(S.corrupt_payloads(S.VALID_BROKER))
def test_broker_registration(data: bytes | None) -> None:
    path = "/brokers/ids/7"
    out = decodes_or_names_path(lambda: C.decode_broker(7, data, path), path)
    if isinstance(out, Broker):
        assert out.id == 7
        assert all(type(ep.port) is int and isinstance(ep.host, str) for ep in out.endpoints)
    else:
        assert isinstance(out, ZNodeDecodeError)


@given(S.corrupt_payloads(S.VALID_REASSIGNMENT))
def test_reassignment(data: bytes | None) -> None:
    path = "/admin/reassign_partitions"
    out = decodes_or_names_path(lambda: A.decode_reassignment(data, path), path)
    if not isinstance(out, ZNodeDecodeError):
        assert all(isinstance(tp, TopicPartition) and _ints(rs) for tp, rs in out.items())


@given(S.corrupt_payloads(S.VALID_PREFERRED))
def test_preferred_replica_election(data: bytes | None) -> None:
    path = "/admin/preferred_replica_election"
    out = decodes_or_names_path(lambda: A.decode_preferred_replica_election(data, path), path)
    if not isinstance(out, ZNodeDecodeError):
        assert all(type(tp.topic) is str and type(tp.partition) is int for tp in out)


@given(S.corrupt_payloads(S.VALID_ISR_CHANGE))
def test_isr_change_notification(data: bytes | None) -> None:
    path = "/isr_change_notification/isr_change_0000000001"
    out = decodes_or_names_path(lambda: A.decode_isr_change_notification(data, path), path)
    if not isinstance(out, ZNodeDecodeError):
        assert all(type(tp.topic) is str and type(tp.partition) is int for tp in out)


@given(S.corrupt_payloads(S.VALID_LOG_DIR_EVENT))
def test_log_dir_event(data: bytes | None) -> None:
    path = "/log_dir_event_notification/log_dir_event_0000000001"
    out = decodes_or_names_path(lambda: A.decode_log_dir_event(data, path), path)
    assert type(out) is int or isinstance(out, ZNodeDecodeError)


@given(S.corrupt_payloads(S.VALID_CONFIG))
def test_entity_config(data: bytes | None) -> None:
    path = "/config/topics/good"
    out = decodes_or_names_path(lambda: A.decode_entity_config(data, path), path)
    if not isinstance(out, ZNodeDecodeError):
        assert all(type(k) is str and type(v) is str for k, v in out.items())


@given(S.corrupt_payloads(S.VALID_CONFIG_CHANGE))
def test_config_change_notification(data: bytes | None) -> None:
    path = "/config/changes/config_change_0000000001"
    out = decodes_or_names_path(lambda: A.decode_config_change_notification(data, path), path)
    assert type(out) is str or isinstance(out, ZNodeDecodeError)


@given(S.corrupt_payloads(S.VALID_CLUSTER_ID))
def test_cluster_id(data: bytes | None) -> None:
    out = decodes_or_names_path(lambda: A.decode_cluster_id(data, "/cluster/id"), "/cluster/id")
    assert type(out) is str or isinstance(out, ZNodeDecodeError)


@given(S.corrupt_payloads(S.VALID_FEATURE))
def test_feature(data: bytes | None) -> None:
    out = decodes_or_names_path(lambda: A.decode_feature(data, "/feature"), "/feature")
    if isinstance(out, FeatureZNode):
        assert out.status in (0, 1)
        assert all(type(lo) is int and type(hi) is int for lo, hi in out.features.values())
    else:
        assert isinstance(out, ZNodeDecodeError)


# Numbers with more digits than ``int()`` accepts from a string (4300 by default since Python 3.11)
# raise ValueError from ``int(text)``. Decoders that parse numbers out of *strings* must turn that
# into a ZNodeDecodeError like any other bad number: one such znode otherwise fails every failover.
_HUGE_CASES = {
    "controller_epoch": ("/controller_epoch", lambda: C.decode_controller_epoch(HUGE.encode())),
    "topic_partition_key": (
        "/brokers/topics/t",
        lambda: C.decode_topic("t", b'{"version":3,"partitions":{"' + HUGE.encode() + b'":[1]}}'),
    ),
    "topic_adding_key": (
        "/brokers/topics/t",
        lambda: C.decode_topic(
            "t", b'{"version":3,"partitions":{"0":[1]},"adding_replicas":{"' + HUGE.encode() + b'":[2]}}'
        ),
    ),
    "broker_endpoint_port": (
        "/brokers/ids/7",
        lambda: C.decode_broker(7, b'{"version":5,"endpoints":["PLAINTEXT://h:' + HUGE.encode() + b'"]}'),
    ),
}


@pytest.mark.parametrize("case", sorted(_HUGE_CASES))
def test_numbers_beyond_the_int_digit_limit_are_decode_errors(case: str) -> None:
    path, decode = _HUGE_CASES[case]
    assert isinstance(decodes_or_names_path(decode, path), ZNodeDecodeError)


# A decode error is logged and audited once per znode on every failover: it must say what is wrong
# in one short line, not echo a hostile payload (a 5,000-element list is ~25 KB of log per error).
_LONG = list(range(5000))
_LONG_VALUE_CASES = {
    "partition_state_isr": (
        "/s",
        lambda: C.decode_partition_state(
            S.serialize({**S.VALID_PARTITION_STATE, "isr": [*_LONG, "x"]}), 0, "/s"
        ),
    ),
    "topic_replicas": (
        "/brokers/topics/t",
        lambda: C.decode_topic("t", S.serialize({"version": 3, "partitions": {"0": [*_LONG, None]}})),
    ),
    "reassignment_replicas": (
        "/r",
        lambda: A.decode_reassignment(
            S.serialize(
                {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [*_LONG, 1.5]}]}
            ),
            "/r",
        ),
    ),
    "controller_brokerid": ("/controller", lambda: C.decode_controller(S.serialize({"brokerid": _LONG}))),
    "config_value": ("/c", lambda: A.decode_entity_config(S.serialize({"config": {"k": _LONG}}), "/c")),
}
MAX_MESSAGE = 500


@pytest.mark.parametrize("case", sorted(_LONG_VALUE_CASES))
def test_decode_errors_do_not_echo_huge_values(case: str) -> None:
    path, decode = _LONG_VALUE_CASES[case]
    error = decodes_or_names_path(decode, path)
    assert isinstance(error, ZNodeDecodeError)
    assert len(str(error)) <= MAX_MESSAGE, f"{len(str(error))}-character message: {str(error)[:120]}..."
