"""The durable local spool: where audit batches wait while the database is unreachable.

One append-only file of frames, each ``magic | length | crc32 | rows`` (16 bytes, little endian)
followed by the batch as orjson. ``append`` writes a whole frame and fsyncs before returning, so a
batch the writer has reported durable survives a crash of the process or the machine. A crash in
the middle of an append leaves a torn frame at the tail; opening the spool finds the last complete
frame (by length and checksum) and cuts the rest off, so only the batch that was never acknowledged
is lost.

Replay reads the frames in order and the writer calls ``clear`` only after every row is committed;
a crash in between replays the same rows again, which the database's unique keys turn into no-ops.
An exclusive ``flock`` keeps two processes from sharing one spool directory.

The same frames, without fsync and without the lock, make the writer's *journal* (``JOURNAL_FILE``):
every batch the caller hands over is written there before ``record`` returns, so it survives a
``kill -9`` of the process (the kernel holds the page) though not a power loss. A journal frame
of a call with bulk records is *compact* (magic ``KCA2``): a list of parts in recording order,
``["rows", batch]`` or ``["cols", table, rows, columns]`` (a column segment, see
``rows.bulk_segment``), so the caller never makes a row tuple; a call's parts go into frames of
at most ``FRAME_ROWS`` rows of column segments, so no payload is large. ``read`` turns both kinds
into batches of at most ``READ_CHUNK_ROWS`` rows from column segments.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from kafka_controller.audit.bulk import Part, Segment, segment_batches
from kafka_controller.audit.rows import Batch, Row, batch_size, widen
from kafka_controller.domain.errors import InvalidArgumentError

log = logging.getLogger(__name__)

SPOOL_FILE = "audit-spool.bin"
JOURNAL_FILE = "audit-journal.bin"
LOCK_FILE = ".lock"
_HEADER = struct.Struct("<4sIII")
_MAGIC = b"KCA1"
_MAGIC_PARTS = b"KCA2"
#: The most rows ``read`` makes from column segments at once.
READ_CHUNK_ROWS = 50_000
#: The most rows of column segments in one compact frame: a failover's ~300,000 rows as one
#: frame made a ~17 MB payload on the controller's event thread at the end of the failover, while
#: its records were still held; in frames of 20,000 rows no payload passes ~1.5 MB.
FRAME_ROWS = 20_000


class Spool:
    """An fsync'd, append-only queue of batches on local disk. Not thread-safe: one owner thread.

    ``durable=False`` makes a journal: no fsync and no directory lock (the spool that shares the
    directory holds it)."""

    def __init__(
        self, directory: str | os.PathLike[str], *, name: str = SPOOL_FILE, durable: bool = True
    ) -> None:
        self.directory = Path(directory)
        self._durable = durable
        self._lock_fd = -1
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            if durable:
                self._lock_fd = os.open(self.directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise InvalidArgumentError(
                f"cannot use audit spool directory {self.directory}: {e.strerror}"
            ) from None
        if durable:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(self._lock_fd)
                raise InvalidArgumentError(
                    f"audit spool directory {self.directory} is in use by another process"
                ) from None
        self.path = self.directory / name
        existed = self.path.exists()
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        if not existed:
            _fsync_dir(self.directory)
        self.rows, self.frames, valid_end = self._scan()
        size = os.fstat(self._fd).st_size
        if valid_end < size:
            log.warning(
                "audit spool %s: dropping a torn frame of %d bytes at the tail", self.path, size - valid_end
            )
            os.ftruncate(self._fd, valid_end)
            os.fsync(self._fd)
        self.size = valid_end

    def _frames(self) -> Iterator[tuple[int, int, bytes, bytes]]:
        """(end offset, rows, payload, magic) for each complete frame, stopping at the first bad one."""
        with open(self.path, "rb") as f:
            offset = 0
            while True:
                head = f.read(_HEADER.size)
                if len(head) < _HEADER.size:
                    return
                magic, length, crc, rows = _HEADER.unpack(head)
                if magic != _MAGIC and magic != _MAGIC_PARTS:
                    return
                payload = f.read(length)
                if len(payload) < length or zlib.crc32(payload) != crc:
                    return
                offset += _HEADER.size + length
                yield offset, rows, payload, magic

    def _scan(self) -> tuple[int, int, int]:
        rows = frames = valid_end = 0
        for end, n, _, _ in self._frames():
            rows += n
            frames += 1
            valid_end = end
        return rows, frames, valid_end

    def __bool__(self) -> bool:
        return self.frames > 0

    def append(self, batch: Batch) -> None:
        """Write one batch and fsync it. Raises ``OSError`` (e.g. disk full) having written nothing
        that a later open would count: a partial frame is cut off again."""
        self._append(_MAGIC, orjson.dumps(batch), batch_size(batch))

    def append_parts(self, parts: list[Part], rows: int) -> None:
        """Write ``parts`` (``rows`` rows in all) as compact frames of at most ``FRAME_ROWS`` rows
        of column segments (a part of single records is never split), in order, then fsync once.
        As ``append``, raises ``OSError`` having written nothing that a later open would count."""
        start = (self.size, self.rows, self.frames)
        try:
            for frame, n in _frames_of(parts, FRAME_ROWS):
                self._append(_MAGIC_PARTS, orjson.dumps(frame), n, sync=False)
            if self._durable:
                os.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, start[0])
            self.size, self.rows, self.frames = start
            raise

    def _append(self, magic: bytes, payload: bytes, rows: int, *, sync: bool = True) -> None:
        # header and payload in one writev: a failover's frame is ~15 MB, not copied into a frame
        header = _HEADER.pack(magic, len(payload), zlib.crc32(payload), rows)
        total = len(header) + len(payload)
        try:
            written = os.writev(self._fd, [header, payload])
            while written < total:
                if written < len(header):
                    written += os.writev(self._fd, [header[written:], payload])
                else:
                    written += os.write(self._fd, memoryview(payload)[written - len(header) :])
            if sync and self._durable:
                os.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, self.size)
            raise
        self.size += total
        self.rows += rows
        self.frames += 1

    def read(self) -> Iterator[Batch]:
        """The spooled batches, oldest first (a compact frame may give several)."""
        for _, _, payload, magic in self._frames():
            if magic == _MAGIC:
                decoded: dict[str, list[list[object]]] = orjson.loads(payload)
                yield {table: [widen(table, row) for row in rows] for table, rows in decoded.items()}
            else:
                yield from _part_batches(orjson.loads(payload))

    def clear(self) -> None:
        """Forget every frame (call only once all of them are committed to the database)."""
        os.ftruncate(self._fd, 0)
        if self._durable:
            os.fsync(self._fd)
        self.size = self.rows = self.frames = 0

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._fd = self._lock_fd = -1


def _frames_of(parts: list[Part], limit: int) -> Iterator[tuple[list[Part], int]]:
    """``parts`` regrouped into frames of at most ``limit`` rows from column segments (a segment
    is cut into slices of its columns, each slice's sequence starting where its rows do; a part
    of single records goes whole into the frame being filled) and the rows each frame holds."""
    frame: list[Part] = []
    size = 0
    for part in parts:
        if len(part) == 2:  # ("rows", batch)
            frame.append(part)
            size += batch_size(part[1])
            continue
        _, table, n, columns = part
        start = 0
        while start < n:
            if size >= limit:
                yield frame, size
                frame, size = [], 0
            stop = min(n, start + limit - size)
            if start == 0 and stop == n:
                frame.append(part)
            else:
                frame.append(("cols", table, stop - start, [_sliced(c, start, stop) for c in columns]))
            size += stop - start
            start = stop
    if frame:
        yield frame, size


def _sliced(column: Any, start: int, stop: int) -> Any:
    """Rows ``start:stop`` of a segment's column (see ``bulk``: a list, ``{"c": v}`` or ``{"s": first}``)."""
    if type(column) is list:
        return column[start:stop]
    first = column.get("s")
    if first is not None and first >= 0:
        return {"s": first + start}
    return column


def _part_batches(parts: list[list[object]]) -> Iterator[Batch]:
    """Batches of a compact frame's parts, in order, none past ``READ_CHUNK_ROWS`` rows from segments."""
    batch: Batch = {}
    size = 0
    for part in parts:
        if part[0] == "rows":
            rows_by_table: dict[str, list[Row]] = part[1]  # type: ignore[assignment]
            for table, rows in rows_by_table.items():
                batch.setdefault(table, []).extend(widen(table, row) for row in rows)
                size += len(rows)
        else:
            segment: Segment = (part[1], part[2], part[3])  # type: ignore[assignment]
            for table, rows in segment_batches(segment, READ_CHUNK_ROWS):
                batch.setdefault(table, []).extend(rows)
                size += len(rows)
                if size >= READ_CHUNK_ROWS:
                    yield batch
                    batch, size = {}, 0
    if batch:
        yield batch


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
