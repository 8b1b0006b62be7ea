"""The control socket of a running ``cluster up``: ``cluster stop-broker|start-broker|restart-broker``
and ``cluster status`` ask the process that started the brokers, because only it can restart one
with the very command line, ports and log it had (and reap it).

The socket is a Unix domain socket in a per-user runtime directory (``$KAFKA_CONTROLLER_RUNTIME_DIR``,
default ``$TMPDIR/kafka-controller-<uid>``, mode 0700 and checked to be ours: only its owner can
talk to it). ``cluster up`` also writes ``cluster-up.json`` into its data dir, saying where the
socket is, so ``--data-dir`` picks one cluster among several. The protocol is one JSON line each
way; requests are handed to ``cluster up``'s main thread (which owns the brokers) through a queue.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import stat
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from kafka_controller.cluster.process import process_alive
from kafka_controller.domain.errors import KafkaControllerError

RUNTIME_DIR_ENV = "KAFKA_CONTROLLER_RUNTIME_DIR"
#: Written into ``cluster up``'s data dir: its pid and where its control socket is.
POINTER_FILE = "cluster-up.json"
#: A request or reply larger than this is refused (they are a few hundred bytes).
MAX_MESSAGE = 1 << 20
#: The longest path a Unix socket can have on Linux (sun_path is 108 bytes, NUL included).
MAX_SOCKET_PATH = 107


class ControlError(KafkaControllerError):
    """No running ``cluster up`` to ask, or it could not be reached or did not answer."""


def runtime_dir(create: bool = False) -> Path:
    """The per-user directory of control sockets; with ``create``, made 0700. Refused when it is
    not a directory owned by this user and closed to others (another user could answer for us)."""
    configured = os.environ.get(RUNTIME_DIR_ENV)
    path = Path(configured) if configured else Path(tempfile.gettempdir()) / f"kafka-controller-{os.getuid()}"
    if create:
        try:
            path.mkdir(mode=0o700, parents=bool(configured), exist_ok=True)
        except OSError as e:
            raise ControlError(f"cannot create the control directory {path}: {e.strerror or e}") from None
    try:
        st = path.lstat()
    except FileNotFoundError:
        return path
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ControlError(
            f"control directory {path} is not a directory of this user closed to others; "
            f"remove it or set ${RUNTIME_DIR_ENV}"
        )
    return path


@dataclass
class Request:
    """One request from a client; ``reply`` is filled by the main thread, then ``done`` is set."""

    action: str
    broker: int | None
    timeout: float
    reply: dict[str, Any] = field(default_factory=dict)
    done: threading.Event = field(default_factory=threading.Event)


class ControlServer:
    """Listens on the control socket; each connection's request is queued for ``next_request``."""

    def __init__(self, data_dir: Path, details: dict[str, Any] | None = None) -> None:
        self.path = runtime_dir(create=True) / f"cluster-{os.getpid()}.sock"
        if len(os.fsencode(self.path)) > MAX_SOCKET_PATH:
            raise ControlError(f"control socket path {self.path} is too long for a Unix socket")
        self.pointer = data_dir / POINTER_FILE
        self.requests: queue.Queue[Request] = queue.Queue()
        self._closed = threading.Event()
        self.path.unlink(missing_ok=True)  # a leftover of a dead process with our pid
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(self.path))
        os.chmod(self.path, 0o600)
        self._sock.listen(8)
        self._sock.settimeout(0.2)
        pointer = {"pid": os.getpid(), "socket": str(self.path), **(details or {})}
        self.pointer.write_bytes(orjson.dumps(pointer) + b"\n")
        self._thread = threading.Thread(target=self._accept, name="cluster-control", daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(
                target=self._serve, args=(conn,), name="cluster-control-conn", daemon=True
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(5.0)
                request = parse_request(read_line(conn))
            except (OSError, ValueError) as e:
                with contextlib.suppress(OSError):
                    conn.sendall(orjson.dumps({"ok": False, "usage": True, "error": str(e)}) + b"\n")
                return
            self.requests.put(request)
            # the main thread answers every request, even when stopping (``drain``)
            request.done.wait()
            with contextlib.suppress(OSError):
                conn.settimeout(5.0)
                conn.sendall(orjson.dumps(request.reply) + b"\n")

    def next_request(self, timeout: float) -> Request | None:
        try:
            return self.requests.get(timeout=timeout)
        except queue.Empty:
            return None

    def drain(self, reason: str) -> None:
        """Answer every queued request with ``reason`` (``cluster up`` is stopping)."""
        while (request := self.next_request(0)) is not None:
            request.reply = {"ok": False, "error": reason}
            request.done.set()

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._sock.close()
        self._thread.join(timeout=2.0)
        self.drain("cluster up is stopping")
        self.path.unlink(missing_ok=True)
        self.pointer.unlink(missing_ok=True)


def read_line(conn: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_MESSAGE:
            raise ValueError("control message too large")
    return data


ACTIONS = ("stop-broker", "start-broker", "restart-broker", "status")


def parse_request(raw: bytes) -> Request:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ValueError("control request is not JSON") from None
    if not isinstance(value, dict) or value.get("action") not in ACTIONS:
        raise ValueError(f"control request must name an action among {', '.join(ACTIONS)}")
    broker = value.get("broker")
    timeout = value.get("timeout", 120.0)
    if broker is not None and (not isinstance(broker, int) or isinstance(broker, bool)):
        raise ValueError("control request's broker must be an integer")
    if not isinstance(timeout, int | float) or not 0 < timeout <= 86_400:
        raise ValueError("control request's timeout must be seconds above 0")
    return Request(value["action"], broker, float(timeout))


# -- the client side ---------------------------------------------------------------------------------


def _pointer(data_dir: Path) -> dict[str, Any]:
    path = data_dir / POINTER_FILE
    try:
        value = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        raise ControlError(
            f"no `cluster up` is running with --data-dir {data_dir} ({path} does not exist)"
        ) from None
    except (OSError, orjson.JSONDecodeError) as e:
        raise ControlError(f"cannot read {path}: {e}") from None
    if not isinstance(value, dict) or not isinstance(value.get("pid"), int) or "socket" not in value:
        raise ControlError(f"{path} is not a `cluster up` control file")
    if not process_alive(value["pid"]):
        raise ControlError(
            f"the `cluster up` of --data-dir {data_dir} (pid {value['pid']}) is no longer running"
        )
    return value


def live_sockets() -> dict[int, Path]:
    """The control sockets of this user's running ``cluster up`` processes, by their pid."""
    directory = runtime_dir()
    live: dict[int, Path] = {}
    if directory.is_dir():
        for sock in sorted(directory.glob("cluster-*.sock")):
            pid = sock.stem.removeprefix("cluster-")
            if pid.isdigit() and process_alive(int(pid)):
                live[int(pid)] = sock
    return live


def cluster_up_of(connect_string: str, timeout: float = 10.0) -> tuple[int, Path] | None:
    """The pid and control socket of the running ``cluster up`` whose ZooKeeper is
    ``connect_string``, or None: each live one is asked its status (a few, at most)."""
    for pid, sock in live_sockets().items():
        try:
            reply = ask(sock, "status", None, timeout)
        except ControlError:
            continue
        if reply.get("ok") and reply.get("zookeeper") == connect_string:
            return pid, sock
    return None


def find_socket(data_dir: Path | None) -> Path:
    """The control socket of the ``cluster up`` using ``data_dir``, or of the only one running."""
    if data_dir is not None:
        return Path(_pointer(data_dir)["socket"])
    directory = runtime_dir()
    live = live_sockets()
    if not live:
        raise ControlError(f"no `cluster up` is running (none has a control socket in {directory})")
    if len(live) > 1:
        pids = ", ".join(map(str, sorted(live)))
        raise ControlError(f"{len(live)} `cluster up` processes are running (pids {pids}): pass --data-dir")
    return next(iter(live.values()))


def ask(sock_path: Path, action: str, broker: int | None, timeout: float) -> dict[str, Any]:
    """Send one request and wait for its reply (the action's own ``timeout`` plus some slack); a
    refused or malformed answer is a ``ControlError``; an error reply is returned as it is."""
    message = orjson.dumps({"action": action, "broker": broker, "timeout": timeout}) + b"\n"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout + 30.0)
        try:
            conn.connect(str(sock_path))
            conn.sendall(message)
            raw = read_line(conn)
        except TimeoutError:
            raise ControlError(f"`cluster up` did not answer within {timeout + 30.0:g}s") from None
        except (OSError, ValueError) as e:
            raise ControlError(f"cannot reach `cluster up` at {sock_path}: {e}") from None
    try:
        reply = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ControlError(f"`cluster up` at {sock_path} closed the connection without an answer") from None
    if not isinstance(reply, dict) or "ok" not in reply:
        raise ControlError(f"`cluster up` at {sock_path} gave a malformed answer")
    return reply
