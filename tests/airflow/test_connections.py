"""Connection fields -> settings: every rule, and that secrets stay out of what may be shown."""

from __future__ import annotations

import pytest

from kafka_controller.airflow.connections import audit_connection, cluster_connection
from kafka_controller.domain.errors import InvalidArgumentError


def test_hosts_ports_and_chroot_become_one_connect_string() -> None:
    c = cluster_connection("c", host="zk1:2181, zk2", port=2182, schema="kafka/prod")
    assert c.connect_string == "zk1:2181,zk2:2182/kafka/prod"
    assert c.zk_config().chroot == "/kafka/prod"
    assert c.zk_config().create_paths is False  # operations never bootstrap a cluster


def test_bootstrap_servers_sit_next_to_the_zookeeper_connect_string() -> None:
    c = cluster_connection("c", host="zk:2181", extra={"bootstrap_servers": "k1:9092, k2:9092"})
    assert c.bootstrap_servers == ("k1:9092", "k2:9092")
    assert c.describe()["bootstrap_servers"] == "k1:9092,k2:9092"
    assert cluster_connection("c", host="zk:2181").bootstrap_servers is None  # the controller, from ZooKeeper


def test_chroot_may_come_with_the_host_but_not_twice() -> None:
    assert cluster_connection("c", host="zk:2181/k").connect_string == "zk:2181/k"
    with pytest.raises(InvalidArgumentError, match="chroot is given twice"):
        cluster_connection("c", host="zk:2181/k", schema="/other")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"host": ""}, "host is empty"),
        ({"host": "zk"}, "has no port"),
        ({"host": "zk:abc"}, "must be an integer"),
        ({"host": "zk:1,,zk:2"}, "empty entry"),
        ({"host": "zk:1", "schema": "/a/../b"}, "invalid chroot"),
        ({"host": "zk:1", "login": "u"}, "need both login and password"),
        ({"host": "zk:1", "extra": {"sesion_timeout_ms": 1}}, "unknown extra field 'sesion_timeout_ms'"),
        ({"host": "zk:1", "extra": {"session_timeout_ms": 10}}, "below 1000"),
        ({"host": "zk:1", "extra": {"broker_defaults": {"no.such.key": "1"}}}, "unknown broker config"),
        ({"host": "zk:1", "extra": {"use_ssl": "maybe"}}, "true or false"),
        ({"host": "zk:1", "extra": {"bootstrap_servers": "k1:9092,k2"}}, "'k2' is not host:port"),
        ({"host": "zk:1", "extra": {"bootstrap_servers": 9092}}, "bootstrap_servers must be host:port"),
    ],
)
def test_bad_cluster_fields_are_refused_with_one_line(fields: dict, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message) as e:
        cluster_connection("prod", **fields)
    assert "\n" not in str(e.value) and "'prod'" in str(e.value)


def test_ui_prefixed_extras_are_read_and_secrets_are_not_described() -> None:
    c = cluster_connection(
        "c",
        host="zk:1",
        login="kafka",
        password="s3cret-digest",
        extra={"extra__kafka_controller_cluster__lifecycle": "local", "set_acl": False},
    )
    assert c.lifecycle == "local" and c.digest == ("kafka", "s3cret-digest")
    assert c.zk_config().auth_data() == [("digest", "kafka:s3cret-digest")]
    shown = repr(c) + repr(c.describe())
    assert "s3cret-digest" not in shown and "kafka" in c.describe()["digest_user"]


def test_audit_url_from_extra_gets_the_password_field_and_hides_it() -> None:
    a = audit_connection("a", password="pw-123", extra={"url": "postgresql+psycopg://kc@db:5432/audit"})
    assert a.url == "postgresql+psycopg://kc:pw-123@db:5432/audit"
    assert "pw-123" not in a.redacted_url and "pw-123" not in repr(a)


def test_audit_url_from_fields_and_sqlite(tmp_path) -> None:
    pg = audit_connection("a", host="db", port=5433, login="kc", password="p@ss/w", schema="audit")
    assert pg.url.startswith("postgresql+psycopg://kc:") and pg.url.endswith("@db:5433/audit")
    lite = audit_connection("a", schema=str(tmp_path / "a.db"), extra={"driver": "sqlite"})
    assert lite.url == f"sqlite:///{tmp_path / 'a.db'}"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"extra": {"driver": "sqlite"}}, "file path in schema"),
        ({}, "host is empty"),
        ({"extra": {"url": "mysql://x@y/z"}}, "not supported"),
        ({"extra": {"url": "sqlite://"}}, "in-memory SQLite"),
        ({"extra": {"uri": "x"}}, "unknown extra field 'uri'"),
    ],
)
def test_bad_audit_fields_are_refused(fields: dict, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        audit_connection("a", **fields)


@pytest.mark.airflow
def test_env_var_json_reads_back_through_airflow_as_the_same_connection() -> None:
    """What the demo and the tests put in ``AIRFLOW_CONN_*`` is what the hooks then parse."""
    from airflow.sdk import Connection

    from kafka_controller.airflow.connections import (
        DEFAULT_CLUSTER_CONN_ID,
        audit_conn_json,
        cluster_conn_json,
        conn_env_var,
    )

    assert conn_env_var(DEFAULT_CLUSTER_CONN_ID) == "AIRFLOW_CONN_KAFKA_CONTROLLER_DEFAULT"
    lifecycle = {"type": "local", "state_dir": "/tmp/lc"}
    raw = Connection.from_json(
        cluster_conn_json("zk:2181", "/k", login="ops", password="s3", lifecycle=lifecycle)
    )
    c = cluster_connection(
        "c", host=raw.host, schema=raw.schema, login=raw.login, password=raw.password, extra=raw.extra_dejson
    )
    assert (c.connect_string, c.digest, c.lifecycle) == ("zk:2181/k", ("ops", "s3"), lifecycle)
    raw = Connection.from_json(audit_conn_json("sqlite:////tmp/a.db"))
    assert audit_connection("a", extra=raw.extra_dejson).url == "sqlite:////tmp/a.db"


@pytest.mark.parametrize(
    ("host", "port", "master"),
    [
        ("spark://127.0.0.1", 7077, "spark://127.0.0.1:7077"),
        ("spark-master", 7077, "spark://spark-master:7077"),  # the provider would pass host:port on
        ("yarn", None, "yarn"),
        ("local[2]", None, "local[2]"),
        ("k8s://https://api.example", 6443, "k8s://https://api.example:6443"),
    ],
)
def test_spark_connection_masters(host: str, port: int | None, master: str) -> None:
    from kafka_controller.airflow.spark_connection import spark_connection

    assert spark_connection("spark_default", host=host, port=port).master == master


def test_spark_connection_extras_and_mistakes() -> None:
    from kafka_controller.airflow.spark_connection import spark_connection
    from kafka_controller.domain.errors import InvalidArgumentError

    c = spark_connection(
        "s", host="yarn", extra={"deploy-mode": "cluster", "queue": "ops", "spark-home": "/opt/spark/"}
    )
    assert c.submit_args() == ["--deploy-mode", "cluster", "--queue", "ops"]
    assert c.spark_binary == "/opt/spark/bin/spark-submit"
    for bad, word in (
        ({"host": ""}, "host is empty"),
        ({"host": "yarn", "extra": {"deploy-mode": "both"}}, "deploy-mode"),
        ({"host": "yarn", "extra": {"spark-binary": "/bin/sh"}}, "spark-binary"),
        ({"host": "yarn", "extra": {"master": "x"}}, "unknown extra field"),
    ):
        with pytest.raises(InvalidArgumentError, match=word):
            spark_connection("s", **bad)
