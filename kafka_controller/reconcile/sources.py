"""Where the brokers' and the controller's views come from: plain callables returning rows.

* ``BrokerViewSource(broker_ids) -> Iterable[BrokerView]``: each broker's own replicas.
  ``replica_manager_source`` reads in-process ``ReplicaManager``s; ``admin_broker_source`` calls the
  broker's ``DescribeReplicas`` admin API through an ``AdminClient``; ``describe_replica_states_source``
  is **the hook** for the runtime's ``DescribeReplicaStates`` JSON (rows: ``snapshot.BROKER_VIEW_FIELDS``).
* ``ControllerViewSource() -> ControllerView``: the active controller's context.
  ``context_controller_source`` reads a ``ControllerContext`` directly (call it on the event thread,
  or while the controller is idle); ``describe_controller_context_source`` is **the hook** for the
  runtime's ``DescribeControllerContext`` JSON, which ``describe_controller_context`` builds.

Every row is checked against the snapshot schema before anything is written: a malformed answer is a
one-line error naming the row and field.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch
from kafka_controller.reconcile import snapshot as S

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
    """The controller's context as rows (``snapshot.CONTROLLER_*_FIELDS``, ``REASSIGNMENT_FIELDS``)."""

    controller_id: int
    epoch: int
    epoch_zk_version: int
    partitions: list[dict[str, Any]]
    replicas: list[dict[str, Any]]
    reassignments: list[dict[str, Any]] = field(default_factory=list)
    checked: bool = False


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
    queued = ctx.topics_to_be_deleted
    states = ctx.partition_states
    leadership = ctx.partitions_leadership_info
    partitions = []
    for tp, a in ctx.iter_assignments():
        state = states.get(tp)
        partitions.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "state": None if state is None else state.kafka_name,
                **leadership_row(leadership.get(tp)),
                "replicas": list(a.replicas),
                "adding_replicas": list(a.adding_replicas),
                "removing_replicas": list(a.removing_replicas),
                "queued_for_deletion": tp.topic in queued,
            }
        )
    replicas = [
        {"topic": r.topic, "partition": r.partition, "replica": r.replica, "state": s.kafka_name}
        for r, s in ctx.replica_states.items()
    ]
    reassignments = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "target_replicas": list(ctx.partition_full_replica_assignment(tp).target_replicas),
            "source": "controller",
            "started_ms": None,
        }
        for tp in sorted(ctx.partitions_being_reassigned)
    ]
    return partitions, replicas, reassignments


def describe_controller_context(context: ControllerContext, controller_id: int) -> dict[str, Any]:
    """The ``DescribeControllerContext`` answer the runtime should serve (JSON-ready)."""
    partitions, replicas, reassignments = _context_rows(context)
    return {
        "version": S.ADMIN_API_VERSION,
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
            S.check_row(table, r, f"DescribeControllerContext {table} row {i}")
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
        S.check_row(
            "broker_replicas", r, f"DescribeReplicaStates broker {broker_id} row {i}", S.BROKER_VIEW_FIELDS
        )
    return BrokerView(broker_id, None if epoch is None else int(epoch), replicas, checked=True)


def _check_version(doc: Mapping[str, Any], api: str) -> None:
    if not isinstance(doc, Mapping):
        raise InvalidArgumentError(f"{api}: expected a JSON object, got {type(doc).__name__}")
    if doc.get("version") != S.ADMIN_API_VERSION:
        raise InvalidArgumentError(f"{api}: unsupported version {doc.get('version')!r}")


def describe_controller_context_source(fetch: Callable[[], Mapping[str, Any]]) -> ControllerViewSource:
    """Hook: ``fetch()`` calls the active controller's ``DescribeControllerContext`` and returns its JSON."""
    return lambda: controller_view_from_json(fetch())


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
    from kafka_controller.domain.errors import KafkaControllerError

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
                    for f in S.BROKER_VIEW_FIELDS
                    for v in (getattr(r, f),)
                }
                for r in answer.replicas
            ]
            yield BrokerView(b, answer.broker_epoch, rows, checked=True)

    return read
