"""The Apache Spark provider's ``spark`` connection, read without the provider: where
``spark-submit`` sends the reconciliation job. Pure, like ``connections`` (which re-exports it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka_controller.airflow.connection_fields import _extras, _int
from kafka_controller.domain.errors import InvalidArgumentError

__all__ = ["DEFAULT_SPARK_CONN_ID", "SPARK_CONN_TYPE", "SparkConnection", "spark_connection"]

SPARK_CONN_TYPE = "spark"
DEFAULT_SPARK_CONN_ID = "spark_default"
_SPARK_EXTRAS = frozenset({"deploy-mode", "queue", "namespace", "spark-home", "spark-binary"})
_SPARK_BINARIES = ("spark-submit", "spark2-submit", "spark3-submit")


@dataclass(frozen=True)
class SparkConnection:
    """Where ``spark-submit`` sends the job: the provider's ``spark`` connection fields, checked."""

    conn_id: str
    master: str
    deploy_mode: str | None = None
    queue: str | None = None
    namespace: str | None = None
    spark_binary: str | None = None  #: a path when ``spark-home`` is set, else None (the venv's)

    def submit_args(self) -> list[str]:
        """The ``spark-submit`` options besides ``--master``."""
        args: list[str] = []
        if self.deploy_mode:
            args += ["--deploy-mode", self.deploy_mode]
        if self.queue:
            args += ["--queue", self.queue]
        if self.namespace:
            args += ["--conf", f"spark.kubernetes.namespace={self.namespace}"]
        return args


def spark_connection(
    conn_id: str,
    *,
    host: str | None,
    port: int | None = None,
    extra: Mapping[str, Any] | None = None,
    **_unused: Any,
) -> SparkConnection:
    """Parse a ``spark`` connection as the Apache Spark provider lays it out: *host* ``local[N]``,
    ``yarn``, ``spark://master`` or ``k8s://https://api``; *port* appended to a URL host; *extra*
    ``deploy-mode``, ``queue``, ``namespace``, ``spark-home``, ``spark-binary``. A bare host name with
    a port is a standalone master (``spark://``), where the provider would pass ``host:port`` on."""
    text = (host or "").strip()
    if not text:
        raise InvalidArgumentError(
            f"connection {conn_id!r}: host is empty (expected spark://HOST, yarn, local[N])"
        )
    ex = _extras(conn_id, SPARK_CONN_TYPE, extra, _SPARK_EXTRAS)
    if port:
        number = _int(conn_id, "port", port)
        if "://" not in text and not text.startswith(("local", "yarn")):
            text = f"spark://{text}"
        if not text.startswith(("local", "yarn")):
            text = f"{text}:{number}"
    mode = ex.get("deploy-mode")
    if mode not in (None, "client", "cluster"):
        raise InvalidArgumentError(
            f"connection {conn_id!r}: deploy-mode must be client or cluster, got {mode!r}"
        )
    binary = ex.get("spark-binary", "spark-submit")
    if binary not in _SPARK_BINARIES:
        raise InvalidArgumentError(
            f"connection {conn_id!r}: spark-binary must be one of {', '.join(_SPARK_BINARIES)}, "
            f"got {binary!r}"
        )
    home = ex.get("spark-home")
    return SparkConnection(
        conn_id,
        text,
        deploy_mode=mode,
        queue=ex.get("queue"),
        namespace=ex.get("namespace"),
        spark_binary=f"{str(home).rstrip('/')}/bin/{binary}" if home else None,
    )
