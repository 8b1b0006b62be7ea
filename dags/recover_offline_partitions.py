"""Guarded recovery of offline partitions by unclean election (committed data may be lost).

The run must name the exact partitions and set ``confirm_unclean``; partitions that are not
offline, or have no live replica, are refused. The dry run (the default) shows who would lead each.
"""

import pendulum
from airflow.sdk import DAG, Param

from kafka_controller.airflow.dag_ids import RECOVER_OFFLINE_PARTITIONS
from kafka_controller.airflow.operators.elections import RecoverOfflinePartitionsOperator
from kafka_controller.airflow.params import TP_PATTERN, common_params

with DAG(
    RECOVER_OFFLINE_PARTITIONS,
    description="Unclean election for named offline partitions (guarded)",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka-controller"],
    render_template_as_native_obj=True,
    params={
        **common_params(),
        "partitions": Param(
            [],
            type="array",
            items={"type": "string", "pattern": TP_PATTERN},
            minItems=1,
            uniqueItems=True,
            description="The offline partitions, as TOPIC-PARTITION (never all).",
        ),
        "confirm_unclean": Param(
            False, type="boolean", description="I accept that committed data may be lost."
        ),
    },
    doc_md=__doc__,
):
    RecoverOfflinePartitionsOperator(
        task_id="recover",
        dry_run="{{ params.dry_run }}",
        requester="{{ params.requester }}",
        reason="{{ params.reason }}",
        partitions="{{ params.partitions }}",
        confirm_unclean="{{ params.confirm_unclean }}",
    )
