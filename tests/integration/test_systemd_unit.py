"""The README's systemd unit for a broker (crash detection's ``ExecStopPost=``), held to what systemd
and the CLI accept.

systemd's own parser (``systemd-analyze verify``, systemd 252 here) must read the unit as the README
prints it without a warning. Its command lines, run as systemd runs them (the unit's
``Environment=``, ``%i`` expanded, ``ExecStopPost=`` once the main process is gone), must close a
kill -9'd broker's session at once (the unit's 18 s default session timeout would otherwise keep
``/brokers/ids/<id>`` and ``/controller``), and find nothing to close after a SIGTERM (its
``KillSignal=``). Only the host-specific parts are replaced: the executable's path, the data
directory, the listener's port and the ZooKeeper hosts.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafka_controller.zk.embedded import EmbeddedZooKeeper
from tests.broker.helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.zk]

README = Path(__file__).resolve().parents[2] / "README.md"
BROKER_ID = "7"
INSTALLED = "/usr/local/bin/kafka-controller"  # where the README's unit has it
KAFKA_CONTROLLER = Path(sys.executable).parent / "kafka-controller"
WAIT_S = 30.0
CLOSED_WITHIN_S = 9.0  # half the unit's 18 s session timeout


def readme_unit() -> str:
    blocks = re.findall(r"```ini\n(.*?)```", README.read_text(), re.S)
    units = [b for b in blocks if "/etc/systemd/system/kafka-controller-broker@.service" in b]
    assert len(units) == 1, "the README has no kafka-controller-broker@.service unit"
    return textwrap.dedent(units[0])


def unit_settings(unit: str) -> dict[str, list[str]]:
    """``key -> values`` of the unit's settings, continuation lines joined (sections ignored)."""
    settings: dict[str, list[str]] = {}
    for line in unit.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def test_systemd_reads_the_readme_unit_without_a_warning(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze is not None, "systemd-analyze is not installed (Debian's systemd package)"
    unit = tmp_path / f"kafka-controller-broker@{BROKER_ID}.service"
    text = readme_unit().replace(INSTALLED, str(KAFKA_CONTROLLER))  # systemd checks that it is executable
    unit.write_text(text)
    checked = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0 and checked.stderr == "", checked.stderr
    # the check can fail: systemd reports a mistyped key in the same unit
    unit.write_text(text.replace("KillSignal=", "KilSignal="))
    mistyped = subprocess.run([analyze, "verify", "--man=no", str(unit)], capture_output=True, text=True)
    assert "Unknown key 'KilSignal'" in mistyped.stderr


class Unit:
    """The unit's commands and environment, for this host."""

    def __init__(self, zk: EmbeddedZooKeeper, data_root: Path) -> None:
        settings = unit_settings(readme_unit())
        self.chroot = f"/systemd-unit-{uuid.uuid4().hex[:8]}"
        self.env: dict[str, str] = {}
        for assignment in settings["Environment"]:
            key, _, value = assignment.partition("=")
            assert key == "KAFKA_CONTROLLER_ZOOKEEPER" and "/" in value, value  # a chroot of its own
            self.env[key] = f"{zk.connect_string}{self.chroot}"
        (self.start,) = (self._command(c, data_root) for c in settings["ExecStart"])
        (stop_post,) = settings["ExecStopPost"]
        assert stop_post.startswith("-"), "ExecStopPost= must not fail the unit"
        self.stop_post = self._command(stop_post[1:], data_root)

    @staticmethod
    def _command(line: str, data_root: Path) -> list[str]:
        argv = shlex.split(line.replace("%i", BROKER_ID))
        assert argv[0] == INSTALLED, argv[0]
        argv[0] = str(KAFKA_CONTROLLER)
        argv = [a.replace("/var/lib/kafka-controller", str(data_root)) for a in argv]
        return [("127.0.0.1:0" if a.endswith(":9092") else a) for a in argv]

    def environment(self) -> dict[str, str]:
        return {**os.environ, **self.env}


@pytest.fixture
def unit(zk_server: EmbeddedZooKeeper, tmp_path: Path) -> Unit:
    return Unit(zk_server, tmp_path / "lib")


@pytest.fixture
def zk(zk_server: EmbeddedZooKeeper, unit: Unit) -> Iterator[KazooClient]:
    root = KazooClient(hosts=zk_server.connect_string)
    root.start(timeout=WAIT_S)
    root.ensure_path(unit.chroot)  # the broker would create it too; made here for this client
    root.stop()
    root.close()
    client = KazooClient(hosts=f"{zk_server.connect_string}{unit.chroot}")
    client.start(timeout=WAIT_S)
    yield client
    client.stop()
    client.close()


def _start(unit: Unit, zk: KazooClient, log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        broker = subprocess.Popen(unit.start, env=unit.environment(), stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: zk.exists(f"/brokers/ids/{BROKER_ID}") is not None, "the registration", WAIT_S)
    except AssertionError:
        broker.kill()
        raise AssertionError(f"the unit's broker did not register:\n{log.read_text()[-2000:]}") from None
    return broker


def _stop_post(unit: Unit) -> str:
    done = subprocess.run(unit.stop_post, env=unit.environment(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_units_commands_close_a_killed_brokers_session_and_leave_a_clean_stop_alone(
    unit: Unit, zk: KazooClient, tmp_path: Path
) -> None:
    registration = f"/brokers/ids/{BROKER_ID}"
    broker = _start(unit, zk, tmp_path / "broker.log")
    wait_until(lambda: zk.exists("/controller") is not None, "the broker to become controller", WAIT_S)
    broker.kill()  # kill -9: systemd runs ExecStopPost= after the main process died
    broker.wait(WAIT_S)
    assert zk.exists(registration) is not None  # the session outlives the process...
    killed = time.monotonic()
    assert "closed session" in _stop_post(unit)
    # ...until ExecStopPost= closed it: the ephemerals go now, not after 18 s
    gone = lambda: zk.exists(registration) is None and zk.exists("/controller") is None  # noqa: E731
    wait_until(gone, "the registration and /controller to go", CLOSED_WITHIN_S - (time.monotonic() - killed))

    broker = _start(unit, zk, tmp_path / "broker.log")
    broker.send_signal(signal.SIGTERM)  # KillSignal=: controlled shutdown, exit 0
    assert broker.wait(WAIT_S) == 0
    assert "nothing to close" in _stop_post(unit)
