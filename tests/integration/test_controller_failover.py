"""Controller failover on real processes: a SIGKILLed controller (epoch + 1, every partition with a
live replica led again), and a controller frozen (SIGSTOP) past its session timeout that wakes up
as a zombie: its writes are fenced, it resigns, and ZooKeeper and the new controller keep their
state (docs/controller-behaviour.md §7.3, §8.2; Kafka's ControllerIntegrationTest
testControllerMove* and ControllerFailoverTest)."""

from __future__ import annotations

import time

import pytest

from kafka_controller.cluster.local import LocalCluster
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, TopicPartition
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, live_replicas_have_live_leaders, wait_all_led, wait_healthy

pytestmark = [pytest.mark.integration, pytest.mark.zk]


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(3, audit=True, broker_config={"auto.leader.rebalance.enable": "false"})
    ids = c.broker_ids
    c.create_topic("f", {p: [ids[p % 3], ids[(p + 1) % 3], ids[(p + 2) % 3]] for p in range(6)})
    c.create_topic("solo", {p: [ids[p]] for p in range(3)})
    wait_healthy(c)
    return c


def _states(cluster: LocalCluster) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
    tps = [p.topic_partition for p in cluster.waits.describe().partitions]
    return {
        tp: s
        for tp, s in cluster.store.get_partition_states(tps).items()
        if isinstance(s, LeaderIsrAndControllerEpoch)
    }


def test_killing_the_controller_elects_a_new_one_with_the_next_epoch(cluster: LocalCluster) -> None:
    old, epoch = cluster.controller()
    assert old is not None and epoch is not None
    led_by_old = sum(p.leader == old for p in cluster.waits.describe().partitions)
    killed_ms = int(time.time() * 1000)
    cluster.kill_broker(old)
    new, new_epoch = cluster.waits.wait_for_controller(TIMEOUT, exclude=[old], min_epoch=epoch + 1)
    assert new_epoch == epoch + 1
    assert cluster.store.get_controller_epoch() == (epoch + 1, epoch + 1)  # zkVersion follows the epoch
    view = wait_all_led(cluster)
    assert live_replicas_have_live_leaders(view)
    solo = [p for p in view.partitions if p.topic == "solo" and p.replicas == (old,)]
    assert all(p.offline for p in solo)  # no live replica: nothing to elect
    assert all(p.controller_epoch == new_epoch for p in view.partitions if p.leader != p.replicas[0])

    _check_the_outage_was_audited(cluster, old, epoch, new, killed_ms, led_by_old)

    cluster.start_broker(old, timeout=TIMEOUT)
    wait_healthy(cluster)
    assert cluster.controller() == (new, new_epoch)  # the restarted broker does not take the role back


def _check_the_outage_was_audited(
    cluster: LocalCluster, old: int, epoch: int, new: int, killed_ms: int, led_by_old: int
) -> None:
    """The new controller's failover row says what outage it ended: the controller it replaced,
    when it saw /controller go (a session timeout after the kill), the partitions it found offline;
    with a drill's record of the kill, the report measures from the kill: seconds, not the
    failover's milliseconds."""
    from kafka_controller.audit.operations import OperationLog
    from kafka_controller.audit.reports import build_report

    assert cluster.audit_url is not None

    def failover_row() -> dict[str, object] | None:
        rows = build_report(str(cluster.audit_url))["sections"]["failover_recovery"]["rows"]
        return next((r for r in rows if r["controller_epoch"] == epoch + 1), None)

    row = cluster.waits.wait_until(failover_row, TIMEOUT, f"the failover of epoch {epoch + 1} in the audit")
    assert (row["broker_id"], row["previous_broker_id"], row["lost_via"]) == (new, old, "/controller deleted")
    seen_ms = int(row["lost_ms"])
    assert seen_ms - killed_ms >= 3000  # ZooKeeper noticed at the session timeout (6 s), not at once
    assert int(row["offline_partitions"]) >= led_by_old > 0
    assert seen_ms <= int(row["first_offline_ms"]) <= int(row["recovered_ms"])
    assert row["time_to_recover_ms"] == int(row["recovered_ms"]) - seen_ms

    with OperationLog(str(cluster.audit_url)) as log:
        log.record_controller_lost(old, epoch, killed_ms, "SIGKILL by the test")
    row = failover_row()
    assert row is not None and row["lost_via"] == "drill" and row["lost_ms"] == killed_ms
    assert float(row["time_to_recover_ms"]) >= seen_ms - killed_ms >= 3000 > float(row["duration_ms"])


def test_a_paused_controller_is_fenced_and_resigns(cluster: LocalCluster) -> None:
    from sqlalchemy import create_engine, text

    zombie, epoch = cluster.controller()
    assert zombie is not None and epoch is not None
    old_broker_epoch = cluster.registered()[zombie]
    paused_ms = int(time.time() * 1000)
    cluster.pause_broker(zombie)
    try:
        # A change the zombie will be told about: its watch fires into its frozen socket.
        cluster.create_topic("during-pause", {0: [b for b in cluster.broker_ids if b != zombie][:2]})
        new, new_epoch = cluster.waits.wait_for_controller(TIMEOUT, exclude=[zombie], min_epoch=epoch + 1)
        assert new_epoch == epoch + 1
        cluster.waits.wait_until(
            lambda: (
                (s := cluster.waits.partition_state("during-pause", 0)) is not None
                and s.controller_epoch == new_epoch
            ),
            TIMEOUT,
            "the new controller to initialise the topic created during the pause",
        )
        controller_before = (cluster.store.get_controller_id(), cluster.store.get_controller_epoch())
        states_before = _states(cluster)
    finally:
        cluster.resume_broker(zombie)

    # The zombie comes back on a new session (a new broker epoch) and records its resignation.
    cluster.waits.wait_until(
        lambda: cluster.registered().get(zombie, old_broker_epoch) > old_broker_epoch,
        TIMEOUT,
        f"broker {zombie} to re-register after its session expired",
    )
    engine = create_engine(str(cluster.audit_url))
    query = text(
        "SELECT count(*) FROM controller_events "
        "WHERE kind = 'resigned' AND broker_id = :b AND started_ms >= :t"
    )

    def resigned() -> bool:
        with engine.connect() as conn:
            return int(conn.execute(query, {"b": zombie, "t": paused_ms}).scalar_one()) > 0

    try:
        cluster.waits.wait_until(
            resigned, TIMEOUT, f"broker {zombie} to record its resignation from epoch {epoch}"
        )
    finally:
        engine.dispose()

    assert (cluster.store.get_controller_id(), cluster.store.get_controller_epoch()) == controller_before
    after = _states(cluster)
    for tp, s in after.items():
        before = states_before.get(tp)
        if before is None or s.leader_and_isr.zk_version != before.leader_and_isr.zk_version:
            assert s.controller_epoch == new_epoch, f"{tp} was written by epoch {s.controller_epoch}"
    # The new controller still acts: the zombie's broker rejoins every ISR, a new topic gets leaders.
    wait_healthy(cluster)
    cluster.create_topic("after-resume", {0: list(cluster.broker_ids)})
    cluster.waits.wait_until(
        lambda: (
            (s := cluster.waits.partition_state("after-resume", 0)) is not None
            and s.controller_epoch == new_epoch
        ),
        TIMEOUT,
        "the new controller to initialise a topic created after the zombie resigned",
    )
    assert cluster.controller() == (new, new_epoch)
