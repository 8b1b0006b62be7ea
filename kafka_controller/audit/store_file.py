"""Is the SQLite file the writer has open still the one at its path?

A SQLite connection holds its database file open by descriptor. Delete the file (``rm``, a log
clean-up, a disk tidy) or rename another over it, and the connection goes on committing into the
old inode without an error: every later row lands in a file no reader can open. ``StoreFile``
remembers the identity (``st_dev``, ``st_ino``) of the file at the path when the writer opened it
and compares it with what the path names now: one ``stat(2)``, cheap enough to run before and after
every batch commit and on every idle cycle of the writer thread.

Nothing is opened by this module: closing any descriptor of a file drops every POSIX lock the
process holds on it, SQLite's included, so a second descriptor of our own would be a hazard.

The old file's WAL and its index (``-wal``, ``-shm``) are named after the path, not the file: a
connection that finds its database moved does not checkpoint and delete them on close (SQLite
treats a moved file as read-only), so they stay next to the new file, and the next connection
would read the old file's pages as the new one's (a "malformed" database, or the old rows showing
through). ``discard_stale`` removes them once the writer has closed its connections, but only if
they are the very files it had (same device and inode): another writer that already recreated the
database has a WAL of its own there, which must not be touched.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path

#: SQLite's files beside a WAL-mode database, named after its path.
COMPANIONS = ("-wal", "-shm")


class FileChange(Enum):
    DELETED = "deleted"
    REPLACED = "replaced"


class StoreFile:
    """The identity of the audit database file; for PostgreSQL (``path`` None) nothing ever changes."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._identity: tuple[int, int] | None = None
        self._known = False
        self._companions: dict[str, tuple[int, int]] = {}

    def _stat(self, suffix: str = "") -> tuple[int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(f"{self.path}{suffix}")
        except FileNotFoundError:
            return None
        except OSError:  # e.g. a directory that cannot be searched: not a sign of replacement
            return self._identity if not suffix else self._companions.get(suffix)
        return st.st_dev, st.st_ino

    def _learn_companions(self) -> None:
        """The WAL and index now beside the file: ours, as long as the file is (SQLite keeps them
        for as long as any connection has the database open)."""
        for suffix in COMPANIONS:
            if suffix not in self._companions:
                found = self._stat(suffix)
                if found is not None:
                    self._companions[suffix] = found

    def remember(self) -> None:
        """Take the file now at the path as the one the writer's connections have open (call right
        after they opened it: a file deleted in between is then reported as deleted, at worst
        costing an unneeded recreation, never a missed one)."""
        if self.path is None:
            return
        self._identity = self._stat()
        self._known = True
        self._companions.clear()
        if self._identity is not None:
            self._learn_companions()

    def forget(self) -> None:
        """The writer closed its connections: nothing to compare until the next ``remember``."""
        self._identity = None
        self._known = False
        self._companions.clear()

    def discard_stale(self) -> list[str]:
        """Remove the old file's WAL and index if they are still at the path (call after closing
        every connection, before opening a new one); the paths removed."""
        removed = []
        for suffix, identity in self._companions.items():
            if self._stat(suffix) == identity:
                try:
                    os.unlink(f"{self.path}{suffix}")
                except FileNotFoundError:
                    continue
                removed.append(f"{self.path}{suffix}")
        return removed

    def change(self) -> FileChange | None:
        """How the path differs from the remembered file, or None if it names the same one."""
        if self.path is None or not self._known:
            return None
        now = self._stat()
        if now is not None and now == self._identity:
            if len(self._companions) < len(COMPANIONS):
                self._learn_companions()
            return None
        return FileChange.DELETED if now is None else FileChange.REPLACED
