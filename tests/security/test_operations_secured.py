"""The operations package on a ``cluster up --security sasl_ssl`` cluster: the super user's client
properties (mode 0600) work as they are for librdkafka and for ``--command-config``; the CLI and
the Airflow hook reach the brokers only with the credentials, and no password reaches a log.

Its ZooKeeper requires the ``kafka`` SASL login and carries Kafka's ``zookeeper.set.acl`` ACLs: an
anonymous session reads and writes nothing, the CLI and the Airflow hook log in through the printed
JAAS file, and a broker restarted by Airflow's ``local`` lifecycle (from its saved command line and
``KAFKA_OPTS``) or through ``cluster up``'s control socket logs in again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.cluster.local import INTER_BROKER_USER, SUPER_USER, LocalCluster
from kafka_controller.cluster.zk_login import ZK_USER, ClusterZkLogin

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

CLI = [sys.executable, "-m", "kafka_controller.cli.main"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(2, security="sasl_ssl") as c:
        c.start(timeout=120)
        yield c


def _cli(*args: str, timeout: float = 90, kafka_opts: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KAFKA_CONTROLLER_ZOOKEEPER", "KAFKA_OPTS")}
    if kafka_opts is not None:
        env["KAFKA_OPTS"] = kafka_opts
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env=env)


def _zk_login(c: LocalCluster) -> ClusterZkLogin:
    assert c.zk_login is not None, "a sasl_ssl cluster's ZooKeeper must require a login"
    return c.zk_login


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
        kafka_opts=_zk_login(cluster).client_kafka_opts,
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
            "zk_jaas_config_file": str(_zk_login(cluster).client_jaas),
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
            "zk_jaas_config_file": str(_zk_login(cluster).client_jaas),
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


# -- ZooKeeper: a SASL login required, Kafka's ACLs ------------------------------------------------
#: kazoo's connection thread raises the server's refusal of an anonymous session
#: (``SessionClosedRequireSaslError``) after the test has already seen the request fail.
_THREAD_REFUSAL = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


def _zk_client(c: LocalCluster, *, login: bool) -> Any:
    from kazoo.client import KazooClient

    sasl = None
    if login:
        sasl = {"mechanism": "DIGEST-MD5", "username": ZK_USER, "password": _zk_login(c).password}
    return KazooClient(hosts=c.connect_string, timeout=5.0, sasl_options=sasl)


def _acls(client: Any, path: str) -> set[tuple[int, str, str]]:
    acls, _ = client.get_acls(path)
    return {(a.perms, a.id.scheme, a.id.id) for a in acls}


@_THREAD_REFUSAL
def test_an_anonymous_zookeeper_session_reads_and_writes_nothing(cluster: LocalCluster) -> None:
    from kazoo.exceptions import KazooException
    from kazoo.handlers.threading import KazooTimeoutError

    path = "/brokers/topics/forged"
    attempts = (
        lambda k: k.get("/config/users/admin"),  # the ACLs alone refuse these two
        lambda k: k.create(path, b'{"partitions":{}}'),
        lambda k: k.get_children("/brokers/ids"),  # world-readable: refused only for want of a login
    )
    for attempt in attempts:
        anonymous = _zk_client(cluster, login=False)
        try:
            with pytest.raises((KazooException, KazooTimeoutError)):
                anonymous.start(timeout=10.0)
                attempt(anonymous)
        finally:
            anonymous.stop()
            anonymous.close()
    assert "forged" not in cluster.store.get_all_topics()


def test_zookeeper_carries_kafkas_acls(cluster: LocalCluster) -> None:
    """``zookeeper.set.acl=true``: the credentials readable by the ``kafka`` login only; what the
    brokers write (a topic made through Kafka's API, a registration) readable by anyone, writable by
    that login only. So even a ZooKeeper that let anonymous sessions in would not give them away."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from kazoo.security import Permissions

    assert cluster.client_properties is not None
    props = dict(line.split("=", 1) for line in cluster.client_properties.read_text().splitlines())
    admin = AdminClient({"bootstrap.servers": _bootstrap(cluster), **props, "log_level": 0})
    (future,) = admin.create_topics([NewTopic("zk-acls", 2, 2)], request_timeout=30).values()
    future.result(timeout=60)
    cluster.wait_topic_healthy("zk-acls")  # created and led
    owner = _zk_client(cluster, login=True)
    owner.start(timeout=15.0)
    try:
        only_kafka = {(Permissions.ALL, "sasl", ZK_USER)}
        assert _acls(owner, "/config/users") == only_kafka
        assert _acls(owner, f"/config/users/{SUPER_USER}") == only_kafka
        readable = only_kafka | {(Permissions.READ, "world", "anyone")}
        for path in ("/brokers/topics/zk-acls", f"/brokers/ids/{cluster.broker_ids[0]}", "/controller"):
            assert _acls(owner, path) == readable, path
    finally:
        owner.stop()
        owner.close()


def test_the_cli_reaches_zookeeper_with_the_printed_login_only(cluster: LocalCluster) -> None:
    login = _zk_login(cluster)
    assert os.stat(login.client_jaas).st_mode & 0o777 == 0o600
    for b in cluster.broker_ids:
        assert os.stat(cluster.broker_data_dir(b) / "zookeeper.jaas").st_mode & 0o777 == 0o600
    ok = _cli("describe", "--zookeeper", cluster.connect_string, "--json", kafka_opts=login.client_kafka_opts)
    assert ok.returncode == 0, ok.stderr
    assert sorted(b["id"] for b in json.loads(ok.stdout)["brokers"]) == list(cluster.broker_ids)
    refused = _cli("describe", "--zookeeper", cluster.connect_string, "--json", timeout=120)
    assert refused.returncode != 0 and not refused.stdout.strip()
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "requires a SASL login" in lines[0] and "KAFKA_OPTS" in lines[0], lines


def test_no_zookeeper_password_in_a_log_or_a_command_line(cluster: LocalCluster) -> None:
    from kafka_controller.cluster.process import broker_pids

    secret = _zk_login(cluster).password
    logs = [*(cluster.data_dir / "logs").glob("*.log"), *(cluster.data_dir / "zookeeper").glob("*.log")]
    assert len(logs) > len(cluster.broker_ids)
    for log in logs:
        assert secret not in log.read_text(errors="replace"), log
    assert cluster.zk is not None
    pids = [cluster.zk.pid, *(p for b in cluster.broker_ids for p in broker_pids(b, cluster.connect_string))]
    assert len(pids) == 1 + len(cluster.broker_ids)
    for pid in pids:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert secret not in argv and cluster._passwords[SUPER_USER] not in argv, pid


def test_a_broker_restarted_by_the_local_lifecycle_logs_in_again(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """Airflow's ``local`` backend kills a broker and starts it from what it saved (command line,
    ``KAFKA_OPTS``), in a process without ``KAFKA_OPTS``: the broker gets into the SASL-only
    ZooKeeper again and leads. The saved state names the JAAS file, never the password."""
    from kafka_controller.airflow.lifecycle import LocalLifecycle

    assert "KAFKA_OPTS" not in os.environ
    broker = cluster.broker_ids[-1]
    before = cluster.registered()[broker]
    lifecycle = LocalLifecycle(cluster.connect_string, tmp_path / "lifecycle")
    lifecycle.kill(broker, 30)
    state = lifecycle._state_file(broker)
    assert os.stat(state).st_mode & 0o777 == 0o600
    saved = json.loads(state.read_text())
    assert saved["env"]["KAFKA_OPTS"].endswith(str(cluster.broker_data_dir(broker) / "zookeeper.jaas"))
    assert _zk_login(cluster).password not in state.read_text()
    cluster.waits.wait_deregistered(broker, timeout=60)
    lifecycle.start(broker, 30)
    # not ``wait_registered``: the cluster's own child for this broker is gone for good
    after = cluster.waits.wait_until(
        lambda: cluster.registered().get(broker), 60, f"broker {broker} registered"
    )
    assert after != before
    cluster.create_topic("after-restart", {0: [broker]})
    view = cluster.wait_topic_healthy("after-restart")
    assert [p.leader for p in view.partitions] == [broker]


def test_cluster_up_security_sasl_ssl(tmp_path: Path) -> None:
    """``cluster up --security sasl_ssl --json``: ``client_config`` works in confluent-kafka as it is,
    kcat and ``--command-config`` read the printed properties file, a wrong password or none gets
    nothing, the password is printed nowhere but in the JSON, and SIGINT still stops the cluster."""
    import shutil
    import signal

    import orjson
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafka_controller.zk.client_security import sasl_from_kafka_opts
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

        zk_jaas = Path(info["zookeeper_jaas_config"])
        assert zk_jaas == data_dir / "zookeeper-client.jaas" and os.stat(zk_jaas).st_mode & 0o777 == 0o600
        zk_opts = info["zookeeper_kafka_opts"]
        zk_login = sasl_from_kafka_opts({"KAFKA_OPTS": zk_opts})
        assert zk_login is not None and zk_login[0] == ZK_USER
        restarted = _cli("cluster", "restart-broker", "1", "--data-dir", str(data_dir), timeout=150)
        assert restarted.returncode == 0, restarted.stderr  # the broker logged in to ZooKeeper again
        seen = _cli("describe", "--zookeeper", info["zookeeper"], "--json", kafka_opts=zk_opts)
        assert seen.returncode == 0, seen.stderr
        assert sorted(b["id"] for b in json.loads(seen.stdout)["brokers"]) == [1, 2]

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
    secrets = (config["sasl.password"], zk_login[1])
    assert not any(secret in line for line in said for secret in secrets)
    logs = [*(data_dir / "logs").glob("*.log"), *(data_dir / "zookeeper").glob("*.log")]
    assert logs and not any(secret in p.read_text(errors="replace") for p in logs for secret in secrets)
