"""``kafka-controller configs describe|alter``: Kafka's ``kafka-configs.sh --bootstrap-server`` for topic
and broker entities, over Kafka's protocol (DescribeConfigs, IncrementalAlterConfigs) through
kafka-python's admin client. The brokers write ``/config/<type>/<name>`` and the ``/config/changes``
notification that every broker follows; ``describe`` shows the entity's own settings (a topic's
overrides, a broker's dynamic configs), as kafka-configs.sh does.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from kafka_controller.cli import audit_options, common, configs_users, kafka_client
from kafka_controller.domain.errors import brief
from kafka_controller.zk.paths import validate_topic_name

PROG = "kafka-controller configs"
#: Sources that are the entity's own (kafka-configs.sh --describe): the topic override, the
#: broker's or the cluster default's dynamic config (DescribeConfigs ConfigSource ids, or the names
#: kafka-python gives them).
OWN_SOURCES = {
    "topics": {1, "DYNAMIC_TOPIC_CONFIG"},
    "brokers": {2, 3, "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG"},
}


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "configs",
        help=summary,
        description="Describe and alter topic and broker configs, as kafka-configs.sh "
        "--bootstrap-server does.",
    )
    sub = p.add_subparsers(dest="configs_command", metavar="ACTION", required=True)
    for name, helptext in (("describe", "show an entity's own configs"), ("alter", "set or delete configs")):
        c = sub.add_parser(name, help=helptext, description=helptext.capitalize() + ".")
        kafka_client.add_connection_options(c)
        c.add_argument(
            "--entity-type",
            required=True,
            choices=("topics", "brokers", "users"),
            help="what to configure (users: SCRAM credentials; without --bootstrap-server written "
            "to ZooKeeper directly, as kafka-configs.sh --zookeeper does)",
        )
        c.add_argument("--entity-name", help="the topic, the broker id, or the user")
        c.add_argument(
            "--entity-default", action="store_true", help="brokers only: the cluster-wide default configs"
        )
        if name == "alter":
            c.add_argument(
                "--add-config",
                metavar="K=V,K2=V2",
                help="configs to set; a list value in [], e.g. k=[a,b]; users: "
                "'SCRAM-SHA-512=[iterations=8192,password=PASSWORD]' (iterations 4096-16384, default 4096)",
            )
            c.add_argument(
                "--delete-config",
                metavar="K,K2",
                help="configs to remove (users: SCRAM-SHA-256, SCRAM-SHA-512)",
            )
        common.add_json_option(c)
        c.set_defaults(func=run_describe if name == "describe" else run_alter)
        if name == "alter":
            audit_options.add_audit_options(c, "configs_alter")


def _entity(args: argparse.Namespace) -> tuple[Any, str, str]:
    """``(kafka-python resource type, resource name, what to call it)``, checked."""
    from kafka.admin import ConfigResourceType

    if args.entity_type == "topics":
        if args.entity_default or not args.entity_name:
            raise common.UsageError("--entity-type topics needs --entity-name TOPIC")

        validate_topic_name(args.entity_name)
        return ConfigResourceType.TOPIC, args.entity_name, f"topic {args.entity_name}"
    if args.entity_default == bool(args.entity_name):
        raise common.UsageError("--entity-type brokers needs either --entity-name ID or --entity-default")
    if args.entity_default:
        return ConfigResourceType.BROKER, "", "the default broker"
    if not re.fullmatch(r"\d+", args.entity_name):
        raise common.UsageError(f"--entity-name {brief(args.entity_name)} is not a broker id")
    return ConfigResourceType.BROKER, str(int(args.entity_name)), f"broker {int(args.entity_name)}"


def parse_add_config(text: str) -> dict[str, str]:
    """kafka-configs.sh's ``--add-config``: ``k=v`` pairs split by ``,``, a list value in ``[...]``."""
    items, depth, current = [], 0, ""
    for ch in text:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(current)
            current = ""
        else:
            current += ch
    items.append(current)
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key or depth != 0:
            raise common.UsageError(
                f"bad --add-config {brief(text)}: expected K=V[,K2=V2] (a list value in [])"
            )
        if key in out:
            raise common.UsageError(f"--add-config sets {key} twice")
        out[key] = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    return out


def run_describe(args: argparse.Namespace) -> int:
    from kafka.admin import ConfigResource
    from kafka.errors import KafkaError

    if args.entity_type == "users":
        return configs_users.run_describe(args)
    rtype, name, what = _entity(args)
    with kafka_client.kafka_admin(args) as admin:
        try:
            resource = ConfigResource(rtype, name)
            if name == "":
                described = kafka_client.send_to_any_broker(
                    admin,
                    admin._describe_configs_request([resource]),
                    lambda rs: admin._describe_configs_process_responses(rs, "all"),
                )
            else:
                described = admin.describe_configs([resource], config_filter="all")
        except KafkaError as e:
            raise common.CommandFailedError(
                f"cannot describe {what}: {kafka_client.describe_error(e)}"
            ) from None
    entries = next(iter(next(iter(described.values())).values()))
    own = {
        k: e.get("value")
        for k, e in sorted(entries.items())
        if e.get("config_source") in OWN_SOURCES[args.entity_type]
    }
    if args.json:
        common.print_json({"entity_type": args.entity_type, "entity_name": name, "configs": own})
        return 0
    label = {"topics": "topic", "brokers": "broker"}[args.entity_type]
    shown = "default broker" if name == "" else f"{label} {name}"
    common.say(f"Dynamic configs for {shown} are:" if own else f"No dynamic configs for {shown}.")
    for k, v in own.items():
        common.say(f"  {k}={v}")
    return 0


def run_alter(args: argparse.Namespace) -> int:
    from kafka.admin import AlterConfigOp, ConfigResource
    from kafka.errors import KafkaError

    if args.entity_type == "users":
        deleted = [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]
        try:
            added = parse_add_config(args.add_config) if args.add_config else {}
        except common.UsageError:  # never echo the text: it holds a password
            raise common.UsageError(
                "bad --add-config: expected 'SCRAM-SHA-512=[iterations=N,password=PASSWORD]'"
            ) from None
        return configs_users.run_alter(args, added, deleted)
    rtype, name, what = _entity(args)
    changes: dict[str, Any] = {}
    if args.add_config:
        changes.update({k: (AlterConfigOp.SET, v) for k, v in parse_add_config(args.add_config).items()})
    for key in [k.strip() for k in (args.delete_config or "").split(",") if k.strip()]:
        if key in changes:
            raise common.UsageError(f"config {key} is both added and deleted")
        changes[key] = (AlterConfigOp.DELETE, None)
    if not changes:
        raise common.UsageError("nothing to alter: give --add-config and/or --delete-config")
    common.left_undone(f"the configs of {what} were not changed")
    with kafka_client.kafka_admin(args) as admin:
        try:
            resource = ConfigResource(rtype, name, configs=changes)
            if name == "":
                result = kafka_client.send_to_any_broker(
                    admin,
                    admin._alter_configs_request([resource], False, True),
                    lambda rs: admin._alter_configs_process_responses(rs[0].responses),
                )
            else:
                result = admin.alter_configs([resource], incremental=True, raise_on_unknown=False)
        except KafkaError as e:
            raise common.CommandFailedError(
                f"cannot alter {what}: {kafka_client.describe_error(e)}"
            ) from None
    _raise_on_error(result, what)
    common.left_undone(None)
    if args.json:
        common.print_json({"entity_type": args.entity_type, "entity_name": name, "altered": sorted(changes)})
    else:
        common.say(f"Completed updating config for {what}.")
    return 0


def _raise_on_error(result: Any, what: str) -> None:
    """kafka-python answers each resource with ``"OK"`` or the error's text instead of raising it."""
    for by_name in result.values():
        for outcome in by_name.values():
            if outcome != "OK":
                text = str(outcome).strip()
                text = text.split("] ", 1)[-1] if text.startswith("[Error") else text
                raise common.CommandFailedError(f"cannot alter {what}: {text}")
