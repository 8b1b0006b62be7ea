"""The audit package's curated names resolve lazily, and the writer is an ``AuditSink``."""

from __future__ import annotations

import inspect

import pytest

import kafka_controller.audit as audit
from kafka_controller.ports import AuditSink


def test_public_names_resolve() -> None:
    for name in audit.__all__:
        assert getattr(audit, name).__name__ == name
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = audit.no_such_name


def test_writer_record_matches_the_port() -> None:
    port = inspect.signature(AuditSink.record)
    ours = inspect.signature(audit.AuditWriter.record)
    assert list(ours.parameters) == list(port.parameters)
