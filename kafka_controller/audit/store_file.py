"""Is the SQLite file the writer has open still the one at its path?

A SQLite connection holds its database file open by descriptor. Delete the file (``rm``, a log
clean-up, a disk tidy) or rename another over it, and the connection goes on committing into the
old inode without an error: every later row lands in a file no reader can open. ``StoreFile``
remembers the identity (``st_dev``, ``st_ino``) of the file at the path when the writer opened it
and compares it with what the path names now: one ``stat(2)``, cheap enough to run before and after
every batch commit and on every idle cycle of the writer thread.

Nothing is opened by this module: closing any descriptor of a file drops every POSIX lock the
process holds on it, SQLite's included, so a second descriptor of our own would be a hazard.
"""

from __future__ import annotations

import os
from enum import Enum
from pathlib import Path


class FileChange(Enum):
    DELETED = "deleted"
    REPLACED = "replaced"


class StoreFile:
    """The identity of the audit database file; for PostgreSQL (``path`` None) nothing ever changes."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._identity: tuple[int, int] | None = None
        self._known = False

    def _stat(self) -> tuple[int, int] | None:
        assert self.path is not None
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None
        except OSError:  # e.g. a directory that cannot be searched: not a sign of replacement
            return self._identity
        return st.st_dev, st.st_ino

    def remember(self) -> None:
        """Take the file now at the path as the one the writer's connections have open (call right
        after they opened it: a file deleted in between is then reported as deleted, at worst
        costing an unneeded recreation, never a missed one)."""
        if self.path is None:
            return
        self._identity = self._stat()
        self._known = True

    def forget(self) -> None:
        """The writer closed its connections: nothing to compare until the next ``remember``."""
        self._identity = None
        self._known = False

    def change(self) -> FileChange | None:
        """How the path differs from the remembered file, or None if it names the same one."""
        if self.path is None or not self._known:
            return None
        now = self._stat()
        if now is not None and now == self._identity:
            return None
        return FileChange.DELETED if now is None else FileChange.REPLACED
