"""CreateTopics v0-7, DeleteTopics v0-6 and CreatePartitions v0-3 through the broker's Kafka handler:
every version round-trips, outcomes land in ZooKeeper in Kafka's formats, and each error path answers
Kafka's code (NOT_CONTROLLER on a broker that is not the controller)."""

from __future__ import annotations

import datetime
import uuid

import pytest
from kio.schema.errors import ErrorCode as E
from kio.static.primitive import i32Timedelta

from kafka_controller.broker.kafka_wire.kio_build import topic_id_from_uuid
from tests.broker.admin_wire import Env, req_nested

CREATE, DELETE, PARTITIONS = 19, 20, 37


def ms(n: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=n))


def topic(
    v: int,
    name: str,
    n: int = -1,
    rf: int = -1,
    assignments: dict[int, list[int]] | None = None,
    configs: dict[str, str | None] | None = None,
):  # type: ignore[no-untyped-def]
    return req_nested(
        CREATE,
        v,
        "CreatableTopic",
        name=name,
        num_partitions=n,
        replication_factor=rf,
        assignments=tuple(
            req_nested(CREATE, v, "CreatableReplicaAssignment", partition_index=p, broker_ids=tuple(bs))
            for p, bs in (assignments or {}).items()
        ),
        configs=tuple(
            req_nested(CREATE, v, "CreatableTopicConfig", name=k, value=x) for k, x in (configs or {}).items()
        ),
    )


def create(env: Env, v: int, *topics, timeout: int = 0, validate_only: bool = False):  # type: ignore[no-untyped-def]
    return env.call(CREATE, v, topics=tuple(topics), timeout=ms(timeout), validate_only=validate_only).topics


@pytest.mark.parametrize("v", range(8))
def test_create_topics_writes_zookeeper_at_every_version(v: int) -> None:
    env = Env()
    (r,) = create(env, v, topic(v, "orders", 4, 2, configs={"retention.ms": "1000"}))
    assert r.name == "orders"
    # timeout 0: written but not waited for, so REQUEST_TIMED_OUT, as Kafka answers
    assert r.error_code == E.request_timed_out
    placed = env.assignment("orders")
    assert sorted(placed) == [0, 1, 2, 3] and all(
        len(rs) == 2 and len(set(rs)) == 2 for rs in placed.values()
    )
    assert env.store.get_topic_config("orders") == {"retention.ms": "1000"}
    leaders = [rs[0] for rs in placed.values()]
    assert len(set(leaders)) == 3  # round-robin over the three brokers


@pytest.mark.parametrize("v", [0, 4, 5, 7])
def test_create_waits_until_the_metadata_cache_has_leaders(v: int) -> None:
    env = Env()
    controller = env.controller_in_background()
    (r,) = create(env, v, topic(v, "paid", assignments={0: [2, 3], 1: [3, 1]}), timeout=15_000)
    controller.join()
    assert r.error_code == E.none
    assert env.assignment("paid") == {0: (2, 3), 1: (3, 1)}
    if v >= 5:
        assert (r.num_partitions, r.replication_factor) == (2, 2)
        configs = {c.name: (c.value, c.config_source) for c in r.configs}
        assert configs["retention.ms"] == ("604800000", 5) and configs["segment.bytes"] == ("1073741824", 5)
    if v >= 7:
        read = env.store.get_replica_assignment_and_topic_ids(["paid"])["paid"]
        assert r.topic_id is not None and topic_id_from_uuid(r.topic_id) == read.topic_id  # type: ignore[union-attr]


def test_validate_only_checks_and_writes_nothing() -> None:
    env = Env()
    ok, bad = create(env, 5, topic(5, "a", 3, 3), topic(5, "b", 3, 4), validate_only=True)
    assert (ok.error_code, ok.num_partitions, ok.replication_factor) == (E.none, 3, 3)
    assert bad.error_code == E.invalid_replication_factor
    assert bad.error_message == "Replication factor: 4 larger than available brokers: 3."
    assert env.store.get_all_topics() == set()


def test_create_errors_per_topic_with_kafka_codes() -> None:
    env = Env()
    create(env, 4, topic(4, "taken", 1, 1))
    env.sync()
    env.store.create_topic("queued", {0: [1]})
    env.store.create_delete_topic_path("queued")
    cases = {
        "taken": (topic(4, "taken", 1, 1), E.topic_already_exists),
        "queued": (topic(4, "queued", 1, 1), E.topic_already_exists),
        "zero": (topic(4, "zero", 0, 1), E.invalid_partitions),
        "rf0": (topic(4, "rf0", 1, 0), E.invalid_replication_factor),
        "gap": (topic(4, "gap", assignments={0: [1], 2: [2]}), E.invalid_replica_assignment),
        "uneven": (topic(4, "uneven", assignments={0: [1], 1: [2, 3]}), E.invalid_replica_assignment),
        "twice": (topic(4, "twice", assignments={0: [1, 1]}), E.invalid_replica_assignment),
        "bad/name": (topic(4, "bad/name", 1, 1), E.invalid_topic_exception),
        "ta.ken": (topic(4, "ta_ken_x", 1, 1), E.none),
        "unknown-config": (
            topic(4, "unknown-config", 1, 1, configs={"retention.mss": "1"}),
            E.invalid_config,
        ),
        "bad-value": (topic(4, "bad-value", 1, 1, configs={"min.insync.replicas": "zero"}), E.invalid_config),
        "null-value": (topic(4, "null-value", 1, 1, configs={"retention.ms": None}), E.invalid_request),
        "both": (topic(4, "both", 1, -1, assignments={0: [1]}), E.invalid_request),
    }
    got = {r.name: (r.error_code, r.error_message) for r in create(env, 4, *(t for t, _ in cases.values()))}
    for name, (t, code) in cases.items():
        assert got[t.name][0] == (E.request_timed_out if code == E.none else code), (name, got[t.name])
    assert got["unknown-config"][1] == "Unknown topic config name: retention.mss"
    assert got["taken"][1] == "Topic 'taken' already exists."
    assert env.store.get_all_topics() == {"taken", "queued", "ta_ken_x"}
    # '.' and '_' collide, as in Kafka
    (r,) = create(env, 4, topic(4, "ta.ken.x", 1, 1))
    assert r.error_code == E.invalid_topic_exception and "collides" in (r.error_message or "")


def test_duplicate_names_are_invalid_requests_and_nothing_is_written() -> None:
    env = Env()
    results = create(env, 2, topic(2, "dup", 1, 1), topic(2, "dup", 2, 1))
    assert [r.error_code for r in results] == [E.invalid_request, E.invalid_request]
    assert env.store.get_all_topics() == set()


def test_a_broker_that_is_not_the_controller_answers_not_controller() -> None:
    env = Env()
    env.controller.is_active = False
    (r,) = create(env, 7, topic(7, "x", 1, 1))
    assert r.error_code == E.not_controller
    env.store.create_topic("y", {0: [1]})
    env.sync()
    (d,) = env.call(
        DELETE, 6, topics=(req_nested(DELETE, 6, "DeleteTopicState", name="y", topic_id=None),), timeout=ms(0)
    ).responses
    assert d.error_code == E.not_controller
    (p,) = env.call(
        PARTITIONS, 3, topics=(partitions(3, "y", 3),), timeout=ms(0), validate_only=False
    ).results
    assert p.error_code == E.not_controller
    assert env.store.get_all_topics() == {"y"} and env.assignment("y") == {0: (1,)}
    assert not env.store.get_topic_deletions()


def test_rack_aware_placement_spreads_replicas_over_racks() -> None:
    env = Env(4, racks=True)
    create(env, 4, topic(4, "racked", 8, 2))
    racks = {b.id: b.rack for b in env.brokers}
    for replicas in env.assignment("racked").values():
        assert len({racks[b] for b in replicas}) == 2


def delete(env: Env, v: int, *names: str, timeout: int = 0, ids: tuple[uuid.UUID, ...] = ()):  # type: ignore[no-untyped-def]
    if v >= 6:
        states = [req_nested(DELETE, v, "DeleteTopicState", name=n, topic_id=None) for n in names]
        states += [req_nested(DELETE, v, "DeleteTopicState", name=None, topic_id=i) for i in ids]
        return env.call(DELETE, v, topics=tuple(states), timeout=ms(timeout)).responses
    return env.call(DELETE, v, topic_names=names, timeout=ms(timeout)).responses


@pytest.mark.parametrize("v", range(7))
def test_delete_topics_marks_for_deletion_and_waits_at_every_version(v: int) -> None:
    env = Env()
    for t in ("gone", "also"):
        env.store.create_topic(t, {0: [1, 2]})
    env.sync()
    (r,) = delete(env, v, "gone")
    assert (r.name, r.error_code) == ("gone", E.request_timed_out)
    assert env.store.get_topic_deletions() == ["gone"]
    controller = env.controller_in_background()
    env.sync()  # "gone" deleted; now "also" with a wait
    controller.join()
    controller = env.controller_in_background()
    (r,) = delete(env, v, "also", timeout=15_000)
    controller.join()
    assert r.error_code == E.none
    assert env.store.get_all_topics() == set()
    (r,) = delete(env, v, "never")
    assert r.error_code == E.unknown_topic_or_partition


def test_delete_by_topic_id_and_refusals() -> None:
    env = Env()
    env.store.create_topic("by-id", {0: [1]}, topic_id="7w0kTq5xQ3yM1n8bV2cD4g")
    env.sync()
    tid = uuid.UUID(bytes=__import__("base64").urlsafe_b64decode("7w0kTq5xQ3yM1n8bV2cD4g=="))
    (r, unknown) = delete(env, 6, ids=(tid, uuid.uuid4()))
    assert (r.name, r.topic_id, r.error_code) == ("by-id", tid, E.request_timed_out)
    assert (unknown.name, unknown.error_code) == (None, E.unknown_topic_id)
    assert env.store.get_topic_deletions() == ["by-id"]
    disabled = Env(config={"delete.topic.enable": "false"})
    disabled.store.create_topic("kept", {0: [1]})
    disabled.sync()
    assert delete(disabled, 2, "kept")[0].error_code == E.invalid_request
    assert delete(disabled, 3, "kept")[0].error_code == E.topic_deletion_disabled
    assert not disabled.store.get_topic_deletions()


def partitions(v: int, name: str, count: int, assignments: list[list[int]] | None = None):  # type: ignore[no-untyped-def]
    return req_nested(
        PARTITIONS,
        v,
        "CreatePartitionsTopic",
        name=name,
        count=count,
        assignments=None
        if assignments is None
        else tuple(
            req_nested(PARTITIONS, v, "CreatePartitionsAssignment", broker_ids=tuple(a)) for a in assignments
        ),
    )


def add(env: Env, v: int, *topics, timeout: int = 0, validate_only: bool = False):  # type: ignore[no-untyped-def]
    results = env.call(
        PARTITIONS, v, topics=tuple(topics), timeout=ms(timeout), validate_only=validate_only
    ).results
    return {r.name: (r.error_code, r.error_message) for r in results}


@pytest.mark.parametrize("v", range(4))
def test_create_partitions_extends_the_topic_znode_at_every_version(v: int) -> None:
    env = Env()
    env.store.create_topic("grow", {0: [2, 3], 1: [3, 1]}, topic_id="7w0kTq5xQ3yM1n8bV2cD4g")
    env.sync()
    assert add(env, v, partitions(v, "grow", 5), validate_only=True) == {"grow": (E.none, None)}
    assert len(env.assignment("grow")) == 2
    controller = env.controller_in_background()
    assert add(env, v, partitions(v, "grow", 5), timeout=15_000) == {"grow": (E.none, None)}
    controller.join()
    placed = env.assignment("grow")
    assert sorted(placed) == [0, 1, 2, 3, 4] and placed[0] == (2, 3) and placed[1] == (3, 1)
    assert all(len(set(placed[p])) == 2 for p in (2, 3, 4))
    read = env.store.get_replica_assignment_and_topic_ids(["grow"])["grow"]
    assert read.topic_id == "7w0kTq5xQ3yM1n8bV2cD4g"  # type: ignore[union-attr]
    assert add(env, v, partitions(v, "grow", 6, [[1, 2]])) == {"grow": (E.request_timed_out, None)}
    assert env.assignment("grow")[5] == (1, 2)


def test_create_partitions_errors() -> None:
    env = Env()
    env.store.create_topic("t", {0: [1, 2], 1: [2, 3]})
    env.store.create_topic("moving", {0: [1]})
    env.store.create_topic("doomed", {0: [1]})
    env.store.create_delete_topic_path("doomed")
    from kafka_controller.domain.values import MATCH_ANY_VERSION, ReplicaAssignment

    env.store.set_topic_assignment(
        "moving", None, {0: ReplicaAssignment((1, 2), (2,), ())}, MATCH_ANY_VERSION
    )
    got = add(
        env,
        1,
        partitions(1, "t", 1),
        partitions(1, "missing", 3),
        partitions(1, "moving", 2),
        partitions(1, "doomed", 2),
        partitions(1, "dup", 2),
        partitions(1, "dup", 3),
    )
    assert got["t"] == (
        E.invalid_partitions,
        "Topic currently has 2 partitions, which is higher than the requested 1.",
    )
    assert got["missing"] == (E.unknown_topic_or_partition, "The topic 'missing' does not exist.")
    assert got["moving"][0] == E.reassignment_in_progress
    assert got["doomed"] == (E.invalid_topic_exception, "The topic is queued for deletion.")
    assert got["dup"] == (E.invalid_request, "Duplicate topic in request.")
    assert add(env, 1, partitions(1, "t", 2)) == {
        "t": (E.invalid_partitions, "Topic already has 2 partitions.")
    }
    assert add(env, 1, partitions(1, "t", 3, [[1, 9]]))["t"] == (
        E.invalid_replica_assignment,
        "Unknown broker(s) in replica assignment: 9.",
    )
    assert add(env, 1, partitions(1, "t", 4, [[1, 2]]))["t"][0] == E.invalid_replica_assignment
    assert add(env, 1, partitions(1, "t", 3, [[1]]))["t"][0] == E.invalid_replica_assignment
    assert add(env, 1, partitions(1, "t", 3, [[1, 1]]))["t"][0] == E.invalid_replica_assignment
    assert env.assignment("t") == {0: (1, 2), 1: (2, 3)}


def test_a_topic_too_large_for_its_znode_is_refused_before_placing_it() -> None:
    env = Env()
    (r,) = create(env, 5, topic(5, "huge", 12_124_162, 1))
    assert r.error_code == E.invalid_partitions and "jute.maxbuffer of 1,048,575 bytes" in (
        r.error_message or ""
    )
    env.store.create_topic("small", {0: [1]})
    assert add(env, 3, partitions(3, "small", 2_000_000))["small"][0] == E.invalid_partitions
    assert env.store.get_all_topics() == {"small"} and len(env.assignment("small")) == 1
