"""Daily audit report (JSON and self-contained HTML): transitions, failures, unclean elections,
operations, failover recovery times. The same report is served live by the plugin's web app."""

import pendulum
from airflow.sdk import DAG, Param

from kafka_controller.airflow.dag_ids import AUDIT_REPORT
from kafka_controller.airflow.operators.reports import AuditReportOperator

with DAG(
    AUDIT_REPORT,
    description="Write the audit report",
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
        "since_hours": Param(
            24, type=["integer", "null"], minimum=1, description="Window (null: everything)."
        ),
    },
    doc_md=__doc__,
):
    AuditReportOperator(
        task_id="report", output_dir="{{ params.output_dir }}", since_hours="{{ params.since_hours }}"
    )
