"""``kafka-controller configs describe|alter --entity-type users``: SCRAM credentials, as
``kafka-configs.sh`` makes them.

``--add-config 'SCRAM-SHA-512=[iterations=8192,password=...]'`` (``iterations`` defaults to 4096,
Kafka's minimum; at most 16384) and ``--delete-config SCRAM-SHA-512``. Without
``--bootstrap-server`` the credential is written to ZooKeeper directly (``/config/users/<name>``
and a ``/config/changes`` notification every broker follows), as Kafka 2.8's ``kafka-configs.sh
--zookeeper`` does: that is how the first users of a SASL cluster are made, before anyone can
authenticate. With ``--bootstrap-server`` it is Kafka's AlterUserScramCredentials (the client
salts and hashes; the password never crosses the wire). Either way only the salt and the derived
keys are stored. ``describe`` shows each mechanism and its iterations, never a key.
"""

from __future__ import annotations

import argparse
from typing import Any

from kafka_controller.cli import common, connections, kafka_client
from kafka_controller.domain.errors import InvalidArgumentError, brief
from kafka_controller.security.credentials import (
    USERS,
    alter_user_credentials,
    desanitize,
    sanitize,
    scram_credentials,
)
from kafka_controller.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramFormatter,
    random_string,
)

DEFAULT_ITERATIONS = 4096


def _mechanisms() -> tuple[str, ...]:
    return tuple(MECHANISMS)


def parse_scram_config(key: str, value: str) -> tuple[int, str]:
    """``iterations=N,password=P`` -> ``(iterations, password)``. Errors never show the value."""
    if key not in _mechanisms():
        raise common.UsageError(
            f"--entity-type users takes {' or '.join(_mechanisms())} configs, not {brief(key)}"
        )
    fields: dict[str, str] = {}
    for part in value.split(","):
        name, sep, text = part.partition("=")
        name = name.strip()
        if not sep or name not in ("iterations", "password") or name in fields:
            raise common.UsageError(f"bad {key} value: expected [iterations=N,password=PASSWORD]")
        fields[name] = text
    if not fields.get("password"):
        raise common.UsageError(f"{key} needs password=... (and optionally iterations=N)")
    try:
        iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
    except ValueError:
        raise common.UsageError(f"{key}: iterations must be a number") from None
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise common.UsageError(f"{key}: iterations must be {MIN_ITERATIONS}-{MAX_ITERATIONS}")
    return iterations, fields["password"]


def _name(args: argparse.Namespace) -> str:
    if args.entity_default or not args.entity_name:
        raise common.UsageError("--entity-type users needs --entity-name USER")
    return str(args.entity_name)


def run_alter(args: argparse.Namespace, add: dict[str, str], delete: list[str]) -> int:
    user = _name(args)
    upsert: dict[str, tuple[int, str]] = {}
    for key, value in add.items():
        upsert[key] = parse_scram_config(key, value)
    for key in delete:
        if key not in _mechanisms():
            raise common.UsageError(
                f"--entity-type users deletes {' or '.join(_mechanisms())}, not {brief(key)}"
            )
        if key in upsert:
            raise common.UsageError(f"config {key} is both added and deleted")
    if not upsert and not delete:
        raise common.UsageError("nothing to alter: give --add-config and/or --delete-config")
    what = f"user {user}"
    common.left_undone(f"the SCRAM credentials of {what} were not changed")
    if args.bootstrap_server:
        _alter_over_kafka(args, user, upsert, delete)
    else:
        credentials = {m: ScramFormatter(m).credential(p, i) for m, (i, p) in upsert.items()}
        with _store(args) as store:
            if delete:
                have = scram_credentials(store.get_entity_config(USERS, sanitize(user)))
                missing = [m for m in delete if m not in have]
                if missing:
                    raise common.CommandFailedError(
                        f"cannot alter {what}: it has no {', '.join(missing)} credential to delete"
                    )
            try:
                alter_user_credentials(store, user, credentials, delete)
            except InvalidArgumentError as e:
                raise common.CommandFailedError(f"cannot alter {what}: {e}") from None
    common.left_undone(None)
    changed = sorted([*upsert, *delete])
    if args.json:
        common.print_json({"entity_type": "users", "entity_name": user, "altered": changed})
    else:
        common.say(f"Completed updating config for {what}.")
    return 0


def _store(args: argparse.Namespace) -> Any:
    args.zookeeper = args.zk_connect
    common.resolve_zookeeper(args)
    return connections.open_store(args)


def _alter_over_kafka(
    args: argparse.Namespace, user: str, upsert: dict[str, tuple[int, str]], delete: list[str]
) -> None:
    from kafka.admin import UserScramCredentialDeletion, UserScramCredentialUpsertion
    from kafka.errors import KafkaError

    alterations: list[Any] = [UserScramCredentialDeletion(user, m) for m in delete]
    alterations += [
        UserScramCredentialUpsertion(user, m, p, iterations=i, salt=random_string().encode())
        for m, (i, p) in upsert.items()
    ]
    with kafka_client.kafka_admin(args) as admin:
        try:
            result = admin.alter_user_scram_credentials(alterations)
        except KafkaError as e:
            raise common.CommandFailedError(
                f"cannot alter user {user}: {kafka_client.describe_error(e)}"
            ) from None
    error = result.get(user)
    if error:
        raise common.CommandFailedError(f"cannot alter user {user}: {error}")


def run_describe(args: argparse.Namespace) -> int:
    wanted = None if args.entity_default or not args.entity_name else str(args.entity_name)
    found: dict[str, list[dict[str, Any]]] = {}
    if args.bootstrap_server:
        from kafka.errors import KafkaError

        with kafka_client.kafka_admin(args) as admin:
            try:
                described = admin.describe_user_scram_credentials(None if wanted is None else [wanted])
            except KafkaError as e:
                raise common.CommandFailedError(
                    f"cannot describe users: {kafka_client.describe_error(e)}"
                ) from None
        for user, info in described.items():
            if info["error"] is None:
                found[user] = [
                    {"mechanism": i["mechanism"].name.replace("_", "-"), "iterations": i["iterations"]}
                    for i in info["credential_infos"]
                ]
    else:
        with _store(args) as store:
            names = [sanitize(wanted)] if wanted is not None else store.get_entity_names(USERS)
            for name in names:
                creds = scram_credentials(store.get_entity_config(USERS, name))
                if creds:
                    found[desanitize(name)] = [
                        {"mechanism": m, "iterations": c.iterations} for m, c in sorted(creds.items())
                    ]
    if args.json:
        common.print_json({"entity_type": "users", "entity_name": wanted, "users": found})
        return 0
    if wanted is not None and wanted not in found:
        common.say(f"No SCRAM credentials for user {wanted}.")
    for user, infos in sorted(found.items()):
        shown = ",".join(f"{i['mechanism']}=iterations={i['iterations']}" for i in infos)
        common.say(f"SCRAM credential configs for user-principal '{user}' are {shown}")
    return 0
