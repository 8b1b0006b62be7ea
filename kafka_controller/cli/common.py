"""What every admin subcommand shares: ``--zookeeper`` and ``--json`` options, a read-mostly
ZooKeeper connection, input files, JSON output and one-line errors.

Errors are raised as ``InvalidArgumentError`` (bad input) or the adapters' own errors (ZooKeeper
unreachable, controller not answering); ``cli.main`` prints them as one line and exits 1. The
connection never creates paths (no chroot, no top-level znodes), so a refused command leaves
ZooKeeper exactly as it was.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError

if TYPE_CHECKING:
    from kafka_controller.broker.admin_client import AdminClient
    from kafka_controller.broker.kafka_admin import KafkaAdmin
    from kafka_controller.security.client_config import ClientSecurity
    from kafka_controller.zk.security import ZkClientConfig
    from kafka_controller.zk.store import ZkMetadataStore

ZOOKEEPER_ENV = "KAFKA_CONTROLLER_ZOOKEEPER"
#: Exit codes beyond 0 (success) and 1 (error, printed by ``cli.main``).
EXIT_IN_PROGRESS = 3


#: The longest --timeout accepted (a day): waits take it as a float of seconds.
MAX_TIMEOUT_S = 86_400.0


class CommandFailedError(KafkaControllerError):
    """The command ran but did not achieve what it was asked (e.g. some partitions failed)."""


class UsageError(InvalidArgumentError):
    """The command line cannot work (a bad connect string, no cluster at the chroot): exit 2, as
    argparse's usage errors, before anything was changed."""


def add_zookeeper_option(
    p: argparse.ArgumentParser, *, timeout: bool = True, bootstrap: bool = False
) -> None:
    """``--zookeeper`` (optional on the command line: ``$KAFKA_CONTROLLER_ZOOKEEPER`` can supply it;
    ``cli.main`` resolves and checks it before the command runs), ``--timeout``, and for commands
    that send admin requests over Kafka's protocol ``--bootstrap-server``."""
    if bootstrap:
        p.add_argument(
            "--bootstrap-server",
            metavar="HOST:PORT[,HOST:PORT]",
            default=None,
            help="Kafka brokers to send admin requests to (default: the brokers in /brokers/ids)",
        )
        add_command_config_option(p)
    p.add_argument(
        "--zookeeper",
        metavar="CONNECT",
        default=None,
        help="ZooKeeper connect string, host:port[,host:port][/chroot] "
        f"(default: ${ZOOKEEPER_ENV}; one of the two is needed)",
    )
    add_zk_tls_option(p)
    if timeout:
        p.add_argument(
            "--timeout",
            type=float,
            default=30.0,
            metavar="SECONDS",
            help="how long to wait for ZooKeeper (connecting), the controller, or the operation "
            "(default: %(default)s)",
        )


def add_command_config_option(p: argparse.ArgumentParser) -> None:
    """Kafka's tools' ``--command-config``, beside every way of reaching brokers."""
    p.add_argument(
        "--command-config",
        metavar="FILE",
        default=None,
        help="client properties for a secured cluster, as Kafka's tools take them: security.protocol, "
        "sasl.mechanism, sasl.jaas.config (PlainLoginModule/ScramLoginModule username and password), "
        "ssl.truststore.location, ssl.keystore.location and ssl.key.password (PEM); librdkafka's "
        "sasl.username, sasl.password and ssl.ca.location too",
    )


def client_security(args: argparse.Namespace) -> ClientSecurity:
    """The command's ``--command-config``, read once (PLAINTEXT without one); a bad file is a
    ``UsageError`` naming the key."""
    from kafka_controller.security.client_config import PLAINTEXT, read_command_config

    cached = getattr(args, "_client_security", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    path = getattr(args, "command_config", None)
    try:
        security = PLAINTEXT if path is None else read_command_config(path)
    except InvalidArgumentError as e:
        raise UsageError(str(e)) from None
    args._client_security = security
    return security


def add_zk_tls_option(p: argparse.ArgumentParser) -> None:
    """Kafka's tools' ``--zk-tls-config-file``, beside every ``--zookeeper``."""
    p.add_argument(
        "--zk-tls-config-file",
        metavar="FILE",
        default=None,
        help="properties file with Kafka's ZooKeeper TLS settings (zookeeper.ssl.client.enable=true, "
        "zookeeper.ssl.keystore.location/password/type, zookeeper.ssl.truststore.location/type, "
        "PEM only), as kafka-configs.sh takes it; SASL to ZooKeeper comes from $KAFKA_OPTS' "
        "-Djava.security.auth.login.config JAAS file (its Client section)",
    )


def resolve_zookeeper(args: argparse.Namespace) -> str:
    """The connect string from ``--zookeeper`` or ``$KAFKA_CONTROLLER_ZOOKEEPER`` (an empty variable
    counts as unset), checked; a bad or missing one is a ``UsageError`` naming what is wrong and
    where it came from. Stores the result in ``args.zookeeper``; calling it again is cheap."""
    from kafka_controller.zk.paths import parse_connect_string

    value = args.zookeeper
    source = ""
    if value is None:
        value = os.environ.get(ZOOKEEPER_ENV) or None
        source = f" (from ${ZOOKEEPER_ENV})"
    if value is None:
        raise UsageError(f"no ZooKeeper to connect to: pass --zookeeper CONNECT or set ${ZOOKEEPER_ENV}")
    try:
        parse_connect_string(value)
    except InvalidArgumentError as e:
        raise UsageError(f"{e}{source}") from None
    args.zookeeper = value
    return str(value)


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")


def check_timeout(args: argparse.Namespace) -> float:
    timeout = float(args.timeout)
    if not 0 < timeout <= MAX_TIMEOUT_S:  # also refuses nan and inf
        raise UsageError(
            f"--timeout must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, got {args.timeout}"
        )
    return timeout


def quiet_kazoo() -> None:
    """kazoo logs every failed connection attempt; a CLI reports one line instead."""
    for name in ("kazoo", "kazoo.client", "kazoo.protocol.connection"):
        logger = logging.getLogger(name)
        if logger.level == logging.NOTSET:
            logger.setLevel(logging.CRITICAL)


class NoClusterError(UsageError):
    """The chroot (or the server's root) holds no Kafka metadata: most likely a wrong chroot."""

    def __init__(self, connect: str) -> None:
        super().__init__(f"no Kafka cluster at {connect}: {BROKER_IDS} is missing")


BROKER_IDS = "/brokers/ids"


def client_config(args: argparse.Namespace, *, create_paths: bool = False) -> ZkClientConfig:
    """The command's ZooKeeper client settings: connecting waits up to ``--timeout`` (and a failure
    says how long it waited); the session lasts ``--timeout`` too, within ZooKeeper's usual 6-30 s.
    SASL comes from ``$KAFKA_OPTS``' JAAS file and TLS from ``--zk-tls-config-file``, as for
    Kafka's own tools."""
    from kafka_controller.zk.client_security import client_settings
    from kafka_controller.zk.security import ZkClientConfig

    timeout_ms = max(100, round(check_timeout(args) * 1000))
    connect = resolve_zookeeper(args)
    try:
        security = client_settings(tls_file=getattr(args, "zk_tls_config_file", None), tool=True)
        return ZkClientConfig(
            connect,
            session_timeout_ms=max(6000, min(timeout_ms, 30000)),
            connection_timeout_ms=timeout_ms,
            create_paths=create_paths,
            **security,
        )
    except InvalidArgumentError as e:  # a bad TLS file or JAAS file: nothing was tried yet
        raise UsageError(str(e)) from None


@contextmanager
def open_store(
    args: argparse.Namespace, *, require_cluster: bool = True, create_paths: bool = False
) -> Iterator[ZkMetadataStore]:
    """A ZooKeeper session for the command (closed on exit). It creates no paths unless
    ``create_paths`` (then the chroot and Kafka's top-level paths, as a broker does). With
    ``require_cluster`` a tree without ``/brokers/ids`` (every Kafka broker creates it) is a
    ``NoClusterError``: a read or an operation there would only ever see an empty cluster."""
    # Imported on use: kazoo is optional (the 'zk' extra).
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    config = client_config(args, create_paths=create_paths)
    connect = config.connect_string
    quiet_kazoo()
    with warnings.catch_warnings():
        # kazoo warns when the chroot does not exist; the check below says it in one line instead
        warnings.filterwarnings("ignore", message="No chroot path exists", category=UserWarning)
        store = KazooMetadataStore(config)
    try:
        if require_cluster and not cluster_exists(store):
            raise NoClusterError(connect)
        yield store
    finally:
        store.close()


def cluster_exists(store: ZkMetadataStore) -> bool:
    """Whether a Kafka broker ever ran on this tree: ``/brokers/ids`` exists."""
    return store.path_exists(BROKER_IDS)


@contextmanager
def open_admin_client(args: argparse.Namespace, store: ZkMetadataStore) -> Iterator[AdminClient]:
    """A client for the controller's admin APIs, found through ``store``."""
    from kafka_controller.broker.admin_client import AdminClient

    security = client_security(args)
    client = AdminClient(
        store,
        timeout_s=check_timeout(args),
        listener_name=security.listener_name,
        ssl_context=security.ssl_context(),
        authenticate=security.authenticate(),
    )
    try:
        yield client
    finally:
        client.close()


@contextmanager
def open_kafka_admin(args: argparse.Namespace, store: ZkMetadataStore) -> Iterator[KafkaAdmin]:
    """Kafka's admin APIs through a Kafka client (kafka-python), bootstrapped from
    ``--bootstrap-server`` or the brokers registered in ZooKeeper."""
    from kafka_controller.broker.kafka_admin import KafkaAdmin

    client = KafkaAdmin(
        getattr(args, "bootstrap_server", None),
        store,
        timeout_s=check_timeout(args),
        security=client_security(args),
    )
    try:
        yield client
    finally:
        client.close()


def read_text_file(path: str | Path, what: str) -> str:
    """The whole file as text; a missing or unreadable file is one line naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidArgumentError(f"{what} file {path} does not exist") from None
    except IsADirectoryError:
        raise InvalidArgumentError(f"{what} file {path} is a directory") from None
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"{what} file {path} is not UTF-8 text") from None
    except OSError as e:
        raise InvalidArgumentError(f"cannot read {what} file {path}: {e.strerror or e}") from None


def write_text_file_atomically(path: str | Path, text: str, what: str) -> None:
    """Write all or nothing: a reader never sees half a file, a failure leaves no file."""
    target = Path(path)
    if not target.parent.is_dir():
        raise InvalidArgumentError(
            f"cannot write {what} file {target}: directory {target.parent} does not exist"
        )
    tmp = target.with_name(f".{target.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise InvalidArgumentError(f"cannot write {what} file {target}: {e.strerror or e}") from None


def print_json(value: Any, *, one_line: bool = False) -> None:
    """Indented JSON on stdout, or one line (for a stream a script reads line by line)."""
    import orjson

    option = orjson.OPT_NON_STR_KEYS | (0 if one_line else orjson.OPT_INDENT_2)
    sys.stdout.write(orjson.dumps(value, option=option).decode() + "\n")
    sys.stdout.flush()


def say(line: str = "") -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def note(prog: str, message: str) -> None:
    """Progress on stderr (stdout is for results)."""
    print(f"{prog}: {message}", file=sys.stderr, flush=True)


def warn(prog: str, message: str) -> None:
    print(f"{prog}: warning: {message}", file=sys.stderr, flush=True)


def format_table(rows: list[list[str]], header: list[str]) -> list[str]:
    """Left-aligned columns, two spaces apart."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]
    ]


class _InterruptNote:
    """What a Ctrl-C now would leave undone, kept up to date by the running command."""

    text: str | None = None


def left_undone(text: str | None) -> None:
    """Say what an interruption at this point leaves undone (``cli.main`` prints it on Ctrl-C), e.g.
    ``deletion of topic t is still queued in /admin/delete_topics/t``; None: the command's default."""
    _InterruptNote.text = text


def interrupt_note() -> str | None:
    return _InterruptNote.text


def install_stop_handlers(event: threading.Event) -> dict[int, Any]:
    """SIGINT and SIGTERM set ``event`` (long-running commands stop cleanly on either); returns the
    handlers they replaced, for ``restore_handlers``. Outside the main thread nothing is installed."""

    def handler(signum: int, frame: object) -> None:
        event.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    return previous


def restore_handlers(previous: dict[int, Any]) -> None:
    for sig, old in previous.items():
        signal.signal(sig, old)


# -- who changed what: the audit option group of every state-changing command -------------------------

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


def operation_id(args: argparse.Namespace) -> str | None:
    """The operation the running command recorded (None when it records none)."""
    value = getattr(args, "operation_id", None)
    return value if isinstance(value, str) else None


def os_user() -> str:
    import getpass

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
        from kafka_controller.cli.kafka_client import kafka_admin

        with kafka_admin(args) as admin:
            value = admin.describe_cluster().get("cluster_id")
    try:
        return checked_cluster_id(value)
    except InvalidArgumentError:
        return None
