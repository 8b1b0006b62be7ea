"""``kafka-controller topics create|delete|list|describe``: Kafka's ``kafka-topics.sh --zookeeper``.

``create`` writes what Kafka's ``AdminZkClient`` writes: ``/config/topics/<t>`` and the topic znode
(version 3, with a new topic id) in one atomic multi, after every check has passed (name, collision,
partitions, replication factor against the live brokers, the assignment syntax, each ``--config``).
The controller then sees the new topic through its watch and elects leaders. ``delete`` creates
``/admin/delete_topics/<t>``; the controller does the rest. With ``--bootstrap-server`` both go
through Kafka's protocol instead (``topics_kafka``), as ``kafka-topics.sh --bootstrap-server``.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from kafka_controller.admin.describe import read_cluster_view
from kafka_controller.admin.topics import plan_topic_creation
from kafka_controller.cli import audit_options, common, connections, kafka_client, topics_kafka
from kafka_controller.domain.errors import InvalidArgumentError, NodeExistsError, NoNodeError
from kafka_controller.domain.values import ReplicaAssignment
from kafka_controller.zk.codecs import new_topic_id
from kafka_controller.zk.paths import validate_topic_name

PROG = "kafka-controller topics"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "topics",
        help=summary,
        description="Create, delete, list and describe topics, writing ZooKeeper as Kafka's tools do.",
    )
    sub = p.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    c = sub.add_parser(
        "create",
        help="create a topic (ZooKeeper, or Kafka's protocol with --bootstrap-server)",
        description=_CREATE_HELP,
    )
    topics_kafka.add_connection_options(c)
    c.add_argument("--topic", required=True, help="topic name")
    c.add_argument("--partitions", type=int, help="number of partitions")
    c.add_argument("--replication-factor", type=int, help="replicas per partition (at most the live brokers)")
    c.add_argument(
        "--replica-assignment",
        metavar="LIST",
        help="explicit placement instead of --partitions/--replication-factor: partitions split by ',', "
        "replicas by ':', e.g. 1:2,2:3 (partition 0 on brokers 1 and 2, partition 1 on 2 and 3)",
    )
    c.add_argument(
        "--config",
        action="append",
        metavar="K=V",
        help="a topic config override, repeated per key, e.g. --config min.insync.replicas=2",
    )
    c.add_argument("--if-not-exists", action="store_true", help="succeed without change if the topic exists")
    common.add_json_option(c)
    c.set_defaults(func=run_create)
    audit_options.add_audit_options(c, "topics_create")

    d = sub.add_parser(
        "delete",
        help="mark a topic for deletion (ZooKeeper, or Kafka's protocol with --bootstrap-server)",
        description="Mark a topic for deletion: /admin/delete_topics/<t> in ZooKeeper, or with "
        "--bootstrap-server a DeleteTopics request (the controller answers once the brokers no longer "
        "serve the topic, up to --timeout).",
    )
    topics_kafka.add_connection_options(d)
    d.add_argument("--topic", required=True, help="topic name")
    d.add_argument(
        "--wait",
        action="store_true",
        help="ZooKeeper only: wait (up to --timeout) until the topic's znodes are gone",
    )
    common.add_json_option(d)
    d.set_defaults(func=run_delete)
    audit_options.add_audit_options(d, "topics_delete")

    a = sub.add_parser(
        "alter",
        help="add partitions to a topic (over Kafka's protocol)",
        description="Add partitions to a topic, as kafka-topics.sh --alter --partitions does: a "
        "CreatePartitions request through kafka-python's admin client; the controller places the replicas.",
    )
    kafka_client.add_connection_options(a)
    a.add_argument("--topic", required=True, help="topic name")
    a.add_argument(
        "--partitions", type=int, required=True, help="the new number of partitions (more than now)"
    )
    common.add_json_option(a)
    a.set_defaults(func=run_alter)
    audit_options.add_audit_options(a, "topics_alter")

    ls = sub.add_parser("list", help="list topics")
    common.add_zookeeper_option(ls)
    common.add_json_option(ls)
    ls.set_defaults(func=run_list)

    ds = sub.add_parser("describe", help="partitions of one or all topics, with leader and ISR")
    common.add_zookeeper_option(ds)
    ds.add_argument("--topic", help="only this topic")
    ds.add_argument(
        "--under-replicated-partitions", action="store_true", help="only under-replicated partitions"
    )
    ds.add_argument(
        "--unavailable-partitions", action="store_true", help="only partitions without a live leader"
    )
    ds.add_argument("--under-min-isr-partitions", action="store_true", help="only partitions below min ISR")
    common.add_json_option(ds)
    ds.set_defaults(func=run_describe)


_CREATE_HELP = (
    "Create a topic: either --partitions with --replication-factor (placed round-robin over the live "
    "brokers, Kafka's algorithm) or --replica-assignment. Every check runs before anything is written. "
    "With --bootstrap-server a CreateTopics request (Kafka's protocol) goes to the controller, which "
    "checks, places and writes the topic; --partitions and --replication-factor then default to the "
    "broker's num.partitions and default.replication.factor."
)


def run_create(args: argparse.Namespace) -> int:
    """Kafka's ``kafka-topics.sh --zookeeper`` writes a topic with an explicit assignment even where no
    broker ever ran (a fresh chroot); so does this, creating the chroot and Kafka's top-level paths as a
    broker would, with a warning. With --partitions/--replication-factor there are no brokers to place
    replicas on: that is the "no Kafka cluster" error, as for every other command."""
    if topics_kafka.over_kafka(args):
        return topics_kafka.run_create(args)
    validate_topic_name(args.topic)  # before the name reaches a ZooKeeper path
    common.left_undone(f"topic {args.topic} was not created")
    with connections.open_store(args, require_cluster=False) as store:
        cluster = connections.cluster_exists(store)
        if not cluster and args.replica_assignment is None:
            raise connections.NoClusterError(args.zookeeper)
        existing = store.get_all_topics()
        if args.if_not_exists and args.topic in existing:
            common.say(f"Topic {args.topic} already exists.")
            return 0
        if store.is_topic_marked_for_deletion(args.topic):
            raise InvalidArgumentError(f"topic {args.topic!r} is marked for deletion; wait until it is gone")
        live = store.get_sorted_broker_list()
        plan = plan_topic_creation(
            args.topic,
            partitions=args.partitions,
            replication_factor=args.replication_factor,
            replica_assignment=args.replica_assignment,
            config_pairs=args.config,
            live_brokers=live,
            existing_topics=existing,
            rng=random.Random(),
        )
        if cluster:
            topic_id = _create(store, plan, args)
    if not cluster:
        with connections.open_store(args, require_cluster=False, create_paths=True) as store:
            topic_id = _create(store, plan, args)
        common.warn(
            PROG,
            f"no broker has ever registered at {args.zookeeper} ({connections.BROKER_IDS} was missing): "
            f"created it and Kafka's other top-level paths",
        )
    common.left_undone(f"nothing is left undone: topic {args.topic} exists")
    if topic_id is None:
        common.say(f"Topic {args.topic} already exists.")
        return 0
    unregistered = sorted({b for rs in plan.assignment.values() for b in rs} - set(live))
    if unregistered:
        common.warn(
            PROG,
            f"topic {plan.topic}: {_brokers(unregistered)} in --replica-assignment "
            f"{'is' if len(unregistered) == 1 else 'are'} not registered; "
            "its replicas there stay offline until then",
        )
    if args.json:
        common.print_json(
            {
                "topic": plan.topic,
                "topic_id": topic_id,
                "partitions": {str(p): list(rs) for p, rs in plan.assignment.items()},
                "config": plan.config,
            }
        )
    else:
        common.say(f"Created topic {plan.topic}.")
    return 0


def _create(store: Any, plan: Any, args: argparse.Namespace) -> str | None:
    """Write the topic; its new id, or None when it exists and --if-not-exists allows that."""
    topic_id = new_topic_id()
    assignment = {p: ReplicaAssignment.of(rs) for p, rs in plan.assignment.items()}
    try:
        store.create_topic(plan.topic, assignment, plan.config, topic_id=topic_id)
    except NodeExistsError:
        if args.if_not_exists:
            return None
        raise InvalidArgumentError(f"topic {args.topic!r} already exists") from None
    return str(topic_id)


def _brokers(ids: list[int]) -> str:
    return f"broker {ids[0]}" if len(ids) == 1 else f"brokers {', '.join(map(str, ids))}"


def run_delete(args: argparse.Namespace) -> int:
    if topics_kafka.over_kafka(args):
        return topics_kafka.run_delete(args)
    timeout = common.check_timeout(args)
    topic = args.topic
    validate_topic_name(topic)
    marker = f"/admin/delete_topics/{topic}"
    with connections.open_store(args) as store:
        common.left_undone(f"topic {topic} was not marked for deletion")
        try:
            store.create_delete_topic_path(topic)
        except NoNodeError:
            raise InvalidArgumentError(f"topic {topic!r} does not exist") from None
        except NodeExistsError:
            raise InvalidArgumentError(f"topic {topic!r} is already marked for deletion") from None
        common.left_undone(f"deletion of topic {topic} is still queued in {marker}")
        gone = False
        if args.wait:
            deadline = time.monotonic() + timeout
            said = ""
            while not (gone := not store.topic_exists(topic)):
                status = deletion_status(store, topic)
                if time.monotonic() >= deadline:
                    raise common.CommandFailedError(
                        f"topic {topic!r} is marked for deletion but still exists after {timeout:g}s: "
                        f"{status}"
                    )
                if status != said:
                    common.note(PROG, f"waiting for topic {topic} to be deleted: {status}")
                    said = status
                time.sleep(0.1)
    common.left_undone(None)
    if args.json:
        common.print_json({"topic": topic, "marked_for_deletion": True, "deleted": gone})
    else:
        common.say(f"Topic {topic} is marked for deletion.")
        if gone:
            common.say(f"Topic {topic} is deleted.")
    return 0


def deletion_status(store: Any, topic: str) -> str:
    """Which replicas of ``topic`` have not confirmed their deletion yet, by broker, and why.

    Kafka's controller deletes a topic once every replica's broker has confirmed (StopReplica with
    delete); a broker that is not registered cannot, so the deletion waits for it (Kafka's
    "ineligible for deletion"). The confirmations themselves live only in the controller's memory:
    from ZooKeeper all replicas not yet gone are unconfirmed."""
    read = store.get_replica_assignment_and_topic_ids([topic]).get(topic)
    if read is None:
        return "its znode is gone"
    if isinstance(read, Exception):
        return f"its znode cannot be read ({read})"
    live = set(store.get_sorted_broker_list())
    by_broker: dict[int, list[int]] = {}
    for tp, ra in read.assignment.items():
        for b in ra.replicas:
            by_broker.setdefault(b, []).append(tp.partition)
    parts = []
    for b in sorted(by_broker, key=lambda b: (b in live, b)):
        state = "registered" if b in live else "not registered"
        parts.append(f"broker {b} ({state}; {_partitions(sorted(by_broker[b]))})")
    controller = store.get_controller_id()
    who = "no controller is active" if controller is None else f"controller: broker {controller}"
    unconfirmed = f"replicas not confirmed on {', '.join(parts)}" if parts else "no replicas"
    return f"{unconfirmed}; {who}"


def _partitions(ps: list[int]) -> str:
    shown = ", ".join(map(str, ps[:10])) + (f" and {len(ps) - 10} more" if len(ps) > 10 else "")
    return f"partition {shown}" if len(ps) == 1 else f"partitions {shown}"


def run_alter(args: argparse.Namespace) -> int:
    from kafka.admin import NewPartitions
    from kafka.errors import KafkaError

    validate_topic_name(args.topic)
    if args.partitions < 1:
        raise common.UsageError(f"--partitions must be greater than 0, got {args.partitions}")
    timeout_ms = round(common.check_timeout(args) * 1000)
    common.left_undone(f"topic {args.topic} was not altered")
    with kafka_client.kafka_admin(args, answer_margin_s=topics_kafka.ANSWER_MARGIN_S) as admin:
        try:
            admin.create_partitions({args.topic: NewPartitions(args.partitions)}, timeout_ms=timeout_ms)
        except KafkaError as e:
            raise common.CommandFailedError(
                f"cannot alter topic {args.topic}: {kafka_client.describe_error(e)}"
            ) from None
    common.left_undone(None)
    if args.json:
        common.print_json({"topic": args.topic, "partitions": args.partitions})
    else:
        common.say(f"Topic {args.topic} now has {args.partitions} partitions.")
    return 0


def run_list(args: argparse.Namespace) -> int:
    with connections.open_store(args) as store:
        topics = sorted(store.get_all_topics())
        marked = set(store.get_topic_deletions())
    if args.json:
        common.print_json([{"name": t, "marked_for_deletion": t in marked} for t in topics])
    else:
        for t in topics:
            common.say(f"{t} - marked for deletion" if t in marked else t)
    return 0


def run_describe(args: argparse.Namespace) -> int:
    if args.topic is not None:
        validate_topic_name(args.topic)
    with connections.open_store(args) as store:
        if args.topic is not None and not store.topic_exists(args.topic):
            raise InvalidArgumentError(f"topic {args.topic!r} does not exist")
        view = read_cluster_view(store, None if args.topic is None else [args.topic])
    wanted = [
        p
        for p in view.partitions
        if (not args.under_replicated_partitions or p.under_replicated)
        and (not args.unavailable_partitions or p.offline)
        and (not args.under_min_isr_partitions or p.under_min_isr)
    ]
    filtered = (
        args.under_replicated_partitions or args.unavailable_partitions or args.under_min_isr_partitions
    )
    if args.json:
        doc = view.to_json()
        common.print_json(
            {
                "topics": doc["topics"],
                "partitions": [
                    d for d, p in zip(doc["partitions"], view.partitions, strict=True) if p in wanted
                ],
            }
        )
        return 0
    for t in view.topics:
        if not filtered:
            configs = ",".join(f"{k}={v}" for k, v in sorted(t.config.items()))
            tid = t.topic_id or "none"
            mark = "\tMarkedForDeletion: true" if t.marked_for_deletion else ""
            common.say(
                f"Topic: {t.name}\tTopicId: {tid}\tPartitionCount: {t.partitions}\t"
                f"ReplicationFactor: {t.replication_factor}\tConfigs: {configs}{mark}"
            )
        for p in wanted:
            if p.topic != t.name:
                continue
            extra = ""
            if p.adding_replicas:
                extra += f"\tAdding Replicas: {_ids(p.adding_replicas)}"
            if p.removing_replicas:
                extra += f"\tRemoving Replicas: {_ids(p.removing_replicas)}"
            leader = "none" if p.leader < 0 else str(p.leader)
            common.say(
                f"\tTopic: {p.topic}\tPartition: {p.partition}\tLeader: {leader}\t"
                f"Replicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}{extra}"
            )
    return 0


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids))
