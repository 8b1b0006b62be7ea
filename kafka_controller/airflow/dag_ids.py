"""The DAG ids this package ships in ``dags/`` (the listener records their outcomes)."""

from __future__ import annotations

CONTROLLER_FAILOVER_DRILL = "controller_failover_drill"
ROLLING_CONTROLLED_SHUTDOWN = "rolling_controlled_shutdown"
PARTITION_REASSIGNMENT = "partition_reassignment"
PREFERRED_LEADER_REBALANCE = "preferred_leader_rebalance"
RECOVER_OFFLINE_PARTITIONS = "recover_offline_partitions"
PARTITION_STATE_RECONCILIATION = "partition_state_reconciliation"
AUDIT_REPORT = "audit_report"

DAG_IDS: frozenset[str] = frozenset(
    {
        CONTROLLER_FAILOVER_DRILL,
        ROLLING_CONTROLLED_SHUTDOWN,
        PARTITION_REASSIGNMENT,
        PREFERRED_LEADER_REBALANCE,
        RECOVER_OFFLINE_PARTITIONS,
        PARTITION_STATE_RECONCILIATION,
        AUDIT_REPORT,
    }
)
