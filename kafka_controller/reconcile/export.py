"""Export a reconciliation snapshot from any ``MetadataStore``, plus the brokers' and controller's views.

ZooKeeper is read with the store's batched reads only (topics in chunks, every state znode of a
chunk in one multi-read, topic configs in one batched read), never one round trip per partition.
The two other views come from pluggable sources (``reconcile.sources``):
``replica_manager_source``, ``admin_broker_source`` and the ``DescribeReplicaStates`` hook for
brokers; ``context_controller_source``, ``admin_controller_source`` (the live controller's
``DescribeControllerContext`` API) and the row-JSON hook for the controller.

A controller view that cannot be had (no controller answered in time, or the controller changed
between the ZooKeeper read and the answer) does not fail the export: the snapshot is written
without it, ``meta.controller_view_error`` and ``ExportResult.controller_view_error`` say why, and
a warning is logged. A malformed answer (or a source's bad row) still fails the export, with
nothing written.

The views are read *after* ZooKeeper, so on a busy cluster a view can be a little newer than the
ZooKeeper data; the rules compare leader epochs, so "newer" shows up as a mismatch with evidence.
``export_audit_history`` copies the audit store's transition tables to Parquet.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError, MetadataStoreError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, TopicPartition
from kafka_controller.ports import Clock, MetadataStore, SystemClock
from kafka_controller.reconcile import snapshot as S
from kafka_controller.reconcile import snapshot_schema as SS
from kafka_controller.reconcile.sources import (
    BrokerView,
    BrokerViewSource,
    ControllerView,
    ControllerViewSource,
    ControllerViewUnavailableError,
    leadership_row,
)

__all__ = ["ExportResult", "export_audit_history", "export_snapshot"]

log = logging.getLogger(__name__)

TOPIC_CHUNK = 2_000
PARTITION_CHUNK = 20_000


@dataclass(slots=True)
class ExportResult:
    path: Path
    snapshot_id: str
    rows: dict[str, int]
    #: Topics whose znode could not be read or decoded (left out of the snapshot), with the reason.
    skipped_topics: dict[str, str]
    #: Whether the controller's view is in the snapshot, and why not when it was asked for.
    controller_view: bool = False
    controller_view_error: str | None = None


# -- ZooKeeper -----------------------------------------------------------------------------------
def export_snapshot(
    store: MetadataStore,
    out: str | os.PathLike[str],
    *,
    broker_source: BrokerViewSource | None = None,
    controller_source: ControllerViewSource | None = None,
    clock: Clock | None = None,
    source: str = "metadata-store",
    default_min_insync_replicas: int = 1,
    default_unclean_leader_election_enable: bool = False,
    overwrite: bool = False,
) -> ExportResult:
    """Read everything, write the snapshot to ``out`` atomically, and return what was written.

    ``MetadataStoreError`` from the store as a whole (e.g. unavailable) aborts the export with
    nothing written; a single corrupt topic znode is skipped and reported in ``skipped_topics``.
    """
    if default_min_insync_replicas < 1:
        raise InvalidArgumentError(f"min.insync.replicas must be >= 1, got {default_min_insync_replicas}")
    now = (clock or SystemClock()).time_ms()
    writer = S.SnapshotWriter(out, overwrite=overwrite)
    with writer:
        controller_id = store.get_controller_id()
        epoch = store.get_controller_epoch()
        cluster_id = store.get_cluster_id()
        brokers = {b.id: (b, e) for b, e in store.get_all_brokers_and_epochs().items()}
        topics = sorted(store.get_all_topics())
        queued = set(store.get_topic_deletions())
        skipped: dict[str, str] = {}
        reassigning: dict[TopicPartition, tuple[int, ...]] = {}
        for i in range(0, len(topics), TOPIC_CHUNK):
            chunk = topics[i : i + TOPIC_CHUNK]
            _export_topics(store, writer, chunk, queued, skipped, reassigning)
            _export_configs(store, writer, chunk)
        _write_reassignments(writer, store.get_partition_reassignment(), reassigning)

        views = list(broker_source(sorted(brokers))) if broker_source is not None else []
        reported = _write_broker_views(writer, views)
        writer.write(
            "brokers",
            _columns(
                SS.TABLES["brokers"],
                [_broker_row(b, e, b.id in reported) for b, e in (brokers[i] for i in sorted(brokers))],
            ),
        )
        controller, controller_error = _read_controller_view(controller_source, controller_id, epoch)
        if controller is not None:
            _write_controller_view(writer, controller)
        snapshot_id = str(uuid.uuid4())
        writer.commit(
            {
                "snapshot_id": snapshot_id,
                "taken_ms": now,
                "source": source,
                "cluster_id": cluster_id,
                "controller_id": controller_id,
                "controller_epoch": epoch[0] if epoch else None,
                "controller_epoch_zk_version": epoch[1] if epoch else None,
                "broker_views": broker_source is not None,
                "controller_view": controller is not None,
                "controller_view_error": controller_error,
                "default_min_insync_replicas": default_min_insync_replicas,
                "default_unclean_leader_election_enable": default_unclean_leader_election_enable,
            }
        )
    return ExportResult(
        writer.path, snapshot_id, dict(writer.rows), skipped, controller is not None, controller_error
    )


def _export_topics(
    store: MetadataStore,
    writer: S.SnapshotWriter,
    topics: list[str],
    queued: set[str],
    skipped: dict[str, str],
    reassigning: dict[TopicPartition, tuple[int, ...]],
) -> None:
    reads = store.get_replica_assignment_and_topic_ids(topics)
    assignments = []
    for topic in topics:
        read = reads.get(topic)
        if read is None:
            continue  # deleted between the listing and the read
        if isinstance(read, MetadataStoreError):
            log.warning("snapshot: skipping topic %s: %s", topic, read)
            skipped[topic] = str(read)
            continue
        for tp in sorted(read.assignment):
            a = read.assignment[tp]
            assignments.append((tp, read.topic_id, a))
            if a.is_being_reassigned:
                reassigning[tp] = a.target_replicas
    for i in range(0, len(assignments), PARTITION_CHUNK):
        part = assignments[i : i + PARTITION_CHUNK]
        states = store.get_partition_states([tp for tp, _, _ in part])
        rows = []
        for tp, topic_id, a in part:
            state_read = states.get(tp)
            state = state_read if isinstance(state_read, LeaderIsrAndControllerEpoch) else None
            error = str(state_read) if isinstance(state_read, MetadataStoreError) else None
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "topic_id": topic_id,
                    "replicas": list(a.replicas),
                    "adding_replicas": list(a.adding_replicas),
                    "removing_replicas": list(a.removing_replicas),
                    **leadership_row(state),
                    "state_error": error,
                    "queued_for_deletion": tp.topic in queued,
                }
            )
        writer.write("zk_partitions", _columns(SS.TABLES["zk_partitions"], rows))


def _export_configs(store: MetadataStore, writer: S.SnapshotWriter, topics: list[str]) -> None:
    configs, failures = store.get_log_configs(topics, {})
    for topic, error in failures.items():
        log.warning("snapshot: no config for topic %s: %s", topic, error)
    rows = [
        {"topic": t, "key": k, "value": str(v)} for t in topics for k, v in sorted(configs.get(t, {}).items())
    ]
    if rows:
        writer.write("topic_configs", _columns(SS.TABLES["topic_configs"], rows))


def _write_reassignments(
    writer: S.SnapshotWriter,
    admin: Mapping[TopicPartition, Sequence[int]],
    in_topics: Mapping[TopicPartition, tuple[int, ...]],
) -> None:
    """Requests still in ``/admin/reassign_partitions`` and reassignments recorded in topic znodes."""
    rows = [(tp, t, "admin_znode") for tp, t in sorted(admin.items())]
    rows += [(tp, t, "topic_znode") for tp, t in sorted(in_topics.items())]
    if rows:
        writer.write(
            "reassignments",
            {
                "topic": [tp.topic for tp, _, _ in rows],
                "partition": [tp.partition for tp, _, _ in rows],
                "target_replicas": [list(t) for _, t, _ in rows],
                "source": [s for _, _, s in rows],
                "started_ms": [None] * len(rows),
            },
        )


def _broker_row(broker: Any, epoch: int, reported: bool) -> dict[str, Any]:
    ep = broker.endpoint()
    return {
        "broker_id": broker.id,
        "broker_epoch": epoch,
        "host": ep.host if ep else None,
        "port": ep.port if ep else None,
        "rack": broker.rack,
        "view_reported": reported,
    }


def _columns(fields: Sequence[SS.Field], rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    return {f.name: [r[f.name] for r in rows] for f in fields}


# -- the views -----------------------------------------------------------------------------------
def _write_broker_views(writer: S.SnapshotWriter, views: Iterable[BrokerView]) -> set[int]:
    reported: set[int] = set()
    for view in views:
        rows = []
        for i, r in enumerate(view.replicas):
            if not view.checked:
                SS.check_row(
                    "broker_replicas",
                    {"broker_id": view.broker_id, "broker_epoch": view.broker_epoch, **r},
                    f"broker {view.broker_id} replica row {i}",
                )
            rows.append({**r, "broker_id": view.broker_id, "broker_epoch": view.broker_epoch})
        reported.add(view.broker_id)
        if rows:
            writer.write("broker_replicas", _columns(SS.TABLES["broker_replicas"], rows))
    return reported


def _read_controller_view(
    source: ControllerViewSource | None, controller_id: int | None, epoch: tuple[int, int] | None
) -> tuple[ControllerView | None, str | None]:
    """The view, or None and why not. A view from another controller or epoch than ZooKeeper named
    at the start of the export is left out: its context belongs to another moment."""
    if source is None:
        return None, None
    try:
        view = source()
    except ControllerViewUnavailableError as e:
        reason = str(e) or type(e).__name__
    else:
        if (
            controller_id is None
            or epoch is None
            or (view.controller_id, view.epoch) == (controller_id, epoch[0])
        ):
            return view, None
        reason = (
            f"the controller changed during the export (ZooKeeper named controller {controller_id} "
            f"epoch {epoch[0]}, the answer came from controller {view.controller_id} epoch {view.epoch})"
        )
    log.warning("snapshot: written without the controller's view: %s", reason)
    return None, reason


def _write_controller_view(writer: S.SnapshotWriter, view: ControllerView) -> None:
    if not view.checked:
        for table, rows in zip(
            ("controller_partitions", "controller_replicas", "reassignments"), view.rows(), strict=True
        ):
            for i, r in enumerate(rows):
                SS.check_row(table, r, f"controller {table} row {i}")
    step = PARTITION_CHUNK * 5
    for table, columns in view.columns().items():
        n = len(columns["partition"])
        for i in range(0, n, step):
            writer.write(table, {k: v[i : i + step] for k, v in columns.items()})


# -- the audit history ---------------------------------------------------------------------------
def export_audit_history(
    url: str, out: str | os.PathLike[str], *, chunk_rows: int = 200_000
) -> dict[str, int]:
    """Copy the audit store's transition tables to Parquet (``<out>/<table>/``), streamed in chunks;
    rows dry runs planned are left out."""
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    from kafka_controller.audit import schema as audit_schema
    from kafka_controller.audit.engine import create_audit_engine, translate

    target = Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidArgumentError(f"audit copy directory {target} already exists and is not empty")
    engine = create_audit_engine(url, must_exist=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    counts: dict[str, int] = {}
    try:
        tmp.mkdir(parents=True)
        with engine.connect() as conn:
            for name, fields in SS.AUDIT_TABLES.items():
                table = audit_schema.metadata.tables[name]
                cols = [table.c[f.name] for f in fields]
                # what happened only: rows a dry run planned are not history
                result = conn.execution_options(stream_results=True).execute(
                    select(*cols).where(table.c.dry_run.is_(False)).order_by(table.c.id)
                )
                counts[name] = S.write_audit_parquet(tmp, name, _batches(result, fields, chunk_rows))
        if target.exists():
            target.rmdir()
        tmp.rename(target)
    except SQLAlchemyError as e:
        raise translate(e, f"cannot export the audit history from {engine.url.render_as_string()}") from None
    finally:
        engine.dispose()
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return counts


def _batches(result: Any, fields: Sequence[SS.Field], chunk_rows: int) -> Iterable[dict[str, list[Any]]]:
    while chunk := result.fetchmany(chunk_rows):
        yield {f.name: [_plain(row[i], f) for row in chunk] for i, f in enumerate(fields)}


def _plain(value: Any, f: SS.Field) -> Any:
    if value is None:
        return None
    return bool(value) if f.type == "bool" else value
