"""Ctrl-C (SIGINT) while a command waits: one line saying what was interrupted and what is left undone,
exit 130, no traceback. Real processes, interrupted once they say they are waiting."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafka_controller.domain.values import Broker, EndPoint, ReplicaAssignment
from kafka_controller.zk.kazoo_backend import KazooMetadataStore

pytestmark = pytest.mark.zk


@pytest.fixture
def store(zk_connect: str) -> Iterator[KazooMetadataStore]:
    """Brokers 1 and 2 registered (no controller); topic ``doomed`` on brokers 9+2 and 9+1, ``t`` on 1."""
    s = KazooMetadataStore(zk_connect)
    for b in (1, 2):
        s.register_broker(Broker(b, (EndPoint("127.0.0.1", 9000 + b),)))
    s.create_topic("doomed", {0: ReplicaAssignment.of([9, 2]), 1: ReplicaAssignment.of([9, 1])})
    s.create_topic("t", {0: ReplicaAssignment.of([1])})
    yield s
    s.close()


class Cli:
    """``kafka-controller`` in a child process, its stderr read line by line on a thread."""

    def __init__(self, *argv: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kafka_controller.cli.main", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for_line(self, prefix: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                raise AssertionError(f"exited ({self.proc.wait()}) before {prefix!r}; stderr: {self.seen}")
            self.seen.append(line)
            if line.startswith(prefix):
                return line
        self.proc.kill()
        raise AssertionError(f"no line {prefix!r} within {timeout}s; stderr: {self.seen}")

    def interrupt(self, timeout: float = 30.0) -> tuple[int, str, list[str]]:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.seen.append(line)
        assert self.proc.stdout is not None
        return code, self.proc.stdout.read(), self.seen


def test_interrupting_topics_delete_wait(
    store: KazooMetadataStore, zk_connect: str, zk_admin_client: KazooClient, zk_chroot: str
) -> None:
    cli = Cli(
        "topics", "delete", "--zookeeper", zk_connect, "--topic", "doomed", "--wait", "--timeout", "120"
    )
    waiting = cli.wait_for_line("kafka-controller topics: waiting for topic doomed to be deleted: ")
    assert waiting.endswith(
        "replicas not confirmed on broker 9 (not registered; partitions 0, 1), "
        "broker 1 (registered; partition 1), broker 2 (registered; partition 0); no controller is active"
    )
    code, out, err = cli.interrupt()
    assert code == 130
    assert out == ""
    assert err == [
        waiting,
        "kafka-controller topics delete: interrupted: "
        "deletion of topic doomed is still queued in /admin/delete_topics/doomed",
    ]
    assert zk_admin_client.exists(f"{zk_chroot}/admin/delete_topics/doomed") is not None


def test_interrupting_reassign_execute_wait(
    store: KazooMetadataStore, zk_connect: str, zk_admin_client: KazooClient, zk_chroot: str, tmp_path: Path
) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,1]}]}')
    cli = Cli(
        "reassign",
        "--zookeeper",
        zk_connect,
        "--execute",
        "--legacy-znode",
        "--wait",
        "--reassignment-json-file",
        str(plan),
        "--timeout",
        "120",
    )
    moving = f"the reassignment of 1 partition(s) in {plan}"
    waiting = cli.wait_for_line("kafka-controller reassign: waiting up to 120s for ")
    assert waiting == f"kafka-controller reassign: waiting up to 120s for {moving} to complete"
    code, _out, err = cli.interrupt()
    assert code == 130
    assert err == [
        waiting,
        f"kafka-controller reassign: interrupted: {moving} was started and goes on in the controller; "
        "`reassign --verify` shows it, `reassign --cancel` stops it",
    ]
    assert zk_admin_client.exists(f"{zk_chroot}/admin/reassign_partitions") is not None


def test_interrupting_a_connection_attempt_changes_nothing() -> None:
    """A "server" that accepts and never answers: the child is connecting once it is accepted."""
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(30)
        port = server.getsockname()[1]
        cli = Cli("describe", "--zookeeper", f"127.0.0.1:{port}", "--timeout", "120")
        conn, _ = server.accept()
        with conn:
            code, out, err = cli.interrupt()
    assert (code, out, err) == (130, "", ["kafka-controller describe: interrupted: nothing was changed"])


def test_interrupting_elect_while_the_controller_is_asked(zk_connect: str) -> None:
    """The controller's listener accepts and never answers: the request is in flight once accepted."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(30)
        s = KazooMetadataStore(zk_connect)
        try:
            s.register_broker(Broker(1, (EndPoint("127.0.0.1", listener.getsockname()[1]),)))
            s.create_topic("t", {0: ReplicaAssignment.of([1])})
            s.register_controller_and_increment_controller_epoch(1)
            cli = Cli(
                "elect", "--zookeeper", zk_connect, "--election-type", "preferred", "--all-topic-partitions",
                "--timeout", "120",
            )  # fmt: skip
            conn, _ = listener.accept()
            with conn:
                code, out, err = cli.interrupt()
        finally:
            s.close()
    assert (code, out) == (130, "")
    assert err == [
        "kafka-controller elect: interrupted: the preferred election of every partition may have been "
        "requested from the controller and may go on; check the leaders with `kafka-controller describe`"
    ]
