"""``kafka-controller reassign``: Kafka's ``kafka-reassign-partitions.sh`` lifecycle
(generate -> review -> execute -> verify -> cancel) over the controller's admin API.

* ``--generate`` proposes a placement of ``--topics-to-move-json-file``'s topics over
  ``--broker-list`` (Kafka's round-robin) and prints the current assignment next to it; with
  ``--reassignment-json-file`` the proposal is also written there (a new file only).
* ``--execute`` starts the plan with AlterPartitionReassignments (``--legacy-znode``: by creating
  ``/admin/reassign_partitions`` instead, as pre-2.4 tools did). It refuses while other
  reassignments run unless ``--additional``; it prints the current assignment to roll back to.
* ``--verify`` compares the plan with the topic znodes (RS/AR/RR) and the legacy znode: exit 0 when
  every partition is done, 3 while any is in progress, 1 when one ended elsewhere or is missing.
* ``--cancel`` cancels the plan's partitions that are still moving (AlterPartitionReassignments
  with no target), reverting them to their original replicas.
* ``--list`` lists every reassignment in progress, read from ZooKeeper (no controller needed): the
  partitions whose topic znode has adding or removing replicas, as Kafka 2.8's ``--list`` prints
  them (``t-0: replicas: 1,2,3. adding: 3. removing: 1.``), and those still queued in the legacy
  ``/admin/reassign_partitions`` znode that the controller has not started.

The file is parsed and checked against the cluster (topics, partitions, registered brokers) before
anything is sent, so a bad plan changes nothing.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_controller.admin.reassignment import (
    COMPLETE,
    IN_PROGRESS,
    encode_reassignment_json,
    generate_reassignment,
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_to_move_json,
    validate_reassignment,
    verify_reassignment,
)
from kafka_controller.admin.znode_size import check_reassignment_plan
from kafka_controller.cli import audit_options, common, connections, reassign_extras
from kafka_controller.domain.errors import InvalidArgumentError, MetadataStoreError, NodeExistsError

if TYPE_CHECKING:
    from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
    from kafka_controller.zk.store import ZkMetadataStore

PROG = "kafka-controller reassign"
FILE = "reassignment JSON"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "reassign",
        help=summary,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_zookeeper_option(p, bootstrap=True)
    p.add_argument("--reassignment-json-file", metavar="FILE", type=Path, help="Kafka's reassignment JSON")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--generate", action="store_true", help="propose a reassignment")
    mode.add_argument("--execute", action="store_true", help="start the reassignment in the file")
    mode.add_argument("--verify", action="store_true", help="check the reassignment in the file")
    mode.add_argument(
        "--cancel", action="store_true", help="cancel the file's reassignments still in progress"
    )
    mode.add_argument(
        "--list",
        action="store_true",
        help="list the reassignments in progress (topic znodes' adding/removing replicas and "
        "/admin/reassign_partitions), as Kafka's --list prints them",
    )
    p.add_argument(
        "--topics-to-move-json-file", metavar="FILE", type=Path, help='generate: {"topics":[{"topic":"t"}]}'
    )
    p.add_argument("--broker-list", metavar="IDS", help="generate: target brokers, e.g. 1,2,3")
    p.add_argument("--additional", action="store_true", help="execute: start even if others are in progress")
    p.add_argument(
        "--legacy-znode",
        action="store_true",
        help="execute: create /admin/reassign_partitions instead of calling the admin API",
    )
    p.add_argument("--wait", action="store_true", help="execute: wait (up to --timeout) until it completes")
    reassign_extras.add_options(p)
    common.add_json_option(p)
    p.set_defaults(func=run)
    audit_options.add_audit_options(p, _operation_kind)


def _operation_kind(args: argparse.Namespace) -> str | None:
    """--execute and --cancel change the cluster; the other modes only read."""
    return "reassignment_execute" if args.execute else "reassignment_cancel" if args.cancel else None


def run(args: argparse.Namespace) -> int:
    common.check_timeout(args)
    if (code := reassign_extras.before_run(args)) is not None:  # option checks; --decommission-brokers
        return code
    if args.generate:
        return _generate(args)
    if args.list:
        return _list(args)
    if args.reassignment_json_file is None:
        raise InvalidArgumentError(
            "--reassignment-json-file is required with --execute, --verify and --cancel"
        )
    for name in ("topics_to_move_json_file", "broker_list"):
        if getattr(args, name) is not None:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} is only for --generate")

    plan = parse_reassignment_json(common.read_text_file(args.reassignment_json_file, FILE))
    if args.execute:
        return _execute(args, plan)
    if args.verify:
        return _verify(args, plan)
    return _cancel(args, plan)


def _assignments(store: ZkMetadataStore, topics: Collection[str]) -> dict[TopicPartition, ReplicaAssignment]:
    """Full assignments (RS/AR/RR) of ``topics`` in one batched read; corrupt topics are errors."""
    out: dict[TopicPartition, ReplicaAssignment] = {}
    for topic, read in store.get_replica_assignment_and_topic_ids(sorted(set(topics))).items():
        if isinstance(read, MetadataStoreError):
            raise InvalidArgumentError(f"cannot read topic {topic!r}: {read}")
        out.update(read.assignment)
    return out


def _by_topic(assignments: Mapping[TopicPartition, ReplicaAssignment]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for tp in assignments:
        out.setdefault(tp.topic, set()).add(tp.partition)
    return out


def _generate(args: argparse.Namespace) -> int:
    if args.topics_to_move_json_file is None or args.broker_list is None:
        raise InvalidArgumentError("--generate needs --topics-to-move-json-file and --broker-list")
    out_file: Path | None = args.reassignment_json_file
    if out_file is not None and out_file.exists():
        raise InvalidArgumentError(
            f"{FILE} file {out_file} already exists; --generate writes a new file only"
        )
    topics = parse_topics_to_move_json(
        common.read_text_file(args.topics_to_move_json_file, "topics-to-move JSON")
    )
    parse_broker_list(args.broker_list)  # syntax first, before connecting
    with connections.open_store(args) as store:
        brokers = parse_broker_list(args.broker_list, set(store.get_sorted_broker_list()))
        current_all = _assignments(store, topics)
    missing = [t for t in topics if t not in _by_topic(current_all)]
    if missing:
        raise InvalidArgumentError(f"topics-to-move JSON: unknown topic {missing[0]!r}")
    current, proposed = generate_reassignment(
        {tp: ra.replicas for tp, ra in current_all.items()}, topics, brokers
    )
    reassign_extras.print_proposal(args, current, proposed)
    return 0


def _execute(args: argparse.Namespace, plan: dict[TopicPartition, tuple[int, ...]]) -> int:
    with connections.open_store(args) as store:
        current = _assignments(store, {tp.topic for tp in plan})
        validate_reassignment(plan, _by_topic(current), set(store.get_sorted_broker_list()))
        check_reassignment_plan(current, plan, legacy_znode=args.legacy_znode)  # znodes that fit ZooKeeper
        rollback = encode_reassignment_json({tp: current[tp].replicas for tp in plan})
        reassign_extras.apply_throttle(args, store, plan, current)  # before the start, as Kafka does
        moving = f"the reassignment of {len(plan)} partition(s) in {args.reassignment_json_file}"
        common.left_undone(
            f"{moving} may have been started and may go on in the controller; "
            "`reassign --verify` shows it, `reassign --cancel` stops it"
        )
        if args.legacy_znode:
            try:
                store.create_partition_reassignment(plan)
            except NodeExistsError:
                raise InvalidArgumentError(
                    "a reassignment is already in progress (/admin/reassign_partitions exists)"
                ) from None
        else:
            with connections.open_kafka_admin(args, store) as admin:
                ongoing = sorted(admin.list_partition_reassignments(None).reassignments)
                if ongoing and not args.additional:
                    names = ", ".join(map(str, ongoing[:5])) + (" ..." if len(ongoing) > 5 else "")
                    raise InvalidArgumentError(
                        f"reassignments are in progress ({names}); pass --additional to start more"
                    )
                results, unsent = reassign_extras.send_in_batches(args, store, admin, plan, "started")
            failed = {tp: r for tp, r in results.items() if r.error != "NONE"}
            if failed:
                tp, r = sorted(failed.items())[0]
                detail = f" ({r.message})" if r.message else ""
                rest = f"; the other {unsent} were not sent" if unsent else ""
                raise common.CommandFailedError(
                    f"{len(failed)} of {len(plan)} reassignments were refused, e.g. {tp}: {r.error}{detail}"
                    + rest
                )
        common.left_undone(
            f"{moving} was started and goes on in the controller; "
            "`reassign --verify` shows it, `reassign --cancel` stops it"
        )
        outcome = None
        if args.wait:
            common.note(PROG, f"waiting up to {common.check_timeout(args):g}s for {moving} to complete")
            outcome = _wait_complete(store, plan, common.check_timeout(args))
    started = ",".join(map(str, sorted(plan)))
    if args.json:
        import orjson

        doc: dict[str, Any] = {
            "started": [str(tp) for tp in sorted(plan)],
            "via": "znode" if args.legacy_znode else "api",
            "rollback": orjson.loads(rollback),
        }
        if outcome is not None:
            doc["verification"] = [_verification_json(v) for v in outcome]
        common.print_json(doc)
    else:
        common.say("Current partition replica assignment")
        common.say()
        common.say(rollback)
        common.say()
        common.say("Save this to use as the --reassignment-json-file option during rollback")
        common.say(f"Successfully started partition reassignments for {started}")
        for v in outcome or ():
            common.say(v.describe())
    if outcome is not None:
        return _exit_code(outcome)
    return 0


def _wait_complete(
    store: ZkMetadataStore, plan: Mapping[TopicPartition, Sequence[int]], timeout: float
) -> list[Any]:
    deadline = time.monotonic() + timeout
    while True:
        outcome = _check(store, plan)
        if all(v.status != IN_PROGRESS for v in outcome) or time.monotonic() >= deadline:
            return outcome
        time.sleep(0.1)


def _check(store: ZkMetadataStore, plan: Mapping[TopicPartition, Sequence[int]]) -> list[Any]:
    current = _assignments(store, {tp.topic for tp in plan})
    try:
        legacy = store.get_partition_reassignment()
    except MetadataStoreError:  # a corrupt legacy znode is ignored by the controller too
        legacy = {}
    return verify_reassignment(plan, current, set(legacy))


def _exit_code(outcome: Sequence[Any]) -> int:
    bad = [v for v in outcome if v.status not in (COMPLETE, IN_PROGRESS)]
    if bad:
        raise common.CommandFailedError(
            f"{len(bad)} partition(s) did not reach their target, e.g. {bad[0].describe()}"
        )
    if any(v.status == IN_PROGRESS for v in outcome):
        return common.EXIT_IN_PROGRESS
    return 0


def _verification_json(v: Any) -> dict[str, Any]:
    return {
        "topic": v.topic_partition.topic,
        "partition": v.topic_partition.partition,
        "status": v.status,
        "target": list(v.target),
        "replicas": list(v.current),
        "adding_replicas": list(v.adding),
        "removing_replicas": list(v.removing),
    }


def _verify(args: argparse.Namespace, plan: dict[TopicPartition, tuple[int, ...]]) -> int:
    with connections.open_store(args) as store:
        validate_reassignment(plan, _by_topic(_assignments(store, {tp.topic for tp in plan})), None)
        outcome = _check(store, plan)
        cleared = reassign_extras.clear_throttles_if_done(args, store, plan, outcome)
    if args.json:
        common.print_json([_verification_json(v) for v in outcome])
        for line in cleared:
            common.note(PROG, line[0].lower() + line[1:])  # stdout holds the JSON
    else:
        common.say("Status of partition reassignment:")
        for v in outcome:
            common.say(v.describe())
        for line in cleared:
            common.say(line)
    return _exit_code(outcome)


def _cancel(args: argparse.Namespace, plan: dict[TopicPartition, tuple[int, ...]]) -> int:
    with connections.open_store(args) as store:
        validate_reassignment(plan, _by_topic(_assignments(store, {tp.topic for tp in plan})), None)
        with connections.open_kafka_admin(args, store) as admin:
            common.left_undone(
                f"the cancellation of the reassignments in {args.reassignment_json_file} may have been "
                "sent; `reassign --verify` shows where they are"
            )
            ongoing = sorted(admin.list_partition_reassignments(list(plan)).reassignments)
            results: dict[TopicPartition, Any] = {}
            unsent = 0
            if ongoing:
                requests = dict.fromkeys(ongoing)
                results, unsent = reassign_extras.send_in_batches(args, store, admin, requests, "cancelled")
    failed = {tp: r for tp, r in results.items() if r.error != "NONE"}
    cancelled = [tp for tp in ongoing if tp in results and tp not in failed]
    if args.json:
        common.print_json(
            {
                "cancelled": [str(tp) for tp in cancelled],
                "failed": {str(tp): r.error for tp, r in sorted(failed.items())},
            }
        )
    elif not ongoing:
        common.say("None of the specified partition reassignments are active.")
    elif cancelled:
        common.say(f"Successfully cancelled partition reassignments for: {','.join(map(str, cancelled))}")
    if failed:
        tp, r = sorted(failed.items())[0]
        rest = f"; {unsent} more were not sent" if unsent else ""
        raise common.CommandFailedError(
            f"could not cancel {len(failed)} reassignment(s), e.g. {tp}: {r.error}{rest}"
        )
    return 0


def _list(args: argparse.Namespace) -> int:
    for name in ("reassignment_json_file", "topics_to_move_json_file", "broker_list"):
        if getattr(args, name) is not None:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} is not for --list")
    with connections.open_store(args) as store:
        current: dict[TopicPartition, ReplicaAssignment] = {}
        for topic, read in store.get_replica_assignment_and_topic_ids(sorted(store.get_all_topics())).items():
            if isinstance(read, MetadataStoreError):
                common.warn(PROG, f"skipping topic {topic!r}, which cannot be read: {read}")
            else:
                current.update(read.assignment)
        try:
            queued = store.get_partition_reassignment()
        except MetadataStoreError as e:  # the controller ignores a corrupt legacy znode too
            common.warn(PROG, f"ignoring /admin/reassign_partitions, which cannot be read: {e}")
            queued = {}
    moving = {tp: ra for tp, ra in current.items() if ra.is_being_reassigned}
    pending = {tp: target for tp, target in queued.items() if tp not in moving}
    if args.json:
        common.print_json(
            [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(moving[tp].replicas if tp in moving else _replicas(current, tp)),
                    "adding_replicas": list(moving[tp].adding_replicas) if tp in moving else [],
                    "removing_replicas": list(moving[tp].removing_replicas) if tp in moving else [],
                    "queued_target": list(pending[tp]) if tp in pending else None,
                }
                for tp in sorted({*moving, *pending})
            ]
        )
        return 0
    if not moving and not pending:
        common.say("No partition reassignments found.")
        return 0
    common.say("Current partition reassignments:")
    for tp in sorted({*moving, *pending}):
        if tp in moving:
            ra = moving[tp]
            adding = f" adding: {_ids(ra.adding_replicas)}." if ra.adding_replicas else ""
            removing = f" removing: {_ids(ra.removing_replicas)}." if ra.removing_replicas else ""
            common.say(f"{tp}: replicas: {_ids(ra.replicas)}.{adding}{removing}")
        else:
            common.say(
                f"{tp}: replicas: {_ids(_replicas(current, tp))}. "
                f"queued in /admin/reassign_partitions: {_ids(pending[tp])}."
            )
    return 0


def _replicas(current: Mapping[TopicPartition, ReplicaAssignment], tp: TopicPartition) -> tuple[int, ...]:
    ra = current.get(tp)
    return () if ra is None else ra.replicas


def _ids(ids: Sequence[int]) -> str:
    return ",".join(map(str, ids))
