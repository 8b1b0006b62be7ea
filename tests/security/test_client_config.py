"""Kafka's tools' client properties (``--command-config``) and the Airflow connection's fields ->
kafka-python's and librdkafka's settings, in one place; bad files are one line naming the key,
and nothing shown carries a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_controller.airflow.connections import cluster_connection
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security.client_config import from_fields, read_command_config

SECRET = 'Pa55-w0rd-"quoted"-9c1e'


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return path


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def test_kafka_tools_scram_over_ssl_maps_onto_kafka_python_and_librdkafka(tmp_path: Path, ca: Path) -> None:
    escaped = SECRET.replace('"', '\\"')
    path = _write(
        tmp_path,
        "# kafka-topics.sh --command-config\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="alice" password="{escaped}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={ca}\n"
        "some.unknown.key=ignored as Kafka's tools ignore it\n",
    )
    s = read_command_config(path)
    assert s.kafka_python() == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "alice",
        "sasl_plain_password": SECRET,
        "ssl_check_hostname": True,
        "ssl_cafile": str(ca),
    }
    assert s.librdkafka() == {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": SECRET,
        "ssl.ca.location": str(ca),
    }
    assert s.listener_name == "SASL_SSL" and s.authenticate() is not None
    assert SECRET not in repr(s) + repr(s.described())


def test_librdkafka_names_read_the_same(tmp_path: Path, ca: Path) -> None:
    path = _write(
        tmp_path,
        f"security.protocol=sasl_plaintext\nsasl.mechanisms=PLAIN\nsasl.username=bob\nsasl.password={SECRET}\n"
        f"ssl.ca.location={ca}\n",
    )
    s = read_command_config(path)
    assert (s.security_protocol, s.sasl_mechanism, s.username, s.password) == (
        "SASL_PLAINTEXT",
        "PLAIN",
        "bob",
        SECRET,
    )
    assert s.cafile is None and s.ssl_context() is None  # no TLS on SASL_PLAINTEXT


def test_pem_keystore_is_the_client_certificate_with_its_key_password(tmp_path: Path, ca: Path) -> None:
    keystore = tmp_path / "client.keystore.pem"
    keystore.write_text("key and chain")
    path = _write(
        tmp_path,
        f"security.protocol=SSL\nssl.keystore.type=PEM\nssl.keystore.location={keystore}\n"
        f"ssl.key.password={SECRET}\nssl.truststore.location={ca}\nssl.endpoint.identification.algorithm=\n",
    )
    kp = read_command_config(path).kafka_python()
    assert kp["ssl_certfile"] == str(keystore) and kp["ssl_password"] == SECRET
    assert "ssl_keyfile" not in kp and kp["ssl_check_hostname"] is False
    assert "sasl_mechanism" not in kp


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("security.protocol=SASL_TLS\n", "security.protocol"),
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=GSSAPI\nsasl.username=a\nsasl.password=b\n",
            "sasl.mechanism",
        ),
        ("security.protocol=SASL_SSL\n", "sasl.mechanism"),  # Kafka's default is GSSAPI
        ("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n", "needs a username and password"),
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=org.apache.kafka.common."
            'security.scram.ScramLoginModule required username="a" password="b";\n',
            "sasl.jaas.config",
        ),
        (
            "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.jaas.config=PlainLoginModule required "
            f'username="a" password="{SECRET}"\n',
            "sasl.jaas.config",
        ),
        ("security.protocol=SSL\nssl.truststore.type=JKS\n", "ssl.truststore.type"),
        ("security.protocol=SSL\nssl.truststore.location=/no/such/ca.pem\n", "ssl.truststore.location"),
        ("security.protocol=SSL\nssl.truststore.certificates=-----BEGIN\n", "ssl.truststore.certificates"),
        ("security.protocol=SSL\nssl.endpoint.identification.algorithm=dns\n", "ssl.endpoint.identification"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_key_and_never_the_password(
    tmp_path: Path, text: str, key: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InvalidArgumentError) as e:
        read_command_config(path)
    message = str(e.value)
    assert key in message and str(path) in message
    assert "\n" not in message and SECRET not in message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match=r"cannot read --command-config .*nope"):
        read_command_config(tmp_path / "nope")


def test_airflow_connection_login_and_password_are_sasl_with_a_sasl_protocol(ca: Path) -> None:
    c = cluster_connection(
        "prod",
        host="zk:2181",
        login="ops",
        password=SECRET,
        extra={
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-256",
            "extra__kafka_controller_cluster__ssl_cafile": str(ca),
        },
    )
    kp = c.kafka_security.kafka_python()
    assert (kp["sasl_plain_username"], kp["sasl_plain_password"], kp["ssl_cafile"]) == (
        "ops",
        SECRET,
        str(ca),
    )
    assert c.digest is None  # SASL's login, not ZooKeeper digest credentials
    shown = repr(c) + repr(c.describe())
    assert SECRET not in shown
    assert c.describe()["sasl_username"] == "ops" and c.describe()["security_protocol"] == "SASL_SSL"


def test_airflow_connection_without_a_protocol_keeps_the_digest_and_plaintext() -> None:
    c = cluster_connection("prod", host="zk:2181", login="kafka", password=SECRET)
    assert c.digest == ("kafka", SECRET) and c.kafka_security.kafka_python() == {
        "security_protocol": "PLAINTEXT"
    }


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "OAUTHBEARER"}, "sasl_mechanism"),
        ({"security_protocol": "SSL", "ssl_cafile": "/no/such.pem"}, "ssl_cafile"),
        ({"security_protocol": "TLS"}, "security_protocol"),
    ],
)
def test_bad_airflow_security_fields_are_one_line_with_the_field_name(extra: dict, named: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        cluster_connection("prod", host="zk:2181", login="ops", password=SECRET, extra=extra)
    assert named in str(e.value) and "'prod'" in str(e.value) and SECRET not in str(e.value)


def test_fields_without_login_are_refused_for_sasl() -> None:
    with pytest.raises(InvalidArgumentError, match="login and password"):
        from_fields(security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN", where="connection 'x'")
