"""Kafka's ControllerIntegrationTest lifecycle cases on real broker processes: the first
election, topic creation, broker failure and bounce, controlled shutdown (SIGTERM and over the
listener), preferred election, topic deletion, and ``describe`` on a live cluster.

One cluster for the module; each test leaves it with every broker up and every ISR full.
"""

from __future__ import annotations

import pytest

from kafka_controller.admin.describe import ClusterView
from kafka_controller.cluster.local import LocalCluster
from kafka_controller.zk import paths as P
from tests.cli.clirun import run
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, state, wait_all_led, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    return make_cluster(3, broker_config={"auto.leader.rebalance.enable": "false"})


def _cli(capsys: pytest.CaptureFixture[str], cluster: LocalCluster, *argv: str):  # type: ignore[no-untyped-def]
    command, *rest = argv
    head = [command, rest.pop(0)] if command == "topics" else [command]
    return run(capsys, *head, "--zookeeper", cluster.connect_string, "--timeout", str(TIMEOUT), *rest)


def test_first_controller_has_epoch_1_and_epoch_zk_version_1(cluster: LocalCluster) -> None:
    controller = cluster.store.get_controller_id()
    assert controller in cluster.broker_ids
    assert cluster.store.get_controller_epoch() == (1, 1)
    assert sorted(cluster.registered()) == list(cluster.broker_ids)


def test_topic_creation_elects_the_first_live_replica(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster
) -> None:
    b = cluster.broker_ids[1]
    r = _cli(capsys, cluster, "topics", "create", "--topic", "single", "--replica-assignment", str(b))
    assert r.code == 0, r.err
    cluster.waits.wait_until(
        lambda: cluster.waits.partition_state("single", 0), TIMEOUT, "single-0 to get a state"
    )
    assert state(cluster, "single") == (1, b, 0, (b,))
    r = _cli(
        capsys,
        cluster,
        "topics",
        "create",
        "--topic",
        "orders",
        "--partitions",
        "6",
        "--replication-factor",
        "3",
    )
    assert r.code == 0, r.err
    view = wait_healthy(cluster)
    orders = [p for p in view.partitions if p.topic == "orders"]
    assert len(orders) == 6
    assert all(p.leader == p.replicas[0] and p.leader_epoch == 0 and p.controller_epoch == 1 for p in orders)


def test_broker_failure_and_bounce(cluster: LocalCluster) -> None:
    controller = cluster.controller()[0]
    victim = next(b for b in cluster.broker_ids if b != controller)
    before = {p.topic_partition: p for p in cluster.waits.describe().partitions}
    led = [tp for tp, p in before.items() if p.leader == victim]
    assert led, "the victim should lead something"
    old_epoch = cluster.registered()[victim]

    cluster.kill_broker(victim, wait_deregistered=True, timeout=TIMEOUT)

    def victim_out() -> ClusterView | None:
        # Every partition led again, and the victim out of every ISR it can leave: the controller
        # shrinks ISRs after it has seen the broker go, so "all led" alone can come first.
        view = wait_all_led(cluster)
        moved = all(
            p.leader != victim and victim not in p.isr for p in view.partitions if set(p.replicas) - {victim}
        )
        return view if moved else None

    view = cluster.waits.wait_until(victim_out, TIMEOUT, f"broker {victim} out of every leadership and ISR")
    for p in view.partitions:
        if set(p.replicas) - {victim}:
            assert p.leader != victim and victim not in p.isr, p
        if p.topic_partition in led and set(p.replicas) - {victim}:
            assert p.leader_epoch == before[p.topic_partition].leader_epoch + 1
    single = view.partition("single", 0)
    if single is not None and single.replicas == (victim,):
        assert single.offline and single.isr == (victim,)  # the last ISR member is kept (KAFKA-5083)

    new_epoch = cluster.start_broker(victim, timeout=TIMEOUT)
    assert new_epoch > old_epoch  # a bounce is a new broker epoch (czxid)
    view = wait_healthy(cluster)
    assert all(victim in p.isr for p in view.partitions if victim in p.replicas)


def test_preferred_election_then_controlled_shutdown_leads_nothing_at_exit(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster
) -> None:
    r = _cli(capsys, cluster, "elect", "--election-type", "preferred", "--all-topic-partitions", "--json")
    assert r.code == 0, r.err
    errors = {x["error"] for x in r.json()["results"]}
    assert errors <= {"NONE", "ELECTION_NOT_NEEDED"}
    view = cluster.waits.describe()
    assert view.summary["not_preferred_leader"] == 0
    controller = cluster.controller()[0]
    victim = max((b for b in view.brokers if b.id != controller), key=lambda b: b.leaders).id
    rf = {p.topic_partition: len(p.replicas) for p in view.partitions}

    report = cluster.controlled_shutdown(victim, timeout=TIMEOUT)
    assert report.exit_code == 0
    assert [tp for tp in report.led_before if rf[tp] > 1], "it led partitions that could move"
    assert [tp for tp in report.led_at_exit if rf[tp] > 1] == []
    after = cluster.waits.describe()
    assert all(p.leader != victim for p in after.partitions if len(p.replicas) > 1)

    cluster.start_broker(victim, timeout=TIMEOUT)
    wait_healthy(cluster)


def test_shutdown_command_asks_the_broker_over_its_listener(
    capsys: pytest.CaptureFixture[str], cluster: LocalCluster
) -> None:
    assert _cli(capsys, cluster, "elect", "--election-type", "preferred", "--all-topic-partitions").code == 0
    controller = cluster.controller()[0]
    victim = next(b for b in cluster.broker_ids if b != controller)
    r = _cli(capsys, cluster, "shutdown", "--broker-id", str(victim), "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["method"] == "api" and doc["led_before"]
    movable = {f"{p.topic}-{p.partition}" for p in cluster.waits.describe().partitions if len(p.replicas) > 1}
    assert [tp for tp in doc["led_at_exit"] if tp in movable] == []
    assert cluster.processes[victim].wait(TIMEOUT) == 0
    cluster.start_broker(victim, timeout=TIMEOUT)
    wait_healthy(cluster)


def test_describe_on_a_live_cluster(capsys: pytest.CaptureFixture[str], cluster: LocalCluster) -> None:
    doc = _cli(capsys, cluster, "describe", "--json").json()
    assert doc["controller"]["broker_id"] == cluster.controller()[0]
    assert [b["id"] for b in doc["brokers"]] == list(cluster.broker_ids)
    assert doc["summary"]["offline"] == 0 and doc["summary"]["under_replicated"] == 0
    assert doc["summary"]["partitions"] == 7


def test_topic_deletion(capsys: pytest.CaptureFixture[str], cluster: LocalCluster, zk_admin_client) -> None:  # type: ignore[no-untyped-def]
    r = _cli(capsys, cluster, "topics", "delete", "--topic", "orders", "--wait", "--json")
    assert r.code == 0, r.err
    assert r.json() == {"topic": "orders", "marked_for_deletion": True, "deleted": True}
    root = cluster.chroot
    for path in (P.topic_path("orders"), P.topic_config_path("orders"), P.delete_topic_path("orders")):
        cluster.waits.wait_until(
            lambda path=path: zk_admin_client.exists(root + path) is None, TIMEOUT, f"{path} to go"
        )
    assert sorted(cluster.store.get_all_topics()) == ["single"]
