"""``kafka-controller shutdown --broker-id N``: controlled shutdown of one running broker.

By default the broker is asked over its own listener (the ShutdownBroker API) to shut down as on
SIGTERM: it asks the controller to move its leadership away (retrying as Kafka does), deregisters
and exits. With ``--pid PID`` the command sends SIGTERM to that local process instead (after
checking its command line names the broker). Either way it then waits until ``/brokers/ids/N`` is
gone, watching the broker's partitions meanwhile, and reports how many it led before and at exit.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path
from typing import Any

from kafka_controller.cli import audit_options, common, connections
from kafka_controller.cluster.process import wait_pids_exited
from kafka_controller.cluster.watch import LeadershipWatch, ShutdownTimeoutError, partitions_of
from kafka_controller.domain.errors import InvalidArgumentError

PROG = "kafka-controller shutdown"
POLL_S = 0.05


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "shutdown",
        help=summary,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_zookeeper_option(p)
    common.add_command_config_option(p)  # the controlled shutdown goes to the controller
    p.add_argument("--broker-id", type=int, required=True, help="the broker to shut down")
    p.add_argument(
        "--pid",
        type=int,
        help="send SIGTERM to this local broker process instead of asking over the listener",
    )
    common.add_json_option(p)
    p.set_defaults(func=run)
    audit_options.add_audit_options(p, "controlled_shutdown")


def run(args: argparse.Namespace) -> int:
    timeout = common.check_timeout(args)
    broker_id = args.broker_id
    if broker_id < 0:
        raise InvalidArgumentError(f"--broker-id must be >= 0, got {broker_id}")
    if args.pid is not None:
        _check_pid(args.pid, broker_id)
    with connections.open_store(args) as store:
        if store.get_broker(broker_id) is None:
            raise InvalidArgumentError(f"broker {broker_id} is not registered")
        watch = LeadershipWatch(store, broker_id, partitions_of(store, broker_id))
        led_before = watch.led
        started = time.monotonic()
        common.left_undone(
            f"broker {broker_id} may have been asked to shut down and may go on shutting down; "
            f"/brokers/ids/{broker_id} shows whether it is still registered"
        )
        if args.pid is not None:
            os.kill(args.pid, signal.SIGTERM)
            method = "signal"
        else:
            with connections.open_admin_client(args, store) as admin:
                admin.shutdown_broker(broker_id, common.operation_id(args))
            method = "api"
        common.left_undone(
            f"broker {broker_id} was asked to shut down and goes on shutting down; "
            f"/brokers/ids/{broker_id} shows whether it is still registered"
        )
        try:
            led_at_exit = watch.wait_deregistered(started + timeout)
        except ShutdownTimeoutError as e:
            raise common.CommandFailedError(str(e)) from None
        seconds = time.monotonic() - started
    if args.pid is not None:
        common.left_undone(f"broker {broker_id} deregistered; its process {args.pid} may still be exiting")
        _wait_exit(args.pid, started + timeout)
    common.left_undone(f"nothing is left undone: broker {broker_id} has shut down")
    if args.json:
        common.print_json(
            {
                "broker_id": broker_id,
                "method": method,
                "led_before": [str(tp) for tp in led_before],
                "led_at_exit": [str(tp) for tp in led_at_exit],
                "seconds": round(seconds, 3),
            }
        )
    else:
        how = "SIGTERM" if method == "signal" else "asked over its listener"
        common.say(
            f"Broker {broker_id} shut down in {seconds:.1f}s ({how}); "
            f"it led {len(led_before)} partition(s) before and {len(led_at_exit)} at exit."
        )
    return 0


def _check_pid(pid: int, broker_id: int) -> None:
    """Refuse to signal a process that is not ``kafka-controller broker --broker-id N``."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        raise InvalidArgumentError(f"no process with pid {pid}") from None
    except OSError as e:
        raise InvalidArgumentError(f"cannot inspect pid {pid}: {e.strerror or e}") from None
    words = [w.decode(errors="replace") for w in argv if w]
    joined = " ".join(words)
    if "broker" not in words or (
        f"--broker-id {broker_id}" not in joined and f"--broker-id={broker_id}" not in joined
    ):
        raise InvalidArgumentError(f"pid {pid} is not a kafka-controller broker with --broker-id {broker_id}")


def _wait_exit(pid: int, deadline: float) -> None:
    if wait_pids_exited([pid], deadline, POLL_S):
        raise common.CommandFailedError(f"process {pid} deregistered but has not exited")
