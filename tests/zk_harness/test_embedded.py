"""The embedded ZooKeeper server: serving, restart, crash, start-up failures, multi-read."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections import namedtuple
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import (
    MultiHeader,
    int_struct,
    multiheader_struct,
    read_buffer,
    stat_struct,
    write_string,
)
from kazoo.protocol.states import ZnodeStat

from kafka_controller.cluster.process import process_alive
from kafka_controller.testing.zk_harness import ZkClientFactory, restart_zk_server, wait_for
from kafka_controller.zk.embedded import EmbeddedZooKeeper, ZooKeeperStartError
from kafka_controller.zk.embedded_os import four_letter_word
from kafka_controller.zk.java import find_zookeeper_classpath

pytestmark = pytest.mark.zk

NONODE = -101


class _MultiRead(namedtuple("_MultiRead", "paths")):
    """Raw ZooKeeper multi-read (opcode 22) of getData ops, to prove the server supports it."""

    type = 22

    def serialize(self) -> bytes:
        body = bytearray()
        for path in self.paths:
            body += MultiHeader(4, False, -1).serialize() + write_string(path) + b"\x00"
        return bytes(body + multiheader_struct.pack(-1, True, -1))

    @classmethod
    def deserialize(cls, buf: bytes, offset: int) -> list[object]:
        results: list[object] = []
        header, offset = MultiHeader.deserialize(buf, offset)
        while not header.done:
            if header.type == 4:
                data, offset = read_buffer(buf, offset)
                results.append((data, ZnodeStat._make(stat_struct.unpack_from(buf, offset))))
                offset += stat_struct.size
            else:
                results.append(int_struct.unpack_from(buf, offset)[0])
                offset += int_struct.size
            header, offset = MultiHeader.deserialize(buf, offset)
        return results


def test_server_serves_four_letter_words(zk_server: EmbeddedZooKeeper) -> None:
    assert zk_server.is_running() and process_alive(zk_server.pid or -1)
    assert zk_server.port > 0
    assert zk_server.connect_string == f"127.0.0.1:{zk_server.port}"
    assert zk_server.four_letter_word("ruok") == "imok"
    srvr = zk_server.four_letter_word("srvr")
    assert "Mode: leader" in srvr  # a one-voter ensemble, see embedded.py
    assert "Zookeeper version: 3." in srvr
    assert zk_server.log_path.is_file()


def test_multi_read_opcode_22_is_served(zk_client_factory: ZkClientFactory) -> None:
    client = zk_client_factory()
    client.create("/a", b"1")
    client.create("/b", b"22")
    root = client.chroot
    request = _MultiRead([f"{root}/a", f"{root}/missing", f"{root}/b"])
    result = client.handler.async_result()
    client._call(request, result)
    a, missing, b = result.get(timeout=10)
    assert a[0] == b"1" and a[1].dataLength == 1
    assert missing == NONODE
    assert b[0] == b"22" and b[1].dataLength == 2


def test_restart_keeps_data_and_sessions(
    zk_server: EmbeddedZooKeeper, zk_client_factory: ZkClientFactory
) -> None:
    client = zk_client_factory()
    client.create("/persist", b"v1")
    client.create("/eph", b"", ephemeral=True)
    session = client.client_id[0]
    old_pid, port = zk_server.pid, zk_server.port

    restart_zk_server(zk_server)

    assert zk_server.pid != old_pid and not process_alive(old_pid or -1)
    assert zk_server.port == port
    assert zk_server.four_letter_word("ruok") == "imok"
    assert zk_client_factory().get("/persist")[0] == b"v1"
    wait_for(lambda: client.connected, timeout=15, message="old client did not reconnect")
    assert client.client_id[0] == session  # a quick restart is a disconnection, not an expiry
    assert client.exists("/eph") is not None


def test_kill_then_start_keeps_data(zk_server: EmbeddedZooKeeper, zk_client_factory: ZkClientFactory) -> None:
    client = zk_client_factory()
    client.create("/before-crash", b"kept")
    pid = zk_server.pid
    zk_server.kill()
    assert not zk_server.is_running() and not process_alive(pid or -1)
    with pytest.raises(OSError):
        four_letter_word("127.0.0.1", zk_server.port, "ruok", timeout=1.0)
    zk_server.start()
    assert zk_server.is_running()
    assert zk_client_factory().get("/before-crash")[0] == b"kept"


def test_port_taken_is_refused_before_starting_a_jvm(zk_server: EmbeddedZooKeeper, tmp_path: Path) -> None:
    clash = EmbeddedZooKeeper(port=zk_server.port, data_dir=tmp_path / "clash")
    with pytest.raises(ZooKeeperStartError, match=f"port {zk_server.port} on 127.0.0.1 is already in use"):
        clash.start(timeout=30)
    assert not clash.is_running() and clash.pid is None


def _jars_without(tmp_path: Path, artifact: str) -> Path:
    jars = tmp_path / "jars"
    jars.mkdir()
    for jar in find_zookeeper_classpath():
        if not jar.name.startswith(artifact):
            (jars / jar.name).symlink_to(jar)
    return jars


def test_jvm_exit_at_start_up_reports_log_tail(tmp_path: Path) -> None:
    server = EmbeddedZooKeeper(data_dir=tmp_path / "zk", jars_dir=_jars_without(tmp_path, "metrics-core"))
    with pytest.raises(ZooKeeperStartError, match="exited with code 1 during start-up") as e:
        server.start(timeout=30)
    message = str(e.value)
    assert "last lines of zookeeper.log and zookeeper.out" in message
    assert "com/codahale/metrics" in message  # the JVM's fatal error, not just the log's start
    assert not server.is_running()


def test_start_up_crash_inside_jvm_is_reported(tmp_path: Path) -> None:
    """ZooKeeper's main thread dying leaves the JVM up; start() must notice, not wait it out."""
    server = EmbeddedZooKeeper(data_dir=tmp_path / "zk", jars_dir=_jars_without(tmp_path, "snappy-java"))
    with pytest.raises(ZooKeeperStartError, match="failed during start-up") as e:
        server.start(timeout=30)
    assert "org/xerial/snappy" in str(e.value)
    assert not server.is_running()


def test_port_zero_and_context_manager_cleanup() -> None:
    with EmbeddedZooKeeper() as server:
        assert server.port > 0
        data_dir = server.data_dir
        assert (data_dir / "version-2").is_dir()
        assert server.four_letter_word("ruok") == "imok"
        pid = server.pid
    assert not server.is_running() and not process_alive(pid or -1)
    assert not data_dir.exists()


def test_server_dies_with_its_parent(tmp_path: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        from kafka_controller.zk.embedded import EmbeddedZooKeeper
        server = EmbeddedZooKeeper(data_dir={str(tmp_path / "zk")!r}).start()
        print(server.pid, flush=True)
        sys.stdin.read()
        """
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        java_pid = int(parent.stdout.readline())
        assert process_alive(java_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        wait_for(lambda: not process_alive(java_pid), timeout=10, message="ZooKeeper outlived its parent")
    finally:
        parent.kill()
        parent.wait()


def test_client_sees_empty_chroot(zk_connect: str) -> None:
    client = KazooClient(hosts=zk_connect)
    client.start(timeout=15)
    try:
        assert client.get_children("/") == []
    finally:
        client.stop()
        client.close()
    assert os.path.basename(zk_connect.split("/", 1)[1]).startswith("t")
