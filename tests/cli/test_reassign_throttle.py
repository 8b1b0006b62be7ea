"""``reassign --execute --throttle``, ``--verify``'s removal of the throttles, and
``--generate --decommission-brokers``, against a real ZooKeeper (no controller: the plan is started
through the legacy znode, and "done" is written into the topic znode as the controller would)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from kazoo.client import KazooClient

from kafka_controller.domain.values import Broker, EndPoint, ReplicaAssignment
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.cli.clirun import Result, run

pytestmark = pytest.mark.zk

RACKS = {1: "a", 2: "a", 3: "b", 4: "b"}


@pytest.fixture
def store(zk_connect: str) -> Iterator[KazooMetadataStore]:
    """Brokers 1-4 on racks a,a,b,b; topic ``t`` on [1,2],[2,3],[3,4] with an unrelated config key."""
    s = KazooMetadataStore(zk_connect)
    for b, rack in RACKS.items():
        s.register_broker(Broker(b, (EndPoint("127.0.0.1", 9000 + b),), rack))
    s.create_topic(
        "t",
        {0: ReplicaAssignment.of([1, 2]), 1: ReplicaAssignment.of([2, 3]), 2: ReplicaAssignment.of([3, 4])},
        {"cleanup.policy": "compact"},
    )
    s.register_controller_and_increment_controller_epoch(1)
    yield s
    s.close()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], zk_connect: str, store: KazooMetadataStore):  # type: ignore[no-untyped-def]
    def call(*argv: str) -> Result:
        return run(capsys, "reassign", "--zookeeper", zk_connect, "--timeout", "5", *argv)

    return call


def _config(client: KazooClient, chroot: str, entity: str) -> dict[str, str]:
    path = f"{chroot}/config/{entity}"
    if client.exists(path) is None:
        return {}
    return dict(orjson.loads(client.get(path)[0])["config"])


def _notified(client: KazooClient, chroot: str) -> list[str]:
    changes = f"{chroot}/config/changes"
    return sorted(
        orjson.loads(client.get(f"{changes}/{c}")[0])["entity_path"] for c in client.get_children(changes)
    )


def test_throttle_is_set_on_execute_and_removed_by_verify_when_done(  # type: ignore[no-untyped-def]
    cli, store: KazooMetadataStore, zk_admin_client: KazooClient, zk_chroot: str, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}')
    r = cli(
        "--reassignment-json-file", str(plan), "--execute", "--legacy-znode", "--throttle", "1000", "--json"
    )
    assert r.code == 0, r.err
    assert r.json()["started"] == ["t-0"]  # stdout stays one JSON document; the throttle is on stderr
    assert "the inter-broker throttle limit was set to 1000 B/s on brokers 1,2,3" in r.err
    rate = {"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "1000"}
    for b in (1, 2, 3):
        assert _config(zk_admin_client, zk_chroot, f"brokers/{b}") == rate
    assert _config(zk_admin_client, zk_chroot, "brokers/4") == {}
    assert _config(zk_admin_client, zk_chroot, "topics/t") == {
        "cleanup.policy": "compact",
        "leader.replication.throttled.replicas": "0:1,0:2",
        "follower.replication.throttled.replicas": "0:3",
    }
    assert _notified(zk_admin_client, zk_chroot) == ["brokers/1", "brokers/2", "brokers/3", "topics/t"]

    r = cli("--reassignment-json-file", str(plan), "--verify")
    assert r.code == 3 and "clearing" not in r.err  # still moving: the throttles stay
    assert _config(zk_admin_client, zk_chroot, "brokers/1") == rate

    # the controller finishes: the topic znode holds the target, the legacy znode is gone
    zk_admin_client.delete(f"{zk_chroot}/admin/reassign_partitions")
    epoch = store.get_controller_epoch()
    assert epoch is not None
    zkv = epoch[1]
    current = store.get_replica_assignment_and_topic_ids(["t"])["t"]
    assignment = {tp.partition: ra for tp, ra in current.assignment.items()}  # type: ignore[union-attr]
    store.set_topic_assignment("t", None, {**assignment, 0: ReplicaAssignment.of([3, 1])}, zkv)

    r = cli("--reassignment-json-file", str(plan), "--verify", "--preserve-throttles")
    assert r.code == 0 and "Clearing" not in r.out
    assert _config(zk_admin_client, zk_chroot, "brokers/2") == rate
    r = cli("--reassignment-json-file", str(plan), "--verify")
    assert r.code == 0, r.err
    assert r.out.splitlines()[-2:] == [  # after the status, on stdout, as kafka-reassign-partitions.sh
        "Clearing broker-level throttles on brokers 1,2,3,4",
        "Clearing topic-level throttles on topics t",
    ]
    for b in (1, 2, 3):
        assert _config(zk_admin_client, zk_chroot, f"brokers/{b}") == {}
    assert _config(zk_admin_client, zk_chroot, "topics/t") == {"cleanup.policy": "compact"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--verify", "--throttle", "1000"], "--throttle is only for --execute"),
        (["--execute", "--throttle", "0"], "--throttle must be a positive number of bytes/s, got 0"),
        (["--execute", "--preserve-throttles"], "--preserve-throttles is only for --verify"),
        (["--execute", "--decommission-brokers", "3"], "--decommission-brokers is only for --generate"),
        (
            ["--generate", "--decommission-brokers", "3,x"],
            "bad --decommission-brokers '3,x': 'x' is not a broker id",
        ),
        (["--generate", "--decommission-brokers", "9"], "broker 9 is not registered and holds no replica"),
        (
            ["--generate", "--decommission-brokers", "3", "--broker-list", "1,3"],
            "broker 3 is both in --decommission-brokers and --broker-list",
        ),
        (
            ["--generate", "--decommission-brokers", "1,2,3"],
            "t-0 has replication factor 2, more than the 1 brokers left (4)",
        ),
    ],
)
def test_refusals_write_nothing(  # type: ignore[no-untyped-def]
    cli, zk_admin_client: KazooClient, zk_chroot: str, tmp_path: Path, args: list[str], message: str
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[3,1]}]}')
    file_args = [] if "--generate" in args else ["--reassignment-json-file", str(plan)]
    r = cli(*file_args, *args)
    assert r.code != 0
    assert r.error_line == f"kafka-controller reassign: error: {message}"
    assert zk_admin_client.exists(f"{zk_chroot}/config/changes") is None or not zk_admin_client.get_children(
        f"{zk_chroot}/config/changes"
    )
    assert zk_admin_client.exists(f"{zk_chroot}/admin/reassign_partitions") is None


def test_decommission_plan_moves_every_replica_off_rack_aware(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "decommission.json"
    r = cli("--generate", "--decommission-brokers", "3", "--reassignment-json-file", str(out))
    assert r.code == 0, r.err
    assert "Current partition replica assignment" in r.out and "Proposed partition reassignment" in r.out
    proposed = {
        (p["topic"], p["partition"]): p["replicas"] for p in orjson.loads(out.read_text())["partitions"]
    }
    # only the partitions on broker 3 move; the surviving replica stays first; the new one is on
    # the other rack than the survivor's when it can be (2 is on rack a -> 4 on rack b), and
    # replication factors are kept
    assert proposed == {("t", 1): [2, 4], ("t", 2): [4, 1]}
    r = cli("--generate", "--decommission-brokers", "3", "--json")
    assert r.json()["proposed"]["partitions"] == [
        {"topic": "t", "partition": 1, "replicas": [2, 4], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 2, "replicas": [4, 1], "log_dirs": ["any", "any"]},
    ]
    r = cli("--generate", "--decommission-brokers", "3", "--reassignment-json-file", str(out))
    assert r.error_line.endswith("already exists; --generate writes a new file only")


def _another_reassignments_throttles(store: KazooMetadataStore) -> dict[str, dict[str, str]]:
    """Throttles as ``--execute --throttle`` of another plan (t-1 from [2,3] to [2,4]) left them."""
    rate = {"leader.replication.throttled.rate": "500", "follower.replication.throttled.rate": "500"}
    lists = {
        "leader.replication.throttled.replicas": "1:2,1:3",
        "follower.replication.throttled.replicas": "1:4",
    }
    written = {
        "brokers/2": rate,
        "brokers/3": rate,
        "brokers/4": rate,
        "topics/t": {"cleanup.policy": "compact", **lists},
    }
    for entity, config in written.items():
        kind, name = entity.split("/")
        store.set_or_create_entity_config(kind, name, config)
    return written


def test_verify_of_a_target_not_reached_fails_in_one_line(  # type: ignore[no-untyped-def]
    cli, store: KazooMetadataStore, zk_admin_client: KazooClient, zk_chroot: str, tmp_path: Path
) -> None:
    """Nothing is moving, but the plan's target is not what ZooKeeper holds (it never ran): exit 1
    with one line on stderr (found by the CLI fuzz test), and the throttles another reassignment
    set are left alone (Kafka's tool would clear every broker's)."""
    written = _another_reassignments_throttles(store)
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[4,3]}]}')
    r = cli("--reassignment-json-file", str(plan), "--verify")
    assert r.code != 0
    assert len(r.err.splitlines()) == 1, r.err
    assert "did not reach their target" in r.err
    assert "Clearing" not in r.out
    for entity, config in written.items():
        assert _config(zk_admin_client, zk_chroot, entity) == config


def test_verify_of_a_plan_that_never_ran_keeps_the_throttles(  # type: ignore[no-untyped-def]
    cli, store: KazooMetadataStore, zk_admin_client: KazooClient, zk_chroot: str, tmp_path: Path
) -> None:
    """A plan that never ran, whose target happens to be the current assignment (so every partition
    reads "complete"), while another reassignment is throttled: nothing of it is touched."""
    written = _another_reassignments_throttles(store)
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
    r = cli("--reassignment-json-file", str(plan), "--verify")
    assert r.code == 0, r.err
    assert "Reassignment of partition t-0 is complete." in r.out
    assert "Clearing" not in r.out and "Clearing" not in r.err
    for entity, config in written.items():
        assert _config(zk_admin_client, zk_chroot, entity) == config
