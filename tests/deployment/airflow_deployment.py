"""A real Airflow deployment for tests: api-server, scheduler, dag-processor and triggerer as separate
processes on 127.0.0.1, a PostgreSQL metadata database of its own, LocalExecutor.

It is configured the way the README's quick-start says: connections added with ``airflow connections
add``, the plugin's ``[kafka_controller] audit_url`` in ``airflow.cfg``, DAGs triggered through the
REST API (``simple_auth_manager_all_admins``: every request is an admin's, as on a laptop). Every
process logs to ``<home>/logs/<component>.log``; a component that dies fails the wait in progress
with the tail of its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
PG_ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=test"
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/{db}"
FINISHED = ("success", "failed")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def private_database(prefix: str) -> Iterator[str]:
    """A database of the test's own on the machine's PostgreSQL; dropped afterwards. Yields its URL."""
    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_URL.format(db=name)
    finally:
        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class DeploymentError(AssertionError):
    """A component died or a wait ran out; the message carries what the logs said."""


class AirflowDeployment:
    def __init__(
        self,
        home: Path,
        *,
        metadata_url: str,
        dags: Path,
        plugins: Path,
        plugin_config: Mapping[str, str],
        extra_env: Mapping[str, str] | None = None,
    ) -> None:
        self.home = home
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.logs = home / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        (home / "airflow.cfg").write_text(
            "[kafka_controller]\n" + "".join(f"{k} = {v}\n" for k, v in plugin_config.items())
        )
        base = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        self.env = {
            **base,
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": metadata_url,
            # psycopg 3 serves Airflow's async engine too (its default would want asyncpg)
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": metadata_url,
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(plugins),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
            "AIRFLOW__API__BASE_URL": self.base_url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            # only the runs the tests trigger: unpausing a daily DAG would also start its latest
            # interval's run, which on 2 cores competes with the triggered one (a second Spark job)
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PYTHONWARNINGS": "ignore",
            **dict(extra_env or {}),
        }
        self.client = httpx.Client(base_url=self.base_url, timeout=30.0)

    # -- the CLI, as an operator runs it ----------------------------------------------------------------
    def cli(self, *args: str, timeout_s: float = 180.0) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "airflow", *args],
            env=self.env,
            capture_output=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-15:]
            raise DeploymentError(
                f"airflow {' '.join(args[:3])} exited {done.returncode}:\n" + "\n".join(tail)
            )
        return done.stdout.decode(errors="replace")

    def add_connection(
        self, conn_id: str, conn_type: str, *, extra: Mapping[str, Any], **fields: str
    ) -> None:
        args = ["connections", "add", conn_id, "--conn-type", conn_type, "--conn-extra", json.dumps(extra)]
        for name, value in fields.items():
            args.append(f"--conn-{name}={value}")  # one argument: a value may begin with "-"
        self.cli(*args)

    # -- processes ------------------------------------------------------------------------------------------
    def start(self) -> None:
        for name in COMPONENTS:
            log = (self.logs / f"{name}.log").open("ab")
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "airflow", name],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            log.close()

    def dead(self) -> dict[str, int]:
        return {n: p.returncode for n, p in self.procs.items() if p.poll() is not None}

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.logs / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def check_alive(self) -> None:
        dead = self.dead()
        if dead:
            name, rc = next(iter(dead.items()))
            raise DeploymentError(f"airflow {name} exited {rc}; its log ends:\n{self.log_tail(name)}")

    def stop(self) -> None:
        for p in self.procs.values():
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for p in self.procs.values():
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait(5)
        self.client.close()

    # -- waiting ------------------------------------------------------------------------------------------
    def wait(self, probe: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 1.0) -> Any:
        """Poll ``probe`` until truthy; fails early when a component dies."""
        deadline = time.monotonic() + timeout_s
        last: object = None
        while True:
            self.check_alive()
            try:
                value = probe()
                if value:
                    return value
                last = value
            except (httpx.HTTPError, KeyError, ValueError) as e:
                last = e
            if time.monotonic() > deadline:
                raise DeploymentError(f"timed out after {timeout_s:g}s waiting for {what} (last: {last!r})")
            time.sleep(interval_s)

    def healthy(self, timeout_s: float = 180.0) -> dict[str, Any]:
        def probe() -> dict[str, Any] | None:
            health: dict[str, Any] = self.client.get("/api/v2/monitor/health").json()
            parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
            ok = all((health.get(p) or {}).get("status") == "healthy" for p in parts)
            return health if ok else None

        result: dict[str, Any] = self.wait(probe, timeout_s, "every component to report healthy")
        return result

    # -- REST API -------------------------------------------------------------------------------------------
    def get(self, path: str, **params: Any) -> Any:
        r = self.client.get(f"/api/v2{path}", params=params or None)
        r.raise_for_status()
        return r.json()

    def wait_dag(self, dag_id: str, timeout_s: float = 120.0) -> None:
        def parsed() -> bool:
            return self.client.get(f"/api/v2/dags/{dag_id}").status_code == 200

        self.wait(parsed, timeout_s, f"the dag-processor to parse {dag_id}")

    def trigger(self, dag_id: str, conf: Mapping[str, Any]) -> str:
        self.client.patch(f"/api/v2/dags/{dag_id}", json={"is_paused": False}).raise_for_status()
        r = self.client.post(
            f"/api/v2/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": dict(conf)}
        )
        if r.status_code >= 400:
            raise DeploymentError(f"triggering {dag_id} answered {r.status_code}: {r.text[:500]}")
        run_id: str = r.json()["dag_run_id"]
        return run_id

    def wait_run(self, dag_id: str, run_id: str, timeout_s: float) -> str:
        def finished() -> str | None:
            state = str(self.get(f"/dags/{dag_id}/dagRuns/{run_id}")["state"])
            return state if state in FINISHED else None

        state: str = self.wait(finished, timeout_s, f"run {run_id} of {dag_id} to finish", interval_s=2.0)
        return state

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        tis = self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")["task_instances"]
        return {t["task_id"]: str(t["state"]) for t in tis}

    def xcom(self, dag_id: str, run_id: str, task_id: str) -> Any:
        entry = self.get(
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/xcomEntries/return_value",
            deserialize=True,
        )
        value = entry["value"]
        return json.loads(value) if isinstance(value, str) and value[:1] in "{[" else value

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        r = self.client.get(
            f"/api/v2/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            headers={"Accept": "application/json"},
        )
        r.raise_for_status()
        content = r.json().get("content", [])
        if isinstance(content, list):
            return "\n".join(str(c.get("event", c)) if isinstance(c, dict) else str(c) for c in content)
        return str(content)
