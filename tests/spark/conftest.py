"""Fixtures for the reconciliation tests: one local SparkSession for the whole test session, tiny
synthetic fleets, and audit stores (SQLite files; PostgreSQL through the audit suite's helpers).

The session is shared (starting Spark costs 10-30 s here): local[2], no UI, two shuffle partitions,
and both Debian JDBC jars, which every test needing JDBC requires to be installed.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.reconcile import synthetic
from kafka_controller.reconcile.spark_io import JAR_DIR, JDBC_DRIVERS

JARS = [os.path.join(JAR_DIR, name) for name, _, _ in JDBC_DRIVERS.values()]
PLANTED_PARTITIONS = 1200


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    missing = [j for j in JARS if not os.path.isfile(j)]
    assert not missing, (
        f"JDBC jars missing: {missing} (apt-get install libpostgresql-jdbc-java libxerial-sqlite-jdbc-java)"
    )
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafka-controller-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        # Tiny inputs: adaptive execution only adds jobs here (the job keeps Spark's default, on).
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.jars", ",".join(JARS))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def planted_fleet(tmp_path_factory: pytest.TempPathFactory) -> synthetic.SyntheticFleet:
    """Every plant once, on a fleet big enough that no plant but leader_skew tips a broker over 10%."""
    return synthetic.generate(
        tmp_path_factory.mktemp("planted") / "fleet", PLANTED_PARTITIONS, plants=synthetic.PLANTS
    )


@pytest.fixture(scope="session")
def healthy_fleet(tmp_path_factory: pytest.TempPathFactory) -> synthetic.SyntheticFleet:
    return synthetic.generate(tmp_path_factory.mktemp("healthy") / "fleet", 300, brokers=5)


def sqlite_audit_url(directory: Path) -> str:
    """A fresh audit store at the head revision, in ``directory``."""
    from kafka_controller.audit.migrate import upgrade_database

    url = f"sqlite:///{directory / 'audit.db'}"
    upgrade_database(url)
    return url
