"""Who changed what: the audit option group of every state-changing command (``--requester``,
``--reason``, ``--audit-url``) and the operation it records around the command, as an Airflow
task's is.

Apart from ``common`` because recording reads the cluster's id, over a ZooKeeper session or Kafka's
protocol (``connections``, ``kafka_client``), which ``kafka-controller --help`` must not import.
"""

from __future__ import annotations

import argparse
import getpass
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kafka_controller.cli.common import ZOOKEEPER_ENV, resolve_zookeeper, warn
from kafka_controller.cli.connections import open_store
from kafka_controller.cli.kafka_client import kafka_admin
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError

AUDIT_URL_ENV = "KAFKA_CONTROLLER_AUDIT_URL"
#: Arguments never copied into an operation's parameters (a URL may hold a password; the rest is in
#: the row's own columns or is the parser's).
_NOT_PARAMETERS = frozenset({"func", "audit_url", "requester", "reason", "operation_id", "audit_kind"})
#: Arguments whose name says they may hold a credential: recorded as present, never their value.
_SECRET_WORDS = ("password", "secret", "token", "jaas", "credential")
#: ``K=V,K2=V2`` arguments: only their names are recorded (a value may be a password).
_CONFIG_ARGUMENTS = frozenset({"add_config", "config", "configs"})
#: A command's operation kind, or a function of its arguments that says (None: this invocation
#: changes nothing, e.g. ``reassign --verify``).
Kind = str | Callable[[argparse.Namespace], str | None]


def add_audit_options(p: argparse.ArgumentParser, kind: Kind) -> None:
    """``--requester``, ``--reason`` and ``--audit-url`` for a command that changes the cluster, and
    its ``func`` wrapped so that, given an audit store, the change is recorded as an operation as
    an Airflow task's is: requester, reason and cluster id first (nothing is changed when that
    fails), the operation id in ``args.operation_id`` for the command to send along (the
    controller stamps it on the transitions the change causes), the outcome last. Call it after
    ``p.set_defaults(func=...)``."""
    g = p.add_argument_group(
        "audit", "record the change as an operation in the audit store (as an Airflow run does)"
    )
    g.add_argument("--requester", metavar="NAME", help="who asks for the change (default: the OS user)")
    g.add_argument("--reason", metavar="TEXT", help="why: recorded with the operation")
    g.add_argument(
        "--audit-url",
        metavar="URL",
        default=None,
        help=f"SQLAlchemy URL of the audit store (default: ${AUDIT_URL_ENV}; empty or unset: not recorded)",
    )
    func = p.get_default("func")
    if func is None:
        raise TypeError("add_audit_options needs the parser's func set first")
    p.set_defaults(func=_Audited(func, kind), operation_id=None)


def audit_url(args: argparse.Namespace) -> str | None:
    """``--audit-url``, else ``$KAFKA_CONTROLLER_AUDIT_URL``; an empty value means none."""
    value = getattr(args, "audit_url", None)
    if value is None:
        value = os.environ.get(AUDIT_URL_ENV)
    return value or None


def os_user() -> str:
    try:
        return getpass.getuser() or f"uid {os.getuid()}"
    except (KeyError, OSError):  # no passwd entry and no $USER (a container's arbitrary uid)
        return f"uid {os.getuid()}"


def operation_parameters(args: argparse.Namespace) -> dict[str, Any]:
    """The command's arguments as JSON-ready values, without the audit options and config values."""
    out: dict[str, Any] = {}
    for key, value in sorted(vars(args).items()):
        if key in _NOT_PARAMETERS:
            continue
        if key in _CONFIG_ARGUMENTS and value is not None:
            items = value if isinstance(value, list) else [value]
            out[key] = sorted(
                {
                    part.split("=", 1)[0].strip()
                    for item in items
                    for part in str(item).split(",")
                    if part.strip()
                }
            )
        elif any(word in key for word in _SECRET_WORDS):
            out[key] = "<not recorded>" if value is not None else None
        else:
            out[key] = _plain_argument(value)
    return out


def _plain_argument(value: Any) -> Any:
    """Plain values and paths as they are; anything else (an object a command stored in its
    arguments, which may hold credentials) only by its type: its text could hold a password."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_plain_argument(v) for v in value]
    return f"<{type(value).__name__}>"


class _Audited:
    """A command's ``func``, recorded as an operation when an audit store is given."""

    def __init__(self, func: Callable[[argparse.Namespace], Any], kind: Kind) -> None:
        self.func = func
        self.kind = kind

    def __call__(self, args: argparse.Namespace) -> Any:
        url = audit_url(args)
        kind = self.kind(args) if callable(self.kind) else self.kind
        args.operation_id = None
        if url is None or kind is None:
            if url is None and kind is not None and (args.reason or args.requester):
                warn(
                    _prog(args),
                    f"--requester/--reason are not recorded: no --audit-url and no ${AUDIT_URL_ENV}",
                )
            return self.func(args)
        return self._recorded(args, url, kind)

    def _recorded(self, args: argparse.Namespace, url: str, kind: str) -> Any:
        # Imported on use: SQLAlchemy is optional (the 'audit' extra).
        from kafka_controller.audit.engine import one_line
        from kafka_controller.audit.operations import OperationLog

        command = " ".join(_command_words(args))
        reason = args.reason or f"kafka-controller {command}, from the command line (no --reason given)"
        cluster_id = _cluster_id(args)
        with OperationLog(url) as log:  # one line and nothing changed if the store cannot be used
            op = log.start_operation(
                kind,
                args.requester or os_user(),
                reason,
                operation_parameters(args),
                False,
                cluster_id=cluster_id,
            )
            args.operation_id = op
            try:
                code = self.func(args)
            except KeyboardInterrupt:
                _finish(log, op, "cancelled", "interrupted (Ctrl-C or SIGTERM)", None, args)
                raise
            except BaseException as e:
                _finish(log, op, "failed", one_line(e) or type(e).__name__, None, args)
                raise
            ok = code in (0, None)
            _finish(log, op, "succeeded" if ok else "failed", None if ok else f"exit code {code}", code, args)
            return code


def _finish(log: Any, op: str, status: str, error: str | None, code: Any, args: argparse.Namespace) -> None:
    """The operation's end; a store that went away meanwhile is a warning, not the command's failure."""
    try:
        log.finish_operation(op, status, error, {"exit_code": code} if code is not None else None)
    except KafkaControllerError as e:
        warn(_prog(args), f"the outcome of operation {op} ({status}) is not recorded: {e}")


def _command_words(args: argparse.Namespace) -> list[str]:
    words = [str(args.command)]
    action = getattr(args, f"{args.command}_command", None)
    if action is not None:
        words.append(str(action))
    return words


def _prog(args: argparse.Namespace) -> str:
    return "kafka-controller " + " ".join(_command_words(args))


def _cluster_id(args: argparse.Namespace) -> str | None:
    """ZooKeeper's ``/cluster/id`` of the cluster the command changes: read from ZooKeeper when the
    command has a connect string, else over Kafka's protocol (Metadata names the cluster) when it
    has ``--bootstrap-server``; None when it has neither (``cluster stop-broker``...) or the id is
    not one the audit can hold."""
    # Imported on use: SQLAlchemy is optional (the 'audit' extra).
    from kafka_controller.audit.schema import checked_cluster_id

    connect = getattr(args, "zookeeper", None) or getattr(args, "zk_connect", None)
    connect = connect or os.environ.get(ZOOKEEPER_ENV) or None
    value: object = None
    if connect is not None:
        zk_args = argparse.Namespace(zookeeper=connect, timeout=getattr(args, "timeout", 30.0))
        resolve_zookeeper(zk_args)
        with open_store(zk_args, require_cluster=False) as store:
            value = store.get_cluster_id()
    elif getattr(args, "bootstrap_server", None):
        with kafka_admin(args) as admin:
            value = admin.describe_cluster().get("cluster_id")
    try:
        return checked_cluster_id(value)
    except InvalidArgumentError:
        return None
