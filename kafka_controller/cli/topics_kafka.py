"""``kafka-controller topics create|delete --bootstrap-server``: Kafka's ``kafka-topics.sh
--bootstrap-server``, a CreateTopics or DeleteTopics request through kafka-python's admin client.

The brokers (the active controller) check and write the topic, so this works against this project's
brokers and any Apache Kafka alike; without ``--bootstrap-server`` the commands keep writing
ZooKeeper as ``kafka-topics.sh --zookeeper`` does (``topics_cmd``). As kafka-topics.sh, one or the
other is given, not both. ``--timeout`` is sent as the request's ``timeout_ms``: the controller
answers once every new partition has a leader (or the deleted topic is gone from the brokers'
metadata), and REQUEST_TIMED_OUT when that takes longer. The broker's answer per topic, with
Kafka's error name and message, becomes one line and exit 1.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafka_controller.admin.topics import (
    MAX_REPLICATION_FACTOR,
    parse_config_pairs,
    parse_replica_assignment,
)
from kafka_controller.broker.kafka_admin import error_name
from kafka_controller.cli import common, kafka_client
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.paths import validate_topic_name

#: How much longer than the request's timeout_ms the client waits for the answer to arrive.
ANSWER_MARGIN_S = 5.0


def add_connection_options(p: argparse.ArgumentParser) -> None:
    """``--bootstrap-server`` (Kafka's protocol) or ``--zookeeper`` (ZooKeeper writes), ``--timeout``."""
    p.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,HOST:PORT]",
        help="send the request to these Kafka brokers over Kafka's protocol (as kafka-topics.sh "
        "--bootstrap-server), instead of writing ZooKeeper",
    )
    p.add_argument(
        "--zookeeper",
        dest="zk_connect",
        metavar="CONNECT",
        help="ZooKeeper connect string, host:port[,host:port][/chroot], to write directly (as "
        f"kafka-topics.sh --zookeeper; default: ${common.ZOOKEEPER_ENV}, used without --bootstrap-server)",
    )
    common.add_command_config_option(p)
    common.add_zk_tls_option(p)
    p.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for ZooKeeper or the brokers, and for the outcome (default: %(default)s)",
    )


def over_kafka(args: argparse.Namespace) -> bool:
    """Whether the command goes through Kafka's protocol; without ``--bootstrap-server`` it resolves
    the ZooKeeper connect string (``args.zookeeper``) the ZooKeeper path needs."""
    if args.bootstrap_server is not None:
        if args.zk_connect is not None:
            raise common.UsageError("give --bootstrap-server or --zookeeper, not both (as kafka-topics.sh)")
        return True
    args.zookeeper = args.zk_connect
    common.resolve_zookeeper(args)
    common.check_timeout(args)
    return False


def _timeout_ms(args: argparse.Namespace) -> int:
    return min(round(common.check_timeout(args) * 1000), 2**31 - 1)


def _send(args: argparse.Namespace, what: str, call: Any) -> dict[str, Any]:
    """``call(admin)``'s answer for the one topic asked; a client failure is one line."""
    from kafka.errors import KafkaError

    with kafka_client.kafka_admin(args, answer_margin_s=ANSWER_MARGIN_S) as admin:
        try:
            answer = call(admin)
        except (KafkaError, RuntimeError) as e:  # RuntimeError: no broker admits to be the controller
            raise common.CommandFailedError(f"cannot {what}: {kafka_client.describe_error(e)}") from None
    (topic,) = answer["topics"]
    return dict(topic)


def _create_topics(admin: Any, topics: dict[str, dict[str, Any]], timeout_ms: int) -> dict[str, Any]:
    """``KafkaAdminClient.create_topics`` without its broker-version gate: kafka-python 3.0.12 refuses
    the -1 defaults (and so a bare --replica-assignment) below the Kafka version it infers from
    ApiVersions, and it infers 1.0 from brokers that serve no Produce or Fetch, as this project's.
    The broker's answer decides instead; the request, its version and the controller lookup
    (retried once on NOT_CONTROLLER) are still kafka-python's."""
    import kafka.errors as errors
    from kafka.protocol.admin import CreateTopicsRequest

    request = CreateTopicsRequest(
        topics=admin._process_create_topics_input(topics), timeout_ms=timeout_ms, validate_only=False
    )

    def topic_errors(response: Any) -> Any:
        return (errors.for_code(t.error_code) for t in response.topics)

    response = admin._manager.run(admin._send_request_to_controller, request, topic_errors, False)
    return dict(response.to_dict())


def _error(topic: dict[str, Any]) -> str:
    """``TOPIC_ALREADY_EXISTS: Topic 't' already exists.``: Kafka's error name and the broker's message."""
    name = error_name(int(topic["error_code"]))
    message = (topic.get("error_message") or "").strip()
    return f"{name}: {message}" if message else name


def run_create(args: argparse.Namespace) -> int:
    """kafka-topics.sh --bootstrap-server --create: without --partitions or --replication-factor the
    broker's defaults (``num.partitions``, ``default.replication.factor``) apply, as Kafka 2.4+ does.
    Config names and values are the broker's to check (a newer Kafka knows more of them)."""
    name = args.topic
    validate_topic_name(name)
    config = parse_config_pairs(args.config)
    spec: dict[str, Any] = {"configs": config}
    if args.replica_assignment is not None:
        if args.partitions is not None or args.replication_factor is not None:
            raise InvalidArgumentError(
                "--replica-assignment cannot be combined with --partitions or --replication-factor"
            )
        spec["assignments"] = {
            p: list(rs) for p, rs in parse_replica_assignment(args.replica_assignment).items()
        }
    else:
        if args.partitions is not None:
            if args.partitions <= 0:
                raise InvalidArgumentError(f"--partitions must be greater than 0, got {args.partitions}")
            spec["num_partitions"] = args.partitions
        if args.replication_factor is not None:
            if not 0 < args.replication_factor <= MAX_REPLICATION_FACTOR:
                raise InvalidArgumentError(
                    f"--replication-factor must be between 1 and {MAX_REPLICATION_FACTOR}, "
                    f"got {args.replication_factor}"
                )
            spec["replication_factor"] = args.replication_factor
    timeout_ms = _timeout_ms(args)
    common.left_undone(
        f"topic {name} may have been created by the controller; check with `kafka-controller topics describe`"
    )
    topic = _send(
        args,
        f"create topic {name}",
        lambda admin: _create_topics(admin, {name: spec}, timeout_ms),
    )
    code = error_name(int(topic["error_code"]))
    if code == "TOPIC_ALREADY_EXISTS" and args.if_not_exists:
        common.left_undone(None)
        common.say(f"Topic {name} already exists.")
        return 0
    if code == "REQUEST_TIMED_OUT":
        raise common.CommandFailedError(
            f"topic {name} was created, but not every partition had a leader within "
            f"{timeout_ms / 1000:g}s (REQUEST_TIMED_OUT); the controller goes on electing them"
        )
    if code != "NONE":
        raise common.CommandFailedError(f"cannot create topic {name}: {_error(topic)}")
    common.left_undone(f"nothing is left undone: topic {name} exists")
    if args.json:
        common.print_json(
            {
                "topic": name,
                "topic_id": _kafka_uuid(topic.get("topic_id")),
                "num_partitions": topic.get("num_partitions", spec.get("num_partitions", -1)),
                "replication_factor": topic.get("replication_factor", spec.get("replication_factor", -1)),
                "config": config,
            }
        )
    else:
        common.say(f"Created topic {name}.")
    return 0


def _kafka_uuid(value: Any) -> str | None:
    """A topic id as Kafka's ``Uuid.toString`` (URL-safe base64, as in the topic znode); None for
    the zero id (CreateTopics before v7, or no id)."""
    import base64
    import uuid

    if value is None:
        return None
    raw = value.bytes if isinstance(value, uuid.UUID) else uuid.UUID(str(value)).bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") if any(raw) else None


def run_delete(args: argparse.Namespace) -> int:
    """kafka-topics.sh --bootstrap-server --delete. The controller's answer already waits (up to
    --timeout) until the brokers no longer serve the topic, so ``--wait`` (until its znodes are gone)
    is for the ZooKeeper path only."""
    name = args.topic
    validate_topic_name(name)
    if args.wait:
        raise common.UsageError(
            "--wait needs --zookeeper: with --bootstrap-server the command already waits, up to --timeout, "
            "until the brokers no longer serve the topic"
        )
    timeout_ms = _timeout_ms(args)
    common.left_undone(
        f"topic {name} may have been marked for deletion; check with `kafka-controller topics list`"
    )
    topic = _send(
        args,
        f"delete topic {name}",
        lambda admin: admin.delete_topics([name], timeout_ms=timeout_ms, raise_errors=False),
    )
    code = error_name(int(topic["error_code"]))
    if code == "REQUEST_TIMED_OUT":
        raise common.CommandFailedError(
            f"topic {name} is marked for deletion, but the brokers still served it after "
            f"{timeout_ms / 1000:g}s (REQUEST_TIMED_OUT); the controller goes on deleting it"
        )
    if code != "NONE":
        raise common.CommandFailedError(f"cannot delete topic {name}: {_error(topic)}")
    common.left_undone(None)
    if args.json:
        common.print_json({"topic": name, "marked_for_deletion": True, "in_metadata": False})
    else:
        common.say(f"Topic {name} is marked for deletion; the brokers no longer serve it.")
    return 0
