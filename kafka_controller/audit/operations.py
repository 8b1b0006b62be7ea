"""Operations: the admin or Airflow request that caused a set of transitions.

The Airflow/admin layer calls ``start_operation`` before it submits a request (the returned id
travels with the request, and the runtime stamps it on every transition the request causes) and
``finish_operation`` when it knows the result (kept, bounded, in ``result``). Both are synchronous,
one small transaction each: operations are rare, and the caller wants to know the row exists before
it acts. Every row carries the cluster it concerns (``cluster_id``, ZooKeeper's ``/cluster/id``) when
the caller knows it, so one store can serve several clusters. A broker records an operation for an
admin request that came over its listener outside any operation (``broker.admin_audit``): it names
its own id (the transitions were stamped with it already), the request's principal, client id and
address, and the times the request started and ended. ``record_controller_lost`` is an operation's
own account of a controller it took down (a drill's kill), so that the report can measure the
outage from then.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import orjson
from sqlalchemy import Engine, insert, select, update
from sqlalchemy.engine import URL
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from kafka_controller.audit.engine import create_audit_engine, translate
from kafka_controller.audit.migrate import upgrade_database
from kafka_controller.audit.schema import (
    OPERATION_FINAL_STATUSES,
    OPERATION_RUNNING,
    checked_cluster_id,
    controller_events,
    operations,
)
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.ports import Clock, SystemClock

#: The most of an operation's result kept in its row (JSON bytes): a result is a summary (times,
#: counts, a plan's per-step summary); a bigger one is kept as its top-level keys and size.
RESULT_LIMIT_BYTES = 64 * 1024


def _text(name: str, value: object, limit: int, *, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"bad {name} {value!r}: must be a non-empty string")
    if len(value) > limit:
        raise InvalidArgumentError(f"bad {name}: longer than {limit} characters")
    return value


class OperationLog:
    """Records operations in the audit store at ``target`` (a URL or an engine it does not own)."""

    def __init__(
        self, target: str | URL | Engine, *, clock: Clock | None = None, ensure_schema: bool = True
    ) -> None:
        self._owns_engine = not isinstance(target, Engine)
        self._engine = create_audit_engine(target) if not isinstance(target, Engine) else target
        self._clock = clock or SystemClock()
        if ensure_schema:
            try:
                upgrade_database(self._engine)
            except BaseException:
                self.close()
                raise

    def start_operation(
        self,
        kind: str,
        requester: str,
        reason: str,
        parameters: Mapping[str, Any] | None = None,
        dry_run: bool = True,
        *,
        airflow_dag_id: str | None = None,
        airflow_run_id: str | None = None,
        airflow_task_id: str | None = None,
        cluster_id: str | None = None,
        principal: str | None = None,
        client_id: str | None = None,
        client_address: str | None = None,
        operation_id: str | None = None,
        started_ms: int | None = None,
    ) -> str:
        """Insert a ``running`` operation and return its id (a UUID string, or ``operation_id``).

        ``dry_run`` defaults to True, as every mutating operation does (see the operations notes).
        Raises ``InvalidArgumentError`` naming the bad field, ``AuditStoreError`` if the store fails.
        """
        row = {
            "operation_id": _text("operation_id", operation_id, 36, required=False) or str(uuid.uuid4()),
            "kind": _text("kind", kind, 64),
            "requester": _text("requester", requester, 255),
            "reason": _text("reason", reason, 10_000),
            "parameters": _parameters(parameters),
            "dry_run": _flag(dry_run),
            "status": OPERATION_RUNNING,
            "started_ms": self._clock.time_ms() if started_ms is None else _ms("started_ms", started_ms),
            "airflow_dag_id": _text("airflow_dag_id", airflow_dag_id, 250, required=False),
            "airflow_run_id": _text("airflow_run_id", airflow_run_id, 250, required=False),
            "airflow_task_id": _text("airflow_task_id", airflow_task_id, 250, required=False),
            "cluster_id": checked_cluster_id(cluster_id),
            "principal": _text("principal", principal, 255, required=False),
            "client_id": _text("client_id", client_id, 255, required=False),
            "client_address": _text("client_address", client_address, 255, required=False),
        }
        try:
            with self._engine.begin() as conn:
                conn.execute(insert(operations).values(**row))
        except SQLAlchemyError as e:
            raise translate(e, "cannot record the operation") from None
        return str(row["operation_id"])

    def finish_operation(
        self,
        operation_id: str,
        status: str,
        error: str | None = None,
        result: Any = None,
        *,
        finished_ms: int | None = None,
    ) -> None:
        """Mark a running operation ``succeeded``, ``failed`` or ``cancelled``, with its ``result``.

        Refuses (``InvalidArgumentError``) an unknown id, a bad status, or an operation already finished.
        """
        if status not in OPERATION_FINAL_STATUSES:
            raise InvalidArgumentError(
                f"bad status {status!r}: use one of {', '.join(OPERATION_FINAL_STATUSES)}"
            )
        error = _text("error", error, 100_000, required=False)
        try:
            with self._engine.begin() as conn:
                done = conn.execute(
                    update(operations)
                    .where(
                        operations.c.operation_id == operation_id, operations.c.status == OPERATION_RUNNING
                    )
                    .values(
                        status=status,
                        error=error,
                        finished_ms=self._clock.time_ms()
                        if finished_ms is None
                        else _ms("finished_ms", finished_ms),
                        result=bounded(result),
                    )
                ).rowcount
                if done == 1:
                    return
                current = conn.execute(
                    select(operations.c.status).where(operations.c.operation_id == operation_id)
                ).scalar()
        except SQLAlchemyError as e:
            raise translate(e, "cannot finish the operation") from None
        if current is None:
            raise InvalidArgumentError(f"unknown operation id {operation_id!r}")
        raise InvalidArgumentError(f"operation {operation_id} is already finished ({current})")

    def record_controller_lost(
        self, broker_id: int, controller_epoch: int, at_ms: int, detail: str, cluster_id: str | None = None
    ) -> None:
        """A ``lost`` controller event: this operation took controller ``broker_id`` (of
        ``controller_epoch``) down at ``at_ms``. Recording it twice is harmless."""
        for name, value in (
            ("broker_id", broker_id),
            ("controller_epoch", controller_epoch),
            ("at_ms", at_ms),
        ):
            if type(value) is not int or value < 0:
                raise InvalidArgumentError(f"bad {name} {value!r}: must be a non-negative integer")
        row = {
            "kind": "lost",
            "broker_id": broker_id,
            "controller_epoch": controller_epoch,
            "started_ms": at_ms,
            "duration_ms": 0.0,
            "detail": _text("detail", detail, 10_000),
            "cluster_id": checked_cluster_id(cluster_id),
        }
        try:
            with self._engine.begin() as conn:
                conn.execute(insert(controller_events).values(**row))
        except IntegrityError:
            return  # the same loss, recorded already
        except SQLAlchemyError as e:
            raise translate(e, "cannot record the controller's loss") from None

    def get_operation(self, operation_id: str) -> dict[str, Any] | None:
        try:
            with self._engine.connect() as conn:
                row = conn.execute(
                    select(operations).where(operations.c.operation_id == operation_id)
                ).first()
        except SQLAlchemyError as e:
            raise translate(e, "cannot read the operation") from None
        return None if row is None else dict(row._mapping)

    def close(self) -> None:
        if self._owns_engine:
            self._engine.dispose()

    def __enter__(self) -> OperationLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _parameters(parameters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if parameters is None:
        return None
    if not isinstance(parameters, Mapping):
        raise InvalidArgumentError(f"bad parameters: must be a mapping, got {type(parameters).__name__}")
    try:
        return dict(orjson.loads(orjson.dumps(dict(parameters))))
    except TypeError as e:
        raise InvalidArgumentError(f"bad parameters: not JSON-serialisable ({e})") from None


def bounded(result: Any) -> Any:
    """``result`` as JSON-ready data of at most ``RESULT_LIMIT_BYTES``; a bigger one is replaced by
    what it held (its keys) and its size, so a huge plan cannot bloat the operations table."""
    if result is None:
        return None
    try:
        text = orjson.dumps(result, option=orjson.OPT_NON_STR_KEYS, default=str)
    except TypeError as e:
        return {"unrecorded": f"not JSON-serialisable: {e}"}
    if len(text) <= RESULT_LIMIT_BYTES:
        return orjson.loads(text)
    keys = sorted(str(k) for k in result) if isinstance(result, Mapping) else []
    return {"truncated": True, "bytes": len(text), "keys": keys}


def _ms(name: str, value: object) -> int:
    if type(value) is not int or value < 0:
        raise InvalidArgumentError(f"bad {name} {value!r}: must be a non-negative integer of milliseconds")
    return value


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"bad dry_run {value!r}: must be True or False")
    return value
