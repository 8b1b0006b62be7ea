"""``reassign``'s options beyond the plan lifecycle, kept apart from ``reassign_cmd``:

* ``--execute --throttle BYTES``: Kafka 2.8's replication throttles (``admin.throttle``) on the
  brokers and topics the plan moves, set before the reassignment starts;
* ``--verify`` removes them once every partition of the plan reached its target (Kafka's
  ``clearAllThrottles``), unless ``--preserve-throttles``, and only for a plan whose throttles
  are there (one that never ran leaves other reassignments' throttles alone);
* ``--generate --decommission-brokers IDS``: a plan moving every replica off those brokers
  (``admin.decommission``: rack-aware, replication factors kept, balanced), printed and written
  like ``--generate``'s;
* ``--execute``/``--cancel --batch-size N``: the plan sent N partitions per request, a progress line
  on stderr after each, so that other admin requests (a ``--cancel``, say) are served between them;
  ``--execute`` stops sending when partitions it sent are no longer moving to the plan's targets;
* the check that each mode's options are used with that mode only (one line naming the option).

Throttle messages go to stderr, so that ``--json`` output stays one JSON document.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_controller.admin.decommission import decommission_plan, rack_aware
from kafka_controller.admin.reassignment import (
    COMPLETE,
    encode_reassignment_json,
    parse_broker_list,
    parse_topics_to_move_json,
)
from kafka_controller.admin.throttle import clear_throttles, ran_throttled, set_throttles, throttle_configs
from kafka_controller.cli import common, connections
from kafka_controller.domain.errors import InvalidArgumentError, MetadataStoreError

if TYPE_CHECKING:
    from kafka_controller.broker.kafka_admin import KafkaAdmin
    from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
    from kafka_controller.zk.store import ZkMetadataStore

PROG = "kafka-controller reassign"
FILE = "reassignment JSON"


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--throttle",
        type=int,
        metavar="BYTES",
        help="execute: throttle the moves' replication to BYTES/s (Kafka's *.replication.throttled.rate "
        "on the brokers involved and *.replication.throttled.replicas on the topics); --verify "
        "removes the throttles once the reassignment is done",
    )
    p.add_argument(
        "--preserve-throttles",
        action="store_true",
        help="verify: keep the throttles even when the reassignment is done",
    )
    p.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help="execute, cancel: send N partitions per request, with a progress line on stderr after each "
        "(default: the whole plan in one request, as Kafka's tool); --execute stops sending when "
        "partitions it already sent are no longer moving to the plan's targets (a --cancel meanwhile)",
    )
    p.add_argument(
        "--decommission-brokers",
        metavar="IDS",
        help="generate: move every replica off these brokers, e.g. 3 or 3,4 (rack-aware, replication "
        "factors kept); all topics unless --topics-to-move-json-file, onto --broker-list or every "
        "other registered broker",
    )


def before_run(args: argparse.Namespace) -> int | None:
    """Refuse options given to the wrong mode; run ``--generate --decommission-brokers``."""
    if not args.execute and (args.additional or args.legacy_znode or args.wait):
        raise InvalidArgumentError("--additional, --legacy-znode and --wait are only for --execute")
    if args.throttle is not None:
        if not args.execute:
            raise InvalidArgumentError("--throttle is only for --execute")
        if args.throttle < 1:
            raise InvalidArgumentError(
                f"--throttle must be a positive number of bytes/s, got {args.throttle}"
            )
    if args.batch_size is not None:
        if not (args.execute or args.cancel):
            raise InvalidArgumentError("--batch-size is only for --execute and --cancel")
        if args.batch_size < 1:
            raise InvalidArgumentError(
                f"--batch-size must be a positive number of partitions, got {args.batch_size}"
            )
        if args.legacy_znode:
            raise InvalidArgumentError(
                "--batch-size cannot be used with --legacy-znode (the znode takes the whole plan at once)"
            )
    if args.preserve_throttles and not args.verify:
        raise InvalidArgumentError("--preserve-throttles is only for --verify")
    if args.decommission_brokers is not None:
        if not args.generate:
            raise InvalidArgumentError("--decommission-brokers is only for --generate")
        return _decommission(args)
    return None


# -- sending in batches -------------------------------------------------------------------------------


def send_in_batches(
    args: argparse.Namespace,
    store: ZkMetadataStore,
    admin: KafkaAdmin,
    requests: Mapping[TopicPartition, Sequence[int] | None],
    verb: str,
) -> tuple[dict[TopicPartition, Any], int]:
    """AlterPartitionReassignments for ``requests``, ``--batch-size`` partitions at a time (all at
    once without it). Starting moves, sending stops after a batch with a refused partition, and
    before a batch when one sent earlier is no longer moving to its target: someone cancelled or
    replaced it, and the rest of the plan must not start behind their back. The check asks the
    controller, so it is answered after any cancel already queued there; a cancel that reaches
    the controller after the check misses the batch sent next (a ``--cancel`` lists the moves,
    then cancels them: what it did not list, it leaves). Returns the results and how many
    partitions were not sent."""
    items = list(requests.items())
    size = args.batch_size or max(1, len(items))
    batches = [dict(items[i : i + size]) for i in range(0, len(items), size)]
    results: dict[TopicPartition, Any] = {}
    sent = 0
    for k, batch in enumerate(batches, 1):
        if k > 1 and verb == "started":
            stray = _not_moving_to_target(store, admin, {tp: t for tp, t in items[:sent] if t is not None})
            if stray:
                raise common.CommandFailedError(
                    f"stopped after {sent} of {len(items)} partitions: {len(stray)} already sent are no "
                    f"longer moving to the plan's targets (cancelled?), e.g. {stray[0]}; the other "
                    f"{len(items) - sent} were not sent"
                )
        answer = admin.alter_partition_reassignments(batch, operation_id=common.operation_id(args))
        results.update(answer.results)
        sent += len(batch)
        refused = sum(1 for tp in batch if results[tp].error != "NONE")
        if len(batches) > 1:
            ok = sum(1 for r in results.values() if r.error == "NONE")
            tail = f", {refused} refused in this batch" if refused else ""
            common.note(PROG, f"batch {k}/{len(batches)}: {verb} {ok}/{len(items)} partitions{tail}")
        if refused and verb == "started":
            break
    return results, len(items) - sent


def _not_moving_to_target(
    store: ZkMetadataStore, admin: KafkaAdmin, targets: Mapping[TopicPartition, Sequence[int]]
) -> list[TopicPartition]:
    """The partitions of ``targets`` neither moving to their target nor there: the controller's
    list of reassignments in progress (queued behind whatever it was asked before, a cancel
    included), then the topic znodes of those it does not list (done, or cancelled)."""
    listed = admin.list_partition_reassignments(list(targets)).reassignments
    stray = [tp for tp, ra in listed.items() if tp in targets and ra.target_replicas != tuple(targets[tp])]
    rest = {tp: target for tp, target in targets.items() if tp not in listed}
    current: dict[TopicPartition, ReplicaAssignment] = {}
    if rest:
        for read in store.get_replica_assignment_and_topic_ids(sorted({tp.topic for tp in rest})).values():
            if not isinstance(read, MetadataStoreError):
                current.update(read.assignment)
    stray += [
        tp
        for tp, target in rest.items()
        if (ra := current.get(tp)) is None or ra.target_replicas != tuple(target)
    ]
    return sorted(stray)


# -- throttles ---------------------------------------------------------------------------------------


def apply_throttle(
    args: argparse.Namespace,
    store: ZkMetadataStore,
    plan: Mapping[TopicPartition, Sequence[int]],
    current: Mapping[TopicPartition, ReplicaAssignment],
) -> None:
    """With ``--throttle``: write the throttles for ``plan`` (before it starts, as Kafka does)."""
    if args.throttle is None:
        return

    brokers, topics = throttle_configs(plan, {tp: ra.replicas for tp, ra in current.items()}, args.throttle)
    set_throttles(store, brokers, topics)
    common.note(
        PROG, f"the inter-broker throttle limit was set to {args.throttle} B/s on brokers {_ids(brokers)}"
    )
    common.note(
        PROG,
        "warning: run --verify periodically, until the reassignment completes, to remove the throttle",
    )


def clear_throttles_if_done(
    args: argparse.Namespace,
    store: ZkMetadataStore,
    plan: Mapping[TopicPartition, Any],
    outcome: Sequence[Any],
) -> list[str]:
    """Once every partition of a plan that ran throttled is complete (and without
    ``--preserve-throttles``): the rates off every registered broker, the replica lists off the
    plan's topics. A plan that never ran (or ran without ``--throttle``, or did not reach its
    target) leaves every throttle alone: they may be another reassignment's (``admin.throttle``).
    Returns Kafka's two lines saying so (``--verify`` prints them with its status, on stdout, as
    kafka-reassign does)."""
    if args.preserve_throttles or any(v.status != COMPLETE for v in outcome):
        return []
    if not ran_throttled(store, plan):
        return []
    brokers = store.get_sorted_broker_list()
    topics = sorted({tp.topic for tp in plan})
    clear_throttles(store, brokers, topics)
    return [
        f"Clearing broker-level throttles on brokers {_ids(brokers)}",
        f"Clearing topic-level throttles on topics {','.join(topics)}",
    ]


def _ids(ids: Any) -> str:
    return ",".join(map(str, sorted(ids)))


# -- --generate's output, and the decommission plan ------------------------------------------------------


def print_proposal(
    args: argparse.Namespace,
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
) -> None:
    """Write ``--reassignment-json-file`` (if given) and print Kafka's two blocks (or ``--json``)."""
    out_file: Path | None = args.reassignment_json_file
    proposed_text = encode_reassignment_json(dict(proposed))
    if out_file is not None:
        common.write_text_file_atomically(out_file, proposed_text + "\n", FILE)
        common.left_undone(f"nothing is left undone: the proposal is in {out_file}")
    if args.json:
        import orjson

        common.print_json(
            {
                "current": orjson.loads(encode_reassignment_json(dict(current))),
                "proposed": orjson.loads(proposed_text),
            }
        )
        return
    common.say("Current partition replica assignment")
    common.say(encode_reassignment_json(dict(current)))
    common.say()
    common.say("Proposed partition reassignment configuration")
    common.say(proposed_text)
    if out_file is not None:
        common.say(f"(written to {out_file})")


def _decommission(args: argparse.Namespace) -> int:
    try:
        leaving = parse_broker_list(args.decommission_brokers)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(str(e).replace("--broker-list", "--decommission-brokers", 1)) from None
    if args.reassignment_json_file is not None and args.reassignment_json_file.exists():
        raise InvalidArgumentError(
            f"{FILE} file {args.reassignment_json_file} already exists; --generate writes a new file only"
        )
    wanted = (
        parse_topics_to_move_json(common.read_text_file(args.topics_to_move_json_file, "topics-to-move JSON"))
        if args.topics_to_move_json_file is not None
        else None
    )
    if args.broker_list is not None:
        parse_broker_list(args.broker_list)  # syntax first, before connecting
    with connections.open_store(args) as store:
        brokers = {b.id: b.rack for b in store.get_all_brokers_and_epochs()}
        targets = parse_broker_list(args.broker_list, set(brokers)) if args.broker_list else list(brokers)
        current = _current(store, wanted)
    overlap = sorted(set(leaving) & set(targets)) if args.broker_list else []
    if overlap:
        raise InvalidArgumentError(f"broker {overlap[0]} is both in --decommission-brokers and --broker-list")
    holding = {r for replicas in current.values() for r in replicas}
    for b in leaving:
        if b not in brokers and b not in holding:
            raise InvalidArgumentError(f"broker {b} is not registered and holds no replica")
    candidates = sorted(set(targets) - set(leaving))
    if not rack_aware(candidates, brokers) and any(brokers.get(b) for b in candidates):
        common.warn(PROG, "racks are ignored: not every target broker has one")
    plan = decommission_plan(current, leaving, candidates, brokers)
    if not plan:
        common.note(PROG, f"no replica is on brokers {_ids(leaving)}: nothing to move")
    print_proposal(args, {tp: current[tp] for tp in plan}, plan)
    return 0


def _current(store: ZkMetadataStore, wanted: list[str] | None) -> dict[TopicPartition, tuple[int, ...]]:
    """Replica lists of the named topics (unknown ones refused), or of every readable topic."""
    names = sorted(wanted) if wanted is not None else sorted(store.get_all_topics())
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for topic, read in store.get_replica_assignment_and_topic_ids(names).items():
        if isinstance(read, MetadataStoreError):
            if wanted is not None:
                raise InvalidArgumentError(f"cannot read topic {topic!r}: {read}")
            common.warn(PROG, f"skipping topic {topic!r}, which cannot be read: {read}")
            continue
        out.update({tp: ra.replicas for tp, ra in read.assignment.items()})
    missing = [t for t in (wanted or ()) if not any(tp.topic == t for tp in out)]
    if missing:
        raise InvalidArgumentError(f"topics-to-move JSON: unknown topic {missing[0]!r}")
    return out
