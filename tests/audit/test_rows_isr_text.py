"""Rows share one ISR string per distinct ISR tuple (a failover audits 300,000 replicas)."""

from __future__ import annotations

import orjson

from kafka_controller.audit.rows import to_batch
from tests.audit.factories import replica_transition


def test_equal_isrs_share_one_string_equal_to_the_json_encoding() -> None:
    a, b = replica_transition(1), replica_transition(2)
    a.isr_before, b.isr_before = (1, 2, 3), (1, 2, 3)
    a.isr_after, b.isr_after = [2, 3], [2, 3]  # a list is encoded each time, never cached
    rows = to_batch([[a, b]]).batch["replica_transitions"]
    texts = [[v for v in row if isinstance(v, str) and v.startswith("[")] for row in rows]
    assert texts[0] == texts[1] == ["[1,2,3]", "[2,3]"]
    assert texts[0][0] is texts[1][0]
    assert texts[0][0] == orjson.dumps([1, 2, 3]).decode()
