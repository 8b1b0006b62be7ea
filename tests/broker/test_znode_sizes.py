"""Topic znodes too large for ZooKeeper are refused before anything is written, on every path that
writes one (CreateTopics and CreatePartitions over Kafka's protocol, ``topics create`` over
ZooKeeper), and the limit is the real one: the largest topic it allows is accepted by ZooKeeper."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from kio.schema.errors import ErrorCode as E
from kio.static.primitive import i32, i32Timedelta

from kafka_controller.admin.znode_size import config_size, max_partitions
from kafka_controller.broker import apis as A
from kafka_controller.broker.kafka_wire.controller_admin_apis import ALTER_PARTITION_REASSIGNMENTS
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.domain.requests import Errors, UpdateMetadataPartitionState
from kafka_controller.domain.values import Broker, EndPoint, ReplicaAssignment, TopicPartition
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.broker.admin_wire import Env, req_nested
from tests.broker.helpers import update_metadata
from tests.broker.test_controller_admin_apis import FakeBroker, alter_request, call, make
from tests.cli.clirun import run

CREATE, PARTITIONS = 19, 37


def ms(n: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=n))


def test_create_topics_refuses_an_assignment_too_large_for_its_znode() -> None:
    env = Env()
    v = 5
    n = max_partitions(3, 3) + 100
    assignments = tuple(
        req_nested(
            CREATE,
            v,
            "CreatableReplicaAssignment",
            partition_index=i32(p),
            broker_ids=(i32(1), i32(2), i32(3)),
        )
        for p in range(n)
    )
    t = req_nested(
        CREATE,
        v,
        "CreatableTopic",
        name="wide",
        num_partitions=-1,
        replication_factor=-1,
        assignments=assignments,
        configs=(),
    )
    (r,) = env.call(CREATE, v, topics=(t,), timeout=ms(0), validate_only=False).topics
    assert r.error_code == E.invalid_request
    assert "jute.maxbuffer of 1,048,575 bytes" in (r.error_message or "")
    assert "wide" not in env.store.get_all_topics()


def test_create_partitions_counts_the_partitions_the_topic_already_has() -> None:
    """45,000 partitions more would fit a znode of their own; with the 50,000 the topic has, not."""
    env = Env()
    env.store.create_topic("grown", {p: ReplicaAssignment.of([1 + p % 3]) for p in range(50_000)})
    env.sync()
    t = req_nested(PARTITIONS, 3, "CreatePartitionsTopic", name="grown", count=i32(95_000), assignments=None)
    (r,) = env.call(PARTITIONS, 3, topics=(t,), timeout=ms(0), validate_only=False).results
    assert r.error_code == E.invalid_partitions
    assert "95,000 partitions of 1 replica" in (r.error_message or "")
    assert "jute.maxbuffer" in (r.error_message or "")
    assert len(env.assignment("grown")) == 50_000
    # with the replicas spelled out, the exact size of the whole topic is what counts
    spelled = tuple(
        req_nested(PARTITIONS, 3, "CreatePartitionsAssignment", broker_ids=(i32(2),)) for _ in range(45_000)
    )
    t = req_nested(
        PARTITIONS, 3, "CreatePartitionsTopic", name="grown", count=i32(95_000), assignments=spelled
    )
    (r,) = env.call(PARTITIONS, 3, topics=(t,), timeout=ms(0), validate_only=False).results
    assert r.error_code == E.invalid_request and "jute.maxbuffer" in (r.error_message or "")
    assert len(env.assignment("grown")) == 50_000


@pytest.fixture
def store(zk_connect: str) -> Iterator[KazooMetadataStore]:
    s = KazooMetadataStore(zk_connect)
    for b in (1, 2, 3):
        s.register_broker(Broker(b, (EndPoint("127.0.0.1", 9000 + b),)))
    yield s
    s.close()


@pytest.mark.zk
def test_the_limit_is_zookeepers_and_the_cli_refuses_beyond_it(
    store: KazooMetadataStore, zk_connect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The largest topic the check allows is one ZooKeeper accepts; ``topics create`` with a count
    beyond it, or two billion, exits 1 at once with one line naming the limit and writes nothing."""
    fits = max_partitions(1, 3, extra=config_size({}))
    store.create_topic("largest", {p: ReplicaAssignment.of([1 + p % 3]) for p in range(fits)})
    assert len(store.get_replica_assignment_and_topic_ids(["largest"])["largest"].assignment) == fits  # type: ignore[union-attr]
    for count in (fits + 1, 2_000_000_000):
        r = run(
            capsys,
            "topics",
            "create",
            "--zookeeper",
            zk_connect,
            "--timeout",
            "5",
            "--topic",
            "over",
            "--partitions",
            str(count),
            "--replication-factor",
            "1",
        )
        assert r.code != 0
        assert "jute.maxbuffer of 1,048,575 bytes" in r.error_line
        assert f"{count:,} partitions of 1 replica" in r.error_line
    assert store.get_all_topics() == {"largest"}


def test_a_reassignment_whose_znode_cannot_fit_is_refused_before_the_controller() -> None:
    """Moving every partition of a wide topic to new replicas doubles its replica lists and adds
    the adding/removing lists: refused per partition with INVALID_REQUEST naming the limit, and
    never handed to the controller; another topic's move in the same request goes ahead."""
    n = 30_000  # 30,000 partitions on [1, 2]: about 430 KB, over 1 MiB while moving to [3, 4]
    states = [UpdateMetadataPartitionState("wide", p, 1, 1, 1, (1, 2), 0, (1, 2), ()) for p in range(n)]
    states.append(UpdateMetadataPartitionState("u", 0, 1, 1, 1, (1, 2), 0, (1, 2), ()))
    cache = MetadataCache(1)
    cache.update_metadata(update_metadata(states, controller_id=1, brokers=[Broker(1, (EndPoint("h", 1),))]))
    fake = FakeBroker()
    fake.answers[A.ALTER_PARTITION_REASSIGNMENTS] = lambda r: A.AlterPartitionReassignmentsResponse(
        Errors.NONE, dict.fromkeys(r.reassignments, A.ReassignmentResult(Errors.NONE))
    )
    moves = [("wide", p, [3, 4]) for p in range(n)] + [("u", 0, [2, 1])]
    response = call(make(fake, cache), ALTER_PARTITION_REASSIGNMENTS, 0, alter_request(moves))
    ((_, private),) = fake.requests
    assert set(private.reassignments) == {TopicPartition("u", 0)}
    got = {
        (t.name, p.partition_index): (int(p.error_code), p.error_message)
        for t in response.responses
        for p in t.partitions
    }
    assert got[("u", 0)] == (0, None)
    codes = {code for (topic, _), (code, _) in got.items() if topic == "wide"}
    assert codes == {int(E.invalid_request)} and len(got) == n + 1
    assert "jute.maxbuffer of 1,048,575 bytes" in (got[("wide", 0)][1] or "")
    # a move that fits is handed over whole
    fake.requests.clear()
    call(make(fake, cache), ALTER_PARTITION_REASSIGNMENTS, 0, alter_request([("wide", 0, [3, 4])]))
    assert len(fake.requests) == 1


@pytest.mark.zk
def test_reassign_execute_refuses_a_plan_whose_znodes_cannot_fit(
    store: KazooMetadataStore, zk_connect: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """``reassign --execute``: a topic whose znode could not hold its moves, or (``--legacy-znode``)
    a plan too large for ``/admin/reassign_partitions`` itself, exits 1 with one line naming the
    limit before anything is written (no throttle, no znode, no request)."""
    store.create_topic("wide", {p: ReplicaAssignment.of([1, 2]) for p in range(30_000)})
    for t in range(25):
        store.create_topic(f"many{t:02}", {p: ReplicaAssignment.of([1, 2]) for p in range(1000)})

    def execute(name: str, entries: list[dict[str, object]], *extra: str) -> str:
        path = tmp_path / name
        path.write_bytes(orjson.dumps({"version": 1, "partitions": entries}))
        r = run(
            capsys, "reassign", "--zookeeper", zk_connect, "--timeout", "5",
            "--reassignment-json-file", str(path), "--execute", *extra,
        )  # fmt: skip
        assert r.code == 1
        return r.error_line

    wide = [{"topic": "wide", "partition": p, "replicas": [2, 3]} for p in range(30_000)]
    for extra in ((), ("--legacy-znode",)):
        line = execute("wide.json", wide, *extra)
        assert "topic 'wide' (30,000 partitions, 30,000 of them moving)" in line
        assert "jute.maxbuffer of 1,048,575 bytes" in line
    many = [
        {"topic": f"many{t:02}", "partition": p, "replicas": [2, 3]} for t in range(25) for p in range(1000)
    ]
    line = execute("many.json", many, "--legacy-znode")
    assert "/admin/reassign_partitions for 25,000 partitions" in line and "jute.maxbuffer" in line
    assert store.get_partition_reassignment() == {}
    read = store.get_replica_assignment_and_topic_ids(["wide"])["wide"]
    assert not isinstance(read, Exception) and not any(
        ra.is_being_reassigned for ra in read.assignment.values()
    )
