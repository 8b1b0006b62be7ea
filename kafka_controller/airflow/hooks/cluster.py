"""``KafkaClusterHook``: one cluster's ZooKeeper session, admin client and broker lifecycle.

The hook owns every piece of I/O the operators need and hands back plain values (``ClusterView``,
``ClusterSnapshot``, per-partition results). Reads are the store's batched ones: a wait loop costs a
handful of round trips per poll, whatever the number of partitions. Credentials stay inside the
connection object; ``describe_connection`` is what may be logged or recorded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.sdk import BaseHook

from kafka_controller.admin.describe import ClusterView, read_cluster_view
from kafka_controller.admin.kafka_logs import keep_kafka_client_logs_at_debug
from kafka_controller.admin.throttle import BROKER_THROTTLE_KEYS, TOPIC_THROTTLE_KEYS, merge_entity_config
from kafka_controller.airflow.connections import (
    CLUSTER_CONN_TYPE,
    DEFAULT_CLUSTER_CONN_ID,
    ClusterConnection,
    airflow_fields,
    cluster_connection,
)
from kafka_controller.airflow.demote import demote_by_reorder, restore_order
from kafka_controller.airflow.lifecycle import BrokerLifecycle, lifecycle_backend
from kafka_controller.airflow.plan_model import ClusterSnapshot
from kafka_controller.audit.schema import checked_cluster_id
from kafka_controller.broker.admin_client import AdminClient
from kafka_controller.broker.kafka_admin import KafkaAdmin
from kafka_controller.domain.config_keys import AUTO_LEADER_REBALANCE_ENABLE
from kafka_controller.domain.errors import (
    BrokerNotAvailableError,
    InvalidArgumentError,
    KafkaControllerError,
    MetadataStoreError,
)
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.ports import Clock, SystemClock, ZNodeEvent

if TYPE_CHECKING:
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

T = TypeVar("T")
DEFAULT_BROKER = "<default>"  # Kafka's entity name for the cluster-wide dynamic broker config


class OperationTimeoutError(KafkaControllerError):
    """A wait did not reach its goal in time; the message says what was awaited and what was seen."""


class OperationCancelledError(KafkaControllerError):
    """The task was killed (``on_kill``) while this hook was waiting or about to reconnect."""


class BrokerLostError(KafkaControllerError):
    """A broker the operation counts on lost its registration (``/brokers/ids/<id>`` went: it
    crashed, was killed, or its ZooKeeper session expired) while the operation ran."""

    def __init__(self, broker_ids: Sequence[int], during: str) -> None:
        self.broker_ids = tuple(broker_ids)
        names = ", ".join(map(str, self.broker_ids))
        super().__init__(
            f"broker {names} left the cluster during {during} (its registration in /brokers/ids is "
            "gone: crashed, killed or its ZooKeeper session expired)"
        )


#: Seconds between two reads of /brokers/ids while guarding when the child watch has not fired
#: (a watch lost with a session must not leave a dead broker unnoticed).
GUARD_REREAD_S = 2.0


class KafkaClusterHook(BaseHook):
    """ZooKeeper, the active controller's admin APIs and the brokers' lifecycle for one cluster."""

    conn_name_attr = "kafka_controller_conn_id"
    default_conn_name = DEFAULT_CLUSTER_CONN_ID
    conn_type = CLUSTER_CONN_TYPE
    hook_name = "Kafka cluster (ZooKeeper mode)"

    def __init__(
        self, kafka_controller_conn_id: str = DEFAULT_CLUSTER_CONN_ID, *, clock: Clock | None = None
    ):
        super().__init__()
        self.kafka_controller_conn_id = kafka_controller_conn_id
        self.clock: Clock = clock or SystemClock()
        self._store: KazooMetadataStore | None = None
        self._admin: AdminClient | None = None
        self._kafka_admin: KafkaAdmin | None = None
        self._cancelled = False
        self._guarded: frozenset[int] = frozenset()
        self._guard_during = ""
        self._ids_changed = threading.Event()
        self._guard_read_at = 0.0
        #: How ``controlled_shutdown`` moves leadership off a broker: this project's ControlledShutdown
        #: API, or ``"reorder"`` (replica reorder + preferred election, works on Apache Kafka too).
        self.demote = "controlled_shutdown"
        #: Replica orders a ``"reorder"`` demotion changed, for ``restore_replica_order``.
        self.reordered: dict[TopicPartition, tuple[int, ...]] = {}

    # -- connection ---------------------------------------------------------------------------------
    @cached_property
    def connection(self) -> ClusterConnection:
        c = self.get_connection(self.kafka_controller_conn_id)
        return cluster_connection(self.kafka_controller_conn_id, **airflow_fields(c))

    def describe_connection(self) -> dict[str, Any]:
        return self.connection.describe()

    def cluster_id(self) -> str | None:
        """ZooKeeper's ``/cluster/id`` (which Kafka's first broker creates), for the audit rows; None
        when it cannot be read or is not a cluster id the audit can hold (the row is kept anyway)."""
        try:
            return checked_cluster_id(self.get_store().get_cluster_id())
        except KafkaControllerError:
            return None

    def cancel(self) -> None:
        """The task was killed: ``wait_for`` loops of this hook stop, and it opens no new session.

        Airflow calls ``on_kill`` from another thread than the one running ``execute``; without
        this, that thread would reopen the session ``close`` had just ended, and keep polling."""
        self._cancelled = True

    def _check_cancelled(self) -> None:
        if self._cancelled:
            raise OperationCancelledError("the task was killed")

    # -- brokers the operation counts on ------------------------------------------------------------
    def guard_brokers(self, broker_ids: Collection[int], during: str) -> None:
        """From now on, every wait of this hook fails at once with ``BrokerLostError`` naming the
        broker when one of ``broker_ids`` loses its registration; an empty set stops guarding.

        A rolling restart or a reassignment would otherwise wait out its whole catch-up timeout for
        an ISR that the dead broker can never join, and then blame the broker it was waiting for.
        A child watch on /brokers/ids says when to look again (its handler only sets an event), so
        a poll reads nothing while the set of brokers does not change."""
        self._guarded = frozenset(broker_ids)
        self._guard_during = during
        self._ids_changed.set()  # look once now, and arm the watch

    def check_brokers(self) -> None:
        """Raise ``BrokerLostError`` if a guarded broker is no longer registered (see ``guard_brokers``)."""
        if not self._guarded:
            return
        now = self.clock.monotonic()
        if not self._ids_changed.is_set() and now - self._guard_read_at < GUARD_REREAD_S:
            return
        self._ids_changed.clear()
        try:
            registered = set(self.get_store().watch_broker_ids(self._on_broker_ids_changed))
        except BaseException:
            self._ids_changed.set()  # not looked: look again on the next poll
            raise
        self._guard_read_at = now
        gone = sorted(self._guarded - registered)
        if gone:
            raise BrokerLostError(gone, self._guard_during)

    def _on_broker_ids_changed(self, _event: ZNodeEvent) -> None:
        self._ids_changed.set()  # a store thread: only note it; the waiting thread reads

    def get_store(self) -> KazooMetadataStore:
        """The kazoo metadata store (one session per hook, closed by ``close``)."""
        self._check_cancelled()
        if self._store is None:
            # Imported on use: kazoo (the 'zk' extra) costs a DAG file's parse, which imports the
            # operators and so this hook, while only a running task opens a session.
            from kafka_controller.zk.kazoo_backend import KazooMetadataStore

            logging.getLogger("kazoo.client").setLevel(logging.WARNING)
            self._store = KazooMetadataStore(self.connection.zk_config(), clock=self.clock)
        return self._store

    def get_admin_client(self) -> AdminClient:
        if self._admin is None:
            security = self.connection.kafka_security
            self._admin = AdminClient(
                self.get_store(),
                timeout_s=self.connection.request_timeout_s,
                listener_name=security.listener_name,
                ssl_context=security.ssl_context(),
                authenticate=security.authenticate(),
            )
        return self._admin

    def get_kafka_admin(self) -> KafkaAdmin:
        """Elections and reassignments over Kafka's protocol (kafka-python), so they work on any
        ZooKeeper-mode Kafka 2.4+; the operation id travels in the client id."""
        if self._kafka_admin is None:
            keep_kafka_client_logs_at_debug()  # refused connections to restarting brokers are no news

            conn = self.connection
            self._kafka_admin = KafkaAdmin(
                conn.bootstrap_servers,
                self.get_store(),
                timeout_s=conn.request_timeout_s,
                security=conn.kafka_security,
            )
        return self._kafka_admin

    def lifecycle(self) -> BrokerLifecycle:
        return lifecycle_backend(self.connection.lifecycle, self.connection.connect_string)

    def close(self) -> None:
        if self._kafka_admin is not None:
            self._kafka_admin.close()
            self._kafka_admin = None
        if self._admin is not None:
            self._admin.close()
            self._admin = None
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> KafkaClusterHook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: connect and read the controller."""
        try:
            view = self.describe()
        except Exception as e:
            return False, f"{type(e).__name__}: {e}"
        finally:
            self.close()
        return (
            True,
            f"controller {view.controller_id}, epoch {view.controller_epoch}, {len(view.brokers)} brokers",
        )

    # -- reads ----------------------------------------------------------------------------------------
    def describe(self, topics: Collection[str] | None = None) -> ClusterView:
        return read_cluster_view(self.get_store(), None if topics is None else list(topics))

    def snapshot(self) -> ClusterSnapshot:
        return ClusterSnapshot.read(self.get_store())

    def controller(self) -> tuple[int | None, int | None, int | None]:
        """``(controller id, epoch, epoch zk version)``."""
        store = self.get_store()
        epoch = store.get_controller_epoch()
        return store.get_controller_id(), *(epoch if epoch else (None, None))

    def assignments(self, topics: Collection[str]) -> dict[TopicPartition, ReplicaAssignment]:
        """Full assignments (RS/AR/RR) of ``topics``, one batched read."""
        out: dict[TopicPartition, ReplicaAssignment] = {}
        for t in self.get_store().get_replica_assignment_and_topic_ids(sorted(set(topics))).values():
            if isinstance(t, MetadataStoreError):
                raise t
            out.update(t.assignment)
        return out

    def wait_for(
        self, probe: Callable[[], T | None], timeout_s: float, what: str, interval_s: float = 0.25
    ) -> T:
        """Poll ``probe`` until truthy (returned) or raise ``OperationTimeoutError``; ZooKeeper or
        controller errors along the way count as "not yet". A guarded broker that goes
        (``guard_brokers``) ends the wait at once with ``BrokerLostError``."""
        deadline = self.clock.monotonic() + timeout_s
        last = ""
        while True:
            self._check_cancelled()
            try:
                self.check_brokers()
                value = probe()
                if value:
                    return value
            except (OperationCancelledError, BrokerLostError):
                raise
            except KafkaControllerError as e:
                last = f" (last error: {e})"
            if self.clock.monotonic() >= deadline:
                raise OperationTimeoutError(f"timed out after {timeout_s:g}s waiting for {what}{last}")
            self.clock.sleep(interval_s)

    def wait_until(
        self, probe: Callable[[], object], timeout_s: float, what: str, interval_s: float = 0.25
    ) -> bool:
        """``wait_for`` for a deadline that is not a failure: False when time ran out. A controlled
        shutdown or a demotion returns what is still led at its deadline, and the caller judges it."""
        try:
            self.wait_for(probe, timeout_s, what, interval_s)
        except OperationTimeoutError:
            return False
        return True

    # -- controller ------------------------------------------------------------------------------------
    def resign_controller(self) -> tuple[int, int]:
        """Delete ``/controller``, fenced on the epoch just read: a controller elected meanwhile is
        left alone (``ControllerMovedError``). Returns the resigned ``(controller id, epoch)``."""
        cid, epoch, zk_version = self.controller()
        if cid is None or epoch is None or zk_version is None:
            raise InvalidArgumentError("there is no active controller to resign")
        self.get_store().delete_controller(zk_version)
        return cid, epoch

    # -- admin requests ---------------------------------------------------------------------------------
    def elect_leaders(
        self,
        election_type: str,
        partitions: Collection[TopicPartition] | None,
        operation_id: str | None = None,
    ) -> dict[TopicPartition, tuple[str, int, str | None]]:
        """``{tp: (error name, leader, message)}`` for each partition the controller answered."""
        # the operation id travels in the client id, so the transitions it causes link to the row
        response = self.get_kafka_admin().elect_leaders(
            election_type, None if partitions is None else list(partitions), operation_id=operation_id
        )
        return {tp: (str(r.error), r.leader, r.message) for tp, r in response.results.items()}

    def alter_reassignments(
        self, plan: Mapping[TopicPartition, Sequence[int] | None], operation_id: str | None = None
    ) -> dict[TopicPartition, tuple[str, str | None]]:
        admin = self.get_kafka_admin()
        response = admin.alter_partition_reassignments(dict(plan), operation_id=operation_id)
        return {tp: (str(r.error), r.message) for tp, r in response.results.items()}

    def controlled_shutdown(
        self, broker_id: int, timeout_s: float, operation_id: str | None = None
    ) -> list[str]:
        """Ask the controller to move every leadership off ``broker_id``, retrying (as a Kafka broker
        does) until nothing is left or time runs out; returns what it still leads. With ``demote =
        "reorder"`` it uses Kafka's public APIs instead (``airflow.demote``)."""
        if self.demote == "reorder":
            still, originals = demote_by_reorder(self, broker_id, timeout_s, operation_id)
            self.reordered.update({tp: o for tp, o in originals.items() if tp not in self.reordered})
            return still
        store = self.get_store()
        epochs = {b.id: e for b, e in store.get_all_brokers_and_epochs().items()}
        if broker_id not in epochs:
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
        remaining: list[str] = []

        def attempt() -> bool:
            nonlocal remaining
            response = self.get_admin_client().controlled_shutdown(
                broker_id, epochs[broker_id], operation_id=operation_id
            )
            remaining = sorted(map(str, response.partitions_remaining))
            return not remaining

        # the caller decides whether partitions still led after the deadline are acceptable
        self.wait_until(attempt, timeout_s, f"broker {broker_id} to lead nothing", interval_s=1.0)
        return remaining

    def restore_replica_order(self, timeout_s: float, operation_id: str | None = None) -> int:
        """Put back the replica orders ``"reorder"`` demotions changed; returns how many were recorded."""
        originals, self.reordered = self.reordered, {}
        restore_order(self, originals, timeout_s, operation_id)
        return len(originals)

    # -- dynamic configs (throttles, auto-rebalance pause) -----------------------------------------------
    def _merge_entity_config(
        self, entity_type: str, name: str, changes: Mapping[str, str | None]
    ) -> dict[str, str]:
        """Set (or with None, remove) keys of ``/config/<type>/<name>`` and notify, as kafka-configs.sh
        does; returns the previous values of the keys touched."""
        return merge_entity_config(self.get_store(), entity_type, name, changes)

    def pause_auto_rebalance(self) -> str | None:
        """Cluster-wide dynamic broker config ``auto.leader.rebalance.enable=false``; returns the
        value it replaced (None = unset), for ``resume_auto_rebalance``."""
        return self._merge_entity_config(
            "brokers", DEFAULT_BROKER, {AUTO_LEADER_REBALANCE_ENABLE: "false"}
        ).get(AUTO_LEADER_REBALANCE_ENABLE)

    def resume_auto_rebalance(self, previous: str | None) -> None:
        self._merge_entity_config("brokers", DEFAULT_BROKER, {AUTO_LEADER_REBALANCE_ENABLE: previous})

    def auto_rebalance_paused(self) -> bool:
        config: dict[str, str] = self.get_store().get_entity_config("brokers", DEFAULT_BROKER)
        return config.get(AUTO_LEADER_REBALANCE_ENABLE) == "false"

    def set_throttles(
        self, brokers: Mapping[int, Mapping[str, str]], topics: Mapping[str, Mapping[str, str]]
    ) -> None:
        for b, config in sorted(brokers.items()):
            self._merge_entity_config("brokers", str(b), dict(config))
        for t, config in sorted(topics.items()):
            self._merge_entity_config("topics", t, dict(config))

    def clear_throttles(self, brokers: Collection[int], topics: Collection[str]) -> None:
        for b in sorted(brokers):
            self._merge_entity_config("brokers", str(b), dict.fromkeys(BROKER_THROTTLE_KEYS))
        for t in sorted(topics):
            self._merge_entity_config("topics", t, dict.fromkeys(TOPIC_THROTTLE_KEYS))
