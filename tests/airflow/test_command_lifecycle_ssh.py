"""The ``command`` lifecycle backend over a real SSH server: Debian's openssh-server on a loopback
port, each action an ``ssh ... {host} ...`` template, driving real broker processes (stop with a
controlled shutdown, start, kill) as ``ssh kafka1 sudo systemctl ...`` does on real hosts."""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.airflow.lifecycle import CommandLifecycle, LifecycleError, lifecycle_backend
from kafka_controller.cluster.process import broker_pids
from tests.airflow.sshd import PrivateSshd

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.timeout(600)]

SERVICE = Path(__file__).with_name("broker_service.py")


def command_spec(sshd: PrivateSshd, zookeeper: str, state_dir: Path, brokers: list[int]) -> dict[str, Any]:
    """The connection's ``lifecycle`` extra: one ssh template per action, every broker on 127.0.0.1."""
    remote = shlex.join([sys.executable, str(SERVICE)])
    tail = shlex.join([zookeeper, str(state_dir)])
    return {
        "type": "command",
        **{
            action: f"{sshd.ssh_prefix} {{host}} {remote} {action} {{broker_id}} {tail}"
            for action in ("stop", "start", "kill")
        },
        "hosts": {str(b): "127.0.0.1" for b in brokers},
    }


@dataclass
class Site:
    sshd: PrivateSshd
    cluster: Any
    backend: CommandLifecycle
    spec: dict[str, Any]


@pytest.fixture(scope="module")
def site(zk_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    from kafka_controller.cluster.local import LocalCluster

    base = tmp_path_factory.mktemp("ssh-lifecycle")
    sshd = PrivateSshd(base / "sshd").start()
    cluster = LocalCluster(3, zookeeper=zk_server.connect_string, chroot="/kc-ssh", data_dir=base / "cluster")
    try:
        cluster.start()
        spec = command_spec(sshd, cluster.connect_string, base / "state", list(cluster.broker_ids))
        backend = lifecycle_backend(spec, cluster.connect_string)
        assert isinstance(backend, CommandLifecycle)
        yield Site(sshd, cluster, backend, spec)
    finally:
        for b in cluster.broker_ids:  # brokers relaunched over ssh are not the cluster's children
            for pid in broker_pids(b, cluster.connect_string):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        cluster.close(graceful=False)
        sshd.close()


def test_stop_start_and_kill_through_ssh(site: Site) -> None:
    cluster, backend = site.cluster, site.backend
    registered = cluster.store.get_sorted_broker_list
    b = 2
    logins = site.sshd.logins()
    (first,) = broker_pids(b, cluster.connect_string)

    backend.stop(b, 90)
    assert broker_pids(b, cluster.connect_string) == []
    cluster.waits.wait_until(lambda: b not in registered(), 30, f"broker {b}'s registration to go")
    log = (cluster.data_dir / "logs" / f"broker-{b}.log").read_text(errors="replace")
    assert f"Controlled shutdown of broker {b} succeeded" in log  # SIGTERM over ssh, not a kill

    backend.start(b, 90)
    (second,) = broker_pids(b, cluster.connect_string)
    assert second != first
    cluster.waits.wait_until(lambda: b in registered(), 60, f"broker {b} to register again")

    with pytest.raises(LifecycleError, match=rf"start of broker {b}: ssh exited 1: .*already running"):
        backend.start(b, 90)  # the far side's one-line error comes back

    backend.kill(b, 90)
    assert broker_pids(b, cluster.connect_string) == []
    backend.start(b, 90)
    (third,) = broker_pids(b, cluster.connect_string)
    assert third not in (first, second)
    # the killed session lapsed, then the broker came back (not a child of the cluster: polled)
    cluster.waits.wait_until(lambda: b in registered(), 60, f"broker {b} to register after the kill")
    assert site.sshd.logins() - logins == 5  # every action went through sshd


def test_an_unreachable_host_is_one_line_naming_ssh(site: Site) -> None:
    spec = {**site.spec, "hosts": {"1": "127.0.0.1"}}
    spec["stop"] = spec["stop"].replace(f"-p {site.sshd.port}", "-p 1")
    backend = lifecycle_backend(spec, site.cluster.connect_string)
    with pytest.raises(LifecycleError, match=r"^stop of broker 1: ssh exited 255: .*(refused|port 1)"):
        backend.stop(1, 30)
    assert broker_pids(1, site.cluster.connect_string), "nothing was stopped"
