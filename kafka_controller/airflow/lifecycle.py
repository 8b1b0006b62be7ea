"""Stopping and starting brokers: a pluggable backend per cluster (the connection's ``lifecycle``).

* ``local`` — brokers on this host started by ``kafka-controller cluster up`` (or ``LocalCluster``).
  When a ``cluster up`` of this user runs the brokers of the connection's ZooKeeper, it stays their
  one owner: a stop or a start is asked of it through its control socket (``cluster stop-broker``,
  ``start-broker``), so it restarts the broker as its own child, with the same command line, and
  ``cluster status`` and its shutdown keep covering it. Otherwise (``LocalCluster`` in a test, or
  brokers started by hand) a broker is found by its command line (``... broker --broker-id N
  --zookeeper CONNECT``); stop is SIGTERM (the broker's own controlled shutdown). Kill is SIGKILL
  either way: a hard failure is one nobody asked its owner for. Before a broker goes, its command
  line, working directory, log file and ``KAFKA_OPTS`` (naming its ZooKeeper login's JAAS file) are
  saved (mode 0600: the line may carry an audit URL with a password), so a later task, in another
  process, can start it again with the same settings, detached so that it outlives the task.
* ``command`` — templates for real hosts, e.g. ``{"stop": "ssh {host} sudo systemctl stop kafka",
  "start": "...", "hosts": {"1": "kafka1"}}``; placeholders ``{broker_id}`` and ``{host}``. Run
  without a shell; a non-zero exit fails with the command's last output line.

Backends only act on processes; waiting for ZooKeeper (registration gone or back) is the caller's,
because it is the same for every backend.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import signal
import string
import subprocess
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from kafka_controller.cluster.control import ControlError, ask, cluster_up_of
from kafka_controller.cluster.process import argv_of, broker_pids, parent_of
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError

POLL_S = 0.05
#: Environment variables never handed to a relaunched broker (Airflow connections carry secrets).
_PRIVATE_ENV_PREFIXES = ("AIRFLOW_", "AIRFLOW__")


#: A broker's environment variables saved with its command line and given back at a start: its
#: ZooKeeper login (``KAFKA_OPTS`` names a JAAS file, as for a Java broker) is not on the command
#: line, and a broker started again without it would not get into a ZooKeeper that requires SASL.
_KEPT_ENV = ("KAFKA_OPTS",)


def _kept_environment(pid: int) -> dict[str, str]:
    """The ``_KEPT_ENV`` variables of process ``pid`` (empty if unreadable: another user's)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read(1 << 20)
    except OSError:
        return {}
    kept: dict[str, str] = {}
    for item in raw.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name.decode(errors="replace") in _KEPT_ENV:
            kept[name.decode()] = value.decode(errors="replace")
    return kept


class LifecycleError(KafkaControllerError):
    """A broker could not be stopped or started; the message names the broker and the cause."""


class BrokerLifecycle(Protocol):
    """Process-level actions on one broker; each returns once the action is done or raises."""

    name: str

    def stop(self, broker_id: int, timeout_s: float) -> None:
        """Graceful stop (the broker runs its controlled shutdown), waiting for the process to end."""
        ...

    def start(self, broker_id: int, timeout_s: float) -> None:
        """Start the broker again with its usual settings (returns once launched)."""
        ...

    def kill(self, broker_id: int, timeout_s: float) -> None:
        """Hard failure: no controlled shutdown."""
        ...


# -- local ------------------------------------------------------------------------------------------


class LocalLifecycle:
    """Brokers of one ZooKeeper connect string running on this host (see the module docstring)."""

    name = "local"

    def __init__(self, connect_string: str, state_dir: str | Path | None = None) -> None:
        self.connect_string = connect_string
        default = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state"))
        self.state_dir = Path(state_dir) if state_dir else default / "kafka-controller" / "lifecycle"
        self._children: list[subprocess.Popen[bytes]] = []
        self._lock = threading.Lock()

    # -- discovery ------------------------------------------------------------------------------
    def pids(self, broker_id: int) -> list[int]:
        """Live processes of this broker (normally one)."""
        self._reap()
        return broker_pids(broker_id, self.connect_string)

    def is_running(self, broker_id: int) -> bool:
        return bool(self.pids(broker_id))

    def _state_file(self, broker_id: int) -> Path:
        key = hashlib.sha256(self.connect_string.encode()).hexdigest()[:16]
        return self.state_dir / key / f"broker-{broker_id}.json"

    def remember(self, broker_id: int) -> dict[str, Any]:
        """Save how the running broker was started; returns what was saved."""
        pids = self.pids(broker_id)
        if not pids:
            raise LifecycleError(f"broker {broker_id} is not running on this host ({self.connect_string})")
        pid = pids[0]
        saved: dict[str, Any] = {"argv": argv_of(pid)}
        kept = _kept_environment(pid)
        if kept:
            saved["env"] = kept
        for key, link in (("cwd", "cwd"), ("log", "fd/1")):
            try:
                target = os.readlink(f"/proc/{pid}/{link}")
            except OSError:
                continue
            if key == "cwd" or (target.startswith("/") and Path(target).is_file()):
                saved[key] = target
        path = self._state_file(broker_id)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(saved, f)
        tmp.replace(path)
        return saved

    def _recalled(self, broker_id: int) -> dict[str, Any]:
        path = self._state_file(broker_id)
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            raise LifecycleError(
                f"broker {broker_id} is not running and its command line is unknown: it was not stopped "
                f"through the local lifecycle backend (no {path})"
            ) from None
        except (OSError, ValueError) as e:
            raise LifecycleError(f"cannot read {path}: {e}") from None
        if not isinstance(saved, dict) or not isinstance(saved.get("argv"), list) or not saved["argv"]:
            raise LifecycleError(f"{path} holds no command line")
        return saved

    # -- actions ---------------------------------------------------------------------------------
    def _signal_and_wait(self, broker_id: int, sig: int, timeout_s: float, what: str) -> None:
        pids = self.pids(broker_id)
        if not pids:
            return
        self.remember(broker_id)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout_s
        while self.pids(broker_id):
            if time.monotonic() >= deadline:
                raise LifecycleError(f"broker {broker_id} did not exit within {timeout_s:g}s of {what}")
            time.sleep(POLL_S)

    def _owner(self) -> tuple[int, Path] | None:
        """The ``cluster up`` running this connect string's brokers (its pid and control socket)."""
        try:
            return cluster_up_of(self.connect_string)
        except ControlError:  # an unusable runtime directory: no owner we can talk to
            return None

    def _ask_owner(self, sock: Path, action: str, broker_id: int, timeout_s: float) -> None:
        try:
            reply = ask(sock, action, broker_id, timeout_s)
        except ControlError as e:
            raise LifecycleError(f"{action} of broker {broker_id} through `cluster up`: {e}") from None
        if not reply.get("ok"):
            raise LifecycleError(
                f"{action} of broker {broker_id} through `cluster up`: {reply.get('error', 'failed')}"
            )

    def stop(self, broker_id: int, timeout_s: float) -> None:
        pids = self.pids(broker_id)
        if not pids:
            return
        owner = self._owner()
        if owner is not None and all(parent_of(pid) == owner[0] for pid in pids):
            self.remember(broker_id)  # so that a start works even once `cluster up` has gone
            self._ask_owner(owner[1], "stop-broker", broker_id, timeout_s)
            return
        self._signal_and_wait(broker_id, signal.SIGTERM, timeout_s, "SIGTERM")

    def kill(self, broker_id: int, timeout_s: float) -> None:
        self._signal_and_wait(broker_id, signal.SIGKILL, timeout_s, "SIGKILL")

    def start(self, broker_id: int, timeout_s: float) -> None:
        if self.pids(broker_id):
            raise LifecycleError(f"broker {broker_id} is already running")
        owner = self._owner()
        if owner is not None:
            self._ask_owner(owner[1], "start-broker", broker_id, timeout_s)
            return
        saved = self._recalled(broker_id)
        env = {k: v for k, v in os.environ.items() if not k.startswith(_PRIVATE_ENV_PREFIXES)}
        recalled_env = saved.get("env")
        if isinstance(recalled_env, dict):
            env.update({k: str(v) for k, v in recalled_env.items() if k in _KEPT_ENV})
        log_path = saved.get("log")
        out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
        try:
            child = subprocess.Popen(
                saved["argv"],
                cwd=saved.get("cwd") or None,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # outlives this task, ignores its terminal's signals
            )
        except OSError as e:
            raise LifecycleError(f"cannot start broker {broker_id}: {e}") from None
        finally:
            if out is not subprocess.DEVNULL:
                out.close()  # type: ignore[union-attr]
        with self._lock:
            self._children.append(child)
        deadline = time.monotonic() + min(timeout_s, 5.0)
        while time.monotonic() < deadline and child.poll() is None and not self.pids(broker_id):
            time.sleep(POLL_S)
        if child.poll() is not None:
            raise LifecycleError(
                f"broker {broker_id} exited at once with code {child.returncode}"
                + (f"; see {log_path}" if log_path else "")
            )

    def _reap(self) -> None:
        """Collect exit codes of brokers this process started (no zombies in long test runs)."""
        with self._lock:
            self._children = [c for c in self._children if c.poll() is None]


# -- command templates ----------------------------------------------------------------------------

_PLACEHOLDERS = frozenset({"broker_id", "host"})


def _check_template(action: str, template: object) -> str:
    if not isinstance(template, str) or not template.strip():
        raise InvalidArgumentError(f"lifecycle {action!r} must be a non-empty command template")
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as e:
        raise InvalidArgumentError(f"lifecycle {action!r} template {template!r}: {e}") from None
    unknown = sorted(names - _PLACEHOLDERS)
    if unknown:
        raise InvalidArgumentError(
            f"lifecycle {action!r} template has unknown placeholder {{{unknown[0]}}} "
            "(use {broker_id}, {host})"
        )
    return template


class CommandLifecycle:
    """Shell-free command templates per action (see the module docstring)."""

    name = "command"

    def __init__(
        self,
        stop: str,
        start: str,
        kill: str | None = None,
        hosts: Mapping[str, str] | None = None,
    ) -> None:
        self.templates = {"stop": _check_template("stop", stop), "start": _check_template("start", start)}
        if kill is not None:
            self.templates["kill"] = _check_template("kill", kill)
        self.hosts = {str(k): str(v) for k, v in (hosts or {}).items()}
        if any("{host}" in t for t in self.templates.values()) and not self.hosts:
            raise InvalidArgumentError("lifecycle templates use {host} but no 'hosts' map is given")

    def command(self, action: str, broker_id: int) -> list[str]:
        template = self.templates.get(action)
        if template is None:
            raise LifecycleError(f"no {action!r} command is configured for this cluster")
        host = self.hosts.get(str(broker_id))
        if "{host}" in template and host is None:
            raise LifecycleError(f"no host is configured for broker {broker_id} (lifecycle 'hosts')")
        return shlex.split(template.format(broker_id=broker_id, host=host or ""))

    def _run(self, action: str, broker_id: int, timeout_s: float) -> None:
        argv = self.command(action, broker_id)
        try:
            done = subprocess.run(argv, capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise LifecycleError(
                f"{action} of broker {broker_id}: {argv[0]} did not finish in {timeout_s:g}s"
            ) from None
        except OSError as e:
            raise LifecycleError(
                f"{action} of broker {broker_id}: cannot run {argv[0]}: {e.strerror or e}"
            ) from None
        if done.returncode != 0:
            lines = (done.stderr or done.stdout or b"").decode(errors="replace").strip().splitlines()
            tail = lines[-1] if lines else "no output"
            raise LifecycleError(
                f"{action} of broker {broker_id}: {argv[0]} exited {done.returncode}: {tail}"
            )

    def stop(self, broker_id: int, timeout_s: float) -> None:
        self._run("stop", broker_id, timeout_s)

    def start(self, broker_id: int, timeout_s: float) -> None:
        self._run("start", broker_id, timeout_s)

    def kill(self, broker_id: int, timeout_s: float) -> None:
        self._run("kill" if "kill" in self.templates else "stop", broker_id, timeout_s)


def lifecycle_backend(spec: object, connect_string: str) -> BrokerLifecycle:
    """The backend a connection's ``lifecycle`` extra names; ``InvalidArgumentError`` if malformed."""
    if spec is None:
        raise InvalidArgumentError(
            'the cluster connection has no \'lifecycle\' (use "local" or {"type": "command", ...})'
        )
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, Mapping):
        raise InvalidArgumentError(f"lifecycle must be a name or an object, got {type(spec).__name__}")
    kind = spec.get("type")
    options = {k: v for k, v in spec.items() if k != "type"}
    if kind == "local":
        unknown = sorted(set(options) - {"state_dir"})
        if unknown:
            raise InvalidArgumentError(f"lifecycle 'local' has unknown option {unknown[0]!r}")
        return LocalLifecycle(connect_string, options.get("state_dir"))
    if kind == "command":
        unknown = sorted(set(options) - {"stop", "start", "kill", "hosts"})
        if unknown:
            raise InvalidArgumentError(f"lifecycle 'command' has unknown option {unknown[0]!r}")
        for required in ("stop", "start"):
            if required not in options:
                raise InvalidArgumentError(f"lifecycle 'command' needs a {required!r} template")
        return CommandLifecycle(**options)
    raise InvalidArgumentError(f"unknown lifecycle type {kind!r} (use 'local' or 'command')")
