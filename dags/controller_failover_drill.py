"""Weekly controller-failover drill: the controller is lost (``method``: it resigns by a fenced delete
of /controller, or its broker is killed with SIGKILL and started again afterwards); the run measures,
from the loss, until a new epoch leads every partition that has a live in-sync replica.

Dry run by default (the in-memory controller's failover on a copy of the metadata); set the
``dry_run`` param default to false once the plan looks right.
"""

import pendulum
from airflow.sdk import DAG, Param

from kafka_controller.airflow.dag_ids import CONTROLLER_FAILOVER_DRILL
from kafka_controller.airflow.operators.cluster import ControllerFailoverDrillOperator
from kafka_controller.airflow.params import common_params

with DAG(
    CONTROLLER_FAILOVER_DRILL,
    description="Make the controller resign and time the recovery",
    schedule="@weekly",
    start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    tags=["kafka-controller"],
    render_template_as_native_obj=True,
    params={
        **common_params(),
        "timeout_s": Param(
            120,
            type="integer",
            minimum=1,
            maximum=3600,
            description="Seconds to wait for a new controller, then again for every partition to "
            "be led (and, with kill, for the broker to be back); past either the run fails.",
        ),
        "method": Param(
            "resign",
            type="string",
            enum=["resign", "kill"],
            description="resign: delete /controller; the controller steps down, its broker stays up, "
            "a new controller is elected within a second. kill: SIGKILL the controller's broker (a "
            "crash), then start it again; the cluster notices when ZooKeeper ends the dead broker's "
            "session: at once when a supervisor closes it (kafka-controller cluster up, the README's "
            "systemd unit), else after zookeeper.session.timeout.ms (Kafka's default: 18 s).",
        ),
    },
    doc_md=__doc__,
):
    ControllerFailoverDrillOperator(
        task_id="failover_drill",
        dry_run="{{ params.dry_run }}",
        requester="{{ params.requester }}",
        reason="{{ params.reason }}",
        timeout_s="{{ params.timeout_s }}",
        method="{{ params.method }}",
    )
