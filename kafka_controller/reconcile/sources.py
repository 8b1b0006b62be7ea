"""Where the brokers' and the controller's views come from: plain callables returning rows.

* ``BrokerViewSource(broker_ids) -> Iterable[BrokerView]``: each broker's own replicas.
  ``replica_manager_source`` reads in-process ``ReplicaManager``s; ``admin_broker_source`` calls the
  broker's ``DescribeReplicas`` admin API through an ``AdminClient``; ``describe_replica_states_source``
  is **the hook** for the runtime's ``DescribeReplicaStates`` JSON (rows: ``snapshot.BROKER_VIEW_FIELDS``).
* ``ControllerViewSource() -> ControllerView``: the active controller's context.
  ``context_controller_source`` reads a ``ControllerContext`` directly (call it on the event thread,
  or while the controller is idle); ``admin_controller_source`` calls the active controller's
  ``DescribeControllerContext`` API (a columnar document, ``core.context_description``) through an
  ``AdminClient``; ``describe_controller_context_source`` is the hook for the same answer as row
  JSON, which ``describe_controller_context`` builds. A source that cannot reach the controller
  raises ``ControllerViewUnavailableError``: the exporter then writes the snapshot without the view
  and records why.

Every row is checked against the snapshot schema before anything is written: a malformed answer is a
one-line error naming the row and field.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_controller.core.context_description import (
    check_description,
    describe_context,
    description_rows,
    expand_description,
)
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch
from kafka_controller.reconcile import snapshot_schema as SS
from kafka_controller.transport.errors import ProtocolError

if TYPE_CHECKING:
    from kafka_controller.core.context import ControllerContext

log = logging.getLogger(__name__)


@dataclass(slots=True)
class BrokerView:
    """One broker's answer: its epoch and its replicas (dicts with ``snapshot.BROKER_VIEW_FIELDS``)."""

    broker_id: int
    broker_epoch: int | None
    replicas: list[dict[str, Any]]
    #: True when the source built or validated the rows itself; the exporter checks the others.
    checked: bool = False


@dataclass(slots=True)
class ControllerView:
    """The controller's context as rows (``snapshot.CONTROLLER_*_FIELDS``, ``REASSIGNMENT_FIELDS``),
    or as the checked columnar ``description`` the ``DescribeControllerContext`` API answers (then
    the row lists are empty: at 100,000 partitions, building a dict per row costs more than the
    whole answer, and the exporter writes the columns as they are). ``rows()`` gives rows either way."""

    controller_id: int
    epoch: int
    epoch_zk_version: int
    partitions: list[dict[str, Any]] = field(default_factory=list)
    replicas: list[dict[str, Any]] = field(default_factory=list)
    reassignments: list[dict[str, Any]] = field(default_factory=list)
    checked: bool = False
    description: dict[str, Any] | None = None

    def rows(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """``(partitions, replicas, reassignments)`` rows."""
        if self.description is not None:
            return description_rows(self.description)
        return self.partitions, self.replicas, self.reassignments

    def columns(self) -> dict[str, dict[str, list[Any]]]:
        """The snapshot tables (``controller_partitions``, ``controller_replicas``,
        ``reassignments``) as columns; replica lists may be shared between rows."""
        if self.description is not None:
            t = expand_description(self.description)
            n = len(t["reassignments"]["partition"])
            reassignments = {**t["reassignments"], "source": ["controller"] * n, "started_ms": [None] * n}
            return {
                "controller_partitions": t["partitions"],
                "controller_replicas": t["replicas"],
                "reassignments": reassignments,
            }
        return {
            table: {f.name: [r[f.name] for r in rows] for f in SS.TABLES[table]}
            for table, rows in (
                ("controller_partitions", self.partitions),
                ("controller_replicas", self.replicas),
                ("reassignments", self.reassignments),
            )
        }


class ControllerViewUnavailableError(KafkaControllerError):
    """The controller did not answer (none registered, moved, timed out, unreachable): the snapshot
    is written without its view, and says why."""


BrokerViewSource = Callable[[Sequence[int]], Iterable[BrokerView]]
ControllerViewSource = Callable[[], ControllerView]


def leadership_row(state: LeaderIsrAndControllerEpoch | None) -> dict[str, Any]:
    if state is None:
        return dict.fromkeys(("leader", "leader_epoch", "isr", "controller_epoch", "zk_version"))
    lai = state.leader_and_isr
    return {
        "leader": lai.leader,
        "leader_epoch": lai.leader_epoch,
        "isr": list(lai.isr),
        "controller_epoch": state.controller_epoch,
        "zk_version": lai.zk_version,
    }


def context_controller_source(context: ControllerContext, controller_id: int) -> ControllerViewSource:
    """The in-process controller view: reads ``context`` when called (on the event thread, or idle)."""

    def read() -> ControllerView:
        return ControllerView(
            controller_id, context.epoch, context.epoch_zk_version, *_context_rows(context), checked=True
        )

    return read


def _context_rows(
    ctx: ControllerContext,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """One definition of the controller's rows: the API's columnar document, expanded."""
    return description_rows(describe_context(ctx, -1))


def describe_controller_context(context: ControllerContext, controller_id: int) -> dict[str, Any]:
    """The ``DescribeControllerContext`` answer the runtime should serve (JSON-ready)."""
    partitions, replicas, reassignments = _context_rows(context)
    return {
        "version": SS.ADMIN_API_VERSION,
        "controller_id": controller_id,
        "epoch": context.epoch,
        "epoch_zk_version": context.epoch_zk_version,
        "partitions": partitions,
        "replicas": replicas,
        "reassignments": reassignments,
    }


def controller_view_from_json(doc: Mapping[str, Any]) -> ControllerView:
    """Parse (and check) a ``DescribeControllerContext`` answer."""
    _check_version(doc, "DescribeControllerContext")
    try:
        view = ControllerView(
            int(doc["controller_id"]),
            int(doc["epoch"]),
            int(doc["epoch_zk_version"]),
            list(doc["partitions"]),
            list(doc["replicas"]),
            list(doc.get("reassignments", [])),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgumentError(f"DescribeControllerContext: bad or missing field {e}") from None
    for table, rows in (
        ("controller_partitions", view.partitions),
        ("controller_replicas", view.replicas),
        ("reassignments", view.reassignments),
    ):
        for i, r in enumerate(rows):
            SS.check_row(table, r, f"DescribeControllerContext {table} row {i}")
    view.checked = True
    return view


def broker_view_from_json(doc: Mapping[str, Any]) -> BrokerView:
    """Parse (and check) a ``DescribeReplicaStates`` answer."""
    _check_version(doc, "DescribeReplicaStates")
    try:
        broker_id = int(doc["broker_id"])
        epoch = doc.get("broker_epoch")
        replicas = [dict(r) for r in doc["replicas"]]
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidArgumentError(f"DescribeReplicaStates: bad or missing field {e}") from None
    for i, r in enumerate(replicas):
        SS.check_row(
            "broker_replicas", r, f"DescribeReplicaStates broker {broker_id} row {i}", SS.BROKER_VIEW_FIELDS
        )
    return BrokerView(broker_id, None if epoch is None else int(epoch), replicas, checked=True)


def _check_version(doc: Mapping[str, Any], api: str) -> None:
    if not isinstance(doc, Mapping):
        raise InvalidArgumentError(f"{api}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("version") != SS.ADMIN_API_VERSION:
        raise InvalidArgumentError(f"{api}: unsupported version {doc.get('version')!r}")


def describe_controller_context_source(fetch: Callable[[], Mapping[str, Any]]) -> ControllerViewSource:
    """Hook: ``fetch()`` returns a ``DescribeControllerContext`` answer as row JSON."""
    return lambda: controller_view_from_json(fetch())


def controller_view_from_description(doc: Any) -> ControllerView:
    """A view of a columnar ``DescribeControllerContext`` document (``core.context_description``),
    checked: a malformed one is a one-line ``InvalidArgumentError``."""
    try:
        check_description(doc)
    except ValueError as e:
        raise InvalidArgumentError(f"DescribeControllerContext: {e}") from None
    return ControllerView(
        doc["controller_id"], doc["epoch"], doc["epoch_zk_version"], checked=True, description=doc
    )


def admin_controller_source(client: Any, timeout_s: float | None = None) -> ControllerViewSource:
    """The active controller's ``DescribeControllerContext`` API through an ``AdminClient`` (which
    finds the controller in ZooKeeper and follows it when it moves). No answer within ``timeout_s``
    (default: the client's), or any transport or controller error, is ``ControllerViewUnavailableError``;
    a malformed answer is ``InvalidArgumentError``."""

    def read() -> ControllerView:
        try:
            answer = client.describe_controller_context(timeout_s=timeout_s)
        except InvalidArgumentError:
            raise
        except ProtocolError as e:  # an answer, but malformed: a bug to report, not an outage
            raise InvalidArgumentError(f"malformed DescribeControllerContext answer: {e}") from None
        except KafkaControllerError as e:
            raise ControllerViewUnavailableError(str(e)) from None
        return controller_view_from_description(answer.context)

    return read


def describe_replica_states_source(fetch: Callable[[int], Mapping[str, Any] | None]) -> BrokerViewSource:
    """Hook: ``fetch(broker_id)`` calls that broker's ``DescribeReplicaStates``; None = no answer."""

    def read(broker_ids: Sequence[int]) -> Iterable[BrokerView]:
        for b in broker_ids:
            doc = fetch(b)
            if doc is not None:
                yield broker_view_from_json(doc)

    return read


def replica_manager_source(
    managers: Mapping[int, Any], broker_epochs: Mapping[int, int] | None = None
) -> BrokerViewSource:
    """In-process brokers: ``managers[broker_id]`` is a ``broker.replica_manager.ReplicaManager``."""

    def read(broker_ids: Sequence[int]) -> Iterable[BrokerView]:
        for b in broker_ids:
            rm = managers.get(b)
            if rm is None:
                continue
            with rm.lock:
                now = rm.now_ms()
                rows = [_replica_row(p, now) for p in rm.snapshot()]
            yield BrokerView(b, (broker_epochs or {}).get(b), rows, checked=True)

    return read


def _replica_row(p: Any, now: int) -> dict[str, Any]:
    return {
        "topic": p.tp.topic,
        "partition": p.tp.partition,
        "leader": p.leader,
        "leader_epoch": p.leader_epoch,
        "isr": list(p.isr),
        "zk_version": p.zk_version,
        "replicas": list(p.replicas),
        "is_leader": bool(p.is_leader),
        "log_end_offset": p.log_end_offset(now),
        "high_watermark": p.high_watermark(now),
    }


def admin_broker_source(client: Any) -> BrokerViewSource:
    """Brokers' ``DescribeReplicas`` API through an ``AdminClient``; a broker that fails is left out."""

    def read(broker_ids: Sequence[int]) -> Iterable[BrokerView]:
        for b in broker_ids:
            try:
                answer = client.describe_replicas(b)
            except KafkaControllerError as e:
                log.warning("snapshot: broker %d did not describe its replicas: %s", b, e)
                continue
            rows = [
                {
                    f: (list(v) if isinstance(v, tuple) else v)
                    for f in SS.BROKER_VIEW_FIELDS
                    for v in (getattr(r, f),)
                }
                for r in answer.replicas
            ]
            yield BrokerView(b, answer.broker_epoch, rows, checked=True)

    return read
