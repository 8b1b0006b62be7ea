"""Daily reconciliation: snapshot ZooKeeper, the brokers' own views and the audit history to
Parquet, then run the PySpark job that checks they agree; findings land in the audit store."""

import pendulum
from airflow.sdk import DAG, Param

from kafka_controller.airflow.dag_ids import PARTITION_STATE_RECONCILIATION
from kafka_controller.airflow.operators.reports import SnapshotExportOperator, SparkReconciliationOperator

with DAG(
    PARTITION_STATE_RECONCILIATION,
    description="Snapshot the cluster and reconcile it with PySpark",
    schedule="@daily",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka-controller"],
    render_template_as_native_obj=True,
    params={
        "output_dir": Param(
            None, type=["string", "null"], description="Default: $AIRFLOW_HOME/kafka-controller."
        ),
        "master": Param(
            "local[2]", type="string", minLength=1, description="Spark master (local[N], yarn, k8s://...)."
        ),
        "spark_conn_id": Param(
            None,
            type=["string", "null"],
            description="A 'spark' connection (the Spark provider's layout, e.g. spark_default); "
            "when set it decides the master instead of 'master'.",
        ),
    },
    doc_md=__doc__,
):
    snapshot = SnapshotExportOperator(task_id="snapshot", output_dir="{{ params.output_dir }}")
    reconcile = SparkReconciliationOperator(
        task_id="reconcile",
        snapshot="{{ ti.xcom_pull(task_ids='snapshot')['snapshot'] }}",
        audit_parquet="{{ ti.xcom_pull(task_ids='snapshot')['audit_parquet'] }}",
        output_dir="{{ params.output_dir }}",
        master="{{ params.master }}",
        spark_conn_id="{{ params.spark_conn_id }}",
    )
    snapshot >> reconcile
