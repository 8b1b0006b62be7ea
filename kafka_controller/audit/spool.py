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
``kill -9`` of the process (the kernel holds the page) though not a power loss.
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

import orjson

from kafka_controller.audit.rows import Batch, batch_size, widen
from kafka_controller.domain.errors import InvalidArgumentError

log = logging.getLogger(__name__)

SPOOL_FILE = "audit-spool.bin"
JOURNAL_FILE = "audit-journal.bin"
LOCK_FILE = ".lock"
_HEADER = struct.Struct("<4sIII")
_MAGIC = b"KCA1"


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

    def _frames(self) -> Iterator[tuple[int, int, bytes]]:
        """(end offset, rows, payload) for each complete frame, stopping at the first bad one."""
        with open(self.path, "rb") as f:
            offset = 0
            while True:
                head = f.read(_HEADER.size)
                if len(head) < _HEADER.size:
                    return
                magic, length, crc, rows = _HEADER.unpack(head)
                if magic != _MAGIC:
                    return
                payload = f.read(length)
                if len(payload) < length or zlib.crc32(payload) != crc:
                    return
                offset += _HEADER.size + length
                yield offset, rows, payload

    def _scan(self) -> tuple[int, int, int]:
        rows = frames = valid_end = 0
        for end, n, _ in self._frames():
            rows += n
            frames += 1
            valid_end = end
        return rows, frames, valid_end

    def __bool__(self) -> bool:
        return self.frames > 0

    def append(self, batch: Batch) -> None:
        """Write one batch and fsync it. Raises ``OSError`` (e.g. disk full) having written nothing
        that a later open would count: a partial frame is cut off again."""
        payload = orjson.dumps(batch)
        rows = batch_size(batch)
        frame = _HEADER.pack(_MAGIC, len(payload), zlib.crc32(payload), rows) + payload
        try:
            written = os.write(self._fd, frame)
            while written < len(frame):
                written += os.write(self._fd, frame[written:])
            if self._durable:
                os.fsync(self._fd)
        except OSError:
            os.ftruncate(self._fd, self.size)
            raise
        self.size += len(frame)
        self.rows += rows
        self.frames += 1

    def read(self) -> Iterator[Batch]:
        """The spooled batches, oldest first."""
        for _, _, payload in self._frames():
            decoded: dict[str, list[list[object]]] = orjson.loads(payload)
            yield {table: [widen(table, row) for row in rows] for table, rows in decoded.items()}

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


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
