"""Partition reassignment: generate (or check a given plan) with movement caps, execute in batches
with an optional replication throttle, verify with a deferrable sensor that removes the throttle.

Give ``plan`` (Kafka's reassignment JSON) or ``topics`` with ``broker_list``. A retried execute task
reconnects to the reassignment in flight; killing it cancels what is in flight. A broker of the plan
that dies meanwhile stops the run at once, naming it. Dry run by default.
"""

import pendulum
from airflow.sdk import DAG, Param

from kafka_controller.airflow.dag_ids import PARTITION_REASSIGNMENT
from kafka_controller.airflow.operators.reassignment import (
    ExecuteReassignmentOperator,
    GenerateReassignmentOperator,
)
from kafka_controller.airflow.params import broker_list_param, common_params
from kafka_controller.airflow.sensors import ReassignmentSensor

with DAG(
    PARTITION_REASSIGNMENT,
    description="Generate, execute in batches, and verify a partition reassignment",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka-controller"],
    render_template_as_native_obj=True,
    params={
        **common_params(),
        "plan": Param(
            None, type=["object", "null"], description='Kafka reassignment JSON: {"partitions": [...]}.'
        ),
        "topics": Param(
            [], type="array", items={"type": "string", "minLength": 1}, description="Topics to move."
        ),
        "broker_list": broker_list_param("Brokers the topics may use."),
        "max_movements_per_broker": Param(5, type="integer", minimum=1, description="Per batch and broker."),
        "max_cluster_movements": Param(
            1250, type="integer", minimum=1, description="Per batch, cluster-wide."
        ),
        "throttle": Param(
            None,
            type=["integer", "null"],
            minimum=1,
            description="Replication throttle in bytes/s on the moving replicas while they catch up; "
            "removed by the verify task, or by the execute task when it is killed. null: none.",
        ),
    },
    doc_md=__doc__,
):
    common = {
        "dry_run": "{{ params.dry_run }}",
        "requester": "{{ params.requester }}",
        "reason": "{{ params.reason }}",
    }
    generate = GenerateReassignmentOperator(
        task_id="generate",
        plan="{{ params.plan }}",
        topics="{{ params.topics }}",
        broker_list="{{ params.broker_list }}",
        max_movements_per_broker="{{ params.max_movements_per_broker }}",
        max_cluster_movements="{{ params.max_cluster_movements }}",
        **common,
    )
    execute = ExecuteReassignmentOperator(
        task_id="execute",
        plan="{{ ti.xcom_pull(task_ids='generate')['plan'] }}",
        batches="{{ ti.xcom_pull(task_ids='generate')['batches'] }}",
        throttle="{{ params.throttle }}",
        retries=2,
        **common,
    )
    verify = ReassignmentSensor(
        task_id="verify",
        plan="{{ ti.xcom_pull(task_ids='generate')['plan'] }}",
        dry_run="{{ params.dry_run }}",
        deferrable=True,
    )
    generate >> execute >> verify
