"""A private, throw-away Airflow for the demo: its own ``AIRFLOW_HOME`` and SQLite metadata DB, the
project's ``dags/``, connections as ``AIRFLOW_CONN_*`` variables, quiet logs.

Airflow reads its configuration once, when it is first imported, so ``enter`` must run before
anything imports it. Every ``AIRFLOW_*`` variable already in the environment is dropped first: a
user's ``AIRFLOW__DATABASE__SQL_ALCHEMY_CONN``, ``AIRFLOW_CONFIG`` or secrets backend must never
send the demo's ``initdb`` or connection look-ups to their real Airflow.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import kafka_controller
from kafka_controller.airflow.connections import (
    DEFAULT_AUDIT_CONN_ID,
    DEFAULT_CLUSTER_CONN_ID,
    audit_conn_json,
    cluster_conn_json,
    conn_env_var,
)
from kafka_controller.airflow.dag_ids import CONTROLLER_FAILOVER_DRILL, ROLLING_CONTROLLED_SHUTDOWN
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError

if TYPE_CHECKING:
    from airflow.sdk import DAG

#: The DAG files the demo runs; ``dags_folder`` checks they are there.
DEMO_DAGS = (CONTROLLER_FAILOVER_DRILL, ROLLING_CONTROLLED_SHUTDOWN)
#: Dropped before the demo's own settings go in (see the module docstring).
_FOREIGN_PREFIXES = ("AIRFLOW_", "KAFKA_CONTROLLER_AUDIT_CONN_ID")


class AirflowDemoError(KafkaControllerError):
    """The Airflow demo cannot run here, or one of its DAG runs failed; the message says which."""


def source_root() -> Path:
    """The directory holding the ``kafka_controller`` package: the checkout in an editable install."""
    return Path(kafka_controller.__file__).resolve().parent.parent


def dags_folder(given: str | Path | None = None) -> Path:
    """The folder with the demo's DAG files: ``given``, or the checkout's ``dags/``. The DAG files
    are not part of the wheel, so a non-editable install has none: say so in one line."""
    folder = Path(given).resolve() if given is not None else source_root() / "dags"
    missing = [f"{d}.py" for d in DEMO_DAGS if not (folder / f"{d}.py").is_file()]
    if not missing:
        return folder
    if given is not None:
        raise InvalidArgumentError(f"bad --dags-folder {given}: no {', '.join(missing)} in it")
    raise AirflowDemoError(
        f"the Airflow demo needs the project's DAG files and {folder} has no {missing[0]} "
        "(a non-editable install): pass --dags-folder DIR of a checkout, or use --scenario scripted"
    )


def plugins_folder(home: Path) -> Path:
    """The checkout's ``plugins/`` (its shim only exports the plugin when the entry point is
    missing), else an empty folder: the installed entry point registers the plugin anyway."""
    folder = source_root() / "plugins"
    if folder.is_dir():
        return folder
    empty = home / "plugins"
    empty.mkdir(parents=True, exist_ok=True)
    return empty


def environment(home: Path, dags: Path, plugins: Path) -> dict[str, str]:
    """The settings ``tests/airflow/conftest.py`` uses, plus the metadata DB spelled out."""
    return {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home / 'airflow.db'}",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
    }


def enter(home: Path, dags: Path) -> dict[str, str]:
    """Point this process's future Airflow import at ``home``; returns the variables set."""
    if "airflow" in sys.modules:
        raise AirflowDemoError("Airflow was already imported in this process; run the demo on its own")
    home.mkdir(parents=True, exist_ok=True)
    for key in [k for k in os.environ if k.startswith(_FOREIGN_PREFIXES)]:
        del os.environ[key]
    settings = environment(home, dags, plugins_folder(home))
    os.environ.update(settings)
    return settings


def set_connections(connect_string: str, chroot: str, audit_url: str, lifecycle_dir: Path) -> dict[str, str]:
    """The default cluster and audit connections, with the ``local`` lifecycle backend so that
    DAG tasks can stop and start the brokers; returns ``{conn_id: redacted description}``."""
    # Imported on use: SQLAlchemy is optional (the 'audit' extra); the CLI imports this module for
    # dags_folder() and the demo's refusals, which run without it.
    from kafka_controller.audit.engine import redacted

    lifecycle = {"type": "local", "state_dir": str(lifecycle_dir)}
    os.environ[conn_env_var(DEFAULT_CLUSTER_CONN_ID)] = cluster_conn_json(
        connect_string, chroot, lifecycle=lifecycle
    )
    os.environ[conn_env_var(DEFAULT_AUDIT_CONN_ID)] = audit_conn_json(audit_url)
    return {
        DEFAULT_CLUSTER_CONN_ID: f"ZooKeeper {connect_string}{chroot}, lifecycle local",
        DEFAULT_AUDIT_CONN_ID: redacted(audit_url),
    }


def quiet_python_warnings() -> None:
    """Airflow routes ``warnings`` into its log; the demo's reader does not need its deprecations."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=PendingDeprecationWarning)
    warnings.filterwarnings("ignore", module="fastapi")


def import_airflow() -> str:
    """Import Airflow (it configures itself from the environment ``enter`` set); its version."""
    quiet_python_warnings()
    import airflow

    return str(airflow.__version__)


def init_metadata_db() -> float:
    """Create Airflow's metadata DB in the private home; the seconds it took."""
    from airflow.utils.db import initdb

    started = time.monotonic()
    initdb()
    return time.monotonic() - started


def load_dags(folder: Path) -> dict[str, DAG]:
    """The demo's DAGs parsed from ``folder``; an import error is one line naming the file."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(folder))
    out: dict[str, DAG] = {}
    for dag_id in DEMO_DAGS:
        dag = bag.dags.get(dag_id)
        if dag is None:
            errors = bag.import_errors.get(str(folder / f"{dag_id}.py"), "")
            first = errors.strip().splitlines()[-1] if errors.strip() else "no such DAG in it"
            raise AirflowDemoError(f"cannot load DAG {dag_id} from {folder}: {first}")
        out[dag_id] = dag
    return out


def warm_task_api() -> float:
    """Build Airflow's in-process task execution API now, while the cluster is still starting: the
    first ``dag.test()`` would otherwise spend 5-8 s generating its versioned FastAPI routes. Best
    effort (``in_process_api_server`` is Airflow's own cached instance, not a public API): if it
    moves, the first run pays the cost as before. Returns the seconds spent."""
    started = time.monotonic()
    with contextlib.suppress(Exception):
        import httpx
        from airflow.sdk.execution_time.supervisor import in_process_api_server

        transport = in_process_api_server().transport
        httpx.Client(transport=transport, base_url="http://in-process.invalid./").get("/health")
    return time.monotonic() - started


def write_env_file(path: Path) -> Path:
    """``export`` lines for this process's Airflow settings and connections (mode 0600: a
    connection may hold a password), so that a shell can use the demo's Airflow afterwards."""
    wanted = [k for k in os.environ if k == "AIRFLOW_HOME" or k.startswith(("AIRFLOW__", "AIRFLOW_CONN_"))]
    lines = [f"export {k}={shlex.quote(os.environ[k])}" for k in sorted(wanted)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path
