"""Records to rows, and the checks that set poison rows aside."""

from __future__ import annotations

import orjson

from kafka_controller.audit.rows import row_problem, split_valid, to_batch
from kafka_controller.audit.schema import LOADED_TABLES
from tests.audit.factories import controller_event, partition_transition, replica_transition


def test_rows_follow_the_loaded_column_order() -> None:
    p = partition_transition(3, unclean=True, operation_id="op-1", error=None)
    r = replica_transition(4)
    e = controller_event(5, detail="x")
    out = to_batch([[p, r], [e]])
    assert out.rows == 3 and out.rejected == []
    got = dict(
        zip(LOADED_TABLES["partition_transitions"], out.batch["partition_transitions"][0], strict=True)
    )
    assert got["topic"] == p.topic and got["partition"] == p.partition and got["sequence"] == 3
    assert got["isr_before"] == orjson.dumps(list(p.isr_before or ())).decode()
    assert got["unclean"] == 1 and got["operation_id"] == "op-1"
    got_r = dict(zip(LOADED_TABLES["replica_transitions"], out.batch["replica_transitions"][0], strict=True))
    assert got_r["replica"] == r.replica and got_r["to_state"] == r.to_state
    got_e = dict(zip(LOADED_TABLES["controller_events"], out.batch["controller_events"][0], strict=True))
    assert got_e["kind"] == e.kind and got_e["duration_ms"] == e.duration_ms and got_e["sequence"] is None


def test_unstamped_sequence_becomes_null_and_order_is_kept() -> None:
    out = to_batch([[partition_transition(i, sequence=-1 if i == 2 else i) for i in range(5)]])
    seqs = [row[2] for row in out.batch["partition_transitions"]]
    assert seqs == [0, 1, None, 3, 4]


def test_bad_outcome_and_foreign_objects_are_rejected_not_loaded() -> None:
    good = partition_transition(1)
    out = to_batch([[good, partition_transition(2, outcome="maybe"), "not a record"]])  # type: ignore[list-item]
    assert out.rows == 1
    reasons = [why for _, why in out.rejected]
    assert any("bad outcome 'maybe'" in why for why in reasons)
    assert any("not an audit record: str" in why for why in reasons)


def test_row_problem_names_the_column() -> None:
    row = to_batch([[partition_transition(1)]]).batch["partition_transitions"][0]
    assert row_problem("partition_transitions", row) is None
    cols = LOADED_TABLES["partition_transitions"]

    def with_(name: str, value: object) -> list[object]:
        out = list(row)
        out[cols.index(name)] = value
        return out

    assert "partition_transitions.partition must be a int32" in str(
        row_problem("partition_transitions", with_("partition", "7"))
    )
    assert "partition_transitions.topic is required" in str(
        row_problem("partition_transitions", with_("topic", None))
    )
    assert "from_state must be a string of at most 32" in str(
        row_problem("partition_transitions", with_("from_state", "x" * 33))
    )
    assert "error must be a string" in str(row_problem("partition_transitions", with_("error", "nul\x00")))
    assert "controller_id must be a int32" in str(
        row_problem("partition_transitions", with_("controller_id", 2**40))
    )
    assert "outcome must be one of" in str(row_problem("partition_transitions", with_("outcome", "meh")))
    assert "expected 21 values" in str(row_problem("partition_transitions", row[:-1]))

    good, bad = split_valid({"partition_transitions": [row, with_("partition", "7"), row]})
    assert good == {"partition_transitions": [row, row]}
    assert [(t, why.split(" must")[0]) for t, _, why in bad] == [
        ("partition_transitions", "partition_transitions.partition")
    ]
