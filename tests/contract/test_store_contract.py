"""The metadata-store contract, run against the in-memory fake and a real ZooKeeper.

Several cases mirror Kafka's ``KafkaZkClientTest`` (docs/controller-behaviour.md §9).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

import orjson
import pytest

from kafka_controller.domain.errors import (
    ControllerMovedError,
    InvalidArgumentError,
    NodeExistsError,
    NoNodeError,
    StoreUnavailableError,
    ZNodeDecodeError,
)
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import MetadataStore, TopicIdReplicaAssignment
from kafka_controller.zk.store import ZkMetadataStore

from .conftest import StoreEnv

TP = TopicPartition
K = TypeVar("K")


def elected(env: StoreEnv, broker_id: int = 1) -> tuple[ZkMetadataStore, int, int]:
    store = env.store()
    epoch, zkv = store.register_controller_and_increment_controller_epoch(broker_id)
    return store, epoch, zkv


def with_states(store: ZkMetadataStore, epoch: int, zkv: int, *tps: TopicPartition) -> None:
    for topic in sorted({tp.topic for tp in tps}):
        n = 1 + max(tp.partition for tp in tps if tp.topic == topic)
        store.create_topic(topic, {p: ReplicaAssignment.of([1, 2]) for p in range(n)})
    states = {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2]), epoch) for tp in tps}
    assert all(err is None for err in store.create_partition_states(states, zkv).values())


def state_path(tp: TopicPartition) -> str:
    return f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state"


# -- controller election and fencing --------------------------------------------------------------


def test_store_satisfies_the_port(env: StoreEnv) -> None:
    assert isinstance(env.store(), MetadataStore)


def test_first_controller_gets_epoch_1_and_zk_version_1(env: StoreEnv) -> None:
    store, epoch, zkv = elected(env, 3)
    assert (epoch, zkv) == (1, 1)
    assert store.get_controller_id() == 3
    assert store.get_controller_epoch() == (1, 1)
    assert orjson.loads(env.raw_get("/controller")[0])["brokerid"] == 3  # type: ignore[index]


def test_second_candidate_is_told_the_controller_moved(env: StoreEnv) -> None:
    elected(env, 1)
    with pytest.raises(ControllerMovedError):
        env.store().register_controller_and_increment_controller_epoch(2)


def test_delete_controller_is_fenced_and_allows_reelection(env: StoreEnv) -> None:
    store, epoch, zkv = elected(env, 1)
    with pytest.raises(ControllerMovedError):
        store.delete_controller(zkv + 5)
    assert store.get_controller_id() == 1
    store.delete_controller(zkv)
    assert store.get_controller_id() is None
    other = env.store()
    assert other.register_controller_and_increment_controller_epoch(2) == (2, 2)
    with pytest.raises(ControllerMovedError):  # the old controller is now a zombie
        store.update_leader_and_isr({TP("t", 0): LeaderAndIsr.initial(1, [1])}, epoch, zkv)


def test_stale_epoch_zk_version_fences_writes_and_writes_nothing(env: StoreEnv) -> None:
    store, epoch, zkv = elected(env)
    tps = [TP("t", p) for p in range(5)]
    with_states(store, epoch, zkv, *tps)
    stale = zkv - 1
    new = {tp: LeaderAndIsr(2, 1, (2,), 0) for tp in tps}
    with pytest.raises(ControllerMovedError):
        store.update_leader_and_isr(new, epoch, stale)
    with pytest.raises(ControllerMovedError):
        store.create_partition_states({TP("t", 9): LeaderIsrAndControllerEpoch(new[tps[0]], 1)}, stale)
    with pytest.raises(ControllerMovedError):
        store.set_topic_assignment("t", None, {0: ReplicaAssignment.of([3])}, stale)
    with pytest.raises(ControllerMovedError):
        store.delete_topic_recursively("t", stale)
    reads = store.get_partition_states(tps)
    assert all(r == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), 1) for r in reads.values())
    assert env.raw_get(state_path(TP("t", 9))) is None
    assert store.get_replica_assignment_and_topic_ids(["t"])["t"].assignment[TP("t", 0)].replicas == (1, 2)  # type: ignore[union-attr]


def test_match_any_version_is_unfenced(env: StoreEnv) -> None:
    store, epoch, zkv = elected(env)
    with_states(store, epoch, zkv, TP("t", 0))
    result = store.update_leader_and_isr({TP("t", 0): LeaderAndIsr(2, 1, (2,), 0)}, epoch, -1)
    assert result.finished == {TP("t", 0): LeaderAndIsr(2, 1, (2,), 1)}


def test_version_conflicts_inside_a_batch(env: StoreEnv) -> None:
    """KafkaZkClientTest.testUpdateLeaderAndIsr, mixed call."""
    store, epoch, zkv = elected(env)
    t10, t11, t20 = TP("topic1", 0), TP("topic1", 1), TP("topic2", 0)
    missing = store.update_leader_and_isr(
        {t10: LeaderAndIsr.initial(1, [1]), t11: LeaderAndIsr.initial(1, [1])}, 1, zkv
    )
    assert missing.to_retry == []
    assert str(missing.finished[t10]) == f"KeeperErrorCode = NoNode for {state_path(t10)}"
    with_states(store, epoch, zkv, t10, t11)
    first = store.update_leader_and_isr(
        {t10: LeaderAndIsr(1, 1, (1, 2), 0), t11: LeaderAndIsr(1, 1, (1, 2), 0)}, 1, zkv
    )
    assert first.finished == {t10: LeaderAndIsr(1, 1, (1, 2), 1), t11: LeaderAndIsr(1, 1, (1, 2), 1)}
    again = store.update_leader_and_isr(
        {t11: LeaderAndIsr(1, 2, (1,), 0), t10: LeaderAndIsr(1, 2, (1,), 0)}, 1, zkv
    )
    assert again.finished == {} and again.to_retry == [t11, t10]  # input order
    mixed = store.update_leader_and_isr(
        {
            t10: LeaderAndIsr(1, 2, (1,), 1),
            t11: LeaderAndIsr(1, 2, (1,), 0),
            t20: LeaderAndIsr(1, 2, (1,), 0),
        },
        1,
        zkv,
    )
    assert mixed.finished[t10] == LeaderAndIsr(1, 2, (1,), 2)
    assert mixed.to_retry == [t11]
    assert isinstance(mixed.finished[t20], NoNodeError)
    assert store.get_partition_states([t11])[t11] == LeaderIsrAndControllerEpoch(
        LeaderAndIsr(1, 1, (1, 2), 1), 1
    )


def test_create_partition_states_creates_parents_and_reports_node_exists(env: StoreEnv) -> None:
    store, epoch, zkv = elected(env)
    store.create_topic("t", {0: ReplicaAssignment.of([1]), 1: ReplicaAssignment.of([1])})
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1]), epoch)
    assert store.create_partition_states({TP("t", 0): state}, zkv) == {TP("t", 0): None}
    assert env.raw_get("/brokers/topics/t/partitions/0") is not None
    again = store.create_partition_states({TP("t", 0): state, TP("t", 1): state}, zkv)
    assert isinstance(again[TP("t", 0)], NodeExistsError) and again[TP("t", 1)] is None
    no_topic = store.create_partition_states({TP("ghost", 0): state}, zkv)
    assert isinstance(no_topic[TP("ghost", 0)], NoNodeError)


def test_oversize_batches_are_split_and_all_written(env: StoreEnv) -> None:
    store = env.store(max_batch_ops=16, max_batch_bytes=4096)
    epoch, zkv = store.register_controller_and_increment_controller_epoch(1)
    tps = [TP(f"t{i % 3}", i // 3) for i in range(300)]
    before = store.batcher.multis_sent
    with_states(store, epoch, zkv, *tps)
    assert store.batcher.multis_sent - before >= 2 * 300 // 15
    update = {tp: LeaderAndIsr(2, 1, (2, 1), 0) for tp in tps}
    result = store.update_leader_and_isr(update, epoch, zkv)
    assert result.to_retry == [] and all(v == LeaderAndIsr(2, 1, (2, 1), 1) for v in result.finished.values())
    assert len(store.get_partition_states(tps)) == 300


# -- batched reads ------------------------------------------------------------------------------------


def test_multi_read_results_and_errors(env: StoreEnv) -> None:
    store, epoch, zkv = elected(env)
    ok, empty, corrupt, missing = TP("t", 0), TP("t", 1), TP("t", 2), TP("t", 3)
    with_states(store, epoch, zkv, ok)
    env.raw_put(state_path(empty), None)
    env.raw_put(state_path(corrupt), b'{"leader":1}')
    reads = store.get_partition_states([missing, ok, corrupt, empty])
    assert list(reads) == [missing, ok, corrupt, empty]
    assert reads[missing] is None and reads[empty] is None
    assert reads[ok] == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2), 0), epoch)
    assert isinstance(reads[corrupt], ZNodeDecodeError) and state_path(corrupt) in str(reads[corrupt])
    many = [TP("big", p) for p in range(2500)]
    assert all(v is None for v in store.get_partition_states(many).values())


def test_log_configs_merge_over_defaults(env: StoreEnv) -> None:
    store = env.store()
    store.create_topic("a", {0: ReplicaAssignment.of([1])}, {"unclean.leader.election.enable": "true"})
    env.raw_put("/config/topics/bad", b"{nope")
    configs, failures = store.get_log_configs(
        ["a", "none", "bad"], {"unclean.leader.election.enable": "false", "x": "1"}
    )
    assert configs == {
        "a": {"unclean.leader.election.enable": "true", "x": "1"},
        "none": {"unclean.leader.election.enable": "false", "x": "1"},
    }
    assert list(failures) == ["bad"] and isinstance(failures["bad"], ZNodeDecodeError)


def test_entity_configs_of_several_types_in_one_read(env: StoreEnv) -> None:
    store = env.store()
    store.set_or_create_entity_config("brokers", "<default>", {"auto.leader.rebalance.enable": "false"})
    store.change_topic_config("t", {"retention.ms": "1"})
    env.raw_put("/config/brokers/7", b"{nope")
    reads = store.get_entity_configs(
        [("brokers", "<default>"), ("brokers", "1"), ("topics", "t"), ("brokers", "7")]
    )
    assert reads[("brokers", "<default>")] == {"auto.leader.rebalance.enable": "false"}
    assert reads[("brokers", "1")] == {}  # absent: no overrides
    assert reads[("topics", "t")] == {"retention.ms": "1"}
    assert isinstance(reads[("brokers", "7")], ZNodeDecodeError)
    assert store.get_entity_configs([]) == {}


# -- brokers and sessions ------------------------------------------------------------------------------


def broker(i: int) -> Broker:
    return Broker(i, (EndPoint(f"b{i}", 9092),), rack=f"r{i % 2}")


def test_broker_registration_is_ephemeral_with_czxid_epoch(env: StoreEnv) -> None:
    b1, b2, observer = env.store(), env.store(), env.store()
    e1 = b1.register_broker(broker(1))
    e2 = b2.register_broker(broker(2))
    assert e2 > e1 > 0
    assert observer.get_all_brokers_and_epochs() == {broker(1): e1, broker(2): e2}
    assert observer.get_sorted_broker_list() == [1, 2] and observer.get_broker(2) == broker(2)
    assert b1.register_broker(broker(1)) == e1  # our own znode: idempotent
    with pytest.raises(NodeExistsError):
        b2.register_broker(broker(1))
    b2.update_broker_info(Broker(2, (EndPoint("moved", 9093),)))
    assert observer.get_broker(2) == Broker(2, (EndPoint("moved", 9093),))
    b1.close()
    assert observer.get_sorted_broker_list() == [2]


def test_session_expiry_events_ephemerals_and_bounce(env: StoreEnv, events: object) -> None:
    from .conftest import Events, SessionEvent

    assert isinstance(events, Events)
    b1, observer = env.store(), env.store()
    e1 = b1.register_broker(broker(1))
    b1.add_session_listener(events)
    old_session = b1.session_id
    env.expire(b1)
    assert events.until(SessionEvent.EXPIRED)[-1] is SessionEvent.EXPIRED
    events.until(SessionEvent.CONNECTED)
    assert b1.session_id != old_session
    assert observer.get_broker(1) is None
    e1b = b1.register_broker(broker(1))
    assert e1b > e1  # a bounce is a greater czxid
    assert observer.get_all_brokers_and_epochs() == {broker(1): e1b}


# -- watches --------------------------------------------------------------------------------------------


def test_children_watch_fires_once_per_arming(env: StoreEnv, events: object) -> None:
    from .conftest import Events

    assert isinstance(events, Events)
    controller, b1, b2, b3 = env.store(), env.store(), env.store(), env.store()
    assert controller.watch_broker_ids(events) == []
    b1.register_broker(broker(1))
    first = events.next()
    assert first.type.value == "children_changed" and first.path == "/brokers/ids"
    b2.register_broker(broker(2))  # not re-armed: must not fire
    assert controller.watch_broker_ids(events) == [1, 2]  # re-arm
    controller.watch_broker_ids(events)  # arming twice still fires once
    b3.register_broker(broker(3))
    events.next()
    assert events.drain() == []  # events arrive in order: nothing for b2, one for b3


def test_node_watch_on_controller_and_unwatch(env: StoreEnv, events: object) -> None:
    from .conftest import Events

    assert isinstance(events, Events)
    observer = env.store()
    assert observer.watch_controller(events) is False
    store, _epoch, zkv = elected(env, 4)
    assert events.next().type.value == "created"
    assert observer.watch_controller(events) is True
    store.delete_controller(zkv)
    assert events.next().type.value == "deleted"
    other = Events()
    observer.watch_controller(events)
    observer.watch_topics(other)
    observer.unwatch("/controller")
    store.register_controller_and_increment_controller_epoch(4)
    store.create_topic("after", {0: ReplicaAssignment.of([1])})
    assert other.next().path == "/brokers/topics"
    assert events.drain() == []  # the unwatched handler stayed silent


def test_topic_data_watches_armed_by_the_batched_read(env: StoreEnv, events: object) -> None:
    from .conftest import Events

    assert isinstance(events, Events)
    admin, controller = env.store(), env.store()
    for t in ("a", "b"):
        admin.create_topic(t, {0: ReplicaAssignment.of([1])})
    read = controller.get_replica_assignment_and_topic_ids(["a", "b", "ghost"], watch_handler=events)
    assert set(read) == {"a", "b"}
    admin.set_topic_assignment("b", None, {0: ReplicaAssignment.of([1]), 1: ReplicaAssignment.of([2])}, -1)
    event = events.next()
    assert (event.type.value, event.path) == ("data_changed", "/brokers/topics/b")


def _plain(reads: Mapping[K, object]) -> dict[K, object]:
    """Errors as (type, message): exceptions compare by identity."""
    return {k: (type(v), str(v)) if isinstance(v, Exception) else v for k, v in reads.items()}


def test_topics_and_their_states_read_together_are_the_two_reads(env: StoreEnv, events: object) -> None:
    """A failover's context load: the topics, then the states of every partition they name,
    over chunks (a topic of 1,500 partitions spans two of the default 1,000), with a missing and a
    corrupt state, a corrupt and a missing topic; each decoded topic's watch armed as before."""
    from .conftest import Events

    assert isinstance(events, Events)
    admin, epoch, zkv = elected(env)
    big = [TP("big", p) for p in range(1500)]
    with_states(admin, epoch, zkv, *big, TP("a", 0), TP("a", 1))
    admin.create_topic("nostate", {0: ReplicaAssignment.of([1])})
    env.raw_put(state_path(TP("a", 1)), b"{not json")
    env.raw_put("/brokers/topics/broken", b"[1, 2]")
    topics = ["a", "big", "broken", "nostate", "ghost"]
    controller = env.store()
    together, states = controller.get_replica_assignments_and_partition_states(topics, watch_handler=events)
    assignments = admin.get_replica_assignment_and_topic_ids(topics)
    assert _plain(together) == _plain(assignments) and set(together) == {"a", "big", "broken", "nostate"}
    assert isinstance(together["broken"], ZNodeDecodeError)
    named = [
        tp for read in together.values() if not isinstance(read, ZNodeDecodeError) for tp in read.assignment
    ]
    assert list(states) == named  # each decoded topic's partitions, in the topics' order
    assert _plain(states) == _plain(admin.get_partition_states(named))
    assert states[TP("nostate", 0)] is None and isinstance(states[TP("a", 1)], ZNodeDecodeError)
    assert states[big[-1]] == LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1, 2]), epoch)
    admin.set_topic_assignment("a", None, {0: ReplicaAssignment.of([2]), 1: ReplicaAssignment.of([2])}, -1)
    event = events.next()
    assert (event.type.value, event.path) == ("data_changed", "/brokers/topics/a")


def test_writes_fail_fast_while_disconnected_and_watches_come_back(env: StoreEnv, events: object) -> None:
    import time

    from .conftest import Events, SessionEvent

    assert isinstance(events, Events)
    store = env.store(request_timeout_s=60.0) if env.kind == "zk" else env.store()
    epoch, zkv = store.register_controller_and_increment_controller_epoch(1)
    with_states(store, epoch, zkv, TP("t", 0))
    store.add_session_listener(events)
    watched = Events()
    store.watch_topics(watched)
    env.disconnect(store)
    try:
        events.until(SessionEvent.SUSPENDED)
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            store.delete_topic_deletions(["t"], zkv)
        with pytest.raises(StoreUnavailableError):
            store.get_partition_states([TP("t", 0)])
        # Kafka's updateLeaderAndIsr turns a whole-call failure into a per-partition one
        failed = store.update_leader_and_isr({TP("t", 0): LeaderAndIsr(2, 1, (2,), 0)}, epoch, zkv)
        assert isinstance(failed.finished[TP("t", 0)], StoreUnavailableError) and failed.to_retry == []
        assert time.monotonic() - started < 10.0  # fails fast instead of waiting for the 60 s timeout
    finally:
        env.reconnect(store)
    events.until(SessionEvent.CONNECTED)
    assert store.update_leader_and_isr({TP("t", 0): LeaderAndIsr(2, 1, (2,), 0)}, epoch, zkv).to_retry == []
    env.store().create_topic("later", {0: ReplicaAssignment.of([1])})  # the re-armed watch fires
    seen = [watched.next()]  # zk also re-fires the watch kazoo dropped while disconnected
    while seen[-1].type.value != "children_changed" or store.get_all_topics() != {"t", "later"}:
        seen.append(watched.next())
    assert {e.path for e in seen} == {"/brokers/topics"}
    assert store.get_all_topics() == {"t", "later"}


# -- topics ------------------------------------------------------------------------------------------


def test_topic_lifecycle(env: StoreEnv) -> None:
    store, _epoch, zkv = elected(env)
    assignment = {0: ReplicaAssignment.of([1, 2]), 1: ReplicaAssignment.of([2, 3])}
    store.create_topic("orders", assignment, {"retention.ms": "1000"})
    assert store.get_all_topics() == {"orders"} and store.topic_exists("orders")
    with pytest.raises(NodeExistsError, match="/brokers/topics/orders"):
        store.create_topic("orders", assignment)
    for bad in (
        {0: ReplicaAssignment.of([1, 1])},
        {1: ReplicaAssignment.of([1])},
        {0: ReplicaAssignment.of([-1])},
    ):
        with pytest.raises(InvalidArgumentError):
            store.create_topic("bad", bad, {"k": "v"})
    assert env.raw_get("/brokers/topics/bad") is None and env.raw_get("/config/topics/bad") is None
    read = store.get_replica_assignment_and_topic_ids(["orders"])["orders"]
    assert isinstance(read, TopicIdReplicaAssignment) and read.topic_id is None
    assert read.assignment == {
        TP("orders", 0): ReplicaAssignment((1, 2)),
        TP("orders", 1): ReplicaAssignment((2, 3)),
    }
    from kafka_controller.zk.codecs import new_topic_id

    tid = new_topic_id()
    assert store.set_topic_ids([TopicIdReplicaAssignment("orders", tid, read.assignment)], zkv) == {
        "orders": None
    }
    again = store.get_replica_assignment_and_topic_ids(["orders"])["orders"]
    assert isinstance(again, TopicIdReplicaAssignment) and again.topic_id == tid and again.zk_version == 1
    store.set_topic_assignment(
        "orders", tid, {0: ReplicaAssignment.of([1, 2, 3], [3], []), 1: assignment[1]}, zkv
    )
    doc = orjson.loads(env.raw_get("/brokers/topics/orders")[0])  # type: ignore[index]
    assert doc == {
        "version": 3,
        "topic_id": tid,
        "partitions": {"0": [1, 2, 3], "1": [2, 3]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {},
    }
    store.create_partition_states(
        {TP("orders", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(1, [1]), 1)}, zkv
    )
    store.delete_topic_recursively("orders", zkv)
    assert (
        store.get_all_topics() == set() and env.raw_get("/brokers/topics/orders/partitions/0/state") is None
    )
    store.delete_topic_recursively("orders", zkv)  # missing is fine
    with pytest.raises(NoNodeError):
        store.set_topic_assignment("orders", None, assignment, zkv)


def test_topic_name_collisions_are_refused(env: StoreEnv) -> None:
    store = env.store()
    store.create_topic("my.topic", {0: ReplicaAssignment.of([1])})
    with pytest.raises(InvalidArgumentError, match="collides"):
        store.create_topic("my_topic", {0: ReplicaAssignment.of([1])})


def test_deletion_requests(env: StoreEnv) -> None:
    store, _epoch, zkv = elected(env)
    with pytest.raises(NoNodeError, match="/brokers/topics/ghost"):
        store.create_delete_topic_path("ghost")
    store.create_topic("t", {0: ReplicaAssignment.of([1])})
    store.create_delete_topic_path("t")
    with pytest.raises(NodeExistsError, match="/admin/delete_topics/t"):
        store.create_delete_topic_path("t")
    assert store.get_topic_deletions() == ["t"] and store.is_topic_marked_for_deletion("t")
    store.delete_topic_recursively("t", zkv)
    with pytest.raises(NodeExistsError):  # Kafka refuses to re-create a topic still marked for deletion
        store.create_topic("t", {0: ReplicaAssignment.of([1])})
    with pytest.raises(ControllerMovedError):
        store.delete_topic_deletions(["t"], zkv + 1)
    store.delete_topic_deletions(["t", "never"], zkv)
    assert store.get_topic_deletions() == []


# -- admin znodes and notifications ------------------------------------------------------------------


def test_reassignment_znode(env: StoreEnv) -> None:
    store, _epoch, zkv = elected(env)
    assert store.get_partition_reassignment() == {} and not store.reassign_partitions_in_progress()
    store.create_partition_reassignment({TP("foo", 0): [1, 2]})
    assert env.raw_get("/admin/reassign_partitions")[0] == (  # type: ignore[index]
        b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}'
    )
    with pytest.raises(NodeExistsError):
        store.create_partition_reassignment({TP("foo", 0): [1, 2]})
    store.set_or_create_partition_reassignment({TP("foo", 1): [3]}, zkv)
    assert store.get_partition_reassignment() == {TP("foo", 1): (3,)}
    with pytest.raises(ControllerMovedError):
        store.delete_partition_reassignment(zkv + 1)
    store.delete_partition_reassignment(zkv)
    store.set_or_create_partition_reassignment({TP("foo", 2): [4, 5]}, zkv)  # create path
    env.raw_put(
        "/admin/reassign_partitions",
        b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1],"log_dirs":["any"]}]}',
    )
    with pytest.raises(ZNodeDecodeError, match="/admin/reassign_partitions"):
        store.get_partition_reassignment()


def test_preferred_replica_election_znode(env: StoreEnv) -> None:
    """KafkaZkClientTest.testPreferredReplicaElectionMethods."""
    store, _epoch, zkv = elected(env)
    parts = {TP("t", 0), TP("t", 1)}
    store.create_preferred_replica_election(sorted(parts))
    with pytest.raises(NodeExistsError):
        store.create_preferred_replica_election(parts)
    assert store.get_preferred_replica_election() == parts
    with pytest.raises(ControllerMovedError):
        store.delete_preferred_replica_election(zkv + 1)
    assert store.get_preferred_replica_election() == parts
    store.delete_preferred_replica_election(zkv)
    assert store.get_preferred_replica_election() == set()


def test_isr_change_and_log_dir_notifications(env: StoreEnv) -> None:
    broker_side, controller = env.store(), env.store()
    epoch, zkv = controller.register_controller_and_increment_controller_epoch(1)
    path = broker_side.propagate_isr_changes([TP("topic-a", 0), TP("topic-b", 0)])
    assert path == "/isr_change_notification/isr_change_0000000000"
    assert env.raw_get(path)[0] == (  # type: ignore[index]
        b'{"version":1,"partitions":[{"topic":"topic-a","partition":0},{"topic":"topic-b","partition":0}]}'
    )
    broker_side.propagate_isr_changes([TP("topic-a", 0)])
    env.raw_put("/isr_change_notification/isr_change_0000000099", b"garbage")
    seqs = controller.get_all_isr_change_notifications()
    assert seqs == ["0000000000", "0000000001", "0000000099"]
    parts = controller.get_partitions_from_isr_change_notifications([*seqs, "0000000050"])
    assert parts == [TP("topic-a", 0), TP("topic-b", 0), TP("topic-a", 0)]  # corrupt and vanished skipped
    controller.delete_isr_change_notifications(seqs[:1], zkv)
    assert controller.get_all_isr_change_notifications() == seqs[1:]
    with pytest.raises(ControllerMovedError):
        controller.delete_isr_change_notifications(None, zkv + 1)
    controller.delete_isr_change_notifications(None, zkv)
    assert controller.get_all_isr_change_notifications() == []
    log_path = broker_side.propagate_log_dir_event(3)
    assert log_path == "/log_dir_event_notification/log_dir_event_0000000000"
    assert env.raw_get(log_path)[0] == b'{"version":1,"broker":3,"event":1}'  # type: ignore[index]
    seqs = controller.get_all_log_dir_event_notifications()
    assert controller.get_broker_ids_from_log_dir_events(seqs) == [3]
    controller.delete_log_dir_event_notifications(None, zkv)
    assert controller.get_all_log_dir_event_notifications() == []
    assert epoch == 1


def test_topic_configs_and_change_notifications(env: StoreEnv) -> None:
    store, _epoch, zkv = elected(env)
    store.create_topic("t", {0: ReplicaAssignment.of([1])})
    assert env.raw_get("/config/topics/t")[0] == b'{"version":1,"config":{}}'  # type: ignore[index]
    store.change_topic_config("t", {"unclean.leader.election.enable": "true"})
    assert store.get_topic_config("t") == {"unclean.leader.election.enable": "true"}
    data = env.raw_get("/config/changes/config_change_0000000000")
    assert data is not None and orjson.loads(data[0]) == {"version": 2, "entity_path": "topics/t"}
    assert store.create_config_change_notification("topics/x").endswith("config_change_0000000001")
    store.delete_topic_configs(["t", "none"], zkv)
    assert store.get_topic_config("t") == {}


def test_cluster_id_sequence_ids_feature_and_top_level_paths(env: StoreEnv) -> None:
    a, b = env.store(), env.store()
    assert a.get_cluster_id() is None
    assert a.create_or_get_cluster_id("Ny6xmTrFQ1SrdsQNHH4yfg") == "Ny6xmTrFQ1SrdsQNHH4yfg"
    assert b.create_or_get_cluster_id("AAAAAAAAAAAAAAAAAAAAAA") == "Ny6xmTrFQ1SrdsQNHH4yfg"
    assert orjson.loads(env.raw_get("/cluster/id")[0])["version"] == "1"  # type: ignore[index]
    n = a.generate_broker_sequence_id()
    assert b.generate_broker_sequence_id() == n + 1
    from kafka_controller.ports import FeatureZNode

    assert a.get_feature_znode() is None
    a.create_feature_znode(FeatureZNode(1, {}))
    with pytest.raises(NodeExistsError):
        b.create_feature_znode(FeatureZNode(0, {}))
    assert b.update_feature_znode(FeatureZNode(0, {})) == 1
    assert a.get_feature_znode() == (FeatureZNode(0, {}), 1)
    for path in ("/brokers/ids", "/config/changes", "/admin/delete_topics", "/isr_change_notification"):
        assert env.raw_get(path) is not None


def test_close_is_lost_not_expired_and_drops_ephemerals(env: StoreEnv) -> None:
    from .conftest import Events, SessionEvent

    events = Events()
    b1, observer = env.store(), env.store()
    b1.register_broker(broker(1))
    b1.add_session_listener(events)
    b1.close()
    assert events.until(SessionEvent.LOST) == [SessionEvent.LOST]
    assert observer.get_sorted_broker_list() == []
    with pytest.raises(StoreUnavailableError):
        b1.register_broker(broker(1))
