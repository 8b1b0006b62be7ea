"""Hourly preferred-leader election (all partitions, or the given topics or partitions), as
``kafka-leader-election --election-type preferred``. Dry run by default."""

import pendulum
from airflow.sdk import DAG, Param

from kafka_controller.airflow.dag_ids import PREFERRED_LEADER_REBALANCE
from kafka_controller.airflow.operators.elections import PreferredLeaderElectionOperator
from kafka_controller.airflow.params import common_params, partitions_param

with DAG(
    PREFERRED_LEADER_REBALANCE,
    description="Move leadership back to preferred replicas",
    schedule="@hourly",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka-controller"],
    render_template_as_native_obj=True,
    params={
        **common_params(),
        "topics": Param(
            [], type="array", items={"type": "string", "minLength": 1}, description="Empty: all."
        ),
        "partitions": partitions_param("TOPIC-PARTITION entries (instead of topics)."),
    },
    doc_md=__doc__,
):
    PreferredLeaderElectionOperator(
        task_id="preferred_election",
        dry_run="{{ params.dry_run }}",
        requester="{{ params.requester }}",
        reason="{{ params.reason }}",
        topics="{{ params.topics }}",
        partitions="{{ params.partitions }}",
    )
