"""Operators: thin and templated; each records an ``operations`` row around its work."""

from kafka_controller.airflow.operators.base import KafkaOperationOperator
from kafka_controller.airflow.operators.cluster import (
    BrokerLifecycleOperator,
    ControlledShutdownOperator,
    ControllerFailoverDrillOperator,
    RollingRestartOperator,
)
from kafka_controller.airflow.operators.elections import (
    PreferredLeaderElectionOperator,
    RecoverOfflinePartitionsOperator,
)
from kafka_controller.airflow.operators.reassignment import (
    ExecuteReassignmentOperator,
    GenerateReassignmentOperator,
)
from kafka_controller.airflow.operators.reports import (
    AuditReportOperator,
    SnapshotExportOperator,
    SparkReconciliationOperator,
)

__all__ = [
    "AuditReportOperator",
    "BrokerLifecycleOperator",
    "ControlledShutdownOperator",
    "ControllerFailoverDrillOperator",
    "ExecuteReassignmentOperator",
    "GenerateReassignmentOperator",
    "KafkaOperationOperator",
    "PreferredLeaderElectionOperator",
    "RecoverOfflinePartitionsOperator",
    "RollingRestartOperator",
    "SnapshotExportOperator",
    "SparkReconciliationOperator",
]
