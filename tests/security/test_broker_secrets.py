"""A broker's secret settings (``ssl.key.password``, JAAS entries with passwords) never reach its
command line, which every local user can read: ``cluster up`` writes them to a mode-0600
``--config-file`` in the broker's data directory, and the broker reads Kafka's server.properties
form from it."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from kafka_controller.cli.broker_cmd import read_server_properties
from kafka_controller.cluster.process import SECRET_SETTINGS, broker_command
from kafka_controller.domain.errors import InvalidArgumentError

JAAS = (
    'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="Jaas-Pw-1";'
)


def test_secret_settings_go_to_a_private_file_not_the_command_line(tmp_path: Path) -> None:
    config = {
        "num.partitions": "3",
        "ssl.key.password": "Key-Pw-2",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": JAAS,
    }
    argv = broker_command(
        1, "zk:2181", "127.0.0.1", 9093, config, data_dir=tmp_path, listener_name="SASL_SSL"
    )
    line = " ".join(argv)
    assert "Key-Pw-2" not in line and "Jaas-Pw-1" not in line
    assert "num.partitions=3" in line
    path = Path(argv[argv.index("--config-file") + 1])
    assert path == tmp_path / SECRET_SETTINGS
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_server_properties(str(path)) == {
        "ssl.key.password": "Key-Pw-2",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": JAAS,
    }
    path.chmod(0o644)  # written again: private again
    broker_command(1, "zk:2181", "127.0.0.1", 9093, config, data_dir=tmp_path, listener_name="SASL_SSL")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_without_secrets_nothing_is_written(tmp_path: Path) -> None:
    argv = broker_command(1, "zk:2181", "127.0.0.1", 9092, {"num.partitions": "3"}, data_dir=tmp_path)
    assert "--config-file" not in argv and not (tmp_path / SECRET_SETTINGS).exists()


def test_server_properties_lines_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("# comment\n! also\n\n a.b = 1 \nx=y=z\n")
    assert read_server_properties(str(path)) == {"a.b": "1", "x": "y=z"}
    path.write_text("ok=1\nsasl.password Secret-3\n")
    with pytest.raises(InvalidArgumentError, match="line 2: expected KEY=VALUE") as info:
        read_server_properties(str(path))
    assert "Secret-3" not in str(info.value)
    with pytest.raises(InvalidArgumentError, match="cannot read --config-file"):
        read_server_properties(str(tmp_path / "missing"))


def test_the_broker_command_reads_its_config_file(tmp_path: Path) -> None:
    """A bad setting in the file is refused as a bad --config is: one line, exit 2, nothing started."""
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=zero\n")
    cli = str(Path(sys.executable).with_name("kafka-controller"))
    done = subprocess.run(
        [cli, "broker", "--broker-id", "1", "--zookeeper", "127.0.0.1:1", "--config-file", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "num.partitions" in done.stderr


def test_a_sasl_ssl_cluster_up_keeps_every_password_off_the_brokers_command_lines(tmp_path: Path) -> None:
    from kafka_controller.cluster.local import LocalCluster
    from kafka_controller.cluster.process import argv_of

    with LocalCluster(1, security="sasl_ssl", data_dir=tmp_path) as cluster:
        (proc,) = cluster.processes.values()
        assert proc.pid is not None
        argv = argv_of(proc.pid)
        assert "--config-file" in argv
        line = " ".join(argv)
        assert "password" not in line and "sasl.jaas.config" not in line
        secret = Path(argv[argv.index("--config-file") + 1])
        assert stat.S_IMODE(secret.stat().st_mode) == 0o600
        assert "sasl.jaas.config=" in secret.read_text() and "ssl.key.password=" in secret.read_text()
