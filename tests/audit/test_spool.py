"""The spool: ordered, durable across reopen, cuts torn tails, one owner at a time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_controller.audit.rows import Batch
from kafka_controller.audit.spool import SPOOL_FILE, Spool
from kafka_controller.domain.errors import InvalidArgumentError


def batch(start: int, n: int) -> Batch:
    return {
        "partition_transitions": [[1, 2, i, "ev", None, "t", i, "A", "B"] for i in range(start, start + n)]
    }


def sequences(batches: list[Batch]) -> list[int]:
    return [row[2] for b in batches for row in b["partition_transitions"]]


def test_batches_come_back_in_order_after_reopen(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    assert not s
    for k in range(5):
        s.append(batch(k * 10, 10))
    assert (s.rows, s.frames) == (50, 5)
    s.close()
    s = Spool(tmp_path)
    assert (s.rows, s.frames) == (50, 5)
    assert sequences(list(s.read())) == list(range(50))
    s.close()


def test_clear_empties_it_for_good(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    s.append(batch(0, 3))
    s.clear()
    assert (s.rows, s.frames, s.size) == (0, 0, 0)
    s.append(batch(3, 2))
    s.close()
    s = Spool(tmp_path)
    assert sequences(list(s.read())) == [3, 4]
    s.close()


@pytest.mark.parametrize("cut", [1, 7, 16, 40])
def test_a_torn_last_frame_is_cut_off_on_open(tmp_path: Path, cut: int) -> None:
    s = Spool(tmp_path)
    s.append(batch(0, 4))
    s.append(batch(4, 4))
    s.close()
    path = tmp_path / SPOOL_FILE
    data = path.read_bytes()
    first_frame_end = len(data) // 2  # both frames have the same size
    path.write_bytes(data[: first_frame_end + cut])  # the second frame only partly written
    s = Spool(tmp_path)
    assert (s.rows, s.frames) == (4, 1)
    assert path.stat().st_size == first_frame_end
    s.append(batch(8, 1))  # appends land after the last good frame
    assert sequences(list(s.read())) == [0, 1, 2, 3, 8]
    s.close()


def test_a_corrupt_frame_ends_the_readable_spool(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    s.append(batch(0, 2))
    s.append(batch(2, 2))
    s.close()
    path = tmp_path / SPOOL_FILE
    data = bytearray(path.read_bytes())
    data[-3] ^= 0xFF  # flip a payload byte of the second frame: its checksum no longer matches
    path.write_bytes(bytes(data))
    s = Spool(tmp_path)
    assert sequences(list(s.read())) == [0, 1]
    s.close()


def test_one_owner_per_directory(tmp_path: Path) -> None:
    s = Spool(tmp_path)
    with pytest.raises(InvalidArgumentError, match="in use by another process"):
        Spool(tmp_path)
    s.close()
    Spool(tmp_path).close()


def test_unusable_directory_is_a_one_line_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(InvalidArgumentError, match="cannot use audit spool directory"):
        Spool(blocker / "spool")


def test_append_is_fsynced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = Spool(tmp_path)
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    s.append(batch(0, 1))
    assert synced, "append returned without fsync"
    s.close()


def test_rows_spooled_before_revision_0003_replay_with_the_new_columns(tmp_path: Path) -> None:
    """A spool written by the previous version holds rows without the appended columns."""
    from kafka_controller.audit.rows import to_batch
    from tests.audit.factories import controller_event, partition_transition

    batch = to_batch([[partition_transition(1), controller_event(3, "failover")]]).batch
    old = {
        table: [row[: -1 if table != "controller_events" else -6] for row in rows]
        for table, rows in batch.items()
    }
    spool = Spool(tmp_path)
    spool.append(old)
    assert list(spool.read()) == [batch]
    spool.close()
