"""A real single-node ZooKeeper server in a child JVM, for development, demos and tests.

Why a real server rather than a fake: the contract suite and the integration tests must see
ZooKeeper's own semantics (sessions, ephemerals, multi, multi-read, watches). The jars come from the
installed pyspark package or ``$ZOOKEEPER_HOME`` (see ``java.py``); nothing is downloaded.

Choices worth knowing:

* It runs as a one-voter ensemble (``QuorumPeerMain``, ``standaloneEnabled=false``), not
  ``ZooKeeperServerMain``. Standalone mode has a start-up window (client port open, database not
  yet created) in which a connecting client hits a NullPointerException on the server and its
  socket is left open unanswered; the client then waits out its whole session timeout and, after
  a restart, comes back to an expired session. A quorum peer closes such early connections
  cleanly, so a restart is reliably a disconnection. It costs ~0.2 s of leader election.
* Readiness is ZooKeeper's ``srvr`` four-letter word reporting a ``Mode:``; ``ruok`` answers
  ``imok`` before the database is loaded, so it is not enough.
* ``forceSync=no``: each commit still reaches the OS before the client is answered, so data survives
  the JVM being killed (the faults tests need); only a machine crash could lose it, and skipping
  fsync keeps the shared test disks from dominating latency.
* Small ``tickTime`` and ``minSessionTimeout`` so session-expiry tests take about a second;
  ``maxClientCnxns=0`` since all test clients come from 127.0.0.1.
* The JVM is small (serial GC, C1 only) and its child dies with the parent: it runs in its own
  session (terminal Ctrl-C goes to the owner, which stops it cleanly), gets ``PR_SET_PDEATHSIG``
  on Linux when started from the main thread, and ``atexit`` stops anything still running.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import IO

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.embedded_os import (
    _can_die_with_parent,
    _check_int,
    _die_with_parent,
    _free_port,
    _port_free,
    four_letter_word,
)
from kafka_controller.zk.java import (
    EmbeddedZooKeeperError,
    find_java,
    find_zookeeper_classpath,
    zookeeper_version,
)
from kafka_controller.zk.server_files import (
    HOST,
    SERVER_ID,
    file_size,
    log_tail,
    read_from,
    render_log4j2_xml,
    render_logback_xml,
    render_zoo_cfg,
)
from kafka_controller.zk.server_security import ZkServerSecurity, write_private

__all__ = ["EmbeddedZooKeeper", "ZooKeeperStartError"]

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
LOG_FILE = "zookeeper.log"
OUT_FILE = "zookeeper.out"
_POLL_INTERVAL = 0.05
_TAIL_LINES = 12
_MAIN_THREAD_DIED = re.compile(r"ERROR .*Thread\[(#\d+,)?main,.*\] died")
_PORT_TAKEN = "Address already in use"


class ZooKeeperStartError(EmbeddedZooKeeperError):
    """The server process exited or did not serve in time; the message ends with its log tail."""


class EmbeddedZooKeeper:
    """One single-node ZooKeeper server process; ``start``/``stop``/``restart``/``kill`` it at will.

    ``port=0`` picks a free port on the first start and keeps it for restarts. Without ``data_dir``
    a temporary directory is used and removed by ``close()`` (or leaving the ``with`` block); data
    always survives ``stop``/``restart``/``kill``. ``heap_mb`` bounds the JVM heap (raise it for
    trees of several hundred thousand znodes); ``java`` and ``jars_dir`` override the look-ups
    described in ``java.py``. ``security`` adds SASL logins (optionally required) and a TLS
    ``secureClientPort`` (see ``server_security.py``).
    """

    #: Where clients reach it, and what its command runs under (``ip netns exec NS`` for a server
    #: in a network namespace): set by ensembles whose members live on other hosts.
    host: str = HOST
    command_prefix: tuple[str, ...] = ()

    def __init__(
        self,
        port: int = 0,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60000,
        java: str | os.PathLike[str] | None = None,
        jars_dir: str | os.PathLike[str] | None = None,
        heap_mb: int = 512,
        force_sync: bool = False,
        security: ZkServerSecurity | None = None,
    ) -> None:
        _check_int("port", port, 0, 65535)
        _check_int("tick_time_ms", tick_time_ms, 1, 60_000)
        _check_int("min_session_timeout_ms", min_session_timeout_ms, 1, 2**31 - 1)
        _check_int("max_session_timeout_ms", max_session_timeout_ms, min_session_timeout_ms, 2**31 - 1)
        _check_int("heap_mb", heap_mb, 32, 1 << 20)
        if data_dir is not None and Path(data_dir).exists() and not Path(data_dir).is_dir():
            raise InvalidArgumentError(f"data_dir {os.fspath(data_dir)} exists and is not a directory")
        self._port = port
        self._auto_port = port == 0
        self._owns_data_dir = data_dir is None
        self._data_dir = Path(data_dir).absolute() if data_dir is not None else None
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap_mb = heap_mb
        self.force_sync = force_sync
        self.security = security or ZkServerSecurity()
        self._secure_port = self.security.secure_port
        self._zk_version: tuple[int, ...] | None = None
        self._java_arg = java
        self._jars_dir = jars_dir
        self._command: list[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._out: IO[bytes] | None = None
        self._log_offsets = (0, 0)
        self._lock = threading.RLock()

    # -- properties ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        """The client port (0 until a port-0 server has started once)."""
        return self._port

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self._port}"

    @property
    def secure_port(self) -> int | None:
        """The TLS client port (None without TLS; 0 until a port-0 one has started once)."""
        return self._secure_port

    @property
    def secure_connect_string(self) -> str | None:
        return None if self._secure_port is None else f"{self.host}:{self._secure_port}"

    @property
    def data_dir(self) -> Path:
        """The data directory (created on first use; a temporary one when none was given)."""
        if self._data_dir is None:
            self._data_dir = Path(tempfile.mkdtemp(prefix="embedded-zk-"))
        return self._data_dir

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"EmbeddedZooKeeper({self.connect_string}, {self._data_dir}, {state})"

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> EmbeddedZooKeeper:
        """Start the server and return once it serves requests; no-op if already running."""
        with self._lock:
            if self.is_running():
                return self
            command = self._resolve_command()
            for attempt in range(3):
                if self._auto_port and (self._port == 0 or attempt > 0):
                    self._port = _free_port()
                elif not _port_free(self._port):
                    raise ZooKeeperStartError(f"port {self._port} on {self.host} is already in use")
                if self.security.secure_port == 0 and (not self._secure_port or attempt > 0):
                    self._secure_port = _free_port()
                self._write_config(_free_port(), _free_port())
                try:
                    self._spawn(command)
                    self._wait_serving(timeout)
                    break
                except ZooKeeperStartError as e:
                    # A port picked here was taken between the check and the JVM's bind: retry.
                    if not (attempt < 2 and _PORT_TAKEN in str(e)):
                        raise
            _running.add(self)
            return self

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the server and wait for it (SIGKILL after ``timeout``); data is kept."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self._release()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would; data written so far is kept."""
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
            self._release()

    def restart(self, timeout: float = 30.0) -> EmbeddedZooKeeper:
        """Stop and start again on the same port and data dir; returns once serving."""
        with self._lock:
            self.stop()
            return self.start(timeout)

    def close(self) -> None:
        """Stop the server and remove the data dir if it is a temporary one made here."""
        with self._lock:
            self.stop()
            if self._owns_data_dir and self._data_dir is not None:
                shutil.rmtree(self._data_dir, ignore_errors=True)
                self._data_dir = None

    def four_letter_word(self, word: str, timeout: float = 2.0) -> str:
        """Send a four-letter command (``ruok``, ``srvr``, ``mntr``...) and return the reply."""
        return four_letter_word(self.host, self._port, word, timeout)

    def __enter__(self) -> EmbeddedZooKeeper:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- internals ----------------------------------------------------------------------------
    def _resolve_command(self) -> list[str]:
        if self._command is None:
            java = find_java(self._java_arg)
            classpath = find_zookeeper_classpath(self._jars_dir)
            self._zk_version = zookeeper_version(classpath)
            self._command = [
                *self.command_prefix,
                java,
                f"-Xmx{self.heap_mb}m",
                "-Xms32m",
                "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1",
                "-XX:-UsePerfData",
                "-XX:+ExitOnOutOfMemoryError",
                "-Djava.awt.headless=true",
                "-Djava.net.preferIPv4Stack=true",
                "-Dzookeeper.admin.enableServer=false",
                "-Dzookeeper.jmx.log4j.disable=true",
                f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.xml'}",
                f"-Dlogback.configurationFile={self.data_dir / 'logback.xml'}",
                *self.security.jvm_flags(self.data_dir),
                "-cp",
                os.pathsep.join(str(p) for p in classpath),
                MAIN_CLASS,
                str(self.data_dir / "zoo.cfg"),
            ]
        return self._command

    def _write_config(self, quorum_port: int, election_port: int) -> None:
        d = self.data_dir
        d.mkdir(parents=True, exist_ok=True)
        (d / "myid").write_text(f"{SERVER_ID}\n")
        zoo_cfg = render_zoo_cfg(
            data_dir=d,
            port=self._port,
            quorum_port=quorum_port,
            election_port=election_port,
            tick_time_ms=self.tick_time_ms,
            min_session_timeout_ms=self.min_session_timeout_ms,
            max_session_timeout_ms=self.max_session_timeout_ms,
            force_sync=self.force_sync,
        ) + self.security.zoo_cfg_lines(self._secure_port, self._zk_version, d, self.host)
        write_private(d / "zoo.cfg", zoo_cfg)  # may hold ssl.keyStore.password
        self.security.write_files(d)
        (d / "log4j2.xml").write_text(render_log4j2_xml(d / LOG_FILE))
        (d / "logback.xml").write_text(render_logback_xml(d / LOG_FILE))

    def _spawn(self, command: list[str]) -> None:
        self._log_offsets = (file_size(self.data_dir / LOG_FILE), file_size(self.data_dir / OUT_FILE))
        self._out = open(self.data_dir / OUT_FILE, "ab")  # noqa: SIM115 - closed in _release
        try:
            self._proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self._out,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
                start_new_session=True,
                preexec_fn=_die_with_parent if _can_die_with_parent() else None,
            )
        except OSError as e:
            self._release()
            raise ZooKeeperStartError(f"cannot run {command[0]}: {e}") from None

    def _wait_serving(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        proc = self._proc
        assert proc is not None
        while True:
            rc = proc.poll()
            if rc is not None:
                self._release()
                raise ZooKeeperStartError(
                    f"ZooKeeper exited with code {rc} during start-up on port {self._port}; "
                    f"{self._startup_log_tail()}"
                )
            with contextlib.suppress(OSError):
                if "Mode:" in self.four_letter_word("srvr", timeout=1.0) and self._is_ours():
                    return
            if _MAIN_THREAD_DIED.search(self._new_log_text()):
                self.kill()
                raise ZooKeeperStartError(f"ZooKeeper failed during start-up; {self._startup_log_tail()}")
            if time.monotonic() >= deadline:
                self.kill()
                raise ZooKeeperStartError(
                    f"ZooKeeper did not serve on port {self._port} within {timeout:g}s; "
                    f"{self._startup_log_tail()}"
                )
            time.sleep(_POLL_INTERVAL)

    def _is_ours(self) -> bool:
        """Whether the server on our port is this one (another may hold the port we asked for)."""
        for line in self.four_letter_word("conf", timeout=1.0).splitlines():
            if line.startswith("dataDir="):
                return Path(line.split("=", 1)[1]).parent.resolve() == self.data_dir.resolve()
        return False

    def _new_log_text(self) -> str:
        return read_from(self.data_dir / LOG_FILE, self._log_offsets[0])

    def _startup_log_tail(self) -> str:
        """The log's last lines, then the JVM's own output (where a fatal error ends up)."""
        log = log_tail(self._new_log_text(), _TAIL_LINES)
        out = log_tail(read_from(self.data_dir / OUT_FILE, self._log_offsets[1]), _TAIL_LINES // 2)
        body = "\n".join(log + out) or "(no output)"
        return f"last lines of {LOG_FILE} and {OUT_FILE} in {self.data_dir}:\n{body}"

    def _release(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
        _running.discard(self)


#: Servers started and not yet stopped: strong references, so that a server its owner forgot
#: about is still stopped at exit.
_running: set[EmbeddedZooKeeper] = set()


@atexit.register
def _stop_all() -> None:
    for server in list(_running):
        with contextlib.suppress(Exception):
            server.stop(timeout=5.0)
