"""``kafka-controller cluster up --security ssl`` as a user runs it: every broker's only listener is
SSL with client certificates required; ``--json`` gives ``bootstrap_servers`` and the librdkafka
``client_config`` that confluent-kafka takes as it is; kcat reads the printed properties file; a
client without TLS gets nothing; ZooKeeper takes only the printed SASL login (an SSL cluster's
ZooKeeper is as secured as a SASL one's: open, it would let anyone rewrite what the client
certificates guard); SIGINT still stops the cluster with controlled shutdowns."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from kafka_controller.zk.client_security import sasl_from_kafka_opts
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from kafka_controller.zk.security import ZkClientConfig
from tests.integration.helpers import pump_stderr

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.clients]


def test_cluster_up_security_ssl(tmp_path: Path) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    data_dir = tmp_path / "c"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafka_controller.cli.main", "cluster", "up", "--port", "0", "--brokers", "2",
         "--data-dir", str(data_dir), "--security", "ssl", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    lines = pump_stderr(proc)
    try:
        while True:
            line = lines.get(timeout=120)
            assert line is not None, f"cluster up exited with {proc.wait()} before it was ready"
            if line.startswith("kafka-controller cluster: ready"):
                break
        assert proc.stdout is not None
        info = orjson.loads(proc.stdout.readline())
        config = info["client_config"]
        assert config["security.protocol"] == "ssl" and Path(config["ssl.ca.location"]).is_file()

        login = sasl_from_kafka_opts({"KAFKA_OPTS": info["zookeeper_kafka_opts"]})
        assert login is not None and login[0] == "kafka"
        store = KazooMetadataStore(ZkClientConfig(info["zookeeper"], sasl=login))
        try:
            for broker in store.get_all_brokers_and_epochs():
                assert [ep.connection_string().split("://")[0] for ep in broker.endpoints] == ["SSL"]
        finally:
            store.close()

        admin = AdminClient({"bootstrap.servers": info["bootstrap_servers"], **config})
        (future,) = admin.create_topics([NewTopic("secured", 2, 2)], request_timeout=30).values()
        future.result(timeout=60)
        assert len(admin.list_topics(timeout=30).brokers) == 2

        properties = data_dir / "tls" / "client.properties"
        kcat = shutil.which("kcat")
        assert kcat is not None, "kcat is not installed (Debian's kcat package; .ci/bootstrap installs it)"
        listing = subprocess.run(
            [kcat, "-F", str(properties), "-b", info["bootstrap_servers"], "-L", "-J", "-m", "20"],
            capture_output=True, text=True, timeout=60, check=True,
        ).stdout  # fmt: skip
        assert "secured" in [t["topic"] for t in json.loads(listing)["topics"]]

        with pytest.raises(KafkaException):
            AdminClient({"bootstrap.servers": info["bootstrap_servers"]}).list_topics(timeout=3)

        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    rest: list[str] = []
    while (line := lines.get(timeout=10)) is not None:
        rest.append(line)
    assert "kafka-controller cluster: stopped" in rest
