"""KafkaJS (npm ``kafkajs`` 2.2.4, run with the machine's node) creates a topic, fetches its metadata and
deletes it through a broker that is not the controller, and alters and lists partition reassignments
(AlterPartitionReassignments / ListPartitionReassignments v0); each outcome is checked in ZooKeeper.

``tests/clients/js`` pins the package (``package-lock.json``); ``.ci/bootstrap`` runs ``npm ci`` there.
Without node or the installed package these tests fail, they never skip."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.cluster.local import LocalCluster
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.clients]

JS = Path(__file__).resolve().parents[1] / "clients" / "js"


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(3, broker_config={"auto.leader.rebalance.enable": "false"})
    wait_healthy(c)
    return c


def kafkajs(bootstrap: str, *args: str) -> Any:
    node = shutil.which("node")
    assert node is not None, "node is not installed"
    assert (JS / "node_modules" / "kafkajs").is_dir(), f"run `npm ci` in {JS} (.ci/bootstrap does)"
    done = subprocess.run(
        [node, str(JS / "admin.js"), bootstrap, *args], capture_output=True, text=True, timeout=120, cwd=JS
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_kafkajs_creates_describes_and_deletes_a_topic(cluster: LocalCluster) -> None:
    controller, _ = cluster.controller()
    bootstrap = cluster.listener(next(b for b in cluster.running_broker_ids() if b != controller))

    assert kafkajs(bootstrap, "create", "js-orders", "3", "2") == {"created": True}
    read = cluster.store.get_replica_assignment_and_topic_ids(["js-orders"])["js-orders"]
    assert not isinstance(read, Exception)
    placed = {tp.partition: list(ra.replicas) for tp, ra in read.assignment.items()}
    assert sorted(placed) == [0, 1, 2] and all(len(set(rs)) == 2 for rs in placed.values())
    assert cluster.store.get_topic_config("js-orders") == {"retention.ms": "86400000"}

    def metadata_matches() -> bool:
        (topic,) = kafkajs(bootstrap, "metadata", "js-orders")
        states = {p.partition: p for p in cluster.waits.describe().partitions if p.topic == "js-orders"}
        return (
            topic["name"] == "js-orders"
            and all(
                p["replicas"] == placed[p["partition"]]
                and p["leader"] == states[p["partition"]].leader
                and sorted(p["isr"]) == sorted(states[p["partition"]].isr)
                for p in topic["partitions"]
            )
            and len(topic["partitions"]) == 3
        )

    cluster.waits.wait_until(metadata_matches, TIMEOUT, "KafkaJS's metadata to equal ZooKeeper's")

    # KafkaJS creating an existing topic answers false (TOPIC_ALREADY_EXISTS is not an error to it)
    assert kafkajs(bootstrap, "create", "js-orders", "1", "1") == {"created": False}

    deleted = kafkajs(bootstrap, "delete", "js-orders")
    assert deleted["deleted"] == "js-orders"
    cluster.waits.wait_until(
        lambda: not cluster.store.topic_exists("js-orders"), TIMEOUT, "js-orders to be deleted"
    )


def test_kafkajs_moves_a_replica_and_lists_the_move_while_it_waits(cluster: LocalCluster) -> None:
    """alterPartitionReassignments to a frozen broker (SIGSTOP: still registered, so the move is
    accepted, as Kafka accepts only live adding replicas, but it cannot catch up): the move is listed
    in flight with its adding and removing replicas until the broker runs again, then it is done
    in ZooKeeper."""
    controller, _ = cluster.controller()
    assert controller is not None
    others = [b for b in cluster.running_broker_ids() if b != controller]
    target, staying = others[0], others[1]
    cluster.create_topic("js-moves", {0: [controller, staying], 1: [staying, controller]})
    cluster.wait_topic_healthy("js-moves", timeout=TIMEOUT)
    cluster.pause_broker(target)
    try:
        bootstrap = cluster.listener(staying)
        moved = {"0": [controller, target]}
        assert kafkajs(bootstrap, "reassign", "js-moves", json.dumps(moved)) == {"reassigned": "js-moves"}

        def listed() -> list[dict[str, Any]] | None:
            found: list[dict[str, Any]] = kafkajs(bootstrap, "list-reassignments", "js-moves")
            return found or None

        (entry,) = cluster.waits.wait_until(listed, TIMEOUT, "KafkaJS to list the move in flight")
        assert entry["partition"] == 0
        assert entry["adding"] == [target] and entry["removing"] == [staying]
        assert sorted(entry["replicas"]) == sorted([controller, target, staying])
    finally:
        cluster.resume_broker(target)

    def done() -> bool:
        read = cluster.store.get_replica_assignment_and_topic_ids(["js-moves"])["js-moves"]
        assert not isinstance(read, Exception)
        ra = {tp.partition: ra for tp, ra in read.assignment.items()}[0]
        return list(ra.replicas) == [controller, target] and not ra.adding_replicas

    cluster.waits.wait_until(done, TIMEOUT, "the move to finish in ZooKeeper")
    assert kafkajs(cluster.listener(staying), "list-reassignments", "js-moves") == []
