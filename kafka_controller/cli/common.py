"""What every admin subcommand shares: ``--zookeeper`` and ``--json`` options, the checked connect
string and timeout, input files, JSON output, one-line errors and the Ctrl-C note.

Errors are raised as ``InvalidArgumentError`` (bad input) or the adapters' own errors (ZooKeeper
unreachable, controller not answering); ``cli.main`` prints them as one line and exits 1.
``cli.main`` imports this module for every run, ``--help`` included, so it imports nothing heavy:
the connections are in ``connections``, the audit options in ``audit_options``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError
from kafka_controller.zk.paths import parse_connect_string

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


def operation_id(args: argparse.Namespace) -> str | None:
    """The operation the running command recorded (None when it records none)."""
    value = getattr(args, "operation_id", None)
    return value if isinstance(value, str) else None
