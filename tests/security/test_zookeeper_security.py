"""ZooKeeper security as Kafka configures it: SASL DIGEST-MD5 from the JAAS ``Client`` section named
by ``$KAFKA_OPTS``, TLS with Kafka's ``zookeeper.ssl.*`` names (and the tools'
``--zk-tls-config-file``), ``zookeeper.set.acl=true``'s ACLs, on a real embedded ZooKeeper that
requires SASL and serves a TLS port."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import BrokerServer
from kafka_controller.controller.config import ZOOKEEPER_CLIENT_KEYS, KafkaConfig
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security import certs
from kafka_controller.zk import client_security as cs
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.security import PERM_ALL, PERM_READ, ZkClientConfig
from kafka_controller.zk.server_security import ZkServerSecurity, render_server_jaas
from tests.broker.helpers import wait_until

USER, PASSWORD = "kafka", 'k@fka-"zk"-secret\\'
OTHER, OTHER_PASSWORD = "mallory", "mallory-zk-secret"
KEY_PASSWORD = "broker-key-secret"


def _jaas(path: Path, section: str = "Client", user: str = USER, password: str = PASSWORD) -> Path:
    quoted = password.replace("\\", "\\\\").replace('"', '\\"')
    path.write_text(
        "// Kafka's JAAS file\n"
        f"{section} {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n"
        f'  username="{user}" password="{quoted}";\n}};\n'
        "KafkaServer { org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="a" password="b"; };\n'
    )
    return path


# -- pure parsing ---------------------------------------------------------------------------------
def test_kafka_opts_jaas_client_section(tmp_path: Path) -> None:
    jaas = _jaas(tmp_path / "jaas.conf")
    env = {"KAFKA_OPTS": f"-Xmx1g -Djava.security.auth.login.config={jaas} -Dfoo=bar"}
    assert cs.sasl_from_kafka_opts(env) == (USER, PASSWORD)
    other = _jaas(tmp_path / "other.conf", section="ZkLogin")
    env = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={other} -Dzookeeper.sasl.clientconfig=ZkLogin"}
    assert cs.sasl_from_kafka_opts(env) == (USER, PASSWORD)
    # No Client section: ZooKeeper without SASL, as Kafka's JaasUtils.isZkSaslEnabled says.
    assert cs.sasl_from_kafka_opts({"KAFKA_OPTS": f"-Djava.security.auth.login.config={other}"}) is None
    assert cs.sasl_from_kafka_opts({}) is None
    spaced = tmp_path / "with space"
    spaced.mkdir()
    quoted = _jaas(spaced / "jaas.conf")
    assert cs.sasl_from_kafka_opts({"KAFKA_OPTS": f"'-Djava.security.auth.login.config={quoted}'"}) == (
        USER,
        PASSWORD,
    )
    off = {"KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas} -Dzookeeper.sasl.client=false"}
    with pytest.raises(InvalidArgumentError, match=re.escape("zookeeper.sasl.client=false")) as e:
        cs.sasl_from_kafka_opts(off)
    assert PASSWORD not in str(e.value)


def test_jaas_errors_name_the_place_not_the_secret(tmp_path: Path) -> None:
    krb = tmp_path / "krb.conf"
    krb.write_text('Client { com.sun.security.auth.module.Krb5LoginModule required principal="x@Y"; };')
    with pytest.raises(InvalidArgumentError, match="Krb5LoginModule is not supported"):
        cs.sasl_from_kafka_opts({"KAFKA_OPTS": f"-Djava.security.auth.login.config={krb}"})
    broken = tmp_path / "broken.conf"
    broken.write_text(
        f'Client {{ org.apache.zookeeper.server.auth.DigestLoginModule required password="{OTHER_PASSWORD}" '
    )
    with pytest.raises(InvalidArgumentError) as e:
        cs.sasl_from_kafka_opts({"KAFKA_OPTS": f"-Djava.security.auth.login.config={broken}"})
    assert "broken.conf" in str(e.value) and OTHER_PASSWORD not in str(e.value)
    with pytest.raises(InvalidArgumentError, match="cannot read the JAAS file"):
        cs.sasl_from_kafka_opts({"KAFKA_OPTS": f"-Djava.security.auth.login.config={tmp_path / 'none'}"})


def test_zk_tls_config_file_in_kafkas_names(tmp_path: Path) -> None:
    (tmp_path / "ks.pem").write_text("x")
    (tmp_path / "ca.pem").write_text("x")
    props = tmp_path / "zk-tls.properties"
    props.write_text(
        "# as kafka-configs.sh --zk-tls-config-file takes it\n"
        "zookeeper.ssl.client.enable=true\n"
        "zookeeper.clientCnxnSocket=org.apache.zookeeper.ClientCnxnSocketNetty\n"
        f"zookeeper.ssl.keystore.location={tmp_path / 'ks.pem'}\n"
        "zookeeper.ssl.keystore.password=pw\n"
        "zookeeper.ssl.keystore.type=PEM\n"
        f"zookeeper.ssl.truststore.location={tmp_path / 'ca.pem'}\n"
        "zookeeper.ssl.truststore.type=PEM\n"
        "unrelated.key=ignored\n"
    )
    got = cs.tls_config_file(str(props))
    assert got == {
        "use_ssl": True,
        "certfile": str(tmp_path / "ks.pem"),
        "keyfile": str(tmp_path / "ks.pem"),
        "keyfile_password": "pw",
        "ca": str(tmp_path / "ca.pem"),
        "verify_certs": True,
        "check_hostname": True,  # Kafka's default zookeeper.ssl.endpoint.identification.algorithm=HTTPS
    }
    assert (
        cs.tls_settings({"zookeeper.ssl.client.enable": "false", "zookeeper.ssl.keystore.type": "JKS"}) == {}
    )
    with pytest.raises(InvalidArgumentError, match=re.escape("zookeeper.ssl.truststore.type must be PEM")):
        cs.tls_settings(
            {
                "zookeeper.ssl.client.enable": "true",
                "zookeeper.ssl.truststore.location": str(props),
                "zookeeper.ssl.truststore.type": "JKS",
            }
        )
    assert (
        cs.tls_settings(
            {"zookeeper.ssl.client.enable": "true", "zookeeper.ssl.endpoint.identification.algorithm": ""}
        )["check_hostname"]
        is False
    )
    assert ZOOKEEPER_CLIENT_KEYS == cs.ZK_CLIENT_KEYS
    KafkaConfig.of(1, {"zookeeper.set.acl": "true", "zookeeper.ssl.client.enable": "true"})  # accepted keys
    with pytest.raises(
        InvalidArgumentError, match=re.escape("unknown broker config 'zookeeper.ssl.keystore.locaton'")
    ):
        KafkaConfig.of(1, {"zookeeper.ssl.keystore.locaton": "x"})


def test_client_config_sasl_and_acls() -> None:
    config = ZkClientConfig("h:2181", sasl=(USER, PASSWORD), set_acl=True)
    kwargs = config.kazoo_kwargs()
    assert kwargs["sasl_options"] == {"mechanism": "DIGEST-MD5", "username": USER, "password": PASSWORD}
    assert kwargs["auth_data"] is None
    assert PASSWORD not in repr(config)
    assert config.acl_triples("/brokers/ids/1") == ((PERM_ALL, "auth", ""), (PERM_READ, "world", "anyone"))
    assert config.acl_triples("/config/users/alice") == ((PERM_ALL, "auth", ""),)
    assert not ZkClientConfig("h:2181", sasl=(USER, PASSWORD)).acl_enabled  # Kafka's default: off
    with pytest.raises(InvalidArgumentError, match=re.escape("zookeeper.set.acl needs an authenticated")):
        ZkClientConfig("h:2181", set_acl=True)
    assert 'user_kafka="k@fka-\\"zk\\"-secret\\\\"' in render_server_jaas({USER: PASSWORD})


#: kazoo's connection thread raises the server's refusal of an anonymous or TLS-less session
#: (``SessionClosedRequireSaslError``, an SSL EOF) after the test has already seen it fail.
_THREAD_REFUSAL = pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")


# -- a real server ----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("zkpki")
    ca = certs.make_ca("zk test CA")
    server_store = certs.write_keystore(d / "zookeeper.pem", certs.issue(ca, "zookeeper"), ca, KEY_PASSWORD)
    broker_store = certs.write_keystore(d / "broker.pem", certs.issue(ca, "broker"), ca, KEY_PASSWORD)
    return {"server": server_store, "broker": broker_store, "ca": certs.write_truststore(d / "ca.pem", ca)}


@pytest.fixture(scope="module")
def secure_zk(pki: dict[str, Path]) -> Iterator[EmbeddedZooKeeper]:
    security = ZkServerSecurity(
        sasl_users={USER: PASSWORD, OTHER: OTHER_PASSWORD},
        require_sasl=True,
        secure_port=0,
        tls={
            "ssl.keyStore.location": str(pki["server"]),
            "ssl.keyStore.password": KEY_PASSWORD,
            "ssl.keyStore.type": "PEM",
            "ssl.trustStore.location": str(pki["ca"]),
            "ssl.trustStore.type": "PEM",
        },
    )
    with EmbeddedZooKeeper(security=security) as zk:
        yield zk


def _client(hosts: str, user: str | None = USER, password: str = PASSWORD, **kwargs: object) -> KazooClient:
    sasl = {"mechanism": "DIGEST-MD5", "username": user, "password": password} if user else None
    client = KazooClient(hosts=hosts, timeout=10.0, sasl_options=sasl, **kwargs)
    client.start(timeout=15.0)
    return client


def _tls_props(pki: dict[str, Path]) -> dict[str, str]:
    return {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
        "zookeeper.ssl.keystore.location": str(pki["broker"]),
        "zookeeper.ssl.keystore.password": KEY_PASSWORD,
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(pki["ca"]),
        "zookeeper.ssl.truststore.type": "PEM",
    }


def _broker(connect: str, broker_id: int, settings: dict[str, str]) -> BrokerServer:
    config = BrokerConfig.of(broker_id, {"auto.leader.rebalance.enable": "false", **settings})
    return BrokerServer(config, connect, listener=("127.0.0.1", 0)).startup()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "kafka-controller"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in env.items() if k != "KAFKA_CONTROLLER_ZOOKEEPER"},
        check=False,
    )


@_THREAD_REFUSAL
def test_sasl_required_refuses_an_anonymous_client(secure_zk: EmbeddedZooKeeper) -> None:
    anonymous = KazooClient(hosts=secure_zk.connect_string, timeout=5.0)
    try:
        with pytest.raises((KazooException, KazooTimeoutError)):
            anonymous.start(timeout=10.0)
            anonymous.get_children("/")
    finally:
        anonymous.stop()
        anonymous.close()
    wrong = KazooClient(
        hosts=secure_zk.connect_string,
        timeout=5.0,
        sasl_options={"mechanism": "DIGEST-MD5", "username": USER, "password": "wrong"},
    )
    try:
        with pytest.raises((KazooException, KazooTimeoutError)):
            wrong.start(timeout=10.0)
            wrong.get_children("/")
    finally:
        wrong.stop()
        wrong.close()


def test_broker_and_cli_over_sasl_with_kafkas_acls(
    secure_zk: EmbeddedZooKeeper,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    jaas = _jaas(tmp_path / "kafka_jaas.conf")
    kafka_opts = f"-Djava.security.auth.login.config={jaas}"
    monkeypatch.setenv("KAFKA_OPTS", kafka_opts)
    connect = secure_zk.connect_string + "/sasl"
    broker = _broker(connect, 1, {"zookeeper.set.acl": "true"})
    try:
        owner = _client(secure_zk.connect_string)
        wait_until(lambda: owner.exists("/sasl/brokers/ids/1") is not None, "broker 1 registered", 30.0)
        acls, _ = owner.get_acls("/sasl/brokers/ids/1")
        assert {(a.perms, a.id.scheme, a.id.id) for a in acls} == {
            (PERM_ALL, "sasl", USER),
            (PERM_READ, "world", "anyone"),
        }
        acls, _ = owner.get_acls("/sasl/config/users")  # Kafka's sensitive root: no world read
        assert {(a.perms, a.id.scheme, a.id.id) for a in acls} == {(PERM_ALL, "sasl", USER)}
        owner.stop()
        owner.close()
        # Another authenticated principal may read but not change what the broker created.
        other = _client(secure_zk.connect_string, OTHER, OTHER_PASSWORD)
        try:
            assert other.get("/sasl/brokers/ids/1")[0]
            with pytest.raises(NoAuthError):
                other.set("/sasl/controller_epoch", b"99")
            with pytest.raises(NoAuthError):
                other.delete("/sasl/brokers/ids/1")
            with pytest.raises(NoAuthError):
                other.get_children("/sasl/config/users")
        finally:
            other.stop()
            other.close()
        env = dict(os.environ)
        ok = _cli("describe", "--zookeeper", connect, "--json", env=env)
        assert ok.returncode == 0, ok.stderr
        assert '"id": 1' in ok.stdout or '"id":1' in ok.stdout
        # Kafka's tools create secure znodes whenever they log in (ConfigCommand's isSecure).
        made = _cli(
            "topics", "create", "--zookeeper", connect, "--topic", "t1", "--replica-assignment", "1", env=env
        )
        assert made.returncode == 0, made.stderr
        owner = _client(secure_zk.connect_string)
        try:
            for path in ("/sasl/brokers/topics/t1", "/sasl/config/topics/t1"):
                acls, _ = owner.get_acls(path)
                assert {(a.perms, a.id.scheme, a.id.id) for a in acls} == {
                    (PERM_ALL, "sasl", USER),
                    (PERM_READ, "world", "anyone"),
                }, path
        finally:
            owner.stop()
            owner.close()
        env.pop("KAFKA_OPTS")
        refused = _cli("describe", "--zookeeper", connect, "--timeout", "5", env=env)
        assert refused.returncode != 0
        for text in (ok.stdout, ok.stderr, refused.stderr, caplog.text):
            assert PASSWORD not in text and OTHER_PASSWORD not in text
    finally:
        broker.shutdown()
    logs = (secure_zk.data_dir / "zookeeper.log").read_text() + (
        secure_zk.data_dir / "zookeeper.out"
    ).read_text()
    for secret in (PASSWORD, OTHER_PASSWORD, KEY_PASSWORD):
        assert secret not in logs
    assert oct((secure_zk.data_dir / "zookeeper-jaas.conf").stat().st_mode & 0o777) == "0o600"


@_THREAD_REFUSAL
def test_broker_and_cli_over_tls(
    secure_zk: EmbeddedZooKeeper,
    pki: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    assert secure_zk.secure_connect_string is not None
    jaas = _jaas(tmp_path / "kafka_jaas.conf")
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    connect = secure_zk.secure_connect_string + "/tls"
    broker = _broker(connect, 2, {**_tls_props(pki), "zookeeper.set.acl": "true"})
    try:
        tls_file = tmp_path / "zk-tls.properties"
        tls_file.write_text("".join(f"{k}={v}\n" for k, v in _tls_props(pki).items()))
        env = dict(os.environ)
        wait_until(
            lambda: (
                '"id": 2'
                in _cli(
                    "describe",
                    "--zookeeper",
                    connect,
                    "--zk-tls-config-file",
                    str(tls_file),
                    "--json",
                    env=env,
                ).stdout
            ),
            "the CLI sees broker 2 over TLS",
            60.0,
        )
        # The ACL names both identities of the broker's session: its SASL login and its certificate.
        owner = _client(secure_zk.connect_string)
        acls, _ = owner.get_acls("/tls/brokers/ids/2")
        schemes = {(a.perms, a.id.scheme) for a in acls}
        owner.stop()
        owner.close()
        assert (
            (PERM_ALL, "sasl") in schemes
            and (PERM_ALL, "x509") in schemes
            and (PERM_READ, "world") in schemes
        )
        plain = _cli("describe", "--zookeeper", connect, "--timeout", "5", env=env)
        assert plain.returncode != 0  # no TLS on the TLS port
        assert KEY_PASSWORD not in plain.stderr
        assert KEY_PASSWORD not in caplog.text and PASSWORD not in caplog.text
    finally:
        broker.shutdown()
    plain_client = KazooClient(
        hosts=secure_zk.secure_connect_string,
        timeout=5.0,
        sasl_options={"mechanism": "DIGEST-MD5", "username": USER, "password": PASSWORD},
    )
    try:
        with pytest.raises((KazooException, KazooTimeoutError)):
            plain_client.start(timeout=8.0)
    finally:
        plain_client.stop()
        plain_client.close()


def test_server_security_refuses_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="requiring SASL needs"):
        ZkServerSecurity(require_sasl=True)
    with pytest.raises(InvalidArgumentError, match="unknown ZooKeeper TLS setting"):
        ZkServerSecurity(secure_port=0, tls={"ssl.keystore.location": "x"})
    with pytest.raises(InvalidArgumentError, match=re.escape("needs ssl.keyStore.location")):
        ZkServerSecurity(secure_port=0)
    with pytest.raises(InvalidArgumentError, match="has no Server section"):
        ZkServerSecurity(jaas_config_file=_jaas(tmp_path / "client-only.conf"))


def test_airflow_connection_reaches_a_secured_zookeeper(
    secure_zk: EmbeddedZooKeeper, pki: dict[str, Path], tmp_path: Path
) -> None:
    """The cluster connection's ``zk_jaas_config_file`` and ``zk_tls_config_file`` extras: what the
    hooks and triggers open (``ClusterConnection.zk_config``) authenticates and speaks TLS."""
    from kafka_controller.airflow.connections import cluster_connection
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    assert secure_zk.secure_connect_string is not None
    jaas = _jaas(tmp_path / "airflow_jaas.conf", section="ZkClient")
    tls_file = tmp_path / "zk-tls.properties"
    tls_file.write_text("".join(f"{k}={v}\n" for k, v in _tls_props(pki).items()))
    extra = {
        "zk_jaas_config_file": str(jaas),
        "zk_sasl_client_config": "ZkClient",
        "zk_tls_config_file": str(tls_file),
    }
    conn = cluster_connection("secured", host=secure_zk.secure_connect_string, schema="/airflow", extra=extra)
    described = repr(conn) + repr(conn.describe()) + repr(conn.zk_config())
    assert conn.describe()["zk_sasl_user"] == USER
    for secret in (PASSWORD, KEY_PASSWORD):
        assert secret not in described
    cfg = conn.zk_config()
    assert cfg.use_ssl and cfg.check_hostname and cfg.sasl == (USER, PASSWORD)
    store = KazooMetadataStore(replace(cfg, create_paths=True, set_acl=True))
    try:
        assert store.path_exists("/brokers/ids")
    finally:
        store.close()
    owner = _client(secure_zk.connect_string)
    try:
        acls, _ = owner.get_acls("/airflow/brokers/ids")
        assert {(a.perms, a.id.scheme) for a in acls} == {
            (PERM_ALL, "sasl"),
            (PERM_ALL, "x509"),
            (PERM_READ, "world"),
        }
    finally:
        owner.stop()
        owner.close()
    with pytest.raises(InvalidArgumentError, match="not both"):
        cluster_connection("bad", host="h:1", extra={**extra, "use_ssl": True})
    with pytest.raises(InvalidArgumentError, match="has no Client section"):
        cluster_connection("bad", host="h:1", extra={"zk_jaas_config_file": str(jaas)})


@_THREAD_REFUSAL
def test_zookeeper_command_requires_sasl_and_serves_tls(pki: dict[str, Path], tmp_path: Path) -> None:
    """``kafka-controller zookeeper --jaas-config F --require-sasl --secure-port 0 --tls-config-file F``:
    the ready line names both ports; SASL logins work, anonymous sessions do not; SIGTERM stops it."""
    jaas = tmp_path / "zookeeper_jaas.conf"
    jaas.write_text(render_server_jaas({USER: PASSWORD}))
    tls = tmp_path / "zookeeper-tls.properties"
    tls.write_text(
        f"ssl.keyStore.location={pki['server']}\nssl.keyStore.password={KEY_PASSWORD}\n"
        f"ssl.keyStore.type=PEM\nssl.trustStore.location={pki['ca']}\nssl.trustStore.type=PEM\n"
    )
    command = [str(Path(sys.executable).parent / "kafka-controller"), "zookeeper", "--port", "0"]
    command += [
        "--jaas-config",
        str(jaas),
        "--require-sasl",
        "--secure-port",
        "0",
        "--tls-config-file",
        str(tls),
    ]
    command += ["--data-dir", str(tmp_path / "zk")]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        ready = proc.stderr.readline()
        match = re.search(r"ready on (\S+), TLS on (\S+) ", ready)
        assert match, ready
        plain, secure = match.groups()
        client = _client(plain)
        assert client.get_children("/") == ["zookeeper"]
        client.stop()
        client.close()
        client = _client(
            secure, use_ssl=True, ca=str(pki["ca"]), certfile=str(pki["broker"]), keyfile=str(pki["broker"]),
            keyfile_password=KEY_PASSWORD, check_hostname=True,
        )  # fmt: skip
        assert client.get_children("/") == ["zookeeper"]
        client.stop()
        client.close()
        anonymous = KazooClient(hosts=plain, timeout=5.0)
        try:
            with pytest.raises((KazooException, KazooTimeoutError)):
                anonymous.start(timeout=10.0)
                anonymous.get_children("/")
        finally:
            anonymous.stop()
            anonymous.close()
        proc.terminate()
        assert proc.wait(timeout=30) == 0
        rest = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    logs = "".join(p.read_text() for p in (tmp_path / "zk").glob("zookeeper.*"))
    for text in (ready, rest, logs):
        assert PASSWORD not in text and KEY_PASSWORD not in text
    assert "kafka-controller zookeeper" in rest  # the stopping line
    bad = subprocess.run(
        [*command[:2], "--port", "0", "--require-sasl"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "requiring SASL needs" in bad.stderr
