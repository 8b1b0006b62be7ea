"""Whatever the command line, ``kafka-controller`` ends in a message and an exit code, never a traceback.

Arguments are generated from the argparse parsers themselves (every option of every command: junk
and plausible values, flags, repeats), connect strings from junk and from an address that refuses
connections, and the CLI runs in-process (``main(argv)``). Any exception other than ``SystemExit``
escaping ``main``, or a traceback printed on the way, fails the test. No ZooKeeper is needed: a connect
string that parses points at a port bound by this module and never listened on (refused at once),
with ``--timeout`` of at most 0.1 s. Commands that would start something long-running (a server, a
broker, a cluster, the demo, Spark, a synthetic fleet) always get one argument that is refused before
anything starts, so every command is covered without starting anything.

``test_no_traceback_on_a_cluster`` does the same for the commands that take ``--zookeeper`` against a
real ZooKeeper chroot holding a cluster, so that they get past connecting.

Safety: generated paths only ever name things inside this module's temporary directory (never
``/``, a device, or a path with ``..``): commands write, replace and delete what they are given.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import io
import os
import shutil
import socket
import tempfile
import traceback
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from kafka_controller.cli.common import ZOOKEEPER_ENV
from kafka_controller.cli.main import main
from kafka_controller.cluster.control import RUNTIME_DIR_ENV
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import Broker, EndPoint, ReplicaAssignment
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from kafka_controller.zk.paths import parse_connect_string
from tests.cli.parsers import options, walk

COMMANDS: dict[tuple[str, ...], argparse.ArgumentParser] = dict(walk())
#: Examples per command: modest by default (the whole file runs in seconds); raise it to hunt.
EXAMPLES = int(os.environ.get("KAFKA_CONTROLLER_FUZZ_EXAMPLES", "25"))

_files = Path(tempfile.mkdtemp(prefix="kc-no-traceback-"))
atexit.register(shutil.rmtree, _files, True)
#: Never created: every path under it is refused (and can never resolve to anything real).
MISSING = _files / "missing"

#: Appended last (argparse keeps the last value): refused before anything starts.
POISON: dict[tuple[str, ...], list[str]] = {
    ("demo",): ["--scenario", "airflow", "--dags-folder", f"{MISSING}/dags"],
    ("cluster", "up"): ["--config", "no.such.key=1"],
    ("zookeeper",): ["--java", f"{MISSING}/java"],
    ("reconcile", "run"): ["--snapshot", f"{MISSING}/snapshot"],
    ("reconcile", "synth"): ["--partitions", "0"],
}
#: ``broker`` is refused by its connect string (only unparseable ones are generated for it).
ONLY_BAD_CONNECT = {("broker",)}

PATH_DESTS = {
    "data_dir",
    "dags_folder",
    "audit_spool_dir",
    "html",
    "reassignment_json_file",
    "topics_to_move_json_file",
    "path_to_json_file",
    "out",
    "snapshot",
    "audit_parquet",
    "file",
    "java",
    "jars_dir",
    "jdbc_jar",
}
URL_DESTS = {"audit_url", "url", "results_url"}

_refusing = socket.socket()
_refusing.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused, the port stays ours
REFUSING = f"127.0.0.1:{_refusing.getsockname()[1]}"

(_files / "empty.json").write_text("")
(_files / "junk.json").write_text("{not json")
(_files / "plan.json").write_text('{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}')
(_files / "moves.json").write_text('{"topics":[{"topic":"t"}]}')
(_files / "election.json").write_text('{"partitions":[{"topic":"t","partition":0,"log_dirs":["any"]}]}')
(_files / "binary.json").write_bytes(b"\xff\xfe\x00")
(_files / "dir").mkdir()
(_files / "dir" / "not-a-snapshot.txt").write_text("keep me")

JUNK = st.one_of(
    st.text(max_size=24),
    st.sampled_from(
        [
            "",
            "-1",
            "0",
            "1",
            "2181",
            "65536",
            "99999999999999999999",
            "1e400",
            "nan",
            "inf",
            "-",
            "=",
            ",",
            "1:2,2:3",
            "1:9",
            "t",
            "a.b",
            "a_b",
            "x" * 300,
            "k=v",
            "min.insync.replicas=0",
            "\udcff",
            "é",
        ]
    ),
)
INTS = st.one_of(st.integers(-3, 10), st.integers(), st.sampled_from(["", "1.5", "x", "0x10", "1_000"]))
FLOATS = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), JUNK)
NAME = st.characters(blacklist_characters="/\x00", blacklist_categories=("Cs",))
#: One path element, never "." or "..": joined to a directory it names something inside it.
ELEMENT = st.text(NAME, min_size=1, max_size=12).filter(lambda t: t not in (".", ".."))
# Only paths inside this module's temporary directory: a generated output path
# (--out, --html, --data-dir ...) must never name anything real (an early version of this test, with
# '/dev/null' among its paths, found `reconcile export --out /dev/null --overwrite` replacing it).
PATHS = st.one_of(
    st.sampled_from([str(p) for p in _files.iterdir()]),
    ELEMENT.map(lambda t: f"{MISSING}/{t}"),
    ELEMENT.map(lambda t: f"{_files}/new/{t}"),
)
URLS = st.one_of(
    JUNK,
    st.sampled_from(["postgresql+psycopg://127.0.0.1:1/audit", f"sqlite:///{MISSING}/audit.db", "sqlite://"]),
)
TIMEOUTS = st.one_of(st.floats(0.01, 0.1).map(repr), st.sampled_from(["0", "-1", "nan", "inf", "x", ""]))


def _refused_or_bad(text: str) -> str:
    """Unparseable text as it is; anything that would connect is pointed at the refusing port."""
    try:
        _, chroot = parse_connect_string(text)
    except InvalidArgumentError:
        return text
    return REFUSING + chroot


BAD_CONNECT = st.text(max_size=30).filter(lambda t: _refused_or_bad(t) == t)
CONNECT = st.one_of(
    BAD_CONNECT,
    st.text(max_size=30).map(_refused_or_bad),
    st.sampled_from(["127.0.0.1:21810000", "127.0.0.1:2181 ", "127.0.0.1:abc", "127.0.0.1:2181,", ""]),
    st.text(alphabet="abc/._-", max_size=12).map(lambda c: _refused_or_bad(REFUSING + "/" + c)),
)


def _value(
    action: argparse.Action, command: tuple[str, ...], overrides: dict[str, st.SearchStrategy[str]]
) -> st.SearchStrategy[str]:
    if action.dest in overrides:
        return overrides[action.dest]
    if action.dest == "zookeeper":
        return BAD_CONNECT if command in ONLY_BAD_CONNECT else CONNECT
    if action.dest == "timeout":
        return TIMEOUTS
    if action.dest in PATH_DESTS:
        return PATHS
    if action.dest in URL_DESTS:
        return URLS
    if action.choices:
        return st.one_of(st.sampled_from(list(action.choices)), JUNK)
    if action.type is int:
        return INTS.map(str)
    if action.type is float:
        return FLOATS
    return JUNK


@st.composite
def command_lines(
    draw: st.DrawFn,
    command: tuple[str, ...],
    overrides: dict[str, st.SearchStrategy[str]] | None = None,
    skip: frozenset[str] = frozenset(),
) -> tuple[list[str], dict[str, str]]:
    """argv for ``command`` (its options in any order, each maybe present) and the environment;
    ``overrides`` replace the value strategy of some options (by dest), ``skip`` leaves some out."""
    overrides = overrides or {}
    parser = COMMANDS[command]
    argv: list[str] = [*command]
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction) and a.dest not in skip]
    for action in draw(st.permutations(actions)):
        # --timeout always: its default (30 s) would make a refused connection retry for 30 s
        if not (action.required or action.dest == "timeout" or draw(st.booleans())):
            continue
        if not action.option_strings:  # a positional
            argv.append(draw(_value(action, command, overrides)))
        elif action.nargs == 0:  # a flag
            argv.append(action.option_strings[-1])
        else:
            repeats = draw(st.integers(1, 3)) if isinstance(action, argparse._AppendAction) else 1
            for _ in range(repeats):
                argv += [action.option_strings[-1], draw(_value(action, command, overrides))]
    argv += POISON.get(command, [])
    env: dict[str, str] = {}
    if draw(st.booleans()):
        env[ZOOKEEPER_ENV] = draw(
            overrides.get("zookeeper", BAD_CONNECT if command in ONLY_BAD_CONNECT else CONNECT)
        )
    # a process's arguments and environment are C strings: no NUL ever reaches the command
    return [a.replace("\x00", "") for a in argv], {k: v.replace("\x00", "") for k, v in env.items()}


@contextlib.contextmanager
def _environment(extra: dict[str, str]) -> Iterator[None]:
    # `cluster stop-broker` & co. find a running `cluster up` by its control socket: only ever this
    # module's (empty) directory, never a real cluster of this user
    with mock.patch.dict(os.environ, {**extra, RUNTIME_DIR_ENV: str(_files / "run")}):
        for name in (ZOOKEEPER_ENV, "KAFKA_CONTROLLER_AUDIT_URL", "KAFKA_CONTROLLER_ZK_DIGEST"):
            if name not in extra:
                os.environ.pop(name, None)
        yield


def run_in_process(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with _environment(env), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
        except BaseException as e:  # the point of the test: report what escaped, with its traceback
            raise AssertionError(
                f"kafka-controller {argv!r} (env {env!r}) raised {type(e).__name__}: {e}\n"
                + "".join(traceback.format_exception(e))
            ) from None
    return code, out.getvalue(), err.getvalue()


def test_every_command_is_generated() -> None:
    assert len(COMMANDS) >= 20
    assert set(POISON) | ONLY_BAD_CONNECT <= set(COMMANDS)


def _check(argv: list[str], env: dict[str, str]) -> None:
    code, _out, err = run_in_process(argv, env)
    assert "Traceback" not in err, f"{argv!r} printed a traceback:\n{err}"
    assert code in (0, 1, 2, 3), (argv, code, err)
    if code != 0:
        lines = [x for x in err.splitlines() if x.strip()]
        assert lines, f"{argv!r} exited {code} without a word"


@pytest.mark.parametrize("command", sorted(COMMANDS), ids=" ".join)
def test_no_traceback(command: tuple[str, ...]) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(command_lines(command))
    def check(line: tuple[list[str], dict[str, str]]) -> None:
        _check(*line)

    check()


CLUSTER_COMMANDS = sorted(
    c for c, p in COMMANDS.items() if "--zookeeper" in options(p) and c not in ONLY_BAD_CONNECT
)
TOPICS = st.one_of(st.sampled_from(["t", "u", "v.w", "v_w"]), JUNK)


@pytest.mark.zk
@pytest.mark.parametrize("command", CLUSTER_COMMANDS, ids=" ".join)
def test_no_traceback_on_a_cluster(
    command: tuple[str, ...], zk_connect: str, zk_chroot: str, zk_admin_client: KazooClient
) -> None:
    """The same against a real ZooKeeper holding a cluster (brokers 1-3 registered, topic t, broker 1
    registered as controller with nobody listening), so that commands get past connecting: they read,
    write (into this test's chroot only) and wait for a controller that never answers. ``--pid`` is
    never generated: ``shutdown`` would signal a matching broker process if one ran on this machine."""
    store = KazooMetadataStore(zk_connect)
    try:
        for b in (1, 2, 3):
            store.register_broker(Broker(b, (EndPoint("127.0.0.1", 1),)))
        store.create_topic("t", {0: ReplicaAssignment.of([1, 2]), 1: ReplicaAssignment.of([2, 9])})
        store.register_controller_and_increment_controller_epoch(1)
        overrides = {
            "zookeeper": st.one_of(st.just(zk_connect), st.just(zk_connect + "/nothing-here")),
            "timeout": st.floats(0.2, 0.3).map(repr),
            "topic": TOPICS,
        }

        @settings(
            max_examples=max(5, EXAMPLES // 3), deadline=None, suppress_health_check=[HealthCheck.too_slow]
        )
        @given(command_lines(command, overrides, skip=frozenset({"pid"})))
        def check(line: tuple[list[str], dict[str, str]]) -> None:
            _check(*line)

        check()
        assert zk_admin_client.exists(f"{zk_chroot}/brokers/ids/1") is not None  # the cluster is still there
    finally:
        store.close()


class _StubCluster:
    """What ``cluster_control.handle`` needs of a ``LocalCluster``: brokers 1 and 2, neither running,
    and a start that fails as a real one can."""

    broker_ids = (1, 2)
    processes: dict[int, object] = {}

    def _known(self, broker_id: int) -> int:
        if broker_id not in self.broker_ids:
            raise InvalidArgumentError(f"broker {broker_id} is not part of this cluster [1, 2]")
        return broker_id

    def info(self) -> dict[str, object]:
        brokers = [
            {"id": b, "listener": None, "pid": None, "log": "-", "metrics": None} for b in self.broker_ids
        ]
        return {"zookeeper": REFUSING, "brokers": brokers}

    def start_broker(self, broker_id: int, timeout: float) -> int:
        from kafka_controller.cluster.waits import ClusterError

        raise ClusterError(f"broker {broker_id} did not register within {timeout:g}s")


CONTROL_COMMANDS = sorted(c for c in COMMANDS if c[0] == "cluster" and c[1] != "up")


@pytest.mark.parametrize("command", CONTROL_COMMANDS, ids=" ".join)
def test_no_traceback_against_a_running_cluster_up(command: tuple[str, ...]) -> None:
    """``cluster stop-broker|start-broker|restart-broker|status`` get past discovery: a control
    socket answers from this module's runtime directory (``handle`` on a stub cluster, so the
    ``cluster up`` side's refusals are fuzzed too)."""
    import threading

    from kafka_controller.cli.cluster_control import handle
    from kafka_controller.cluster.control import ControlServer

    data_dir = _files / "cluster-up"
    data_dir.mkdir(exist_ok=True)
    with mock.patch.dict(os.environ, {RUNTIME_DIR_ENV: str(_files / "run")}):
        server = ControlServer(data_dir, {"zookeeper": REFUSING})
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            request = server.next_request(0.05)
            if request is not None:
                handle(_StubCluster(), request, set())  # type: ignore[arg-type]

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        overrides = {
            "data_dir": st.one_of(st.just(str(data_dir)), PATHS),
            "timeout": st.floats(0.2, 5).map(repr),
        }

        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(command_lines(command, overrides))
        def check(line: tuple[list[str], dict[str, str]]) -> None:
            _check(*line)

        check()
    finally:
        stop.set()
        thread.join(5)
        server.close()
