"""``kafka-controller close-session --data-dir DIR``: end a dead broker's ZooKeeper session now.

For a supervisor that saw the broker process exit (systemd's ``ExecStopPost=``): it reads the
session the broker recorded in its ``--data-dir`` as it registered, and, only if that process is
gone and that session still owns ``/brokers/ids/<id>``, re-attaches to the session and closes it,
so that the broker's registration (and ``/controller``, if it was the controller) go at once
instead of after ``zookeeper.session.timeout.ms``. A clean shutdown leaves no record: nothing to
do. A stale record (the session expired, or a newer incarnation registered) is left unclosed.
ZooKeeper is tried again until --timeout has passed (an ensemble electing a leader drops every
client for a moment). Exit 0 when there was nothing to close or the session was closed; 1 when the
broker process still runs, the record is bad or ZooKeeper cannot be reached; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kafka_controller.cli import common, connections
from kafka_controller.zk.session_file import (
    SessionFileError,
    read_session_file,
    remove_session_file,
    same_process_alive,
)

PROG = "kafka-controller close-session"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "close-session",
        help=summary,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--data-dir", required=True, type=Path, help="the broker's --data-dir")
    p.add_argument("--broker-id", type=int, help="refuse a record of any other broker id")
    common.add_zookeeper_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported on use: kazoo is optional (the 'zk' extra).
    from kafka_controller.zk.session_close import CloseOutcome, close_recorded_session

    data_dir: Path = args.data_dir
    if not data_dir.is_dir():
        raise common.UsageError(f"--data-dir {data_dir} is not a directory")
    record = read_session_file(data_dir)
    if record is None:
        common.say(f"no session recorded in {data_dir} (a clean shutdown removes it): nothing to close")
        return 0
    if args.broker_id is not None and record.broker_id != args.broker_id:
        raise SessionFileError(
            f"{data_dir} records broker {record.broker_id}, not broker {args.broker_id}; nothing closed"
        )
    if same_process_alive(record.pid, record.pid_start):
        raise common.CommandFailedError(
            f"broker {record.broker_id}'s process {record.pid} is still running: only the session of a "
            "process that exited is closed"
        )
    connections.quiet_kazoo()  # kazoo logs a re-attach to an expired session; the outcome line says it
    outcome = close_recorded_session(connections.client_config(args), record)
    session = f"session 0x{record.session_id:x} of broker {record.broker_id} (pid {record.pid})"
    if outcome is CloseOutcome.CLOSED:
        common.say(f"closed {session}: its ephemeral znodes are gone")
    elif outcome is CloseOutcome.NOT_OWNER:
        common.say(f"left {session} alone: /brokers/ids/{record.broker_id} belongs to another registration")
    else:
        common.say(f"nothing to close: {session} is over ({outcome.value})")
    remove_session_file(data_dir, record.pid)
    return 0
