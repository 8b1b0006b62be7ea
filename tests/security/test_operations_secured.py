"""The operations package on a ``cluster up --security sasl_ssl`` cluster: the super user's client
properties (mode 0600) work as they are for librdkafka and for ``--command-config``; the CLI and
the Airflow hook reach the brokers only with the credentials, and no password reaches a log."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_controller.cluster.local import INTER_BROKER_USER, SUPER_USER, LocalCluster

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLI = [sys.executable, "-m", "kafka_controller.cli.main"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, security="sasl_ssl") as c:
        c.start(timeout=120)
        yield c


def _cli(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_CONTROLLER_ZOOKEEPER"}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _bootstrap(c: LocalCluster) -> str:
    return ",".join(c.listener(b) for b in c.broker_ids)


def test_the_client_properties_are_private_and_work_for_librdkafka_as_they_are(cluster: LocalCluster) -> None:
    from confluent_kafka.admin import AdminClient

    path = cluster.client_properties
    assert path is not None and os.stat(path).st_mode & 0o777 == 0o600
    props = dict(line.split("=", 1) for line in path.read_text().splitlines())
    assert props["security.protocol"] == "sasl_ssl" and props["sasl.username"] == SUPER_USER
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster), **props, "log_level": 0})
    assert set(admin.list_topics(timeout=20).brokers) == set(cluster.broker_ids)


def test_cli_over_kafka_needs_the_command_config(cluster: LocalCluster) -> None:
    bootstrap = _bootstrap(cluster)
    refused = _cli(
        "topics",
        "create",
        "--topic",
        "no-creds",
        "--partitions",
        "1",
        "--replication-factor",
        "1",
        "--bootstrap-server",
        bootstrap,
        "--timeout",
        "5",
    )
    assert refused.returncode != 0 and "cannot reach a Kafka broker" in refused.stderr
    assert "no-creds" not in cluster.store.get_all_topics()
    done = _cli(
        "topics",
        "create",
        "--topic",
        "with-creds",
        "--partitions",
        "2",
        "--replication-factor",
        "2",
        "--bootstrap-server",
        bootstrap,
        "--command-config",
        str(cluster.client_properties),
    )
    assert done.returncode == 0, done.stderr
    assert "with-creds" in cluster.store.get_all_topics()
    elected = _cli(
        "elect",
        "--election-type",
        "preferred",
        "--all-topic-partitions",
        "--zookeeper",
        cluster.connect_string,
        "--command-config",
        str(cluster.client_properties),
    )
    assert elected.returncode == 0, elected.stderr


def test_a_bad_command_config_is_one_line_naming_the_key(cluster: LocalCluster, tmp_path: Path) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.username=a\nsasl.password=b\n")
    r = _cli(
        "topics",
        "create",
        "--topic",
        "x",
        "--bootstrap-server",
        _bootstrap(cluster),
        "--command-config",
        str(bad),
    )
    assert r.returncode == 2
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "sasl.mechanism" in lines[0] and str(bad) in lines[0]


def test_the_airflow_hook_elects_and_shuts_down_with_the_connection_credentials(
    cluster: LocalCluster,
) -> None:
    from kafka_controller.airflow.connections import cluster_connection
    from kafka_controller.airflow.hooks.cluster import KafkaClusterHook

    security = cluster.client_security()
    hook = KafkaClusterHook("secured")
    hook.__dict__["connection"] = cluster_connection(
        "secured",
        host=cluster.connect_string,
        login=security.username,
        password=security.password,
        extra={
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "ssl_cafile": security.cafile,
        },
    )
    try:
        results = hook.elect_leaders("preferred", None)
        assert all(error in ("NONE", "ELECTION_NOT_NEEDED") for error, _, _ in results.values())
        assert hook.get_admin_client().describe_controller_context() is not None  # the private protocol
        assert security.password not in repr(hook.describe_connection())
    finally:
        hook.close()
    wrong = KafkaClusterHook("wrong")
    wrong.__dict__["connection"] = cluster_connection(
        "wrong",
        host=cluster.connect_string,
        login=SUPER_USER,
        password="not-the-password",
        extra={
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "ssl_cafile": security.cafile,
            "request_timeout_s": 3,
        },
    )
    try:
        with pytest.raises(Exception, match=r"cannot connect|failed"):
            wrong.elect_leaders("preferred", None)
    finally:
        wrong.close()


def test_no_password_reaches_a_broker_log(cluster: LocalCluster) -> None:
    secrets = [cluster._passwords[SUPER_USER], cluster._passwords[INTER_BROKER_USER]]
    logs = [p for p in (cluster.data_dir / "logs").glob("*.log")]
    assert logs
    for log in logs:
        text = log.read_text(errors="replace")
        assert not any(s in text for s in secrets), log


def test_cluster_up_security_sasl_ssl(tmp_path: Path) -> None:
    """``cluster up --security sasl_ssl --json``: ``client_config`` works in confluent-kafka as it is,
    kcat and ``--command-config`` read the printed properties file, a wrong password or none gets
    nothing, the password is printed nowhere but in the JSON, and SIGINT still stops the cluster."""
    import json
    import shutil
    import signal

    import orjson
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.integration.helpers import pump_stderr

    data_dir = tmp_path / "c"
    proc = subprocess.Popen(
        [*CLI, "cluster", "up", "--port", "0", "--brokers", "2", "--data-dir", str(data_dir),
         "--security", "sasl_ssl", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines = pump_stderr(proc)
    said: list[str] = []
    try:
        while True:
            line = lines.get(timeout=180)
            assert line is not None, f"cluster up exited with {proc.wait()} before it was ready: {said}"
            said.append(line)
            if line.startswith("kafka-controller cluster: ready"):
                break
        assert proc.stdout is not None
        info = orjson.loads(proc.stdout.readline())
        config = info["client_config"]
        assert config["security.protocol"] == "sasl_ssl" and config["sasl.mechanism"] == "SCRAM-SHA-512"
        assert config["sasl.username"] == SUPER_USER and Path(config["ssl.ca.location"]).is_file()
        properties = Path(info["client_properties"])
        assert properties == data_dir / "client.properties" and os.stat(properties).st_mode & 0o777 == 0o600

        admin = AdminClient({"bootstrap.servers": info["bootstrap_servers"], **config})
        (future,) = admin.create_topics([NewTopic("secured", 2, 2)], request_timeout=30).values()
        future.result(timeout=60)

        kcat = shutil.which("kcat")
        assert kcat is not None, "kcat is not installed (Debian's kcat package; .ci/bootstrap installs it)"
        listing = subprocess.run(
            [kcat, "-F", str(properties), "-b", info["bootstrap_servers"], "-L", "-J", "-m", "20"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        assert "secured" in [t["topic"] for t in json.loads(listing)["topics"]]
        described = _cli(
            "configs", "describe", "--entity-type", "topics", "--entity-name", "secured",
            "--bootstrap-server", info["bootstrap_servers"], "--command-config", str(properties),
        )  # fmt: skip
        assert described.returncode == 0, described.stderr

        wrong = {**config, "sasl.password": "not-" + config["sasl.password"], "log_level": 0}
        for settings in (wrong, {"log_level": 0}):
            with pytest.raises(KafkaException):
                AdminClient({"bootstrap.servers": info["bootstrap_servers"], **settings}).list_topics(
                    timeout=3
                )

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    while (line := lines.get(timeout=10)) is not None:
        said.append(line)
    assert "kafka-controller cluster: stopped" in said
    assert not any(config["sasl.password"] in line for line in said)
    logs = list((data_dir / "logs").glob("*.log"))
    assert logs and not any(config["sasl.password"] in p.read_text(errors="replace") for p in logs)
