"""One real broker process (``kafka-controller broker``) and what a test reads of it from outside:
its RSS and thread count (``/proc/<pid>/status``), its CPU time (``/proc/<pid>/stat``), its log,
and whether a Kafka client (confluent-kafka) is still served."""

from __future__ import annotations

import os
import resource
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from tests.broker.helpers import wait_until

DEADLINE_S = 60.0


class BrokerProcess:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.port = port
        self.log = log

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def status(self, field: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
        raise AssertionError(f"no {field} in /proc/{self.pid}/status")

    def rss_kb(self) -> int:
        return self.status("VmRSS")

    def threads(self) -> int:
        return self.status("Threads")

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kafka_client_served(self) -> bool:
        """A Kafka client's Metadata round trip: the broker lists itself."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.port}", "socket.timeout.ms": 10000})
        metadata = admin.list_topics(timeout=20)
        return 1 in metadata.brokers


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _can_connect(port: int) -> bool:
    with suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=2):
        return True
    return False


@contextmanager
def running_broker(
    zk_connect: str, tmp_path: Path, *settings: str, nofile: int | None = None
) -> Iterator[BrokerProcess]:
    """Broker 1 on a free loopback port with ``--config`` ``settings``; ``nofile`` lowers its
    RLIMIT_NOFILE. Stopped (SIGTERM, then SIGKILL) on exit; its log is printed if the test fails."""
    port = _free_port()
    log = tmp_path / "broker-1.log"
    args = [sys.executable, "-m", "kafka_controller.cli.main", "broker", "--broker-id", "1"]
    args += ["--zookeeper", zk_connect, "--listener", f"127.0.0.1:{port}"]
    for setting in ("controlled.shutdown.enable=false", *settings):
        args += ["--config", setting]

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, preexec_fn=limit)
    broker = BrokerProcess(proc, port, log)
    try:
        up = lambda: not broker.alive() or "Registered broker 1" in broker.log_text()  # noqa: E731
        wait_until(up, "broker 1 registered", DEADLINE_S)
        assert broker.alive(), broker.log_text()[-3000:]
        wait_until(lambda: _can_connect(port), "the listener answering", DEADLINE_S)
        yield broker
    except BaseException:
        print(broker.log_text()[-6000:])
        raise
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
