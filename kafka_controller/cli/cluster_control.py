"""``kafka-controller cluster stop-broker|start-broker|restart-broker N`` and ``cluster status``: act
on the brokers of a running ``cluster up`` through its control socket.

The ``cluster up`` process does the work (it started the brokers: it restarts one with the same
command line, listener, metrics port and log, and reaps it), in its main thread, one request at a
time; this side only asks and prints the answer. Errors are one line: no ``cluster up`` running,
several running and no ``--data-dir``, an unknown broker id, a broker already stopped or running.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka_controller.cli import audit_options, common
from kafka_controller.cluster.control import ask, find_socket
from kafka_controller.cluster.process import broker_pids
from kafka_controller.cluster.waits import ClusterError
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError

if TYPE_CHECKING:
    from kafka_controller.cluster.control import Request
    from kafka_controller.cluster.local import LocalCluster

_ACTIONS = {
    "stop-broker": "stop one broker of a running `cluster up` (controlled shutdown)",
    "start-broker": "start a stopped broker of a running `cluster up` again",
    "restart-broker": "bounce one broker of a running `cluster up`: controlled shutdown, then start",
}


def register(sub: Any) -> None:
    for action, help_text in _ACTIONS.items():
        p = sub.add_parser(
            action, help=help_text, description=f"{help_text[0].upper()}{help_text[1:]}. {__doc__}"
        )
        p.add_argument("broker_id", type=int, metavar="BROKER_ID", help="the broker's id")
        _add_common(p)
        p.set_defaults(func=run, control_action=action)
        audit_options.add_audit_options(p, "broker_lifecycle")
    p = sub.add_parser("status", help="the brokers of a running `cluster up`: pid, listener, running or not")
    _add_common(p)
    common.add_json_option(p)
    p.set_defaults(func=run, control_action="status", broker_id=None)


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--data-dir",
        type=Path,
        help="the --data-dir of the `cluster up` to ask (default: the only one of this user running)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="how long the broker may take to stop or start (default: %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    if args.broker_id is not None and not 0 <= args.broker_id <= 2**31 - 1:  # Kafka's ids are int32
        raise common.UsageError(f"broker id must be between 0 and {2**31 - 1}, got {args.broker_id}")
    timeout = common.check_timeout(args)
    reply = ask(find_socket(args.data_dir), args.control_action, args.broker_id, timeout)
    if not reply["ok"]:
        error = str(reply.get("error", "failed"))
        raise common.UsageError(error) if reply.get("usage") else common.CommandFailedError(error)
    if args.control_action == "status":
        _print_status(reply, as_json=args.json)
    else:
        common.say(str(reply.get("message", "done")))
    return 0


def _print_status(reply: dict[str, Any], *, as_json: bool) -> None:
    brokers = reply.get("brokers", [])
    if as_json:
        common.print_json({"zookeeper": reply.get("zookeeper"), "brokers": brokers})
        return
    common.say(f"ZooKeeper: {reply.get('zookeeper')}")
    rows = [
        [str(b["id"]), _state(b), str(b["pid"] or "-"), str(b["listener"] or "-"),
         str(b.get("metrics") or "-")]
        for b in brokers
    ]  # fmt: skip
    for line in common.format_table(rows, ["BROKER", "STATE", "PID", "LISTENER", "METRICS"]):
        common.say(line)


def _state(broker: dict[str, Any]) -> str:
    if not broker["pid"]:
        return "stopped"
    return "running (started outside)" if broker.get("outside") else "running"


# -- the `cluster up` side: runs in its main thread ------------------------------------------------------


def handle(cluster: LocalCluster, request: Request, reported: set[int]) -> None:
    """Carry out one control request on ``cluster`` and fill in its reply. ``reported`` holds the
    brokers whose exit ``cluster up`` need not announce (stopped on request, or already announced)."""
    try:
        request.reply = {"ok": True, **_do(cluster, request, reported)}
    except InvalidArgumentError as e:
        request.reply = {"ok": False, "usage": True, "error": str(e)}
    except KafkaControllerError as e:
        request.reply = {"ok": False, "error": str(e)}
    except Exception as e:  # a failed request must not end `cluster up`; the client gets one line
        request.reply = {"ok": False, "error": f"{request.action} failed: {type(e).__name__}: {e}"}
    finally:
        request.done.set()


def _do(cluster: LocalCluster, request: Request, reported: set[int]) -> dict[str, Any]:
    if request.action == "status":
        info = cluster.info()
        for row in info["brokers"]:
            # a broker of this cluster that something else started (by hand, or a backend that
            # relaunched it): running, and said to be outside, so the table never says "stopped"
            outside = [] if row["pid"] else broker_pids(row["id"], cluster.connect_string)
            if outside:
                row["pid"], row["outside"] = outside[0], True
        return {"zookeeper": info["zookeeper"], "brokers": info["brokers"]}
    b = request.broker
    if b is None:
        raise ClusterError(f"{request.action} needs a broker id")
    cluster.addresses.known(b)
    proc = cluster.processes.get(b)
    running = proc is not None and proc.is_running()
    if request.action == "stop-broker":
        if not running:
            raise ClusterError(f"broker {b} is not running")
        reported.add(b)
        code = cluster.stop_broker(b, timeout=request.timeout)
        return {"message": f"broker {b} stopped (controlled shutdown, exit code {code})"}
    if request.action == "start-broker" and running:
        raise ClusterError(f"broker {b} is already running (pid {proc.pid if proc else '?'})")
    if request.action == "restart-broker":
        if not running:
            raise ClusterError(f"broker {b} is not running; use start-broker")
        reported.add(b)
        epoch = cluster.restart_broker(b, timeout=request.timeout)
    else:
        epoch = cluster.start_broker(b, timeout=request.timeout)
    reported.discard(b)
    pid = cluster.processes[b].pid
    verb = "restarted" if request.action == "restart-broker" else "started"
    return {"message": f"broker {b} {verb} on {cluster.listener(b)} (pid {pid}, broker epoch {epoch})"}
