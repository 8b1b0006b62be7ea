"""``reconcile export --overwrite`` replaces a snapshot directory and nothing else (it once replaced
``/dev/null`` with a directory when told ``--out /dev/null --overwrite``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile.snapshot import SnapshotWriter


@pytest.mark.parametrize("overwrite", [False, True])
def test_overwrite_refuses_what_is_not_a_snapshot(tmp_path: Path, overwrite: bool) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("keep")
    with pytest.raises(InvalidArgumentError, match="exists and is not a directory"):
        SnapshotWriter(a_file, overwrite=overwrite)
    with pytest.raises(InvalidArgumentError, match="names no directory of its own"):
        SnapshotWriter("/", overwrite=overwrite)
    other = tmp_path / "other"
    other.mkdir()
    (other / "data.txt").write_text("keep")
    message = "is not a snapshot \\(no meta/\\)" if overwrite else "already exists and is not empty"
    with pytest.raises(InvalidArgumentError, match=message):
        SnapshotWriter(other, overwrite=overwrite)
    assert a_file.read_text() == "keep" and (other / "data.txt").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "other"]  # no temporary left behind


def test_overwrite_replaces_a_snapshot(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    (snap / "meta").mkdir(parents=True)
    (snap / "stale.txt").write_text("old")
    writer = SnapshotWriter(snap, overwrite=True)
    writer.abort()
    assert (snap / "stale.txt").exists()  # nothing replaced until commit
