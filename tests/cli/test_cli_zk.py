"""The admin subcommands against a real ZooKeeper (no brokers): what they write, what they print,
and that every refused command leaves the tree exactly as it was."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from kazoo.client import KazooClient

from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.cli.clirun import Result, run, snapshot

pytestmark = pytest.mark.zk


@pytest.fixture
def store(zk_connect: str) -> Iterator[KazooMetadataStore]:
    """Brokers 1-3 registered (this session owns their ephemerals) and topic ``t`` on [1,2],[2,3]."""
    s = KazooMetadataStore(zk_connect)
    for b in (1, 2, 3):
        s.register_broker(Broker(b, (EndPoint("127.0.0.1", 9000 + b),)))
    s.create_topic("t", {0: ReplicaAssignment.of([1, 2]), 1: ReplicaAssignment.of([2, 3])})
    _, zkv = s.register_controller_and_increment_controller_epoch(1)
    s.create_partition_states(
        {
            TopicPartition("t", 0): LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 3, (2,), 0), 1),
            TopicPartition("t", 1): LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 3), 0), 1),
        },
        zkv,
    )
    yield s
    s.close()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], zk_connect: str, store: KazooMetadataStore):  # type: ignore[no-untyped-def]
    def call(*argv: str) -> Result:
        command, *rest = argv
        if command in ("topics", "cluster"):
            action, *rest = rest
            return run(capsys, command, action, "--zookeeper", zk_connect, "--timeout", "5", *rest)
        return run(capsys, command, "--zookeeper", zk_connect, "--timeout", "5", *rest)

    return call


def _unchanged(client: KazooClient, chroot: str, before: dict[str, tuple[bytes, int]]) -> None:
    assert snapshot(client, chroot) == before


# -- topics ------------------------------------------------------------------------------------------
def test_create_writes_what_kafkas_admin_client_writes(
    cli, zk_admin_client: KazooClient, zk_chroot: str
) -> None:  # type: ignore[no-untyped-def]
    r = cli(
        "topics",
        "create",
        "--topic",
        "orders",
        "--partitions",
        "4",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
        "--json",
    )
    assert r.code == 0, r.err
    doc = r.json()
    assert set(doc) == {"topic", "topic_id", "partitions", "config"}
    assert len(doc["topic_id"]) == 22 and doc["config"] == {"min.insync.replicas": "2"}
    znode = orjson.loads(zk_admin_client.get(f"{zk_chroot}/brokers/topics/orders")[0])
    assert znode == {
        "version": 3,
        "topic_id": doc["topic_id"],
        "partitions": doc["partitions"],
        "adding_replicas": {},
        "removing_replicas": {},
    }
    assert sorted(doc["partitions"]) == ["0", "1", "2", "3"]
    assert all(sorted(rs) == [1, 2, 3] for rs in doc["partitions"].values())
    config = orjson.loads(zk_admin_client.get(f"{zk_chroot}/config/topics/orders")[0])
    assert config == {"version": 1, "config": {"min.insync.replicas": "2"}}
    r = cli("topics", "create", "--topic", "pinned", "--replica-assignment", "1:2,3:1")
    assert (r.code, r.out) == (0, "Created topic pinned.\n")
    pinned = orjson.loads(zk_admin_client.get(f"{zk_chroot}/brokers/topics/pinned")[0])
    assert pinned["partitions"] == {"0": [1, 2], "1": [3, 1]}


ONE = ["--partitions", "1", "--replication-factor", "1"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--topic", "x", "--partitions", "0", "--replication-factor", "1"],
            "--partitions must be greater than 0, got 0",
        ),
        (
            ["--topic", "x", "--partitions", "1", "--replication-factor", "4"],
            "--replication-factor 4 is larger than the 3 live brokers",
        ),
        (
            ["--topic", "x", *ONE, "--config", "retention.mss=1"],
            "unknown topic config 'retention.mss' (did you mean 'retention.ms'?)",
        ),
        (
            ["--topic", "x", *ONE, "--config", "min.insync.replicas=0"],
            "invalid value 0 for topic config min.insync.replicas: must be at least 1",
        ),
        (
            ["--topic", "x", "--replica-assignment", "1:1"],
            "bad --replica-assignment '1:1': partition 0 lists broker 1 twice",
        ),
        (
            ["--topic", "x", "--replica-assignment", "1:2,3"],
            "bad --replica-assignment '1:2,3': partition 1 has replication factor 1, partition 0 has 2",
        ),
        (
            ["--topic", "x", "--replica-assignment", "1", "--partitions", "1"],
            "--replica-assignment cannot be combined with --partitions or --replication-factor",
        ),
        (["--topic", "t", *ONE], "topic 't' already exists"),
        (["--topic", "bad/name", *ONE], "topic name 'bad/name' has illegal characters '/'"),
        (["--topic", "x"], "missing --partitions (or give --replica-assignment)"),
    ],
)
def test_create_refusals_write_nothing(  # type: ignore[no-untyped-def]
    cli, zk_admin_client: KazooClient, zk_chroot: str, args: list[str], message: str
) -> None:
    before = snapshot(zk_admin_client, zk_chroot)
    r = cli("topics", "create", *args)
    assert r.code == 1
    assert r.error_line == f"kafka-controller topics: error: {message}"
    assert r.out == ""
    _unchanged(zk_admin_client, zk_chroot, before)


def test_list_describe_delete(cli, zk_admin_client: KazooClient, zk_chroot: str) -> None:  # type: ignore[no-untyped-def]
    assert cli("topics", "create", "--topic", "u", "--replica-assignment", "3").code == 0
    assert cli("topics", "list").out == "t\nu\n"
    text = cli("topics", "describe", "--topic", "t").out.splitlines()
    assert text[0].startswith("Topic: t\tTopicId: ") and "PartitionCount: 2\tReplicationFactor: 2" in text[0]
    assert text[1:] == [
        "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 1,2\tIsr: 2",
        "\tTopic: t\tPartition: 1\tLeader: 2\tReplicas: 2,3\tIsr: 2,3",
    ]
    urp = cli("topics", "describe", "--under-replicated-partitions").out.splitlines()
    assert urp == [
        "\tTopic: t\tPartition: 0\tLeader: 2\tReplicas: 1,2\tIsr: 2",
        "\tTopic: u\tPartition: 0\tLeader: none\tReplicas: 3\tIsr: ",
    ]
    doc = cli("topics", "describe", "--topic", "t", "--json").json()
    assert [p["flags"] for p in doc["partitions"]] == [["under-replicated", "not-preferred-leader"], []]
    r = cli("topics", "delete", "--topic", "u", "--json")
    assert r.json() == {"topic": "u", "marked_for_deletion": True, "deleted": False}
    assert zk_admin_client.exists(f"{zk_chroot}/admin/delete_topics/u") is not None
    assert cli("topics", "list", "--json").json() == [
        {"name": "t", "marked_for_deletion": False},
        {"name": "u", "marked_for_deletion": True},
    ]
    before = snapshot(zk_admin_client, zk_chroot)
    for args, message in [
        (["delete", "--topic", "u"], "topic 'u' is already marked for deletion"),
        (["delete", "--topic", "nope"], "topic 'nope' does not exist"),
        (["describe", "--topic", "nope"], "topic 'nope' does not exist"),
        (
            ["create", "--topic", "u", "--replica-assignment", "1"],
            "topic 'u' is marked for deletion; wait until it is gone",
        ),
    ]:
        r = cli("topics", *args)
        assert (r.code, r.error_line) == (1, f"kafka-controller topics: error: {message}")
    _unchanged(zk_admin_client, zk_chroot, before)


# -- describe ----------------------------------------------------------------------------------------
def test_describe_json_shape_and_text(cli) -> None:  # type: ignore[no-untyped-def]
    doc = cli("describe", "--json").json()
    assert set(doc) == {"controller", "brokers", "topics", "partitions", "summary"}
    assert doc["controller"]["broker_id"] == 1 and doc["controller"]["epoch"] >= 1
    assert [b["id"] for b in doc["brokers"]] == [1, 2, 3]
    assert set(doc["brokers"][0]) == {"id", "endpoints", "rack", "epoch", "leaders", "replicas", "preferred"}
    assert doc["brokers"][0]["endpoints"] == ["PLAINTEXT://127.0.0.1:9001"]
    assert set(doc["partitions"][0]) >= {
        "topic",
        "partition",
        "leader",
        "leader_epoch",
        "isr",
        "replicas",
        "flags",
    }
    assert doc["summary"]["under_replicated"] == 1 and doc["summary"]["not_preferred_leader"] == 1
    assert [p["partition"] for p in cli("describe", "--json", "--problems-only").json()["partitions"]] == [0]
    text = cli("describe").out
    assert text.startswith("Controller: broker 1 (epoch ")
    assert "under-replicated,not-preferred-leader" in text
    r = cli("describe", "--topic", "missing")
    assert (r.code, r.error_line) == (1, "kafka-controller describe: error: topic 'missing' does not exist")


# -- reassign ----------------------------------------------------------------------------------------
def _entry(topic: str, partition: int, replicas: list[int]) -> dict[str, object]:
    return {"partitions": [{"topic": topic, "partition": partition, "replicas": replicas}]}


def _write(tmp_path: Path, name: str, doc: object) -> str:
    path = tmp_path / name
    path.write_text(doc if isinstance(doc, str) else orjson.dumps(doc).decode())
    return str(path)


def test_generate_proposes_over_the_broker_list(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    topics = _write(tmp_path, "move.json", {"version": 1, "topics": [{"topic": "t"}]})
    out = tmp_path / "plan.json"
    r = cli(
        "reassign",
        "--generate",
        "--topics-to-move-json-file",
        topics,
        "--broker-list",
        "2,3",
        "--reassignment-json-file",
        str(out),
        "--json",
    )
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["current"]["partitions"] == [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 1, "replicas": [2, 3], "log_dirs": ["any", "any"]},
    ]
    assert all(sorted(p["replicas"]) == [2, 3] for p in doc["proposed"]["partitions"])
    assert orjson.loads(out.read_text()) == doc["proposed"]
    again = cli(
        "reassign",
        "--generate",
        "--topics-to-move-json-file",
        topics,
        "--broker-list",
        "2,3",
        "--reassignment-json-file",
        str(out),
    )
    assert again.error_line == (
        f"kafka-controller reassign: error: reassignment JSON file {out} already exists; "
        "--generate writes a new file only"
    )
    bad = cli("reassign", "--generate", "--topics-to-move-json-file", topics, "--broker-list", "2,7")
    assert (
        bad.error_line
        == "kafka-controller reassign: error: bad --broker-list '2,7': broker 7 is not registered"
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "reassignment JSON is not valid JSON: "),
        ({"version": 1, "partitions": []}, "reassignment JSON: 'partitions' is empty"),
        (_entry("zz", 0, [1]), "reassignment JSON: unknown topic 'zz'"),
        (_entry("t", 9, [1]), "reassignment JSON: unknown partition t-9 (topic 't' has 2)"),
        (_entry("t", 0, [1, 1]), "reassignment JSON: t-0: broker 1 is listed twice in replicas [1, 1]"),
        (_entry("t", 0, [-1]), "reassignment JSON: t-0: negative broker id -1"),
        (_entry("t", 0, [4]), "reassignment JSON: t-0: unknown broker id 4 (registered: 1, 2, 3)"),
        (_entry("t", 0, []), "reassignment JSON: t-0: the replica list is empty"),
    ],
)
def test_execute_refusals_write_nothing(  # type: ignore[no-untyped-def]
    cli, zk_admin_client: KazooClient, zk_chroot: str, tmp_path: Path, content: object, message: str
) -> None:
    plan = _write(tmp_path, "plan.json", content)
    before = snapshot(zk_admin_client, zk_chroot)
    for mode in (["--execute"], ["--execute", "--legacy-znode"]):
        r = cli("reassign", "--reassignment-json-file", plan, *mode)
        assert r.code == 1
        assert r.error_line.startswith(f"kafka-controller reassign: error: {message}")
    _unchanged(zk_admin_client, zk_chroot, before)


def test_missing_file_and_mode_errors(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "nope.json"
    r = cli("reassign", "--reassignment-json-file", str(missing), "--verify")
    assert (
        r.error_line == f"kafka-controller reassign: error: reassignment JSON file {missing} does not exist"
    )
    r = cli("reassign", "--verify")
    assert r.error_line == (
        "kafka-controller reassign: error: "
        "--reassignment-json-file is required with --execute, --verify and --cancel"
    )
    r = cli("reassign", "--reassignment-json-file", str(missing), "--verify", "--legacy-znode")
    assert (
        r.error_line
        == "kafka-controller reassign: error: --additional, --legacy-znode and --wait are only for --execute"
    )


def test_legacy_execute_then_verify(
    cli, zk_admin_client: KazooClient, zk_chroot: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    plan = _write(
        tmp_path,
        "plan.json",
        {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]}]},
    )
    r = cli("reassign", "--reassignment-json-file", plan, "--execute", "--legacy-znode", "--json")
    assert r.code == 0, r.err
    assert r.json()["rollback"]["partitions"][0]["replicas"] == [1, 2]
    znode = orjson.loads(zk_admin_client.get(f"{zk_chroot}/admin/reassign_partitions")[0])
    assert znode == {"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]}]}
    r = cli("reassign", "--reassignment-json-file", plan, "--verify")
    assert r.code == 3  # in progress: the controller has not picked it up (there is none here)
    assert "Reassignment of partition t-0 is still in progress" in r.out
    again = cli("reassign", "--reassignment-json-file", plan, "--execute", "--legacy-znode")
    assert again.error_line == (
        "kafka-controller reassign: error: "
        "a reassignment is already in progress (/admin/reassign_partitions exists)"
    )
    zk_admin_client.delete(f"{zk_chroot}/admin/reassign_partitions")
    r = cli("reassign", "--reassignment-json-file", plan, "--verify", "--json")
    assert r.code == 1
    assert r.json() == [
        {
            "topic": "t",
            "partition": 0,
            "status": "mismatch",
            "target": [3, 1],
            "replicas": [1, 2],
            "adding_replicas": [],
            "removing_replicas": [],
        },
    ]
    done = _write(tmp_path, "done.json", {"partitions": [{"topic": "t", "partition": 1, "replicas": [2, 3]}]})
    r = cli("reassign", "--reassignment-json-file", done, "--verify")
    # done, but this plan never ran with --throttle: the brokers' throttles (perhaps another plan's)
    # are left alone (tests/cli/test_reassign_throttle.py covers a plan that ran throttled)
    assert (r.code, r.out) == (
        0,
        "Status of partition reassignment:\nReassignment of partition t-1 is complete.\n",
    )


def test_api_commands_without_a_controller_fail_in_one_line(  # type: ignore[no-untyped-def]
    cli, zk_admin_client: KazooClient, zk_chroot: str, tmp_path: Path
) -> None:
    zk_admin_client.delete(f"{zk_chroot}/controller")
    plan = _write(tmp_path, "plan.json", {"partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]}]})
    before = snapshot(zk_admin_client, zk_chroot)
    for argv in (
        ("reassign", "--reassignment-json-file", plan, "--execute", "--timeout", "0.5"),
        ("elect", "--election-type", "preferred", "--all-topic-partitions", "--timeout", "0.5"),
    ):
        r = cli(*argv)
        assert r.code == 1
        assert "(no controller is registered in /controller): KafkaTimeoutError: " in r.error_line
    _unchanged(zk_admin_client, zk_chroot, before)


# -- elect, shutdown ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            [],
            "name the partitions one way: --topic with --partition, --all-topic-partitions, "
            "or --path-to-json-file",
        ),
        (["--topic", "t"], "--topic and --partition must be given together"),
        (["--all-topic-partitions", "--topic", "t", "--partition", "0"], "name the partitions one way"),
        (
            ["--path-to-json-file", "/nonexistent/e.json"],
            "election JSON file /nonexistent/e.json does not exist",
        ),
    ],
)
def test_elect_refusals(cli, args: list[str], message: str) -> None:  # type: ignore[no-untyped-def]
    r = cli("elect", "--election-type", "preferred", *args)
    assert r.code == 1
    assert r.error_line.startswith(f"kafka-controller elect: error: {message}")


def test_shutdown_refusals(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("shutdown", "--broker-id", "9")
    assert r.error_line == "kafka-controller shutdown: error: broker 9 is not registered"
    r = cli("shutdown", "--broker-id", "1", "--pid", str(os.getpid()))
    assert (
        r.error_line == f"kafka-controller shutdown: error: pid {os.getpid()} "
        "is not a kafka-controller broker with --broker-id 1"
    )


def test_unreachable_zookeeper_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run(capsys, "topics", "list", "--zookeeper", f"127.0.0.1:{port}", "--timeout", "1")
    assert r.code == 1
    assert r.error_line.startswith(
        f"kafka-controller topics: error: cannot connect to ZooKeeper at 127.0.0.1:{port}"
    )


def test_delete_wait_names_the_brokers_deletion_waits_for(cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("topics", "create", "--topic", "stranded", "--replica-assignment", "7:1").code == 0
    r = cli("topics", "delete", "--topic", "stranded", "--wait", "--timeout", "0.3")
    assert r.code == 1
    status = (
        "replicas not confirmed on broker 7 (not registered; partition 0), "
        "broker 1 (registered; partition 0); controller: broker 1"
    )
    assert r.err.splitlines() == [
        f"kafka-controller topics: waiting for topic stranded to be deleted: {status}",
        "kafka-controller topics: error: topic 'stranded' is marked for deletion "
        f"but still exists after 0.3s: {status}",
    ]


def test_elect_takes_a_reassignment_plan_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plan = tmp_path / "plan.json"
    plan.write_text(
        '{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2],"log_dirs":["any","any"]}]}'
    )
    r = cli("elect", "--election-type", "preferred", "--path-to-json-file", str(plan), "--timeout", "0.5")
    # parsed, then sent to the brokers of /brokers/ids: it fails only because no broker process
    # answers in this fixture
    assert r.code == 1
    assert r.error_line.startswith("kafka-controller elect: error: cannot connect to 127.0.0.1:"), (
        r.error_line
    )


def test_create_warns_about_unregistered_brokers(cli, zk_admin_client: KazooClient, zk_chroot: str) -> None:  # type: ignore[no-untyped-def]
    r = cli("topics", "create", "--topic", "ahead", "--replica-assignment", "1:9,9:8")
    assert (r.code, r.out) == (0, "Created topic ahead.\n")
    assert r.error_line == (
        "kafka-controller topics: warning: topic ahead: brokers 8, 9 in --replica-assignment are not "
        "registered; its replicas there stay offline until then"
    )
    assert zk_admin_client.exists(f"{zk_chroot}/brokers/topics/ahead") is not None
    r = cli("topics", "create", "--topic", "placed", "--replica-assignment", "1:2")
    assert (r.code, r.out, r.err) == (0, "Created topic placed.\n", "")


def test_reassign_list(cli, store: KazooMetadataStore, zk_admin_client: KazooClient, zk_chroot: str) -> None:  # type: ignore[no-untyped-def]
    r = cli("reassign", "--list")
    assert (r.code, r.out, r.err) == (0, "No partition reassignments found.\n", "")
    # t-0 moving from [1,2] to [3,1] (RS/AR/RR as the controller writes them); t-1 queued in the legacy znode
    path = f"{zk_chroot}/brokers/topics/t"
    doc = orjson.loads(zk_admin_client.get(path)[0])
    doc["partitions"]["0"] = [3, 1, 2]
    doc["adding_replicas"] = {"0": [3]}
    doc["removing_replicas"] = {"0": [2]}
    zk_admin_client.set(path, orjson.dumps(doc))
    store.create_partition_reassignment({TopicPartition("t", 1): [3, 1], TopicPartition("t", 0): [3, 1]})
    r = cli("reassign", "--list")
    assert (r.code, r.err) == (0, "")
    assert r.out == (
        "Current partition reassignments:\n"
        "t-0: replicas: 3,1,2. adding: 3. removing: 2.\n"
        "t-1: replicas: 2,3. queued in /admin/reassign_partitions: 3,1.\n"
    )
    r = cli("reassign", "--list", "--json")
    assert r.json() == [
        {
            "topic": "t",
            "partition": 0,
            "replicas": [3, 1, 2],
            "adding_replicas": [3],
            "removing_replicas": [2],
            "queued_target": None,
        },
        {
            "topic": "t",
            "partition": 1,
            "replicas": [2, 3],
            "adding_replicas": [],
            "removing_replicas": [],
            "queued_target": [3, 1],
        },
    ]
    r = cli("reassign", "--list", "--reassignment-json-file", "plan.json")
    assert (r.code, r.error_line) == (
        1,
        "kafka-controller reassign: error: --reassignment-json-file is not for --list",
    )


def test_undecodable_arguments_never_reach_zookeeper(cli, store: KazooMetadataStore) -> None:  # type: ignore[no-untyped-def]
    """A non-UTF-8 byte in an argument arrives as a lone surrogate ('\\udcff'); kazoo cannot encode it
    and used to drop its connection from its own thread, with a traceback."""
    for argv in (
        ("topics", "describe", "--topic", "t\udcff"),
        ("topics", "create", "--topic", "t\udcff", "--replica-assignment", "1"),
        ("topics", "delete", "--topic", "t\udcff"),
    ):
        r = cli(*argv)
        assert r.code == 1
        assert r.error_line == (
            "kafka-controller topics: error: topic name 't\\udcff' has illegal characters '\\udcff'"
        )
    with pytest.raises(MetadataStoreError) as e:
        store.topic_exists("t\udcff")  # the adapter refuses it too, and stays connected
    assert e.value.code == "BADARGUMENTS"
    assert store.topic_exists("t")
