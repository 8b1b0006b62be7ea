"""The auto-rebalance pause on real processes: ``auto.leader.rebalance.enable=false`` written to the
cluster-default dynamic broker config (``/config/brokers/<default>`` plus a ``/config/changes``
notification, as the Airflow hook's ``pause_auto_rebalance`` and ``kafka-configs.sh`` write it)
stops preferred elections by the auto rebalance; removing it lets the next check elect.

The checks run every second (``leader.imbalance.check.interval.seconds=1``). "Nothing happened
while paused" is read from the audit store: the controller records each check it skipped, with
what it held back, so the test waits for two such checks made after the imbalance existed and
then reads the partition's state.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kafka_controller.cluster.local import LocalCluster
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import TIMEOUT, state, wait_state

pytestmark = [pytest.mark.integration, pytest.mark.zk]

AUTO = "auto.leader.rebalance.enable"


@pytest.fixture(scope="module")
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    return make_cluster(2, audit=True, broker_config={"leader.imbalance.check.interval.seconds": "1"})


@pytest.fixture
def audit(cluster: LocalCluster) -> Iterator[object]:
    from sqlalchemy import create_engine

    engine = create_engine(str(cluster.audit_url))
    yield engine
    engine.dispose()


def set_cluster_default(cluster: LocalCluster, config: dict[str, str]) -> None:
    cluster.store.set_or_create_entity_config("brokers", "<default>", config)
    cluster.store.create_config_change_notification("brokers/<default>")


def count(engine: object, kind: str, broker: int, since_ms: int, detail: str) -> int:
    from sqlalchemy import text

    query = text(
        "SELECT count(*) FROM controller_events WHERE kind = :k AND broker_id = :b "
        "AND started_ms > :t AND detail LIKE :d"
    )
    with engine.connect() as conn:  # type: ignore[attr-defined]
        return int(conn.execute(query, {"k": kind, "b": broker, "t": since_ms, "d": detail}).scalar_one())


def test_no_preferred_election_while_paused_and_one_after_resume(
    cluster: LocalCluster, audit: object
) -> None:
    c = cluster.controller()[0]
    assert c is not None
    other = next(b for b in cluster.broker_ids if b != c)

    paused_ms = int(time.time() * 1000) - 1
    set_cluster_default(cluster, {AUTO: "false"})
    cluster.waits.wait_until(
        lambda: count(audit, "dynamic_config", c, paused_ms, f"{AUTO}=false (cluster default)%") > 0,
        TIMEOUT,
        f"controller {c} to follow the paused cluster default",
    )

    # Imbalance: the preferred replica comes back into the ISR while the controller leads.
    cluster.create_topic("paused", {0: [other, c]})
    wait_state(cluster, "paused", 0, leader=other, isr=(other, c))
    cluster.stop_broker(other, timeout=TIMEOUT)
    wait_state(cluster, "paused", 0, leader=c)
    cluster.start_broker(other, timeout=TIMEOUT)
    _, _, epoch, _ = wait_state(cluster, "paused", 0, leader=c, isr=(other, c))
    imbalanced_ms = int(time.time() * 1000)

    cluster.waits.wait_until(
        lambda: count(audit, "rebalance_paused", c, imbalanced_ms, "1 partition(s) left%") >= 2,
        TIMEOUT,
        "two auto-rebalance checks that held the imbalanced partition back",
    )
    assert state(cluster, "paused")[1:3] == (c, epoch)

    set_cluster_default(cluster, {})  # resume: what resume_auto_rebalance(None) writes
    _, _, leader_epoch, isr = wait_state(cluster, "paused", 0, leader=other)
    assert leader_epoch == epoch + 1  # one election, by the auto rebalance
    assert set(isr) == {other, c}
