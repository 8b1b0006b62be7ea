"""``AuditStoreHook.record_transitions`` takes bulk records too: every row stored, each a plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from kafka_controller.airflow.connections import AuditConnection
from kafka_controller.airflow.hooks.audit import AuditStoreHook
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.schema import partition_transitions, replica_transitions
from kafka_controller.domain.audit_records import PartitionTransition, ReplicaTransitionColumns

pytestmark = pytest.mark.airflow


def test_bulk_and_single_records_are_all_stored_as_planned(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    upgrade_database(url)
    hook = AuditStoreHook()
    hook.__dict__["connection"] = AuditConnection("test", url, url)  # no Airflow connection needed
    bulk = ReplicaTransitionColumns("OfflineReplica", sequence=2, controller_id=-1)
    for p in range(5):
        bulk.add("t", p, 3, "OnlineReplica", 3, 1, (3, 1), (1,), 4, 5)
    single = PartitionTransition("t", 0, "OnlinePartition", "OnlinePartition", sequence=1)
    assert hook.record_transitions([single, bulk]) == 6
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            replicas = conn.execute(
                select(replica_transitions.c.partition, replica_transitions.c.dry_run)
            ).all()
            partitions = conn.execute(select(partition_transitions.c.dry_run)).scalars().all()
    finally:
        engine.dispose()
    assert sorted(replicas) == [(p, True) for p in range(5)]
    assert partitions == [True]
