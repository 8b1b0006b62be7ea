"""``BrokerServer``: one broker process (Kafka's ``KafkaServer`` in ZooKeeper mode, data plane simulated).

Start-up, in Kafka's order where it matters: connect to ZooKeeper (creating the chroot, Kafka's
top-level paths and ``/cluster/id``), build the replica manager, metadata cache and data plane,
**serve the listener before registering** (the controller may send LeaderAndIsr as soon as
``/brokers/ids/<id>`` appears; Kafka clients are answered there too, ``kafka_wire``), register
(version 5 JSON; czxid = broker epoch; with a ``data_dir``, the session file a supervisor closes
the session with when it sees the process die: ``session_file``), then the controller candidate,
channel manager and audit.

After a ZooKeeper session expiry the broker registers again and so gets a new, larger broker epoch
(KIP-380); the store's session listener only enqueues that work for the broker's own thread
(``reregistration``).

``shutdown()`` is Kafka's controlled shutdown: ask the active controller to move this broker's
leadership away, retrying up to ``controlled.shutdown.max.retries`` times, ``controlled.shutdown.
retry.backoff.ms`` apart, while the answer still lists partitions this broker leads (or no
controller answered); then stop serving, stop the controller candidate, and close the session,
which deregisters the broker. When every attempt fails it goes on anyway, as Kafka does.
"""

from __future__ import annotations

import logging
import queue
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_controller.broker import apis as A
from kafka_controller.broker import metrics as M
from kafka_controller.broker import zk_wait
from kafka_controller.broker.admin_audit import AdminAudit, audited_cluster_id
from kafka_controller.broker.admin_client import AdminClient, zk_locator
from kafka_controller.broker.alter_isr import AlterIsrManager
from kafka_controller.broker.authorization import BrokerAuthorization
from kafka_controller.broker.config import BrokerConfig, zookeeper_store
from kafka_controller.broker.config_changes import ConfigChangeListener
from kafka_controller.broker.data_plane import DataPlane
from kafka_controller.broker.epoch_guard import ControllerEpochGuard
from kafka_controller.broker.kafka_wire.admin_apis import admin_apis, auto_create_topics
from kafka_controller.broker.kafka_wire.controller_admin_apis import controller_admin_apis
from kafka_controller.broker.kafka_wire.handler import KafkaProtocolHandler, new_cluster_id
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.broker.request_handler import BrokerRequestHandler
from kafka_controller.broker.reregistration import SessionExpiry
from kafka_controller.controller.config import KafkaConfig
from kafka_controller.controller.kafka_controller import KafkaController
from kafka_controller.controller.metrics import MetricsRegistry
from kafka_controller.controller.metrics_http import serve_metrics
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import Broker
from kafka_controller.ports import AuditSink, Clock, MetadataStore, SystemClock
from kafka_controller.security.credentials import ScramCredentialCache
from kafka_controller.security.listeners import BrokerListeners, sasl_factory
from kafka_controller.transport.channel_manager import ControllerChannelManager
from kafka_controller.transport.limits import SocketSettings
from kafka_controller.transport.server import TransportServer
from kafka_controller.zk import session_file
from kafka_controller.zk.paths import CONTROLLER_EPOCH_PATH

log = logging.getLogger(__name__)
__all__ = ["BrokerServer", "socket_settings"]


def socket_settings(kafka: KafkaConfig) -> SocketSettings:
    """The listener's limits from the broker's Kafka settings."""
    return SocketSettings(
        socket_request_max_bytes=kafka.socket_request_max_bytes,
        sasl_server_max_receive_size=kafka.sasl_server_max_receive_size,
        queued_max_request_bytes=kafka.queued_max_request_bytes,
        connections_max_idle_ms=kafka.connections_max_idle_ms,
        connection_failed_authentication_delay_ms=kafka.connection_failed_authentication_delay_ms,
        max_connections=kafka.max_connections,
        max_connections_per_ip=kafka.max_connections_per_ip,
        max_connections_per_ip_overrides=kafka.max_connections_per_ip_overrides_map,
        num_io_threads=kafka.num_io_threads,
    )


class BrokerServer:
    """One broker; ``startup()`` then, later, ``shutdown()`` (both from the same thread).

    ``zookeeper`` is a connect string, or a ``MetadataStore`` the server then owns (it closes it on
    shutdown, which ends the session and so deregisters the broker).
    """

    def __init__(
        self,
        config: BrokerConfig,
        zookeeper: str | MetadataStore,
        *,
        listener: tuple[str, int] | None = None,
        rack: str | None = None,
        audit_url: str | None = None,
        audit_spool_dir: str | Path | None = None,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        clock: Clock | None = None,
        data_dir: str | Path | None = None,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.clock: Clock = clock or SystemClock()
        self._zookeeper = zookeeper
        self._listener = listener
        self.rack = rack
        self.audit_url = audit_url
        self.audit_spool_dir = audit_spool_dir
        self.metrics_port = metrics_port
        self.metrics_host = metrics_host
        self.data_dir = data_dir
        self.broker_epoch = -1
        self.broker_info: Broker | None = None
        self.listeners: BrokerListeners  # set at start-up, from the listener settings
        #: Set by SIGTERM handlers and the ShutdownBroker API; whoever runs the server watches it
        #: and then calls ``shutdown()`` (the CLI's main thread does).
        self.shutdown_requested = threading.Event()
        self._halted = threading.Event()  # set once everything is being stopped
        self._tasks: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._session_expiry: SessionExpiry | None = None  # built once the store is open
        self._started = False
        self._stopped = False
        self.broker_state = M.NOT_RUNNING  # Kafka's BrokerState gauge
        self._cleanup: list[tuple[str, Callable[[], Any]]] = []  # undone in reverse on shutdown
        self.store: MetadataStore | None = None
        self.controller: Any = None
        self.transport: Any = None
        self.metrics_server: Any = None
        self.audit: AuditSink | None = None
        self.admin_audit: AdminAudit | None = None

    # -- start-up ------------------------------------------------------------------------------------
    def startup(self) -> BrokerServer:
        """Start everything; on failure undo what was started and re-raise."""
        self.broker_state = M.STARTING
        try:
            self._startup()
        except BaseException:
            self._stop_all()
            raise
        self._started = True
        self.broker_state = M.RUNNING_AS_BROKER
        return self

    def _startup(self) -> None:
        cfg = self.config
        clock = self.clock
        now_ms = clock.time_ms
        # Listeners and TLS stores first: a bad setting or an unreadable key fails before anything runs.
        listeners = BrokerListeners.of(cfg.kafka.security_originals(), self._listener)
        client_tls = listeners.client_context()
        props = cfg.kafka.security_originals()
        client_sasl = listeners.client_authenticate(props)
        inter_broker = listeners.inter_broker_listener_name
        self.listeners = listeners
        store = (
            self._zookeeper
            if not isinstance(self._zookeeper, str)
            else zookeeper_store(self._zookeeper, cfg, clock)
        )
        self.store = store
        # SCRAM users: loaded when /config/changes is followed (below), then kept by its notifications.
        self.credentials = ScramCredentialCache(store)  # type: ignore[arg-type]
        kafka_answer: list[Callable[[bytes], bytes | None]] = []  # the ApiVersions answer, once built
        endpoints = listeners.endpoints(
            sasl_factory(props, self.credentials, lambda payload: kafka_answer[0](payload))
        )
        self._cleanup.append(("zookeeper session", store.close))  # closing it deregisters the broker
        self._session_expiry = expiry = SessionExpiry(
            self.broker_id,
            store,
            broker_info=lambda: self.broker_info,
            reregistered=self._reregistered,
            enqueue=self._tasks.put,
            halted=self._halted,
            clock=clock,
            data_dir=self.data_dir,
        )
        store.add_session_listener(expiry.on_session_event)
        retry = zk_wait.UntilConnected(store, self.shutdown_requested, clock)  # Kafka's, on CONNECTIONLOSS
        new_id = new_cluster_id()  # as Kafka's brokers do
        self.cluster_id = retry(lambda: store.create_or_get_cluster_id(new_id), "Reading /cluster/id")
        if self.audit_url:  # a bad URL fails before anything is registered; rows carry the cluster id
            self.audit = self._open_audit(self.audit_url)

        self.metrics = MetricsRegistry(clock)
        self.metadata_cache = MetadataCache(self.broker_id)
        self.replica_manager = ReplicaManager(
            self.broker_id, now_ms, produce_rate_per_s=cfg.produce_rate_per_s
        )
        self.link = AdminClient(
            store,
            locator=self._locate_controller,
            timeout_s=cfg.kafka.controller_socket_timeout_ms / 1000.0,
            listener_name=inter_broker,
            ssl_context=client_tls,
            authenticate=client_sasl,
        )
        self._cleanup.append(("controller link", self.link.close))
        self.alter_isr = AlterIsrManager(
            self.replica_manager,
            lambda: self.broker_epoch,
            lambda request, fresh: self.link.send_to_controller_once(A.ALTER_ISR, request, fresh=fresh),
            retry_backoff_s=cfg.alter_isr_retry_backoff_ms / 1000.0,
        )
        self.data_plane = DataPlane(
            self.replica_manager,
            self.alter_isr,
            fetch_interval_ms=cfg.fetch_interval_ms,
            replica_lag_time_max_ms=cfg.kafka.replica_lag_time_max_ms,
            timeout_s=cfg.kafka.controller_socket_timeout_ms / 1000.0,
            listener_name=inter_broker,
            client_factory=listeners.client_factory(client_tls, client_sasl),
        )
        self.handler = BrokerRequestHandler(
            self.broker_id,
            lambda: self.broker_epoch,
            self.replica_manager,
            self.metadata_cache,
            self.data_plane,
            controller_timeout_s=cfg.kafka.controller_socket_timeout_ms / 1000.0,
            on_shutdown_requested=self.shutdown_requested.set,
            epoch_guard=ControllerEpochGuard(
                lambda: _epoch_of(store.get_controller_epoch()), sync=_epoch_sync(store)
            ),
        )
        self._register_metrics(store)

        # ACLs (kafka.security.authorizer.AclAuthorizer): loaded before the listener serves.
        self.authorization = authorization = BrokerAuthorization(
            props,
            store,
            self.metadata_cache,
            lambda: self.controller is not None and bool(self.controller.is_active),
            private_listeners=frozenset({inter_broker, listeners.controller_listener_name}),
            listener_count=len(listeners.listeners),
            clock=clock,
        )
        retry(lambda: authorization.start(self._tasks.put), "Loading the ACLs")
        self._cleanup.append(("ACL change listener", authorization.stop))
        apis = authorization.kafka_apis(
            {**controller_admin_apis(self.handler.handle, self.metadata_cache), **admin_apis(self)}
        )
        private: Callable[[str, Any], Any] = authorization.private(self.handler.handle)
        if self.admin_audit is not None:  # who changed what, recorded where requests are dispatched
            apis, private = self.admin_audit.kafka_apis(apis), self.admin_audit.private(private)
        kafka = KafkaProtocolHandler(
            self.metadata_cache,
            lambda: self.cluster_id,
            apis,
            auto_create_topics(self),
            authorization.requests,
        ).handle
        kafka_answer.append(kafka)
        name = f"broker-{self.broker_id}"
        self.transport = TransportServer(
            "",
            0,
            private,
            name=name,
            raw_handler=kafka,
            settings=socket_settings(cfg.kafka),
            listeners=endpoints,
        )
        self.transport.start()
        self._cleanup.append(("listener", self.transport.stop))
        listeners.warn_exposed(log)
        registered = listeners.registered(self.transport.ports)
        self.broker_info = info = Broker(self.broker_id, registered, self.rack)

        lifecycle = threading.Thread(
            target=self._run_tasks, name=f"broker-{self.broker_id}-lifecycle", daemon=True
        )
        lifecycle.start()
        self._cleanup.append(("lifecycle thread", lambda: self._tasks.put(None)))

        # Before registering: whoever waits for the registration (cluster up's "ready") may scrape.
        if self.metrics_port is not None:
            self.metrics_server = serve_metrics(self.metrics, self.metrics_host, self.metrics_port)
            self._cleanup.append(("metrics endpoint", self.metrics_server.close))
            log.info("Metrics on http://%s:%d/metrics", self.metrics_host, self.metrics_server.port)

        if (data_dir := self.data_dir) is not None:  # before registering: see session_file's docstring
            self._cleanup.append(("session file", lambda: session_file.remove_session_file(data_dir)))
            session_file.record_session(data_dir, store, self.broker_id)
        self.broker_epoch = epoch = retry(lambda: store.register_broker(info), "Registering the broker")
        endpoint = ",".join(ep.connection_string() for ep in info.endpoints)
        log.info("Registered broker %d at %s with broker epoch %d", self.broker_id, endpoint, epoch)
        if data_dir is not None:  # the epoch, and the session should it have changed while registering
            session_file.record_session(data_dir, store, self.broker_id, epoch)

        self.alter_isr.start()
        self._cleanup.append(("AlterIsr sender", self.alter_isr.stop))
        self.data_plane.start()
        self._cleanup.append(("data plane", self.data_plane.stop))

        channel_manager = ControllerChannelManager(
            self.broker_id,
            clock=clock,
            timeout_s=cfg.kafka.controller_socket_timeout_ms / 1000.0,
            local_handler=self.handler.handle,
            listener_name=listeners.controller_listener_name,
            client_factory=listeners.client_factory(
                listeners.client_context(listeners.controller_listener_name),
                listeners.client_authenticate(props, listeners.controller_listener_name),
            ),
        )
        self._cleanup.append(("channel manager", channel_manager.shutdown))
        M.register_channel_metrics(
            self.metrics, lambda: channel_manager.broker_ids, channel_manager.queue_size
        )
        self.controller = KafkaController(
            cfg.kafka,
            store,
            channel_manager,
            clock=clock,
            audit=self.audit,
            metrics=self.metrics,
            broker_info=self.broker_info,
        )
        self.controller.startup()
        self._cleanup.append(("controller", self.controller.shutdown))
        self.handler.controller = self.controller

        controller = self.controller
        self.config_changes = ConfigChangeListener(
            store,
            self._tasks.put,
            controller.enable_topic_unclean_leader_election,
            broker_id=self.broker_id,
            on_broker_config=controller.update_dynamic_broker_configs,
            on_topic_config=self.min_isr.on_topic_config,
            on_user_config=self.credentials.update,
            load_users=self.credentials.load,
        )
        retry(self.config_changes.start, "Watching /config/changes")
        self._cleanup.append(("config change listener", self.config_changes.stop))

    def _reregistered(self, epoch: int) -> None:
        """After a session expiry (``SessionExpiry``): the new, larger broker epoch (Kafka's
        ``KafkaZkClient.registerBroker``)."""
        old, self.broker_epoch = self.broker_epoch, epoch
        log.info("Re-registered broker %d (session expired): epoch %d -> %d", self.broker_id, old, epoch)

    def _open_audit(self, url: str) -> AuditSink:
        # Imported on use: SQLAlchemy is optional (the 'audit' extra).
        from kafka_controller.audit.operations import OperationLog
        from kafka_controller.audit.writer import AuditWriter

        spool = Path(
            self.audit_spool_dir or Path(tempfile.gettempdir()) / f"kafka-controller-audit-{self.broker_id}"
        )
        cluster_id = audited_cluster_id(self.cluster_id)
        writer = AuditWriter(url, spool_dir=spool, clock=self.clock, cluster_id=cluster_id)
        self._cleanup.append(("audit writer", writer.close))
        self.admin_audit = AdminAudit(
            lambda: OperationLog(url, clock=self.clock),
            lambda: cluster_id,
            now_ms=self.clock.time_ms,
            name=f"broker-{self.broker_id}-admin-audit",
        )
        self._cleanup.append(("admin request audit", self.admin_audit.close))
        return writer

    def _register_metrics(self, store: MetadataStore) -> None:
        """``broker.metrics``: the ReplicaManager's, BrokerState, the ZooKeeper client's, the audit's."""
        self.min_isr = M.TopicMinIsr(store)
        isr_changes = M.register_replica_manager_metrics(self.metrics, self.replica_manager, self.min_isr)
        self.alter_isr.on_committed = isr_changes.committed
        self.metrics.gauge(M.BROKER_STATE, lambda: float(self.broker_state), "Kafka's BrokerState number")
        M.register_zookeeper_metrics(self.metrics, store)
        M.register_thread_cpu_metrics(self.metrics)
        if self.audit is not None:
            # Imported on use: SQLAlchemy is optional (the 'audit' extra).
            from kafka_controller.audit.writer_recovery import register_writer_gauges

            register_writer_gauges(self.metrics, self.audit)

    @property
    def port(self) -> int:
        return int(self.transport.port) if self.transport is not None else -1

    # -- controller discovery -------------------------------------------------------------------------
    def _locate_controller(self, fresh: bool) -> tuple[int, str, int] | None:
        """The metadata cache first (no ZooKeeper round trip), ZooKeeper when told it was wrong."""
        if not fresh:
            cid = self.metadata_cache.controller_id
            endpoint = self.metadata_cache.endpoint(cid, self.listeners.inter_broker_listener_name)
            if cid >= 0 and endpoint is not None:
                return cid, endpoint.host, endpoint.port
        assert self.store is not None
        return zk_locator(self.store, self.listeners.inter_broker_listener_name)(fresh)

    def _run_tasks(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            try:
                task()
            except Exception:
                log.exception("Broker %d: background task failed", self.broker_id)

    # -- shutdown ---------------------------------------------------------------------------------------
    def controlled_shutdown(self) -> bool:
        """Kafka's broker side: True once the controller says this broker leads nothing."""
        cfg = self.config.kafka
        backoff_s = cfg.controlled_shutdown_retry_backoff_ms / 1000.0
        remaining = cfg.controlled_shutdown_max_retries
        fresh = False
        while remaining > 0:
            remaining -= 1
            request = A.ControlledShutdownRequest(self.broker_id, self.broker_epoch)
            try:
                response = self.link.send_to_controller_once(A.CONTROLLED_SHUTDOWN, request, fresh=fresh)
                if response.error == Errors.NONE and not response.partitions_remaining:
                    log.info("Controlled shutdown of broker %d succeeded", self.broker_id)
                    return True
                if response.error == Errors.NONE:
                    still = response.partitions_remaining
                    log.info(
                        "Remaining partitions to move off broker %d: %d (e.g. %s)",
                        self.broker_id,
                        len(still),
                        ", ".join(map(str, still[:5])),
                    )
                else:
                    refusal = (self.broker_id, response.error, response.message or "")
                    log.info("Controlled shutdown of broker %d refused: %s %s", *refusal)
                    fresh = True
            except KafkaControllerError as e:
                log.warning("Controlled shutdown request of broker %d failed: %s", self.broker_id, e)
                fresh = True
            if remaining > 0:
                retrying = "Retrying controlled shutdown of broker %d in %.1fs (%d attempts left)"
                log.warning(retrying, self.broker_id, backoff_s, remaining)
                self.clock.sleep(backoff_s)
        log.warning(
            "Proceeding to an unclean shutdown of broker %d: every controlled-shutdown attempt failed",
            self.broker_id,
        )
        return False

    def shutdown(self) -> bool:
        """Controlled shutdown (when enabled), then stop everything; returns whether it was clean."""
        if self._stopped:
            return True
        clean = True
        if self._started and self.config.kafka.controlled_shutdown_enable:
            self.broker_state = M.PENDING_CONTROLLED_SHUTDOWN
            self.data_plane.stop_fetching()  # so that no leader adds this broker back to an ISR
            clean = self.controlled_shutdown()
        self.broker_state = M.BROKER_SHUTTING_DOWN
        self._stop_all()
        return clean

    def crash(self) -> None:
        """Stop at once, without controlled shutdown (a hard failure, for tests): the session is
        closed, so the controller sees the broker die as it would after a SIGKILL."""
        self._stop_all()

    def _stop_all(self) -> None:
        self._stopped = True
        self._halted.set()
        if self.store is not None and self._session_expiry is not None:
            self.store.remove_session_listener(self._session_expiry.on_session_event)
        for name, undo in reversed(self._cleanup):
            try:
                undo()
            except Exception:
                log.exception("Broker %d: stopping the %s failed", self.broker_id, name)
        self._cleanup.clear()
        self.broker_state = M.NOT_RUNNING
        log.info("Broker %d stopped", self.broker_id)


def _epoch_of(read: tuple[int, int] | None) -> int | None:
    """The epoch of ``get_controller_epoch()``'s ``(epoch, zk_version)``."""
    return None if read is None else read[0]


def _epoch_sync(store: MetadataStore) -> Callable[[], None] | None:
    """ZooKeeper's ``sync`` of ``/controller_epoch`` through the store's kazoo client (chroot
    applied by kazoo), or None for a store without one (the in-memory tree is never behind)."""
    client = getattr(getattr(store, "backend", None), "client", None)
    sync = getattr(client, "sync", None)
    if not callable(sync):
        return None
    return lambda: sync(CONTROLLER_EPOCH_PATH)
