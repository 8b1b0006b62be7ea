"""Rolling restart with controlled shutdown: one broker at a time, the active controller last.

Before each broker: refused if stopping it would take a partition offline (RF=1, or an ISR that
has shrunk to it) or if the cluster is not healthy. After each: wait until it is back in every ISR
and nothing is under-replicated, then a preferred election for its partitions. Automatic leader
rebalance is paused for the window. A broker that dies meanwhile (its registration goes) stops the
run at once, naming it. Dry run by default.

``demote`` says how leadership leaves a broker before it stops: ``controlled_shutdown`` (this
project's brokers) or ``reorder`` (Kafka's public APIs: any ZooKeeper-mode Apache Kafka 2.4+). The
processes are stopped and started by the cluster connection's ``lifecycle`` backend.
"""

import pendulum
from airflow.sdk import DAG, Param

from kafka_controller.airflow.dag_ids import ROLLING_CONTROLLED_SHUTDOWN
from kafka_controller.airflow.demote import DEMOTE_MODES
from kafka_controller.airflow.operators.cluster import RollingRestartOperator
from kafka_controller.airflow.params import broker_list_param, common_params

with DAG(
    ROLLING_CONTROLLED_SHUTDOWN,
    description="Restart brokers one at a time, controller last",
    schedule=None,
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka-controller"],
    render_template_as_native_obj=True,
    params={
        **common_params(),
        "brokers": broker_list_param("Brokers to restart, in order (empty: all; the controller goes last)."),
        "catch_up_timeout_s": Param(
            300,
            type="integer",
            minimum=1,
            maximum=86400,
            description="Seconds to wait, per broker, for it to be back in every ISR with nothing "
            "under-replicated; past it the run fails there (a broker that dies is named at once).",
        ),
        "demote": Param(
            "controlled_shutdown",
            type="string",
            enum=list(DEMOTE_MODES),
            description="How leadership leaves each broker before it stops. controlled_shutdown: "
            "the ControlledShutdown request (this project's brokers; an Apache Kafka controller "
            "refuses it from anyone but the broker itself). reorder: the broker goes last in each "
            "replica list (no data moves) and a preferred election moves its leaderships (any "
            "ZooKeeper-mode Kafka 2.4+); the original orders are put back after the last broker.",
        ),
    },
    doc_md=__doc__,
):
    RollingRestartOperator(
        task_id="rolling_restart",
        dry_run="{{ params.dry_run }}",
        requester="{{ params.requester }}",
        reason="{{ params.reason }}",
        brokers="{{ params.brokers }}",
        catch_up_timeout_s="{{ params.catch_up_timeout_s }}",
        demote="{{ params.demote }}",
    )
