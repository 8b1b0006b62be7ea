"""Spark I/O for the job: the session, the snapshot and the audit history (JDBC or Parquet).

JDBC drivers come from Debian packages (``/usr/share/java``), not Maven: ``libpostgresql-jdbc-java``
and ``libxerial-sqlite-jdbc-java``. A missing jar is a one-line error naming the jar and the
package, raised before Spark starts. SQLite is single-writer and local: it is read with one
partition. PostgreSQL is read in ``id`` ranges, several partitions at once.

The audit URL is the project's usual SQLAlchemy URL (``sqlite:////path/audit.db``,
``postgresql+psycopg://user@host:5432/db``), translated here to JDBC; a ``jdbc:`` URL is taken as is.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.reconcile import snapshot_schema as SS

JAR_DIR = os.environ.get("KAFKA_CONTROLLER_JDBC_JAR_DIR", "/usr/share/java")
#: backend -> (jar file name, driver class, Debian package)
JDBC_DRIVERS = {
    "postgresql": ("postgresql.jar", "org.postgresql.Driver", "libpostgresql-jdbc-java"),
    "sqlite": ("sqlite-jdbc.jar", "org.sqlite.JDBC", "libxerial-sqlite-jdbc-java"),
}


@dataclass(frozen=True, slots=True)
class JdbcTarget:
    backend: str
    url: str
    driver: str
    jar: str
    package: str
    properties: dict[str, str]


def jdbc_target(url: str, jar: str | None = None) -> JdbcTarget:
    """The JDBC URL, driver and jar for an audit store URL; ``InvalidArgumentError`` if unusable."""
    props: dict[str, str] = {}
    if url.startswith("jdbc:"):
        backend = url.split(":", 2)[1]
        jdbc_url = url
    else:
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            parsed = make_url(url)
        except (ArgumentError, ValueError):
            raise InvalidArgumentError(f"bad audit URL {url!r}: not a SQLAlchemy or jdbc: URL") from None
        backend = parsed.get_backend_name()
        if backend == "sqlite":
            if not parsed.database or parsed.database == ":memory:":
                raise InvalidArgumentError("bad audit URL: a SQLite audit store needs a file path")
            path = Path(parsed.database).resolve()
            if not path.is_file():
                raise InvalidArgumentError(f"no audit database at {path}")
            jdbc_url = f"jdbc:sqlite:{path}"
        elif backend == "postgresql":
            host = parsed.host or "localhost"
            jdbc_url = f"jdbc:postgresql://{host}:{parsed.port or 5432}/{parsed.database or ''}"
            if parsed.username:
                props["user"] = parsed.username
            if parsed.password:
                props["password"] = str(parsed.password)
        else:
            raise InvalidArgumentError(
                f"bad audit URL: backend {backend!r} is not supported (sqlite or postgresql)"
            )
    if backend not in JDBC_DRIVERS:
        raise InvalidArgumentError(f"bad audit URL: no JDBC driver known for {backend!r}")
    name, driver, package = JDBC_DRIVERS[backend]
    return JdbcTarget(backend, jdbc_url, driver, jar or os.path.join(JAR_DIR, name), package, props)


def check_jar(target: JdbcTarget) -> None:
    if not os.path.isfile(target.jar):
        raise InvalidArgumentError(
            f"JDBC driver jar {target.jar} is missing: install the Debian package {target.package}"
        )


def get_spark(
    *,
    master: str | None = None,
    jars: list[str] | None = None,
    shuffle_partitions: int | None = None,
    driver_memory: str | None = None,
    app_name: str = "kafka-controller-reconcile",
) -> tuple[Any, bool]:
    """The active session (not ours to stop) or a new one; returns ``(spark, created)``.

    Under ``spark-submit`` the master, memory and jars come from its command line; elsewhere the
    default master is ``local[*]``. A session that already runs must already have the jars.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        _check_session_jars(active, jars or [])
        return active, False
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name).config("spark.ui.enabled", "false")
    if master is not None or "PYSPARK_GATEWAY_PORT" not in os.environ:
        builder = builder.master(master or "local[*]")
    if jars:
        builder = builder.config("spark.jars", ",".join(jars))
    if shuffle_partitions:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if driver_memory:
        builder = builder.config("spark.driver.memory", driver_memory)
    spark = builder.getOrCreate()
    _check_session_jars(spark, jars or [])
    return spark, True


def _check_session_jars(spark: Any, jars: list[str]) -> None:
    loaded = spark.sparkContext.getConf().get("spark.jars", "")
    names = {os.path.basename(j) for j in loaded.split(",") if j}
    missing = [j for j in jars if os.path.basename(j) not in names and j not in loaded]
    if missing:
        raise InvalidArgumentError(
            f"the running Spark session lacks the JDBC jar {missing[0]}: pass it with spark-submit --jars"
        )


def is_local(path: str) -> bool:
    scheme = urlparse(path).scheme
    return scheme in ("", "file") or len(scheme) == 1  # a Windows drive letter is not a scheme


def check_local_tables(root: str, tables: Any, what: str) -> None:
    """For a local path, that it is a directory holding every table (remote paths are Spark's to check)."""
    if not is_local(root):
        return
    path = Path(root.removeprefix("file://"))
    if not path.is_dir():
        raise InvalidArgumentError(f"{what} {root} does not exist or is not a directory")
    for table in tables:
        if not (path / table).is_dir():
            raise InvalidArgumentError(
                f"{root} has no {table!r} table (expected a Parquet dataset at {path / table})"
            )


def read_table(spark: Any, root: str, table: str, fields: tuple[SS.Field, ...]) -> Any:
    location = f"{root.rstrip('/')}/{table}"
    if is_local(root) and not Path(location.removeprefix("file://")).is_dir():
        raise InvalidArgumentError(
            f"{root} has no {table!r} table (expected a Parquet dataset at {location})"
        )
    return spark.read.schema(SS.spark_ddl(fields)).parquet(location)


def read_meta(spark: Any, snapshot: str) -> dict[str, Any]:
    if is_local(snapshot) and not Path(snapshot.removeprefix("file://")).is_dir():
        raise InvalidArgumentError(f"snapshot {snapshot} does not exist or is not a directory")
    rows = read_table(spark, snapshot, "meta", SS.TABLES["meta"]).collect()
    if len(rows) != 1:
        raise InvalidArgumentError(f"snapshot {snapshot}: meta must have exactly one row, has {len(rows)}")
    meta: dict[str, Any] = rows[0].asDict()
    version = meta.get("schema_version")
    if not isinstance(version, int) or not 1 <= version <= SS.SNAPSHOT_VERSION:
        raise InvalidArgumentError(
            f"snapshot {snapshot}: schema version {version} is not supported "
            f"(this job reads 1..{SS.SNAPSHOT_VERSION})"
        )
    return meta


def read_snapshot(spark: Any, snapshot: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(meta, {table: DataFrame})``; every table is checked to exist before anything runs."""
    meta = read_meta(spark, snapshot)
    frames = {t: read_table(spark, snapshot, t, f) for t, f in SS.TABLES.items() if t != "meta"}
    return meta, frames


def read_audit_parquet(spark: Any, root: str) -> tuple[Any, Any]:
    partitions, replicas = (read_table(spark, root, t, f) for t, f in SS.AUDIT_TABLES.items())
    return partitions, replicas


def read_audit_jdbc(spark: Any, target: JdbcTarget, partitions: int = 4) -> tuple[Any, Any]:
    """Both transition tables over JDBC, only the columns the rules use, in ``id`` ranges on PostgreSQL."""

    def reader() -> Any:
        r = spark.read.format("jdbc").option("url", target.url).option("driver", target.driver)
        for k, v in target.properties.items():
            r = r.option(k, v)
        return r.option("fetchsize", "10000")

    frames = []
    for table, fields in SS.AUDIT_TABLES.items():
        columns = ", ".join(f'"{f.name}"' for f in fields)
        lo, hi = (0, 0)
        if target.backend != "sqlite" and partitions > 1:
            query = f'SELECT min(id) AS lo, max(id) AS hi FROM "{table}"'
            bounds = reader().option("query", query).load().collect()
            lo, hi = bounds[0]["lo"] or 0, bounds[0]["hi"] or 0
        if hi > lo:
            df = (
                reader()
                .option("dbtable", f'(SELECT {columns} FROM "{table}") AS t')
                .option("partitionColumn", "id")
                .option("lowerBound", str(lo))
                .option("upperBound", str(hi + 1))
                .option("numPartitions", str(partitions))
                .load()
            )
        else:
            df = reader().option("query", f'SELECT {columns} FROM "{table}"').load()
        frames.append(df)
    return frames[0], frames[1]


def write_text(spark: Any, uri: str, text: str) -> None:
    """Write a small text file next to the run's datasets: locally, or through Hadoop's FileSystem."""
    if is_local(uri):
        path = Path(uri.removeprefix("file://"))
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        return
    jvm = spark.sparkContext._jvm
    hpath = jvm.org.apache.hadoop.fs.Path(uri)
    fs = hpath.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    out = fs.create(hpath, True)
    try:
        out.write(bytearray(text.encode("utf-8")))
    finally:
        out.close()
