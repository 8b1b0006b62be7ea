"""``LocalCluster``: an embedded ZooKeeper plus N ``kafka-controller broker`` processes on this host.

Used by ``cluster up``, the demo, the integration tests and the benchmarks. Brokers are real
processes so that failures are real: SIGKILL lets the ZooKeeper session lapse, SIGTERM runs the
broker's controlled shutdown, SIGSTOP freezes a controller past its session timeout. Every wait
polls ZooKeeper (or a broker's Metadata API) against a deadline and fails with a message naming
what was not reached and the broker's log tail.

Defaults differ from Kafka's in two places, both to keep failure drills short on a laptop:
``zookeeper.session.timeout.ms=6000`` (a killed broker is noticed in ~6 s, not 18 s) and
``controlled.shutdown.retry.backoff.ms=1000``. ``broker_config`` overrides them.

A broker that exits unasked (``crash_broker``, a crash) has its ZooKeeper session closed at once
(``supervisor``; ``session_closer.enabled``); ``kill_broker`` is asked for: its session lapses.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_controller.admin.describe import ClusterView
from kafka_controller.broker.admin_client import AdminClient
from kafka_controller.cluster.local_addresses import ClusterAddresses
from kafka_controller.cluster.process import (
    BrokerProcess,
    broker_command,
    broker_pids,
    stop_outside_brokers,
    wait_all_exited,
)
from kafka_controller.cluster.waits import ClusterError, ClusterWaits, time_left
from kafka_controller.cluster.watch import LeadershipWatch, ShutdownReport, partitions_of
from kafka_controller.cluster.zk_login import ClusterZkLogin
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import ReplicaAssignment
from kafka_controller.security.client_config import PLAINTEXT, ClientSecurity
from kafka_controller.security.credentials import alter_user_credentials
from kafka_controller.security.scram import ScramFormatter
from kafka_controller.zk.codecs import new_topic_id
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from kafka_controller.zk.security import ZkClientConfig, digest_from_env

if TYPE_CHECKING:
    from kafka_controller.cluster.supervisor import ExitSupervisor, SessionCloser
    from kafka_controller.security.certs import ClusterPki
    from kafka_controller.zk.store import ZkMetadataStore

log = logging.getLogger(__name__)
#: ``LocalCluster(security=...)``.
SECURITY_MODES = ("plaintext", "ssl", "sasl_plaintext", "sasl_ssl")
#: The SASL modes' users: the super user a person (and this cluster's own clients) log in as, and
#: the brokers' own (inter-broker) user. Both are ``super.users``, as Kafka's docs set them up.
SUPER_USER = "admin"
INTER_BROKER_USER = "broker"
SCRAM_MECHANISM = "SCRAM-SHA-512"
ACL_AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"

DEFAULT_BROKER_CONFIG: dict[str, str] = {
    "zookeeper.session.timeout.ms": "6000",
    "controlled.shutdown.retry.backoff.ms": "1000",
}


class LocalCluster:
    """ZooKeeper (embedded, an ensemble of ``zk_servers``, or ``zookeeper=`` an existing connect
    string) and brokers ``first_broker_id .. first_broker_id + brokers - 1``. Use as a context
    manager, or ``start()`` then ``close()``. Holds ``addresses`` (where each part listens) and
    ``waits`` (ZooKeeper reads, readiness waits), and repeats the few of theirs others call."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        first_broker_id: int = 1,
        zk_port: int = 0,
        zk_servers: int = 1,
        zookeeper: str | None = None,
        chroot: str = "",
        data_dir: str | Path | None = None,
        audit_url: str | None = None,
        broker_config: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        broker_hosts: Mapping[int, tuple[str, Sequence[str]]] | None = None,
        python: str | None = None,
        log_level: str = "INFO",
        close_dead_sessions: bool = True,
        metrics_port: int | None = None,
        store_session_timeout_ms: int = 30_000,
        listener_port: int | None = None,
        security: str = "plaintext",
    ) -> None:
        """``listener_port``: broker i (0-based) listens on ``listener_port + i`` (None: a free port
        each, picked at start). ``security``: ``plaintext``, or ``ssl``: every broker's only
        listener is SSL with client certificates required (brokers and this cluster's own admin
        client present theirs), from a private CA made in ``data_dir/tls`` (``tls``);
        ``sasl_plaintext``/``sasl_ssl``: every broker's only listener is SASL (SCRAM-SHA-512, over
        that CA's TLS for ``sasl_ssl``) with Kafka's ACL authorizer on, a super user and an
        inter-broker user with random passwords (``client_properties``: the super user's, mode 0600).
        Every mode but ``plaintext`` also secures an embedded single ZooKeeper (``zk_login``): a
        SASL login required, Kafka's ``zookeeper.set.acl`` ACLs."""
        if security not in SECURITY_MODES:
            raise InvalidArgumentError(
                f"security must be one of {', '.join(SECURITY_MODES)}, got {security!r}"
            )
        self.security = security
        self.tls: ClusterPki | None = None
        self._passwords: dict[str, str] = {}  # SASL user -> password; never logged
        self.client_properties: Path | None = None
        #: The ``kafka`` ZooKeeper login (``cluster.zk_login``); None: ZooKeeper is open.
        self.zk_login: ClusterZkLogin | None = None
        if not 1 <= brokers <= 64:
            raise InvalidArgumentError(f"number of brokers must be between 1 and 64, got {brokers}")
        if first_broker_id < 0:
            raise InvalidArgumentError(f"first broker id must be >= 0, got {first_broker_id}")
        if chroot and (not chroot.startswith("/") or chroot.endswith("/")):
            raise InvalidArgumentError(f"chroot {chroot!r} must start with '/' and not end with '/'")
        self.broker_ids: tuple[int, ...] = tuple(range(first_broker_id, first_broker_id + brokers))
        if zk_servers not in (1, 3, 5):
            raise InvalidArgumentError(f"ZooKeeper servers must be 1, 3 or 5, got {zk_servers}")
        self.zk_port = zk_port
        self.zk_servers = zk_servers
        self.external_zookeeper = zookeeper
        self.chroot = chroot
        self.audit_url = audit_url
        self.broker_config = {**DEFAULT_BROKER_CONFIG, **dict(broker_config or {})}
        self.host = host
        #: Broker id -> (its address, the prefix its command runs under): brokers on other hosts,
        #: e.g. network namespaces (``ip netns exec NS``), each listening on port 9092 of its own.
        self.broker_hosts = dict(broker_hosts or {})
        self.python = python
        self.log_level = log_level
        self._owns_dir = data_dir is None
        self.data_dir = (
            Path(data_dir).absolute()
            if data_dir is not None
            else Path(tempfile.mkdtemp(prefix="kc-cluster-"))
        )
        self.zk: EmbeddedZooKeeper | ZooKeeperEnsemble | None = None
        self.processes: dict[int, BrokerProcess] = {}
        self.listener_base_port = listener_port
        #: Broker id -> listener port, kept by ``addresses`` (``assign_listener``).
        self.ports: dict[int, int] = (
            {} if listener_port is None else {b: listener_port + i for i, b in enumerate(self.broker_ids)}
        )
        self._store: ZkMetadataStore | None = None
        self._admin: AdminClient | None = None
        self._closed = False
        self.supervisor: ExitSupervisor | None = None
        self.session_closer: SessionCloser | None = None
        self._close_sessions = close_dead_sessions
        #: The session of the cluster's own ZooKeeper client (``store``): a client stuck on a
        #: server cut off from the rest notices only after 2/3 of it, so fault tests that cut
        #: servers off give it their brokers' short session.
        self.store_session_timeout_ms = store_session_timeout_ms
        self.addresses = ClusterAddresses(
            self.broker_ids,
            host=host,
            chroot=chroot,
            ports=self.ports,
            broker_hosts=self.broker_hosts,
            metrics_base_port=metrics_port,
            external_zookeeper=zookeeper,
            zookeeper=lambda: self.zk,
        )
        self.waits = ClusterWaits(
            lambda: self.store, self.admin, self.processes, self.broker_ids, self.addresses.known
        )

    @property
    def store(self) -> ZkMetadataStore:
        if self._store is None:
            raise ClusterError("the cluster is not started")
        return self._store

    def admin(self) -> AdminClient:
        """An admin client that finds the controller through ZooKeeper (shared, closed with the cluster)."""
        if self._admin is None:
            security = self.client_security()
            self._admin = AdminClient(
                self.store,
                timeout_s=30.0,
                listener_name=security.listener_name,
                ssl_context=security.ssl_context(),
                authenticate=security.authenticate(),
            )
        return self._admin

    # -- what the CLI, Airflow's demo and the benchmarks call; the rest is on ``addresses``, ``waits``
    @property
    def zookeeper_connect(self) -> str:
        return self.addresses.zookeeper_connect

    @property
    def connect_string(self) -> str:
        return self.addresses.connect_string

    def listener(self, broker_id: int) -> str:
        return self.addresses.listener(broker_id)

    def controller(self) -> tuple[int | None, int | None]:
        return self.waits.controller()

    def registered(self) -> dict[int, int]:
        return self.waits.registered()

    def running_broker_ids(self) -> list[int]:
        return self.waits.running_broker_ids()

    def wait_topic_healthy(self, topic: str, timeout: float = 60.0) -> ClusterView:
        return self.waits.wait_topic_healthy(topic, timeout)

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str] | None = None,
    ) -> str:
        """Create a topic as ``topics create`` does (config + version-3 znode with a new id)."""
        topic_id = new_topic_id()
        self.store.create_topic(
            topic, {p: ReplicaAssignment.of(rs) for p, rs in assignment.items()}, config, topic_id=topic_id
        )
        return topic_id

    def info(self) -> dict[str, Any]:
        """Addresses, pids and log files, for printing."""
        return {
            "zookeeper": self.connect_string,
            "data_dir": str(self.data_dir),
            "audit_url": self.audit_url,
            "brokers": [
                {
                    "id": b,
                    "listener": self.listener(b) if b in self.ports else None,
                    "pid": p.pid if (p := self.processes.get(b)) is not None and p.is_running() else None,
                    "log": str(self.data_dir / "logs" / f"broker-{b}.log"),
                    "metrics": self.addresses.metrics_url(b),
                }
                for b in self.broker_ids
            ],
        }

    def start(self, timeout: float = 90.0) -> LocalCluster:
        """ZooKeeper, then every broker at once; returns when all are registered, a controller is
        elected and every broker's metadata lists every broker."""
        deadline = time.monotonic() + timeout
        try:
            if self.external_zookeeper is None and self.zk is None:
                zk_dir = self.data_dir / "zookeeper"
                if self.security != "plaintext" and self.zk_servers == 1 and self.zk_login is None:
                    self.data_dir.mkdir(parents=True, exist_ok=True)
                    self.zk_login = ClusterZkLogin.new(self.data_dir)
                security = None if self.zk_login is None else self.zk_login.server_security()
                self.zk = (
                    EmbeddedZooKeeper(port=self.zk_port, data_dir=zk_dir, security=security)
                    if self.zk_servers == 1
                    else ZooKeeperEnsemble(self.zk_servers, self.zk_port, zk_dir)
                )
                self.zk.start(timeout=max(1.0, deadline - time.monotonic()))
            self._open_store()
            if self.security in ("ssl", "sasl_ssl") and self.tls is None:
                # Imported on use: cryptography loads only when used (start-up time).
                from kafka_controller.security.certs import make_cluster_pki

                hosts = {"localhost", "127.0.0.1", self.host, *(h for h, _ in self.broker_hosts.values())}
                self.tls = make_cluster_pki(self.data_dir / "tls", self.broker_ids, hosts=sorted(hosts))
            if self.security.startswith("sasl_") and not self._passwords:
                self._make_users()
            if self.supervisor is None:
                self._supervise()
            if self.audit_url:
                # Imported on use: SQLAlchemy is optional (the 'audit' extra).
                from kafka_controller.audit.migrate import upgrade_database

                upgrade_database(self.audit_url)  # once here, not raced by every broker's writer
            self._start_brokers(self.broker_ids, deadline)
            self.waits.wait_for_controller(timeout=time_left(deadline))
            self.waits.wait_metadata(timeout=time_left(deadline))
        except BaseException:
            self.close(graceful=False)
            raise
        return self

    def client_security(self) -> ClientSecurity:
        """How a client with every right reaches the brokers: the super user over SASL, the
        client certificate over SSL, nothing over PLAINTEXT."""
        if self.security == "plaintext":
            return PLAINTEXT
        if self.security == "ssl":
            if self.tls is None:
                raise ClusterError("the cluster is not started")
            return ClientSecurity(
                "SSL",
                cafile=str(self.tls.truststore),
                certfile=str(self.tls.client_certificate),
                keyfile=str(self.tls.client_key),
            )
        if not self._passwords:
            raise ClusterError("the cluster is not started")
        return ClientSecurity(
            self.security.upper(),
            SCRAM_MECHANISM,
            SUPER_USER,
            self._passwords[SUPER_USER],
            cafile=None if self.tls is None else str(self.tls.truststore),
        )

    def _make_users(self) -> None:
        """SCRAM-SHA-512 credentials for the super user and the inter-broker user in ZooKeeper
        (``/config/users``, before any broker starts: the brokers log in to each other with
        theirs), and the super user's client properties, mode 0600."""
        # Imported on use: cryptography loads only when used (start-up time).
        from kafka_controller.security.certs import new_password

        formatter = ScramFormatter(SCRAM_MECHANISM)
        passwords = {SUPER_USER: new_password(), INTER_BROKER_USER: new_password()}
        for user, password in passwords.items():
            credential = formatter.credential(password, 8192)
            alter_user_credentials(self.store, user, {SCRAM_MECHANISM: credential})
        self._passwords = passwords
        target = self.data_dir / "client.properties"
        lines = [f"{k}={v}" for k, v in self.client_security().librdkafka().items()]
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)  # an existing file keeps its mode through O_CREAT
            f.write("\n".join(lines) + "\n")
        self.client_properties = target

    def _sasl_settings(self) -> dict[str, str]:
        """The broker settings of the SASL modes: SCRAM-SHA-512 only, the inter-broker login in the
        listener's JAAS entry, Kafka's ACL authorizer with both users as super users."""
        listener = self.security.upper()
        password = self._passwords[INTER_BROKER_USER].replace("\\", "\\\\").replace('"', '\\"')
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{INTER_BROKER_USER}" password="{password}";'
        )
        return {
            "security.inter.broker.protocol": listener,
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "sasl.mechanism.inter.broker.protocol": SCRAM_MECHANISM,
            f"listener.name.{listener.lower()}.{SCRAM_MECHANISM.lower()}.sasl.jaas.config": jaas,
            "authorizer.class.name": ACL_AUTHORIZER,
            "super.users": f"User:{SUPER_USER};User:{INTER_BROKER_USER}",
        }

    def _open_store(self) -> None:
        if self._store is not None:
            return
        # Imported on use: kazoo is optional (the 'zk' extra).
        from kafka_controller.zk.kazoo_backend import KazooMetadataStore

        logging.getLogger("kazoo").setLevel(logging.WARNING)
        self._store = KazooMetadataStore(  # brokers inherit the environment, and with it the credentials
            ZkClientConfig(
                self.connect_string,
                session_timeout_ms=self.store_session_timeout_ms,
                connection_timeout_ms=30_000,
                digest=digest_from_env(),
                **self._zk_client_settings(),
            )
        )

    def _zk_client_settings(self) -> dict[str, Any]:
        return {} if self.zk_login is None else self.zk_login.client_settings()

    def broker_data_dir(self, broker_id: int) -> Path:
        return self.data_dir / "brokers" / f"broker-{broker_id}"

    def _supervise(self) -> None:
        # Imported on use: kazoo is optional (the 'zk' extra).
        from kafka_controller.cluster.supervisor import ExitSupervisor, SessionCloser

        backend: Any = self.store.backend  # type: ignore[attr-defined]
        config = ZkClientConfig(
            self.connect_string,
            connection_timeout_ms=10_000,
            digest=digest_from_env(),
            **self._zk_client_settings(),
        )
        closer = SessionCloser(self.broker_data_dir, config, backend.exists, enabled=self._close_sessions)
        self.session_closer = closer
        self.supervisor = ExitSupervisor(lambda: list(self.processes.values()), closer).start()

    def _start_brokers(self, broker_ids: Sequence[int], deadline: float) -> dict[int, int]:
        """Spawn, then wait for the registrations. A broker whose port was taken meanwhile (other
        programs pick free ports too) is started again on a new port, up to three times."""
        pending = list(broker_ids)
        epochs: dict[int, int] = {}
        for attempt in range(3):
            for b in pending:
                self._spawn(b)
            try:
                epochs.update(self.waits.wait_registered(pending, timeout=time_left(deadline)))
                return epochs
            except ClusterError:
                lost = [b for b in pending if self._port_was_taken(b)]
                if lost and self.listener_base_port is not None:  # chosen ports: not ours to move
                    taken = ", ".join(f"{self.ports[b]} (broker {b})" for b in lost)
                    raise ClusterError(f"listener port {taken} is taken by another program") from None
                if not lost or attempt == 2:
                    raise
                registered = self.waits.registered()
                epochs.update({b: registered[b] for b in pending if b in registered})
                for b in lost:
                    self.ports.pop(b, None)
                pending = lost
        return epochs

    def _port_was_taken(self, broker_id: int) -> bool:
        proc = self.processes.get(broker_id)
        return proc is not None and not proc.is_running() and "cannot listen on" in proc.log_tail(5)

    def _spawn(self, broker_id: int) -> BrokerProcess:
        host, port, prefix = self.addresses.assign_listener(broker_id)
        config = self.broker_config
        if self.security == "ssl" and self.tls is not None:
            config = {
                **config,
                "security.inter.broker.protocol": "SSL",
                "ssl.client.auth": "required",
                **self.tls.broker_settings(broker_id),
            }
        elif self.security.startswith("sasl_"):
            tls = {} if self.tls is None else self.tls.broker_settings(broker_id)
            config = {**config, **self._sasl_settings(), **tls}
        env = None
        if self.zk_login is not None:  # its ZooKeeper login: KAFKA_OPTS names its JAAS file
            config = {**config, **self.zk_login.broker_settings()}
            env = self.zk_login.broker_environment(self.broker_data_dir(broker_id))
        command = broker_command(
            broker_id,
            self.connect_string,
            host,
            port,
            config,
            audit_url=self.audit_url,
            audit_spool_dir=self.data_dir / "spool" / f"broker-{broker_id}",
            python=self.python,
            log_level=self.log_level,
            data_dir=self.broker_data_dir(broker_id),
            metrics_port=self.addresses.metrics_port(broker_id),
            listener_name=self.security.upper(),
        )
        command[:0] = prefix
        proc = self.processes.get(broker_id)
        if proc is None or proc.command != command:
            log_path = self.data_dir / "logs" / f"broker-{broker_id}.log"
            proc = BrokerProcess(broker_id, command, log_path, env=env)
            self.processes[broker_id] = proc
        proc.start()
        return proc

    def start_broker(self, broker_id: int, timeout: float = 60.0) -> int:
        """Start (or restart after a stop or kill) one broker; returns its new broker epoch.

        A registration left by a killed incarnation must lapse first (ZooKeeper refuses a second
        ephemeral), so this waits for it to go before starting."""
        self.addresses.known(broker_id)
        deadline = time.monotonic() + timeout
        proc = self.processes.get(broker_id)
        if proc is not None and proc.is_running():
            raise ClusterError(f"broker {broker_id} is already running (pid {proc.pid})")
        if self.zk is not None or self.external_zookeeper is not None:
            # Relaunched by someone else (Airflow's ``local`` lifecycle backend starts brokers
            # detached): its registration would never go, so waiting for it would only time out.
            others = broker_pids(broker_id, self.connect_string)
            if others:
                raise ClusterError(
                    f"broker {broker_id} is already running (pid {others[0]}), started outside this "
                    "cluster (by Airflow's local lifecycle backend?); stop that process first"
                )
        self.waits.wait_deregistered(broker_id, timeout=time_left(deadline))
        return self._start_brokers([broker_id], deadline)[broker_id]

    def stop_broker(self, broker_id: int, timeout: float = 60.0) -> int | None:
        """SIGTERM (controlled shutdown) and wait for exit and deregistration; the exit code."""
        proc = self.processes.get(self.addresses.known(broker_id))
        if proc is None or not proc.is_running():
            return None if proc is None else proc.returncode
        deadline = time.monotonic() + timeout
        code = proc.stop(timeout)
        if code is None:
            raise ClusterError(
                f"broker {broker_id} did not exit within {timeout:g}s of SIGTERM and was killed"
            )
        self.waits.wait_deregistered(broker_id, timeout=time_left(deadline))
        return code

    def controlled_shutdown(self, broker_id: int, timeout: float = 60.0) -> ShutdownReport:
        """SIGTERM, watching the broker's leadership until it deregisters; what it led before and
        at exit (the last look while still registered), how long it took, its exit code."""
        proc = self._running(broker_id)
        deadline = time.monotonic() + timeout
        watch = LeadershipWatch(self.store, broker_id, partitions_of(self.store, broker_id))
        led_before = watch.led
        started = time.monotonic()
        proc.terminate()
        led_at_exit = watch.wait_deregistered(deadline)
        seconds = time.monotonic() - started
        code = proc.wait(time_left(deadline))
        if code is None:
            proc.kill()
            raise ClusterError(f"broker {broker_id} deregistered but did not exit in time; it was killed")
        return ShutdownReport(broker_id, tuple(led_before), tuple(led_at_exit), seconds, code)

    def _running(self, broker_id: int) -> BrokerProcess:
        proc = self.processes.get(self.addresses.known(broker_id))
        if proc is None or not proc.is_running():
            raise ClusterError(f"broker {broker_id} is not running")
        return proc

    def kill_broker(self, broker_id: int, *, wait_deregistered: bool = False, timeout: float = 60.0) -> None:
        """SIGKILL: a hard failure. With ``wait_deregistered``, return once its session has lapsed."""
        proc = self.processes.get(self.addresses.known(broker_id))
        if proc is not None:
            proc.kill()
        if wait_deregistered:
            self.waits.wait_deregistered(broker_id, timeout=timeout)

    def crash_broker(self, broker_id: int) -> None:
        """SIGKILL from outside (an OOM kill): an exit the cluster did not ask for (``supervisor``)."""
        pid = self._running(broker_id).pid
        if pid is not None:  # None only before its start, which ``_running`` rules out
            os.kill(pid, signal.SIGKILL)

    def restart_broker(self, broker_id: int, timeout: float = 90.0) -> int:
        """A bounce: controlled shutdown, then start again; returns the new broker epoch."""
        deadline = time.monotonic() + timeout
        self.stop_broker(broker_id, timeout=time_left(deadline))
        return self.start_broker(broker_id, timeout=time_left(deadline))

    def pause_broker(self, broker_id: int) -> None:
        """SIGSTOP: the process and its ZooKeeper client freeze."""
        proc = self._running(broker_id)
        proc.pause()

    def resume_broker(self, broker_id: int) -> None:
        proc = self.processes.get(self.addresses.known(broker_id))
        if proc is not None:
            proc.resume()

    def close(self, *, graceful: bool = True, timeout: float = 60.0) -> None:
        """Stop the brokers (controlled shutdown one at a time, the controller last; or SIGKILL
        when not ``graceful``), then ZooKeeper; remove the data dir if it is a temporary one."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + timeout
        if self.supervisor is not None:
            self.supervisor.stop()
        procs = [p for p in self.processes.values() if p.is_running()]
        try:
            if graceful and procs:
                controller = self.waits.controller_or_none()
                order = sorted(procs, key=lambda p: p.broker_id == controller)
                for p in order:
                    per_broker = max(1.0, time_left(deadline) / max(1, len(order)))
                    p.stop(per_broker)
            if graceful:
                self._stop_relaunched(signal.SIGTERM, deadline)
        finally:
            for p in self.processes.values():
                p.kill()
            wait_all_exited(list(self.processes.values()), time.monotonic() + 5.0)
            self._stop_relaunched(signal.SIGKILL, time.monotonic() + 5.0)
            if self._admin is not None:
                self._admin.close()
            if self._store is not None:
                with contextlib.suppress(Exception):
                    self._store.close()
            if self.zk is not None:
                self.zk.close()
            if self._owns_dir:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def _stop_relaunched(self, sig: int, deadline: float) -> None:
        """Brokers of this cluster that something else started (by hand, or Airflow's ``local``
        lifecycle backend when no ``cluster up`` owned them) are not our children, but they are
        this cluster's: stop them too (SIGTERM: their controlled shutdown, one at a time; SIGKILL
        for what is left), or they outlive ``cluster up`` and keep the ports and ZooKeeper paths."""
        if self.zk is not None or self.external_zookeeper is not None:  # else none of ours can exist
            stop_outside_brokers(self.broker_ids, self.connect_string, sig, deadline)

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close(graceful=False)
