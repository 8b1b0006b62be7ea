"""The DAGs folder: imports cleanly, every DAG is what the issue asks, params refuse bad input."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kafka_controller.airflow.dag_ids import DAG_IDS

pytestmark = pytest.mark.airflow

MUTATING = {
    "controller_failover_drill",
    "rolling_controlled_shutdown",
    "partition_reassignment",
    "preferred_leader_rebalance",
    "recover_offline_partitions",
}
SCHEDULED = {
    "controller_failover_drill",
    "preferred_leader_rebalance",
    "partition_state_reconciliation",
    "audit_report",
}


@pytest.fixture(scope="module")
def dagbag(airflow_db) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    from tests.airflow.support import REPO

    return DagBag(dag_folder=str(REPO / "dags"))


def test_dags_import_without_errors(dagbag) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == DAG_IDS


def test_schedules_tags_and_dry_run_defaults(dagbag) -> None:
    for dag_id in DAG_IDS:
        dag = dagbag.get_dag(dag_id)
        assert "kafka-controller" in dag.tags
        assert (dag.schedule is not None) == (dag_id in SCHEDULED), dag_id
        if dag_id in MUTATING:
            assert dag.params["dry_run"] is True, f"{dag_id} must default to a dry run"


def _validate(dag: Any, conf: dict[str, Any]) -> None:
    params = copy.deepcopy(dag.params)
    for key, value in conf.items():
        params[key] = value
    params.validate()


@pytest.mark.parametrize(
    ("dag_id", "conf", "message"),
    [
        ("recover_offline_partitions", {"partitions": []}, "partitions"),
        ("recover_offline_partitions", {"partitions": ["orders"]}, "partitions"),
        ("rolling_controlled_shutdown", {"brokers": [1, 1]}, "brokers"),
        ("rolling_controlled_shutdown", {"catch_up_timeout_s": 0}, "catch_up_timeout_s"),
        ("rolling_controlled_shutdown", {"demote": "politely"}, "demote"),
        ("partition_reassignment", {"max_movements_per_broker": 0}, "max_movements_per_broker"),
        ("partition_reassignment", {"throttle": -5}, "throttle"),
        ("preferred_leader_rebalance", {"dry_run": "maybe"}, "dry_run"),
    ],
)
def test_trigger_form_refuses_bad_params_with_the_param_named(
    dagbag, dag_id: str, conf: dict, message: str
) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match=message):
        _validate(dagbag.get_dag(dag_id), conf)


def test_good_params_pass(dagbag) -> None:
    _validate(
        dagbag.get_dag("recover_offline_partitions"), {"partitions": ["orders-0"], "confirm_unclean": True}
    )
    _validate(
        dagbag.get_dag("partition_reassignment"), {"topics": ["t"], "broker_list": [1, 2], "throttle": 1000}
    )


def test_the_rolling_restart_takes_demote_and_passes_it_on(dagbag) -> None:
    from kafka_controller.airflow.demote import DEMOTE_MODES

    dag = dagbag.get_dag("rolling_controlled_shutdown")
    assert dag.params["demote"] == "controlled_shutdown"
    assert dag.params.get_param("demote").schema["enum"] == list(DEMOTE_MODES)
    _validate(dag, {"demote": "reorder"})
    assert dag.get_task("rolling_restart").demote == "{{ params.demote }}"


def test_parameter_descriptions_say_what_happens(dagbag) -> None:
    """The kill drill's outage is said as it is: at once under a supervisor, else the session timeout."""
    method = dagbag.get_dag("controller_failover_drill").params.get_param("method").description
    assert "about the session timeout" not in method
    assert "at once when a supervisor closes it" in method and "zookeeper.session.timeout.ms" in method
