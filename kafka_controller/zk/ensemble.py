"""A real ZooKeeper ensemble (3 or 5 servers) in child JVMs, for tests that need quorum faults.

Production Kafka runs against an ensemble, and what a single server cannot show is a leader dying
while followers keep serving, a minority that refuses writes, and a quorum that comes back. Each
member is an :class:`EmbeddedZooKeeper` (same jars, JVM flags and logging) with its own data dir
and ``myid``, its own client, quorum and election ports, and the same ``server.N`` lines; the admin
server stays off and every four-letter word is whitelisted (``srvr`` tells leader from follower).

Members are spawned together and then awaited, since none serves before a majority is up; a single
member restarted later joins the others on its own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.embedded import EmbeddedZooKeeper, ZooKeeperStartError
from kafka_controller.zk.embedded_os import _free_port, _port_free
from kafka_controller.zk.server_files import HOST, render_server_lines

__all__ = ["EnsembleMember", "ZooKeeperEnsemble"]

_POLL_INTERVAL = 0.05


class EnsembleMember(EmbeddedZooKeeper):
    """One server of a :class:`ZooKeeperEnsemble`: fixed ports, ``myid`` = ``server_id``."""

    def __init__(
        self,
        server_id: int,
        servers: str,
        port: int,
        data_dir: Path,
        *,
        tick_time_ms: int,
        min_session_timeout_ms: int,
        max_session_timeout_ms: int,
        java: str | os.PathLike[str] | None,
        jars_dir: str | os.PathLike[str] | None,
        heap_mb: int,
        host: str = HOST,
        command_prefix: Sequence[str] = (),
    ) -> None:
        self.host = host
        self.command_prefix = tuple(command_prefix)
        super().__init__(
            port,
            data_dir,
            tick_time_ms=tick_time_ms,
            min_session_timeout_ms=min_session_timeout_ms,
            max_session_timeout_ms=max_session_timeout_ms,
            java=java,
            jars_dir=jars_dir,
            heap_mb=heap_mb,
        )
        self.server_id = server_id
        self._servers = servers

    def mode(self) -> str | None:
        """``leader``, ``follower`` (from ``srvr``), or None when it is down or not serving."""
        if not self.is_running():
            return None
        try:
            reply = self.four_letter_word("srvr", timeout=1.0)
        except OSError:
            return None
        for line in reply.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def spawn(self) -> None:
        """Start the JVM without waiting for it to serve (it cannot, alone, without a quorum)."""
        with self._lock:
            if self.is_running():
                return
            command = self._resolve_command()
            if not self.command_prefix and not _port_free(self._port):
                raise ZooKeeperStartError(f"port {self._port} on {HOST} is already in use")
            self._write_config(0, 0)
            self._spawn(command)

    def wait_serving(self, timeout: float) -> None:
        """Return once this member serves as leader or follower (raises ``ZooKeeperStartError``)."""
        if not self.is_running():
            raise ZooKeeperStartError(f"ZooKeeper server {self.server_id} is not running")
        self._wait_serving(timeout)

    def _write_config(self, quorum_port: int, election_port: int) -> None:
        super()._write_config(quorum_port, election_port)
        (self.data_dir / "myid").write_text(f"{self.server_id}\n")
        cfg = self.data_dir / "zoo.cfg"
        lines = [ln for ln in cfg.read_text().splitlines(keepends=True) if not ln.startswith("server.")]
        cfg.write_text("".join(lines) + self._servers)

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.is_running() else "stopped"
        return f"EnsembleMember({self.server_id}, {self.connect_string}, {state})"


class ZooKeeperEnsemble:
    """``servers`` ZooKeeper servers forming one quorum on 127.0.0.1; faults by member or role.

    Without ``data_dir`` a temporary directory is used (``zk-<id>`` per member) and removed by
    ``close()``. ``connect_string`` lists every member, so a client fails over between them.
    Client ports are ``port``, ``port + 1``, ...; ``port=0`` picks free ones (as do the quorum and
    election ports, always). With ``hosts`` (an address and a command prefix per member, e.g.
    ``ip netns exec NS`` from :class:`kafka_controller.testing.netns.NetnsLab`) each member runs on
    its own host with ZooKeeper's usual ports (client ``port`` or 2181, quorum 2888, election 3888).
    """

    def __init__(
        self,
        servers: int = 3,
        port: int = 0,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        tick_time_ms: int = 500,
        min_session_timeout_ms: int = 1000,
        max_session_timeout_ms: int = 60000,
        java: str | os.PathLike[str] | None = None,
        jars_dir: str | os.PathLike[str] | None = None,
        heap_mb: int = 256,
        hosts: Sequence[tuple[str, Sequence[str]]] | None = None,
    ) -> None:
        if hosts is not None and len(hosts) != servers:
            raise InvalidArgumentError(f"{servers} servers need {servers} hosts, got {len(hosts)}")
        if not isinstance(servers, int) or isinstance(servers, bool) or not 1 <= servers <= 9:
            raise InvalidArgumentError(f"servers must be an integer in [1, 9], got {servers!r}")
        if data_dir is not None and Path(data_dir).exists() and not Path(data_dir).is_dir():
            raise InvalidArgumentError(f"data_dir {os.fspath(data_dir)} exists and is not a directory")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65536 - servers:
            raise InvalidArgumentError(f"port must be an integer in [0, {65536 - servers}], got {port!r}")
        self._owns_data_dir = data_dir is None
        self.data_dir = (
            Path(data_dir).absolute()
            if data_dir is not None
            else Path(tempfile.mkdtemp(prefix="zk-ensemble-"))
        )
        if hosts is not None:
            addresses = [(i + 1, h, port or 2181, 2888, 3888) for i, (h, _) in enumerate(hosts)]
        else:
            clients = [port + i for i in range(servers)] if port else []
            free = _distinct_free_ports(3 * servers, exclude=clients)
            clients = clients or free[2 * servers :]
            addresses = [(i + 1, HOST, clients[i], free[2 * i], free[2 * i + 1]) for i in range(servers)]
        prefixes = [tuple(p) for _, p in hosts] if hosts is not None else [()] * servers
        lines = render_server_lines(addresses)
        self.members: tuple[EnsembleMember, ...] = tuple(
            EnsembleMember(
                sid,
                lines,
                client,
                self.data_dir / f"zk-{sid}",
                tick_time_ms=tick_time_ms,
                min_session_timeout_ms=min_session_timeout_ms,
                max_session_timeout_ms=max_session_timeout_ms,
                java=java,
                jars_dir=jars_dir,
                heap_mb=heap_mb,
                host=host,
                command_prefix=prefixes[sid - 1],
            )
            for sid, host, client, _quorum, _election in addresses
        )

    # -- addresses and roles --------------------------------------------------------------------
    @property
    def connect_string(self) -> str:
        return ",".join(m.connect_string for m in self.members)

    @property
    def quorum_size(self) -> int:
        return len(self.members) // 2 + 1

    def member(self, server_id: int) -> EnsembleMember:
        for m in self.members:
            if m.server_id == server_id:
                return m
        raise InvalidArgumentError(
            f"no ZooKeeper server {server_id} in {[m.server_id for m in self.members]}"
        )

    def modes(self) -> dict[int, str | None]:
        """Each member's role as ``srvr`` reports it (None: down or not serving)."""
        return {m.server_id: m.mode() for m in self.members}

    def leader(self, timeout: float = 30.0) -> EnsembleMember:
        """The member that reports ``Mode: leader``, waiting up to ``timeout`` for an election."""
        deadline = time.monotonic() + timeout
        while True:
            for m in self.members:
                if m.mode() == "leader":
                    return m
            if time.monotonic() >= deadline:
                raise ZooKeeperStartError(f"no ZooKeeper leader within {timeout:g}s; modes {self.modes()}")
            time.sleep(_POLL_INTERVAL)

    def is_running(self) -> bool:
        """Whether every member's JVM is running."""
        return all(m.is_running() for m in self.members)

    def running(self) -> list[EnsembleMember]:
        return [m for m in self.members if m.is_running()]

    def four_letter_word(self, word: str, timeout: float = 2.0) -> str:
        """The reply of the first member that answers (``OSError`` when none does)."""
        error: OSError | None = None
        for m in self.running():
            try:
                return m.four_letter_word(word, timeout)
            except OSError as e:
                error = e
        raise error or OSError("no ZooKeeper server is running")

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        """Start every stopped member; return once all of them serve (leader or follower)."""
        self.start_members([m.server_id for m in self.members if not m.is_running()], timeout)
        return self

    def start_members(self, server_ids: Sequence[int], timeout: float = 60.0) -> None:
        """Start these members together and wait until each serves (they need a quorum to)."""
        members = [self.member(s) for s in server_ids]
        deadline = time.monotonic() + timeout
        try:
            for m in members:
                m.spawn()
            for m in members:
                m.wait_serving(max(0.5, deadline - time.monotonic()))
        except BaseException:
            for m in members:
                m.kill()
            raise

    def kill_leader(self, timeout: float = 30.0) -> int:
        """SIGKILL the current leader; returns its server id."""
        leader = self.leader(timeout)
        leader.kill()
        return leader.server_id

    def lose_quorum(self, *, kill: bool = False, keep: int | None = None) -> list[int]:
        """Stop (or kill) a majority of members, so the rest stop serving; returns their ids.

        The leader is always among them (so the survivors must elect anew when quorum returns);
        ``keep`` names a follower to leave running (default: the highest-numbered follower)."""
        running = self.running()
        leader = next((m for m in running if m.mode() == "leader"), None)
        order = sorted(running, key=lambda m: (m is not leader, m.server_id == keep, m.server_id))
        victims = order[: max(0, len(order) - (len(self.members) - self.quorum_size))]
        for m in victims:
            if kill:
                m.kill()
            else:
                m.stop()
        return [m.server_id for m in victims]

    def wait_quorum(self, timeout: float = 60.0) -> EnsembleMember:
        """Wait until the running members have a leader and all serve; returns the leader."""
        deadline = time.monotonic() + timeout
        leader = self.leader(timeout)
        for m in self.running():
            m.wait_serving(max(0.5, deadline - time.monotonic()))
        return leader

    def stop(self, timeout: float = 10.0) -> None:
        for m in self.members:
            m.stop(timeout)

    def kill(self) -> None:
        for m in self.members:
            m.kill()

    def restart(self, timeout: float = 60.0) -> ZooKeeperEnsemble:
        self.stop()
        return self.start(timeout)

    def close(self) -> None:
        """Stop every member and remove the data dir if it is a temporary one made here."""
        for m in self.members:
            with contextlib.suppress(Exception):
                m.close()
        if self._owns_data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __iter__(self) -> Iterator[EnsembleMember]:
        return iter(self.members)

    def __enter__(self) -> ZooKeeperEnsemble:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble({self.connect_string}, {self.data_dir})"


def _distinct_free_ports(n: int, exclude: Sequence[int] = ()) -> list[int]:
    ports: list[int] = []
    while len(ports) < n:
        p = _free_port()
        if p not in ports and p not in exclude:
            ports.append(p)
    return ports
