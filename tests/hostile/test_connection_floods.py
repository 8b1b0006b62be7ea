"""Hostile clients against a real broker process (``kafka-controller broker`` on a real ZooKeeper).

Each test measures the broker from outside, as an operator would: RSS and thread count from
``/proc/<pid>/status``, CPU time from ``/proc/<pid>/stat``, open descriptors from
``/proc/<pid>/fd``, what it logs, and whether a Kafka client (confluent-kafka) is still served.
"""

from __future__ import annotations

import os
import re
import socket
import struct
import time
from collections.abc import Callable
from contextlib import ExitStack, closing, suppress
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_controller.transport import framing
from tests.broker.helpers import wait_until
from tests.hostile.broker_process import BrokerProcess, running_broker

pytestmark = [pytest.mark.integration, pytest.mark.zk]

MIB = 1024 * 1024
DEADLINE_S = 30.0


def open_fds(broker: BrokerProcess) -> int:
    return len(os.listdir(f"/proc/{broker.pid}/fd"))


def accepted_from(broker: BrokerProcess, ports: set[int]) -> int:
    """How many of the broker's open sockets are connections from one of our local ``ports``
    (its descriptors' socket inodes matched against ``/proc/net/tcp``): unlike a count of all its
    descriptors, not moved by a connection of its own that opens or closes meanwhile."""
    inodes = set()
    for fd in os.listdir(f"/proc/{broker.pid}/fd"):
        with suppress(OSError):
            target = os.readlink(f"/proc/{broker.pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    count = 0
    for line in Path(f"/proc/{broker.pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote_port = int(fields[2].rsplit(":", 1)[1], 16)
        if fields[9] in inodes and remote_port in ports:
            count += 1
    return count


def connect(broker: BrokerProcess, source: str = "127.0.0.1") -> socket.socket:
    sock = socket.socket()
    sock.settimeout(DEADLINE_S)
    sock.bind((source, 0))
    sock.connect(broker.address)
    return sock


def closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def peak_over(seconds: float, sample: Callable[[], int]) -> int:
    """The largest of samples taken every 50 ms for ``seconds`` (a measurement, not a wait)."""
    end, peak = time.monotonic() + seconds, sample()
    while time.monotonic() < end:
        time.sleep(0.05)
        peak = max(peak, sample())
    return peak


def test_announced_frames_cost_what_arrives_not_what_is_announced(zk_connect: str, tmp_path: Path) -> None:
    """16 connections each announce a 100 MiB frame and send one byte: < 64 MB more RSS."""
    with running_broker(zk_connect, tmp_path) as broker, ExitStack() as stack:
        assert broker.kafka_client_served()  # the client path loaded before the baseline
        before_kb = peak_over(0.5, broker.rss_kb)
        ports = set()
        for _ in range(16):
            sock = stack.enter_context(closing(connect(broker)))
            sock.sendall(struct.pack(">I", 100 * MIB) + b"\x00")
            ports.add(sock.getsockname()[1])
        wait_until(lambda: accepted_from(broker, ports) == 16, "the 16 connections accepted", DEADLINE_S)
        assert broker.kafka_client_served()
        after_kb = peak_over(2.0, broker.rss_kb)
        print(f"RSS before {before_kb} kB, after 16 x 100 MiB announced: {after_kb} kB")
        assert after_kb - before_kb < 64 * 1024
        assert broker.alive()


def test_two_hundred_idle_connections_cost_no_threads(zk_connect: str, tmp_path: Path) -> None:
    with running_broker(zk_connect, tmp_path) as broker, ExitStack() as stack:
        assert broker.kafka_client_served()
        threads_before = broker.threads()
        ports = {stack.enter_context(closing(connect(broker))).getsockname()[1] for _ in range(200)}
        wait_until(lambda: accepted_from(broker, ports) == 200, "200 connections accepted", DEADLINE_S)
        assert broker.kafka_client_served()
        threads_after = broker.threads()
        print(f"threads before {threads_before}, with 200 idle connections {threads_after}")
        assert threads_after <= threads_before + 2  # a Kafka client's Metadata costs no thread either
        assert threads_after < 64


def test_idle_and_stalled_connections_are_closed_after_connections_max_idle_ms(
    zk_connect: str, tmp_path: Path
) -> None:
    with (
        running_broker(zk_connect, tmp_path, "connections.max.idle.ms=1500") as broker,
        ExitStack() as stack,
    ):
        idle = stack.enter_context(closing(connect(broker)))
        stalled = stack.enter_context(closing(connect(broker)))
        stalled.sendall(struct.pack(">I", 1000) + b'{"api"')
        opened = time.monotonic()
        assert closed_by_broker(idle) and closed_by_broker(stalled)
        assert time.monotonic() - opened >= 1.0  # not at once: after the idle limit
        idle_port, stalled_port = idle.getsockname()[1], stalled.getsockname()[1]
        wait_until(lambda: f"127.0.0.1:{stalled_port}: stalled" in broker.log_text(), "the close logged")
        log = broker.log_text()
        assert (
            f"closed the connection from 127.0.0.1:{idle_port}: idle for connections.max.idle.ms=1500" in log
        )
        assert (
            f"closed the connection from 127.0.0.1:{stalled_port}: stalled mid-frame (10 of 1004 bytes)"
            in log
        )
        assert broker.kafka_client_served()


def test_max_connections_per_ip_refuses_the_next_one(zk_connect: str, tmp_path: Path) -> None:
    with (
        running_broker(zk_connect, tmp_path, "max.connections.per.ip.overrides=127.0.0.2:3") as broker,
        ExitStack() as stack,
    ):
        kept = [stack.enter_context(closing(connect(broker, "127.0.0.2"))) for _ in range(3)]
        extra = stack.enter_context(closing(connect(broker, "127.0.0.2")))
        assert closed_by_broker(extra)
        for sock in kept:  # still served: an unknown API gets its INVALID_REQUEST answer
            framing.write_frame(sock, framing.encode_request("NoSuchApi", 5, {}))
            answer = framing.read_frame(sock, MIB)
            assert answer is not None and framing.decode_response(answer)[2][0] == "INVALID_REQUEST"
        port = extra.getsockname()[1]
        wait_until(lambda: f"refused the connection from 127.0.0.2:{port}" in broker.log_text(), "logged")
        assert broker.kafka_client_served()  # from 127.0.0.1: the default limit


def shed(sock: socket.socket) -> bool:
    """Whether the broker closed this (non-blocking) connection."""
    try:
        return sock.recv(1) == b""
    except (BlockingIOError, OSError) as e:
        return isinstance(e, ConnectionResetError)


def test_running_out_of_descriptors_costs_no_busy_loop(zk_connect: str, tmp_path: Path) -> None:
    """Out of descriptors the listener stays readable: the broker must pause accepting, not spin,
    shed waiting peers one at a time (each named), and say so once per interval."""
    with running_broker(zk_connect, tmp_path, nofile=128) as broker, ExitStack() as stack:
        assert broker.kafka_client_served()  # started through and through: no descriptor opened later
        pending: list[socket.socket] = []
        baseline = open_fds(broker)
        for _ in range(128 - baseline + 8):  # past the limit: the last ones wait in the backlog
            pending.append(stack.enter_context(closing(connect(broker))))
        exhausted = lambda: "out of file descriptors" in broker.log_text()  # noqa: E731
        wait_until(exhausted, "the exhaustion logged", DEADLINE_S)
        cpu_before, started = broker.cpu_s(), time.monotonic()
        while time.monotonic() - started < 3.0:  # a flood of new peers meanwhile
            sock = socket.socket()
            sock.setblocking(False)
            with suppress(BlockingIOError):
                sock.connect(broker.address)
            pending.append(stack.enter_context(closing(sock)))
            time.sleep(0.02)
        cpu_used = broker.cpu_s() - cpu_before
        elapsed = time.monotonic() - started
        log = broker.log_text()
        lines = [line for line in log.splitlines() if "out of file descriptors" in line]
        for sock in pending:
            sock.setblocking(False)
        closed = sum(shed(sock) for sock in pending)
        print(f"CPU {cpu_used:.2f}s over {elapsed:.1f}s out of descriptors; {closed} peers shed; {lines}")
        assert cpu_used < 0.25 * elapsed
        assert len(lines) == 1  # one per 10 s interval
        assert re.search(r"\(EMFILE\): closed 1 connection\(s\) .*the latest from 127\.0\.0\.1:\d+", lines[0])
        # About one per ACCEPT_BACKOFF_S (0.5 s): the reserved descriptor is reused, and accepting
        # backs off rather than shedding the whole flood as fast as it comes.
        assert 3 <= closed <= elapsed / 0.5 + 4
        assert broker.alive()
        for sock in pending:
            sock.close()
        pending.clear()
        stack.close()
        wait_until(broker.kafka_client_served, "served again once descriptors are free", DEADLINE_S)


def _frames() -> st.SearchStrategy[bytes]:
    length = st.integers(0, 2**32 - 1)
    body = st.binary(max_size=300)
    return st.one_of(
        st.binary(max_size=64),  # anything, including partial length prefixes
        st.builds(lambda n, b: struct.pack(">I", n) + b, length, body),  # any length prefix
        st.builds(lambda b: struct.pack(">I", len(b)) + b, st.binary(min_size=1, max_size=300)),
        st.builds(lambda b: struct.pack(">I", len(b) + 1) + b"\x00" + b, body),  # Kafka-looking
        st.builds(lambda b: struct.pack(">I", len(b) + 1) + b"{" + b, body),  # JSON-looking
    )


def test_random_frames_never_kill_the_broker(zk_connect: str, tmp_path: Path) -> None:
    with running_broker(zk_connect, tmp_path) as broker:

        @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(_frames())
        def one_peer(data: bytes) -> None:
            with closing(connect(broker)) as sock:
                sock.sendall(data)
                sock.shutdown(socket.SHUT_WR)
                with suppress(ConnectionResetError):
                    while sock.recv(65536):  # answered or not, the broker ends the connection
                        pass
            assert broker.alive()

        one_peer()
        assert broker.kafka_client_served()
        assert broker.alive()
