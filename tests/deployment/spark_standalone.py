"""A Spark standalone cluster on 127.0.0.1: one master and one worker, started from the pyspark
package's own ``spark-class`` (no download), as a user who outgrows ``local[N]`` would run one."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from tests.deployment.airflow_deployment import DeploymentError, free_port


class SparkStandalone:
    def __init__(self, work: Path, *, cores: int = 1, memory: str = "1g") -> None:
        self.work = work
        self.port, self.ui_port, self.worker_ui_port = free_port(), free_port(), free_port()
        self.master_url = f"spark://127.0.0.1:{self.port}"
        self.cores, self.memory = cores, memory
        self.procs: list[subprocess.Popen[bytes]] = []

    def _spark_class(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        spark_class = Path(sys.executable).with_name("spark-class")
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_WORKER_DIR": str(self.work / "worker"),
            "SPARK_LOG_DIR": str(self.work / "logs"),
            "PYSPARK_PYTHON": sys.executable,
        }
        log = (self.work / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            [str(spark_class), *args],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        self.procs.append(proc)
        return proc

    def status(self) -> dict[str, Any]:
        r = httpx.get(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5.0)
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data

    def completed_apps(self) -> list[dict[str, Any]]:
        return list(self.status().get("completedapps", []))

    def __enter__(self) -> SparkStandalone:
        self.work.mkdir(parents=True, exist_ok=True)
        self._spark_class(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.ui_port),
        )  # fmt: skip
        self._spark_class(
            "worker",
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
            "--webui-port", str(self.worker_ui_port),
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while True:
            dead = [p for p in self.procs if p.poll() is not None]
            if dead:
                raise DeploymentError(
                    f"a Spark process exited: {(self.work / 'master.log').read_text()[-2000:]}"
                )
            with contextlib.suppress(httpx.HTTPError, ValueError):
                if any(w.get("state") == "ALIVE" for w in self.status().get("workers", [])):
                    return self
            if time.monotonic() > deadline:
                raise DeploymentError("the Spark worker did not register with the master in 120 s")
            time.sleep(0.5)

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
