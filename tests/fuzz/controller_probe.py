"""An in-process cluster to feed corrupt znodes to, and the checks that follow every write.

Three simulated brokers (``tests.controller.cluster``: real ``KafkaController``s on one in-memory
ZooKeeper tree, each with its own session and a ``RecordingAuditSink``) and a topic ``good`` whose
partitions are led by brokers 2 and 3, so that stopping broker 2 forces elections while broker 1
stays the controller. "Others" write raw bytes through the admin session, under the store.

After each write ``ControllerProbe`` checks the rule for bad input from other systems: the
controller keeps running (same controller, same epoch, its event thread alive), nothing it owns is
partially written, its failures are reported per partition, and it still works afterwards (a new
topic gets a leader; a failover loads every readable partition).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kafka_controller.controller.kafka_controller import KafkaController
from kafka_controller.domain.audit_records import (
    OUTCOME_FAILED,
    ControllerEventRecord,
    PartitionTransition,
    ReplicaTransition,
)
from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.dryrun.memory_zk import InMemorySession
from kafka_controller.dryrun.recording import RecordingAuditSink
from kafka_controller.ports import TopicIdReplicaAssignment
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import NONODE, PERSISTENT
from tests.controller.cluster import Cluster, SimBroker, wait_until

BROKERS = (1, 2, 3)
GOOD: dict[int, list[int]] = {0: [2, 3], 1: [3, 2], 2: [2, 1], 3: [3, 1]}
#: Everything is in memory: what has not happened within this long will not happen.
TIMEOUT_S = 5.0


class ControllerProbe:
    """One cluster, the corrupt writes made to it, and the checks."""

    def __init__(self) -> None:
        self.sinks: dict[int, RecordingAuditSink] = {}
        self.cluster = Cluster(audit=self._sink, config={"auto.leader.rebalance.enable": "false"})
        self.cluster.start_all(BROKERS)
        self.cluster.create_topic("good", GOOD)
        self.controller_id = self.cluster.active().id
        self.epoch = self.cluster.controller_epoch()
        self.touched: set[str] = set()  # paths written by "others"
        self.new_topics: set[str] = set()  # topics that appeared through those writes
        self._probes = 0

    def _sink(self, broker_id: int) -> RecordingAuditSink:
        self.sinks[broker_id] = RecordingAuditSink()
        return self.sinks[broker_id]

    # -- what "others" do ------------------------------------------------------------------------
    @property
    def raw(self) -> InMemorySession:
        """The admin session's backend: raw znode writes, no codec in the way."""
        return self.cluster.admin.session

    def write(self, path: str, data: bytes | None, mode: int = PERSISTENT) -> str:
        """Create ``path`` (parents too) or overwrite it; returns the actual (sequential) path."""
        for parent in P.ancestors(path):
            if self.raw.exists(parent) is None:
                try:
                    self.raw.create(parent, None, PERSISTENT)
                except MetadataStoreError as e:
                    if e.code != "NODEEXISTS":
                        raise
        parts = path.split("/")
        if len(parts) == 4 and path.startswith(P.BROKER_TOPICS_PATH + "/") and self.raw.exists(path) is None:
            self.new_topics.add(parts[3])
        if mode == PERSISTENT and self.raw.exists(path) is not None:
            self.raw.set_data(path, data, -1)
            actual = path
        else:
            actual = self.raw.create(path, data, mode)[0]
        self.touched.add(actual)
        self.cluster.wait_idle()
        return actual

    # -- checks ------------------------------------------------------------------------------------
    @property
    def active(self) -> KafkaController:
        return self.cluster.brokers[self.controller_id].controller

    def assert_still_in_charge(self) -> None:
        """Same controller, same epoch, still processing events."""
        c = self.cluster
        assert c.admin.get_controller_id() == self.controller_id, "the controller changed"
        assert c.controller_epoch() == self.epoch, "the controller epoch changed"
        assert self.active.is_active, "the controller stopped acting as controller"
        assert self.active.event_manager.thread.is_alive(), "the controller's event thread died"
        assert self.active.wait_until_idle(TIMEOUT_S), "the controller no longer drains its queue"

    def states(self) -> dict[TopicPartition, object]:
        """Every state znode in the tree, decoded (or its decode error)."""
        tps = []
        for path in self.cluster.tree.paths():
            parts = path.split("/")  # /brokers/topics/<t>/partitions/<p>/state
            if len(parts) == 7 and parts[6] == "state" and parts[5].lstrip("-").isdigit():
                tps.append(TopicPartition(parts[3], int(parts[5])))
        return dict(self.cluster.admin.get_partition_states(tps))

    def assert_owned_state_consistent(self) -> None:
        """Every state znode the controller wrote is whole and sane; topics are all-or-nothing."""
        epoch = self.epoch[0]
        assignments = self.cluster.admin.get_replica_assignment_and_topic_ids(
            self.cluster.admin.get_all_topics()
        )
        for tp, read in self.states().items():
            path = P.topic_partition_state_path(tp)
            topic = assignments.get(tp.topic)
            if path in self.touched:
                continue  # others own what they wrote, sane or not (the controller trusts it, as Kafka)
            assert isinstance(read, LeaderIsrAndControllerEpoch), f"{path} does not decode: {read}"
            lai = read.leader_and_isr
            assert read.controller_epoch <= epoch, f"{path}: written by a future controller"
            assert lai.leader == -1 or lai.leader in lai.isr, f"{path}: leader {lai.leader} not in ISR"
            if isinstance(topic, TopicIdReplicaAssignment) and P.topic_path(tp.topic) not in self.touched:
                replicas = topic.assignment[tp].replicas
                assert set(lai.isr) <= set(replicas), f"{path}: ISR {lai.isr} outside replicas {replicas}"
        for name, topic in assignments.items():
            if name in self.new_topics and isinstance(topic, MetadataStoreError):
                kids = self.raw.get_children_many([P.topic_partitions_path(name)])[0]
                assert kids[0] == NONODE or not kids[1], f"undecodable topic {name} got partitions"

    def assert_failure_reported(self, tp: TopicPartition, broker_id: int | None = None) -> None:
        """The controller's audit trail holds a failed transition of ``tp`` naming its znode."""
        sink = self.sinks[broker_id if broker_id is not None else self.controller_id]
        failed = [
            r
            for r in sink.records
            if isinstance(r, PartitionTransition | ReplicaTransition)
            and (r.topic, r.partition) == tp
            and r.outcome == OUTCOME_FAILED
        ]
        assert failed, f"no failed transition of {tp} was audited"
        assert any(P.topic_partition_state_path(tp) in (r.error or "") for r in failed), [
            r.error for r in failed
        ]

    def assert_still_works(self) -> None:
        """A new topic is brought online, then a failover loads every readable partition."""
        c = self.cluster
        self._probes += 1
        probe = f"probe-{self._probes}"
        c.create_topic(probe, {0: [3, 2]})
        tp = TopicPartition(probe, 0)
        wait_until(lambda: _leader(c.state(tp)) == 3, f"{probe} gets leader 3", TIMEOUT_S)

        old = self.controller_id
        c.stop(old)
        wait_until(
            lambda: c.admin.get_controller_id() not in (None, old), "a new controller is elected", TIMEOUT_S
        )
        new = self.wait_for_controller()
        assert c.controller_epoch()[0] == self.epoch[0] + 1, "more than one election was needed"
        failovers = [
            r
            for r in self.sinks[new.id].records
            if isinstance(r, ControllerEventRecord) and r.kind == "failover"
        ]
        assert failovers and "failed" not in (failovers[-1].detail or ""), failovers
        ctx = new.controller.controller_context
        for p in GOOD:
            good = TopicPartition("good", p)
            if P.topic_partition_state_path(good) in self.touched or P.topic_path("good") in self.touched:
                continue
            assert ctx.partition_leadership_info(good) is not None, f"{good} not loaded on failover"
        self.controller_id, self.epoch = new.id, c.controller_epoch()
        self.assert_owned_state_consistent()

    def wait_for_controller(self) -> SimBroker:
        """The broker named by ``/controller`` once it acts as controller with an empty queue."""
        c = self.cluster
        wait_until(lambda: c.admin.get_controller_id() in c.brokers, "a controller is registered", TIMEOUT_S)
        new = c.brokers[c.admin.get_controller_id()]
        wait_until(lambda: new.controller.is_active, f"broker {new.id} acts as controller", TIMEOUT_S)
        assert new.controller.wait_until_idle(TIMEOUT_S), "the controller does not drain its queue"
        return new

    def close(self) -> None:
        self.cluster.close()


def _leader(state: LeaderIsrAndControllerEpoch | None) -> int | None:
    return None if state is None else state.leader_and_isr.leader


@contextmanager
def controller_probe() -> Iterator[ControllerProbe]:
    probe = ControllerProbe()
    try:
        yield probe
    finally:
        probe.close()


__all__ = ["BROKERS", "GOOD", "ControllerProbe", "controller_probe"]
