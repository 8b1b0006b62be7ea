"""The broker's session file: its ZooKeeper session id and password, for the supervisor that sees it die.

Kafka notices a dead broker only when its ZooKeeper session expires (``zookeeper.session.timeout.ms``,
18 s by default). A supervisor that *observed* the broker process exit (``LocalCluster``, systemd's
``ExecStopPost=``) can do better: ZooKeeper lets a client re-attach to a live session with its id and
password and then close it, and closing it deletes the session's ephemerals (``/brokers/ids/<id>``,
``/controller``) at once. So the broker writes what that takes to
``<data dir>/zookeeper-session.json`` (mode 0600: the password is a credential for that session),
atomically (a reader sees the old record or the new one, never half of one). It writes it *before*
it registers, with the broker epoch unknown, and again with the epoch once registered: a process
killed between registering and writing would otherwise leave a registration no record can close.

The record names the process (pid and its start time, so that a recycled pid is not mistaken for
it), the broker id and the broker epoch (the registration's czxid), so that a closer can refuse a
file that is not the dead process's: see ``zk.session_close``. A clean shutdown removes the file.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import NamedTuple

from kafka_controller.domain.errors import InvalidArgumentError

SESSION_FILE_NAME = "zookeeper-session.json"
_FORMAT_VERSION = 1
#: The record's broker epoch before the registration it is written for exists.
UNKNOWN_BROKER_EPOCH = -1


class SessionFileError(InvalidArgumentError):
    """The session file is missing, unreadable or malformed (the message says which)."""


class SessionRecord(NamedTuple):
    broker_id: int
    pid: int
    #: The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22); -1 unknown.
    pid_start: int
    session_id: int
    password: bytes
    #: The registration's czxid; ``UNKNOWN_BROKER_EPOCH`` when written before registering.
    broker_epoch: int

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": _FORMAT_VERSION,
                "broker_id": self.broker_id,
                "pid": self.pid,
                "pid_start": self.pid_start,
                "session_id": self.session_id,
                "password": self.password.hex(),
                "broker_epoch": self.broker_epoch,
            }
        )

    @classmethod
    def from_json(cls, text: str, where: str) -> SessionRecord:
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("version") != _FORMAT_VERSION:
                raise ValueError(f"expected a version {_FORMAT_VERSION} record")
            ints = [data[k] for k in ("broker_id", "pid", "pid_start", "session_id", "broker_epoch")]
            if any(type(v) is not int for v in ints):
                raise ValueError("ids must be integers")
            return cls(ints[0], ints[1], ints[2], ints[3], bytes.fromhex(data["password"]), ints[4])
        except (ValueError, KeyError, TypeError) as e:
            raise SessionFileError(f"{where} is not a broker session file: {e}") from None


def session_file(data_dir: str | Path) -> Path:
    return Path(data_dir) / SESSION_FILE_NAME


def process_start(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot; -1 when it is gone or unknowable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return -1


def same_process_alive(pid: int, pid_start: int) -> bool:
    """Whether the process the record names still runs (not a zombie, not a recycled pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and (pid_start < 0 or int(fields[19]) == pid_start)


def write_session_file(data_dir: str | Path, record: SessionRecord) -> Path:
    """Write atomically with mode 0600: a temporary file created 0600, fsynced, renamed over."""
    path = session_file(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{SESSION_FILE_NAME}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(record.to_json())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path


def read_session_file(data_dir: str | Path) -> SessionRecord | None:
    """The record, or None when there is none (a clean shutdown removed it, or none was written)."""
    path = session_file(data_dir)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise SessionFileError(f"cannot read {path}: {e.strerror or e}") from None
    return SessionRecord.from_json(text, str(path))


def remove_session_file(data_dir: str | Path, pid: int | None = None) -> None:
    """Remove the file if this process (or ``pid``) wrote it: another incarnation's is left alone."""
    with contextlib.suppress(SessionFileError, OSError):
        record = read_session_file(data_dir)
        if record is not None and record.pid == (os.getpid() if pid is None else pid):
            session_file(data_dir).unlink()


def record_session(
    data_dir: str | Path, store: object, broker_id: int, broker_epoch: int = UNKNOWN_BROKER_EPOCH
) -> bool:
    """Write this process's record for ``store``'s current session; False when the store cannot
    tell its session's password (only the kazoo store can: fakes have no session to re-attach to).

    Called before registering (epoch unknown) and after (epoch known); see the module's docstring."""
    credentials = getattr(getattr(store, "backend", None), "session_credentials", None)
    found = credentials() if callable(credentials) else None
    if found is None:
        return False
    (session_id, password), pid = found, os.getpid()
    write_session_file(
        data_dir, SessionRecord(broker_id, pid, process_start(pid), session_id, password, broker_epoch)
    )
    return True
