"""The embedded ZooKeeper ensemble: a real 3-server quorum, its roles, and quorum faults."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from kafka_controller.cluster.process import process_alive
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.testing.zk_harness import ZkClientFactory, wait_for
from kafka_controller.zk.ensemble import ZooKeeperEnsemble
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from tests.zk_harness.test_cli import ERROR_PREFIX, Cli

pytestmark = pytest.mark.zk

ENSEMBLE_READY = re.compile(
    r"^kafka-controller zookeeper: ready on (?P<connect>\S+) "
    r"\(3 servers: (?P<pids>.+), data dir (?P<dir>.+)\)$"
)


def _write(client: KazooClient, path: str, timeout: float = 30.0) -> None:
    """Create ``path``, retrying while the ensemble elects (a fresh connection may land anywhere)."""
    wait_for(lambda: _try_create(client, path), timeout=timeout, interval=0.1, message=f"create {path}")


def _try_create(client: KazooClient, path: str) -> bool:
    try:
        client.create_async(path, b"x", makepath=True).get(timeout=2.0)
    except KazooTimeoutError:
        return False
    except Exception as e:
        return type(e).__name__ == "NodeExistsError"
    return True


def test_three_servers_one_leader_each_its_own_dir_and_ports(zk_ensemble: ZooKeeperEnsemble) -> None:
    hosts = zk_ensemble.connect_string.split(",")
    assert len(hosts) == 3 and len(set(hosts)) == 3
    modes = zk_ensemble.modes()
    assert sorted(modes.values(), key=str) == ["follower", "follower", "leader"]
    dirs = {m.data_dir for m in zk_ensemble}
    assert len(dirs) == 3
    for m in zk_ensemble:
        assert (m.data_dir / "myid").read_text().strip() == str(m.server_id)
        cfg = (m.data_dir / "zoo.cfg").read_text()
        assert cfg.count("server.") == 3 and "4lw.commands.whitelist=*" in cfg
        assert "admin.enableServer=false" in cfg


def test_killing_the_leader_elects_another_and_keeps_sessions_and_data(
    zk_ensemble: ZooKeeperEnsemble, zk_ensemble_connect: str
) -> None:
    client = ZkClientFactory(zk_ensemble_connect)(timeout=10.0)
    try:
        client.create("/before", b"1")
        session = client.client_id
        old = zk_ensemble.kill_leader()
        new = zk_ensemble.wait_quorum(timeout=60.0)
        assert new.server_id != old and zk_ensemble.modes()[old] is None
        _write(client, "/after")
        assert client.client_id == session, "the session survived the leader's death"
        zk_ensemble.member(old).start(timeout=60.0)
        assert zk_ensemble.member(old).mode() == "follower"
        assert set(client.get_children("/")) >= {"before", "after"}
    finally:
        client.stop()
        client.close()


def test_kill_and_restart_one_follower_keeps_serving(
    zk_ensemble: ZooKeeperEnsemble, zk_ensemble_connect: str
) -> None:
    leader = zk_ensemble.leader()
    follower = next(m for m in zk_ensemble if m is not leader)
    follower.kill()
    assert not process_alive(follower.pid or -1)
    client = ZkClientFactory(zk_ensemble_connect)(timeout=10.0)
    try:
        _write(client, "/while-one-is-down")
        follower.start(timeout=60.0)
        assert follower.mode() == "follower" and zk_ensemble.leader() is leader
        chroot = "/" + zk_ensemble_connect.split("/", 1)[1]
        solo = KazooClient(hosts=follower.connect_string + chroot)
        solo.start(timeout=30.0)
        try:  # the restarted follower caught up with what was written while it was down
            solo.sync("/")
            assert solo.exists("/while-one-is-down") is not None
        finally:
            solo.stop()
            solo.close()
    finally:
        client.stop()
        client.close()


def test_lost_quorum_refuses_writes_and_regained_quorum_serves_them(
    zk_ensemble: ZooKeeperEnsemble, zk_ensemble_connect: str
) -> None:
    client = ZkClientFactory(zk_ensemble_connect)(timeout=30.0)
    try:
        client.create("/kept", b"1")
        stopped = zk_ensemble.lose_quorum(kill=True)
        assert len(stopped) == 2
        survivor = next(m for m in zk_ensemble if m.server_id not in stopped)
        wait_for(lambda: survivor.mode() is None, timeout=30.0, message="the minority to stop serving")
        assert not _try_create(client, "/during")
        zk_ensemble.start_members(stopped, timeout=60.0)
        zk_ensemble.wait_quorum(timeout=60.0)
        _write(client, "/after")
        assert set(client.get_children("/")) >= {"kept", "after"}
    finally:
        client.stop()
        client.close()


def test_metadata_store_on_a_multi_server_connect_string_survives_a_leader_kill(
    zk_ensemble: ZooKeeperEnsemble, zk_ensemble_connect: str
) -> None:
    assert zk_ensemble_connect.count(",") == 2
    store = KazooMetadataStore(zk_ensemble_connect)
    try:
        store.create_top_level_paths()
        zk_ensemble.kill_leader()
        zk_ensemble.wait_quorum(timeout=60.0)
        assert wait_for(lambda: _broker_list(store) == [], timeout=60.0, interval=0.2)
    finally:
        store.close()


def _broker_list(store: KazooMetadataStore) -> list[int] | None:
    try:
        return store.get_sorted_broker_list()
    except Exception:
        return None


def test_bad_ensemble_arguments_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="servers must be"):
        ZooKeeperEnsemble(0)
    with pytest.raises(InvalidArgumentError, match="port must be"):
        ZooKeeperEnsemble(3, 65535)


def test_cli_runs_an_ensemble_and_stops_every_server_on_sigint(tmp_path: Path) -> None:
    cli = Cli("--servers", "3", "--port", "0", "--data-dir", str(tmp_path / "zk"))
    try:
        ready = cli.wait_ready_line(ENSEMBLE_READY)
        hosts = ready["connect"].split(",")
        assert len(hosts) == 3
        pids = [int(p) for p in re.findall(r"pid (\d+)", ready["pids"])]
        assert len(pids) == 3 and all(process_alive(p) for p in pids)
        client = KazooClient(hosts=ready["connect"])
        client.start(timeout=30.0)
        client.create("/from-cli-client")
        client.stop()
        client.close()
        assert sorted(p.name for p in (tmp_path / "zk").iterdir()) == ["zk-1", "zk-2", "zk-3"]
        cli.proc.send_signal(signal.SIGINT)
        assert cli.proc.wait(timeout=60) == 0
        assert not any(line.startswith(ERROR_PREFIX) for line in cli.rest_of_stderr())
        assert wait_for(lambda: not any(process_alive(p) for p in pids), timeout=10.0)
    finally:
        if cli.proc.poll() is None:
            cli.proc.kill()
            cli.proc.wait()


def test_cli_refuses_an_even_number_of_servers() -> None:
    cli = Cli("--servers", "2", "--port", "0")
    assert cli.proc.wait(timeout=60) == 2
    lines = cli.rest_of_stderr()
    assert lines == [f"{ERROR_PREFIX}--servers must be 1, 3 or 5, got 2"]


def test_render_server_lines_for_members_on_other_hosts(tmp_path: Path) -> None:
    from kafka_controller.zk.server_files import render_server_lines, render_zoo_cfg

    lines = render_server_lines([(1, "10.0.0.1", 2181, 2888, 3888), (2, "10.0.0.2", 2181, 2888, 3888)])
    cfg = render_zoo_cfg(
        data_dir=tmp_path, port=1, quorum_port=2, election_port=3, tick_time_ms=500,
        min_session_timeout_ms=1000, max_session_timeout_ms=60000, force_sync=False, servers=lines,
    )  # fmt: skip
    servers = [ln for ln in cfg.splitlines() if ln.startswith("server.")]
    assert servers == [
        "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181",
        "server.2=10.0.0.2:2888:3888:participant;10.0.0.2:2181",
    ]


def test_a_new_leader_waits_zookeepers_default_20_s_for_its_followers(tmp_path: Path) -> None:
    """initLimit in ticks gives a new leader 20 s, as ZooKeeper's defaults do, whatever the tick
    (5 s with short ticks made an ensemble on a loaded machine flap for minutes after a leader kill)."""
    from kafka_controller.zk.server_files import render_zoo_cfg

    def limits(tick_ms: int) -> tuple[str, ...]:
        cfg = render_zoo_cfg(
            data_dir=tmp_path, port=1, quorum_port=2, election_port=3, tick_time_ms=tick_ms,
            min_session_timeout_ms=1000, max_session_timeout_ms=60000, force_sync=False,
        )  # fmt: skip
        return tuple(ln for ln in cfg.splitlines() if ln.startswith(("initLimit=", "syncLimit=")))

    assert limits(500) == ("initLimit=40", "syncLimit=5")
    assert limits(2000) == ("initLimit=10", "syncLimit=5")
