"""kafka-python's transport chatter stays out of task logs: re-levelled to DEBUG by the cluster hook,
still there for whoever turns the ``kafka`` loggers up to DEBUG."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.airflow


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)  # as a task handler that leaves levels to the loggers
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def records() -> Iterator[Records]:
    import airflow.settings  # noqa: F401  # Airflow configures logging once, on import: before us

    handler = Records()
    root, package = logging.getLogger(), logging.getLogger("kafka")
    level = root.level
    package.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        package.removeHandler(handler)
        root.setLevel(level)
        package.setLevel(logging.NOTSET)


def _chatter() -> None:
    logging.getLogger("kafka.net.transport").error("<BrokerConnection node_id=3>: socket disconnected")
    logging.getLogger("kafka.cluster").warning("Connect attempt returned error 111 ECONNREFUSED")


def test_the_hooks_kafka_admin_keeps_transport_chatter_at_debug(records: Records) -> None:
    from kafka_controller.airflow.hooks.cluster import KafkaClusterHook

    hook = KafkaClusterHook()
    hook.__dict__["connection"] = SimpleNamespace(
        bootstrap_servers="127.0.0.1:1", request_timeout_s=1.0, kafka_security=None
    )
    hook._store = object()  # not read: the admin connects on its first request
    hook.get_kafka_admin()
    _chatter()
    assert records.records == []  # an INFO task log shows none of it

    logging.getLogger("kafka").setLevel(logging.DEBUG)  # looking at the wire on purpose
    _chatter()
    assert [(r.name, r.levelname) for r in records.records] == [
        ("kafka.net.transport", "DEBUG"),
        ("kafka.cluster", "DEBUG"),
    ]
    assert "socket disconnected" in records.records[0].getMessage()
