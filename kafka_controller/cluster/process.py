"""One ``kafka-controller broker`` child process: start, SIGTERM, SIGKILL, SIGSTOP/SIGCONT, reap.

The child runs in its own session (a terminal's Ctrl-C goes to the owner, which then stops the
brokers in order), appends its stderr to a log file that survives restarts, and, on Linux when
started from the main thread, is killed if its owner dies (``PR_SET_PDEATHSIG``). An ``atexit``
hook kills whatever is still running, so a crashed test or demo leaves no broker behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from kafka_controller.controller.config import is_sensitive_key
from kafka_controller.domain.errors import InvalidArgumentError

_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
#: Processes started and not yet reaped; ``_kill_all`` ends them at interpreter exit.
_live: set[BrokerProcess] = set()
_live_lock = threading.Lock()


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie counts as dead (containers may not reap orphans)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def _die_with_parent() -> None:
    assert _libc is not None
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


#: The broker's secret settings (``is_sensitive_key``), mode 0600 in its data directory.
SECRET_SETTINGS = "secret.properties"


def write_secret_settings(path: Path, settings: Mapping[str, str]) -> Path:
    """``KEY=VALUE`` lines for the broker's ``--config-file``, created mode 0600 (never wider)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in settings.items()))
    os.chmod(path, 0o600)  # an existing file keeps its mode through O_CREAT
    return path


def broker_command(
    broker_id: int,
    zookeeper: str,
    host: str,
    port: int,
    config: Mapping[str, str],
    *,
    audit_url: str | None = None,
    audit_spool_dir: Path | None = None,
    python: str | None = None,
    log_level: str = "INFO",
    data_dir: Path | None = None,
    metrics_port: int | None = None,
    listener_name: str = "PLAINTEXT",
) -> list[str]:
    """The command line of one broker (``python -m kafka_controller.cli.main broker ...``): a
    PLAINTEXT listener with ``--listener``, any other (``SSL``) with Kafka's ``listeners``; secret
    settings (passwords, JAAS entries) go to ``data_dir/secret.properties`` (``--config-file``)."""
    argv = [
        python or sys.executable,
        "-m",
        "kafka_controller.cli.main",
        "broker",
        "--broker-id",
        str(broker_id),
        "--zookeeper",
        zookeeper,
        *(
            ["--listener", f"{host}:{port}"]
            if listener_name == "PLAINTEXT"
            else ["--config", f"listeners={listener_name}://{host}:{port}"]
        ),
        "--log-level",
        log_level,
    ]
    secrets = {k: v for k, v in config.items() if is_sensitive_key(k)}
    for key, value in config.items():
        if key not in secrets:
            argv += ["--config", f"{key}={value}"]
    if secrets:  # never on a command line, which every local user can read (ps, /proc/PID/cmdline)
        if data_dir is None:
            raise InvalidArgumentError("a broker with secret settings needs a data directory for them")
        argv += ["--config-file", str(write_secret_settings(data_dir / SECRET_SETTINGS, secrets))]
    if metrics_port is not None:
        argv += ["--metrics-port", str(metrics_port), "--metrics-host", host]
    if audit_url:
        argv += ["--audit-url", audit_url]
        if audit_spool_dir is not None:
            argv += ["--audit-spool-dir", str(audit_spool_dir)]
    if data_dir is not None:
        argv += ["--data-dir", str(data_dir)]
    return argv


class BrokerProcess:
    """A broker child process; ``start`` may be called again after it stopped (a bounce)."""

    def __init__(
        self, broker_id: int, command: Sequence[str], log_path: Path, env: Mapping[str, str] | None = None
    ):
        self.broker_id = broker_id
        self.command = list(command)
        self.log_path = log_path
        self._env = dict(env) if env is not None else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.paused = False
        self.starts = 0
        #: Set when the owner sends SIGTERM or SIGKILL; an exit without it is a crash
        #: (``cluster.supervisor``).
        self.exit_requested = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        if self.is_running():
            return
        self._close_log()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed when the process is reaped
        can_pdeathsig = _libc is not None and threading.current_thread() is threading.main_thread()
        self._proc = subprocess.Popen(
            self.command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=self._env,
            start_new_session=True,
            preexec_fn=_die_with_parent if can_pdeathsig else None,
        )
        self.paused = False
        self.exit_requested = False
        self.starts += 1
        with _live_lock:
            _live.add(self)

    def signal(self, sig: int) -> None:
        if self.is_running():
            assert self._proc is not None
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(sig)

    def terminate(self) -> None:
        """SIGTERM: the broker's controlled shutdown (a paused broker is resumed first)."""
        self.exit_requested = True
        self.resume()
        self.signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL and reap: a hard failure, but one the owner asked for (see ``exit_requested``)."""
        self.exit_requested = True
        self.signal(signal.SIGKILL)
        self.paused = False
        if self._proc is not None:
            self._proc.wait()
        self._reaped()

    def pause(self) -> None:
        """SIGSTOP: the process freezes (its ZooKeeper session lapses after the session timeout)."""
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.paused:
            self.signal(signal.SIGCONT)
            self.paused = False

    def wait(self, timeout: float) -> int | None:
        """Wait up to ``timeout`` for exit; the exit code, or None if still running."""
        if self._proc is None:
            return None
        try:
            code = self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self._reaped()
        return code

    def stop(self, timeout: float) -> int | None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL; the exit code (None if killed)."""
        if not self.is_running():
            self._reaped()
            return self.returncode
        self.terminate()
        code = self.wait(timeout)
        if code is None:
            self.kill()
        return code

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:]) or "(empty log)"

    def last_log_line(self) -> str:
        """The log's last non-empty line, for one-line error messages."""
        lines = [line for line in self.log_tail(5).splitlines() if line.strip()]
        return lines[-1].strip() if lines else "(empty log)"

    def _reaped(self) -> None:
        self._close_log()
        with _live_lock:
            _live.discard(self)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


def wait_all_exited(processes: Sequence[BrokerProcess], deadline: float) -> list[BrokerProcess]:
    """Wait for every process until ``deadline``; returns those still running."""
    pending = [p for p in processes if p.is_running()]
    while pending and time.monotonic() < deadline:
        pending = [p for p in pending if p.wait(0.05) is None]
    return pending


def wait_pids_exited(pids: Sequence[int], deadline: float, poll_s: float = 0.01) -> list[int]:
    """Wait until none of ``pids`` runs or ``deadline``; returns those still running. For processes
    that are not our children (nothing to reap): a killed process still runs while its memory is
    torn down, holding its ports."""
    alive = [pid for pid in pids if process_alive(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(poll_s)
        alive = [pid for pid in alive if process_alive(pid)]
    return alive


@atexit.register
def _kill_all() -> None:
    with _live_lock:
        procs = list(_live)
    for p in procs:
        with contextlib.suppress(Exception):
            p.kill()


# -- discovery of broker processes by command line (brokers this process did not start) -----------


def argv_of(pid: int) -> list[str]:
    """The command line of process ``pid`` ([] when it is gone or unreadable)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _option(argv: list[str], name: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def is_broker_command(argv: list[str], broker_id: int, connect_string: str) -> bool:
    """``argv`` runs ``kafka-controller broker`` for this broker id and ZooKeeper connect string."""
    runs_cli = any(a == "kafka_controller.cli.main" or a.endswith("/kafka-controller") for a in argv[:3])
    return (
        runs_cli
        and "broker" in argv
        and _option(argv, "--broker-id") == str(broker_id)
        and _option(argv, "--zookeeper") == connect_string
    )


def broker_pids(broker_id: int, connect_string: str) -> list[int]:
    """Live processes on this host running broker ``broker_id`` of ``connect_string``."""
    return [
        int(entry)
        for entry in os.listdir("/proc")
        if entry.isdigit()
        and is_broker_command(argv_of(int(entry)), broker_id, connect_string)
        and process_alive(int(entry))
    ]


def stop_outside_brokers(broker_ids: Sequence[int], connect_string: str, sig: int, deadline: float) -> None:
    """Send ``sig`` to the brokers of ``connect_string`` that another program started (not our
    children), one broker id at a time, waiting for each to exit as for our own children: until
    ``deadline`` after SIGTERM (a controlled shutdown runs one broker at a time), 5 s otherwise."""
    for broker_id in broker_ids:
        signalled = []
        for pid in broker_pids(broker_id, connect_string):
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
                signalled.append(pid)
        wait_pids_exited(signalled, deadline if sig == signal.SIGTERM else time.monotonic() + 5.0)


def parent_of(pid: int) -> int | None:
    """The parent pid of ``pid`` (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def children_of(pid: int) -> set[int]:
    """Live processes whose parent is ``pid``. Brokers and ZooKeeper run in sessions of their own
    (signals to a terminal do not reach them), so the parent link is what ties them to a command."""
    out: set[int] = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                out.add(int(entry.name))
    return out
