"""Reassignment and unclean election (docs/controller-behaviour.md §8.8, §8.13) through the CLI on
real brokers.

* ``[c] -> [o]`` through the legacy znode and through the admin API ends on ``[o]`` with leader
  epoch 3 (add, move leadership, drop the old replica) and no reassignment left behind;
* a reassignment stuck on a frozen target is reported in progress and cancelled back;
* a partition whose whole ISR died stays offline (leader -1, the last ISR member kept) until
  unclean election is enabled for its topic, or forced with ``elect --election-type unclean``.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.ports import TopicIdReplicaAssignment
from kafka_controller.zk import paths as P
from tests.cli.clirun import Result, run
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, state, wait_healthy, wait_state

pytestmark = [pytest.mark.integration, pytest.mark.zk]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    return make_cluster(3, broker_config={"auto.leader.rebalance.enable": "false"})


def _cli(capsys: pytest.CaptureFixture[str], cluster: LocalCluster, *argv: str) -> Result:
    return run(capsys, argv[0], "--zookeeper", cluster.connect_string, "--timeout", str(TIMEOUT), *argv[1:])


def _plan(tmp_path: Path, name: str, topic: str, replicas: list[int]) -> str:
    path = tmp_path / name
    path.write_bytes(
        orjson.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]})
    )
    return str(path)


def _new_topic(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    cluster.create_topic(topic, {0: replicas})
    wait_state(cluster, topic, 0, leader=replicas[0], isr=tuple(replicas))


def test_legacy_znode_reassignment_ends_at_leader_epoch_3(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster, tmp_path: Path, zk_admin_client
) -> None:  # type: ignore[no-untyped-def]
    c = cluster.controller()[0]
    assert c is not None
    o = next(b for b in cluster.broker_ids if b != c)
    _new_topic(cluster, "legacy", [c])
    plan = _plan(tmp_path, "legacy.json", "legacy", [o])
    r = _cli(capsys, cluster, "reassign", "--reassignment-json-file", plan, "--execute", "--legacy-znode")
    assert r.code == 0, r.err
    cluster.waits.wait_until(
        lambda: _cli(capsys, cluster, "reassign", "--reassignment-json-file", plan, "--verify").code == 0,
        TIMEOUT,
        "the legacy reassignment to complete",
    )
    epoch = cluster.controller()[1]
    assert state(cluster, "legacy") == (epoch, o, 3, (o,))
    read = cluster.store.get_replica_assignment_and_topic_ids(["legacy"])["legacy"]
    assert isinstance(read, TopicIdReplicaAssignment)
    assert read.assignment == {TopicPartition("legacy", 0): ReplicaAssignment((o,))}
    cluster.waits.wait_until(
        lambda: zk_admin_client.exists(cluster.chroot + P.REASSIGN_PARTITIONS_PATH) is None,
        TIMEOUT,
        "/admin/reassign_partitions to be removed",
    )


def test_api_reassignment_with_wait(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster, tmp_path: Path
) -> None:
    c = cluster.controller()[0]
    o = next(b for b in cluster.broker_ids if b != c)
    _new_topic(cluster, "viaapi", [c])
    plan = _plan(tmp_path, "api.json", "viaapi", [o])
    r = _cli(capsys, cluster, "reassign", "--reassignment-json-file", plan, "--execute", "--wait", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["via"] == "api" and doc["rollback"]["partitions"][0]["replicas"] == [c]
    assert [v["status"] for v in doc["verification"]] == ["complete"]
    _, leader, leader_epoch, isr = state(cluster, "viaapi")
    assert (leader, leader_epoch, isr) == (o, 3, (o,))


def test_a_stuck_reassignment_is_in_progress_then_cancelled(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster, tmp_path: Path
) -> None:
    c = cluster.controller()[0]
    a, target = [b for b in cluster.broker_ids if b != c]
    _new_topic(cluster, "stuck", [a])
    plan = _plan(tmp_path, "stuck.json", "stuck", [target])
    cluster.pause_broker(target)  # registered, but it will not fetch: it cannot join the ISR
    try:
        r = _cli(capsys, cluster, "reassign", "--reassignment-json-file", plan, "--execute")
        assert r.code == 0, r.err
        r = _cli(capsys, cluster, "reassign", "--reassignment-json-file", plan, "--verify", "--json")
        assert r.code == 3
        assert r.json()[0]["status"] == "in progress" and r.json()[0]["adding_replicas"] == [target]
        other = _cli(capsys, cluster, "reassign", "--reassignment-json-file", plan, "--execute")
        assert other.code == 1 and "reassignments are in progress (stuck-0); pass --additional" in other.err
        r = _cli(capsys, cluster, "reassign", "--reassignment-json-file", plan, "--cancel", "--json")
        assert r.code == 0, r.err
        assert r.json() == {"cancelled": ["stuck-0"], "failed": {}}
    finally:
        cluster.resume_broker(target)
    ra = cluster.store.get_replica_assignment_and_topic_ids(["stuck"])["stuck"].assignment[("stuck", 0)]  # type: ignore[union-attr,index]
    assert (ra.replicas, ra.adding_replicas, ra.removing_replicas) == ((a,), (), ())
    r = _cli(capsys, cluster, "reassign", "--reassignment-json-file", plan, "--cancel")
    assert (r.code, r.out) == (0, "None of the specified partition reassignments are active.\n")
    wait_healthy(cluster)


def test_a_batched_execute_and_cancel_report_each_batch(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster, tmp_path: Path
) -> None:
    """``--batch-size``: one request per batch, a progress line each on stderr; moves that cannot
    finish (their target is frozen) are all cancelled back, batch by batch."""
    c = cluster.controller()[0]
    a, target = [b for b in cluster.broker_ids if b != c]
    cluster.create_topic("batched", {p: [a] for p in range(5)})
    for p in range(5):
        wait_state(cluster, "batched", p, leader=a, isr=(a,))
    path = tmp_path / "batched.json"
    entries = [{"topic": "batched", "partition": p, "replicas": [target]} for p in range(5)]
    path.write_bytes(orjson.dumps({"version": 1, "partitions": entries}))
    plan = str(path)
    cluster.pause_broker(target)  # registered, but it will not fetch: it cannot join the ISR
    try:
        r = _cli(
            capsys, cluster, "reassign", "--reassignment-json-file", plan, "--execute", "--batch-size", "2"
        )
        assert r.code == 0, r.err
        assert [line for line in r.err.splitlines() if "batch" in line] == [
            "kafka-controller reassign: batch 1/3: started 2/5 partitions",
            "kafka-controller reassign: batch 2/3: started 4/5 partitions",
            "kafka-controller reassign: batch 3/3: started 5/5 partitions",
        ]
        r = _cli(
            capsys, cluster, "reassign", "--reassignment-json-file", plan, "--cancel", "--batch-size", "3"
        )
        assert r.code == 0, r.err
        assert [line for line in r.err.splitlines() if "batch" in line] == [
            "kafka-controller reassign: batch 1/2: cancelled 3/5 partitions",
            "kafka-controller reassign: batch 2/2: cancelled 5/5 partitions",
        ]
    finally:
        cluster.resume_broker(target)
    read = cluster.store.get_replica_assignment_and_topic_ids(["batched"])["batched"]
    assert isinstance(read, TopicIdReplicaAssignment)
    assert read.assignment == {TopicPartition("batched", p): ReplicaAssignment((a,)) for p in range(5)}
    wait_healthy(cluster)


_UNCLEAN: dict[str, int] = {}


def test_a_partition_whose_whole_isr_died_stays_offline(cluster: LocalCluster) -> None:
    c = cluster.controller()[0]
    x, y = [b for b in cluster.broker_ids if b != c]
    _UNCLEAN.update(x=x, y=y)
    for topic in ("unclean-config", "unclean-api"):
        _new_topic(cluster, topic, [x, y])
    cluster.kill_broker(y, wait_deregistered=True, timeout=TIMEOUT)
    for topic in ("unclean-config", "unclean-api"):
        wait_state(cluster, topic, 0, leader=x, isr=(x,))
    cluster.kill_broker(x, wait_deregistered=True, timeout=TIMEOUT)
    for topic in ("unclean-config", "unclean-api"):
        _, _, _, isr = wait_state(cluster, topic, 0, leader=-1)
        assert isr == (x,)  # the last ISR member is kept (KAFKA-5083)
    cluster.start_broker(y, timeout=TIMEOUT)
    cluster.waits.wait_metadata([y], timeout=TIMEOUT)  # the controller has processed y's start-up
    for topic in ("unclean-config", "unclean-api"):
        _, leader, _, isr = state(cluster, topic)
        assert (leader, isr) == (-1, (x,))  # still offline: unclean election is off by default


def test_enabling_unclean_election_in_the_topic_config_elects_an_out_of_sync_replica(
    cluster: LocalCluster,
) -> None:
    assert _UNCLEAN, "needs the previous test's offline partition"
    y = _UNCLEAN["y"]
    cluster.store.change_topic_config("unclean-config", {"unclean.leader.election.enable": "true"})
    cluster.waits.wait_until(
        lambda: state(cluster, "unclean-config")[1] == y,
        15.0,
        "the controller to elect the out-of-sync replica",
    )
    assert state(cluster, "unclean-config")[3] == (y,)


def test_unclean_election_forced_through_the_admin_api(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster
) -> None:
    assert _UNCLEAN, "needs the previous tests' offline partition"
    x, y = _UNCLEAN["x"], _UNCLEAN["y"]
    r = _cli(
        capsys,
        cluster,
        "elect",
        "--election-type",
        "unclean",
        "--topic",
        "unclean-api",
        "--partition",
        "0",
        "--json",
    )
    assert r.code == 0, r.err
    assert r.json()["results"] == [
        {"topic": "unclean-api", "partition": 0, "error": "NONE", "leader": y, "message": None}
    ]
    _, leader, _, isr = state(cluster, "unclean-api")
    assert (leader, isr) == (y, (y,))
    r = _cli(
        capsys, cluster, "elect", "--election-type", "unclean", "--topic", "unclean-api", "--partition", "0"
    )
    assert (r.code, r.out) == (0, "Valid replica already elected for partitions unclean-api-0\n")
    cluster.start_broker(x, timeout=TIMEOUT)
    wait_healthy(cluster)
