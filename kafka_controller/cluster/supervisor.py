"""``ExitSupervisor``: notices at once when a broker child exits without being asked to.

``LocalCluster`` (and with it ``cluster up``) owns its brokers as child processes, so it sees a
crash the moment it happens: the kernel makes a child's pidfd readable when it exits. An exit the
cluster did not ask for (``BrokerProcess.exit_requested`` unset: not a SIGTERM or SIGKILL sent
by the cluster) is handed to ``on_exit``, which closes the dead broker's ZooKeeper session
(``zk.session_close``) so that its registration, and ``/controller`` if it held it, go now rather
than after the session timeout. Only an exit this process observed is treated so: a hang, or a
host that fails with its supervisor, still waits for ZooKeeper's session timeout.

Each exit is handled on a thread of its own: a close retries while ZooKeeper cannot be reached (up
to the connection timeout), and a second broker that dies meanwhile must not wait behind it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from kafka_controller.cluster.process import BrokerProcess
from kafka_controller.zk.backend import Stat
from kafka_controller.zk.security import ZkClientConfig
from kafka_controller.zk.session_close import CloseOutcome, close_recorded_session
from kafka_controller.zk.session_file import read_session_file, remove_session_file

log = logging.getLogger(__name__)

#: How often the set of processes is looked at again (new starts), and the fallback poll interval
#: where pidfds are not available.
RESCAN_S = 0.2
FALLBACK_POLL_S = 0.02
#: How long ``stop`` waits for exits still being handled (a close may be retrying).
HANDLER_JOIN_S = 2.0


class ExitedProcess(NamedTuple):
    """A broker process's exit as observed: taken when it is seen, since the process object may be
    started again while the exit is still being handled."""

    broker_id: int
    pid: int
    returncode: int | None


class ExitSupervisor:
    """A daemon thread over ``processes()``; ``on_exit(process)`` runs for each unasked exit, on a
    daemon thread of its own (module docs)."""

    def __init__(
        self,
        processes: Callable[[], list[BrokerProcess]],
        on_exit: Callable[[ExitedProcess], None],
        *,
        name: str = "exit-supervisor",
    ) -> None:
        self._processes = processes
        self._on_exit = on_exit
        self._stopped = threading.Event()
        self._wake_r, self._wake_w = os.pipe()
        self._pidfds: dict[int, int] = {}
        self._seen: set[tuple[int, int]] = set()  # (id of process, its start count) handled
        self._use_pidfd = hasattr(os, "pidfd_open")
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._handlers: list[threading.Thread] = []

    def start(self) -> ExitSupervisor:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5.0)
        for handler in self._handlers:
            if handler is not threading.current_thread():
                handler.join(HANDLER_JOIN_S)
        for fd in [*self._pidfds.values(), self._wake_r, self._wake_w]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._pidfds.clear()

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                self._wait_for_an_exit()
                self._check()
            except Exception:
                log.exception("exit supervisor: checking the brokers failed")
                self._stopped.wait(RESCAN_S)

    def _wait_for_an_exit(self) -> None:
        if not self._use_pidfd:
            self._stopped.wait(FALLBACK_POLL_S)
            return
        live = {p.pid for p in self._processes() if p.pid is not None and p.returncode is None}
        for pid in set(self._pidfds) - live:
            os.close(self._pidfds.pop(pid))
        for pid in live - set(self._pidfds):
            try:
                self._pidfds[pid] = os.pidfd_open(pid)
            except ProcessLookupError:
                continue  # exited in between: _check sees it
            except OSError:  # a kernel without pidfds: poll instead
                self._use_pidfd = False
                return
        poller = select.poll()
        poller.register(self._wake_r, select.POLLIN)
        for fd in self._pidfds.values():
            poller.register(fd, select.POLLIN)
        poller.poll(RESCAN_S * 1000)

    def _check(self) -> None:
        for proc in self._processes():
            key = (id(proc), proc.starts)
            if proc.pid is None or key in self._seen or proc.returncode is None:
                continue
            self._seen.add(key)
            if proc.exit_requested or self._stopped.is_set():
                continue
            # code 0 is a broker's own clean shutdown, which only a request starts (a lifecycle
            # backend's or an operator's SIGTERM): expected, so no warning in a task log or the demo
            clean = proc.returncode == 0
            log.log(
                logging.DEBUG if clean else logging.WARNING,
                "broker %d (pid %d) exited with code %s, %s",
                proc.broker_id,
                proc.pid,
                proc.returncode,
                "a clean shutdown asked for from outside this process" if clean else "not at our request",
            )
            exited = ExitedProcess(proc.broker_id, proc.pid, proc.returncode)
            self._handlers = [h for h in self._handlers if h.is_alive()]
            handler = threading.Thread(
                target=self._handle, args=(exited,), name=f"{self._thread.name}-{proc.broker_id}", daemon=True
            )
            self._handlers.append(handler)
            handler.start()

    def _handle(self, exited: ExitedProcess) -> None:
        try:
            self._on_exit(exited)
        except Exception as e:
            log.warning("broker %d: handling its exit failed: %s", exited.broker_id, e)


class SessionCloser:
    """``on_exit`` for ``ExitSupervisor``: close the session recorded in the dead broker's data dir,
    if the record is that process's (its pid); remembers each outcome for tests and benchmarks."""

    def __init__(
        self,
        data_dir_of: Callable[[int], Path],
        config: ZkClientConfig,
        read_stat: Callable[[str], Stat | None] | None = None,
        *,
        enabled: bool = True,
    ) -> None:
        self._data_dir_of = data_dir_of
        self._config = config
        self._read_stat = read_stat
        self.enabled = enabled
        #: (broker id, pid, outcome) per handled exit, in order; outcome None: no record of that pid.
        self.outcomes: list[tuple[int, int, CloseOutcome | None]] = []

    def __call__(self, proc: ExitedProcess) -> None:
        if not self.enabled:
            return
        data_dir = self._data_dir_of(proc.broker_id)
        record = read_session_file(data_dir)
        outcome = None
        if record is not None and record.pid == proc.pid and record.broker_id == proc.broker_id:
            outcome = close_recorded_session(self._config, record, read_stat=self._read_stat)
            remove_session_file(data_dir, record.pid)
            log.warning("broker %d: session 0x%x %s", proc.broker_id, record.session_id, outcome.value)
        self.outcomes.append((proc.broker_id, proc.pid, outcome))
