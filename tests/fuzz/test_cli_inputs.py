"""The admin CLI fed what operators mistype: a clear one-line error, a non-zero exit, and ZooKeeper
exactly as it was (docs/external-contract.md §2.3) — or, when the input happens to be valid,
exactly what it asked.

Runs ``kafka-controller`` in-process against a real ZooKeeper chroot holding three registered
brokers and a topic ``good``; no controller runs, so commands that need one end with a one-line
"no controller" error after a short ``--timeout``, which is also what the rule asks. Between
examples the module's chroot is compared, znode by znode, with its state before the command.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from kafka_controller.domain.values import Broker, EndPoint, ReplicaAssignment
from kafka_controller.zk import paths as P
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.kazoo_backend import KazooMetadataStore
from kafka_controller.zk.security import ZkClientConfig
from tests.cli.clirun import Result, run, snapshot
from tests.fuzz import strategies as S

pytestmark = pytest.mark.zk

FUZZ = settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
BROKERS = (1, 2, 3)
_chroots = itertools.count(1)


class Env:
    """A chroot with three registered brokers (their own sessions) and topic ``good``."""

    def __init__(self, server: EmbeddedZooKeeper, admin: KazooClient, tmp: Path) -> None:
        self.root = f"/cli-fuzz-{next(_chroots)}"
        self.connect = server.connect_string + self.root
        self.admin = admin
        self.tmp = tmp
        self.sessions = [
            KazooMetadataStore(ZkClientConfig(self.connect, session_timeout_ms=30_000)) for _ in BROKERS
        ]
        for b, store in zip(BROKERS, self.sessions, strict=True):
            store.register_broker(Broker(b, (EndPoint("127.0.0.1", 9000 + b),)))
        self.sessions[0].create_topic(
            "good", {p: ReplicaAssignment.of([1 + p % 3, 1 + (p + 1) % 3]) for p in range(3)}
        )
        self.files = itertools.count(1)

    def tree(self) -> dict[str, tuple[bytes, int]]:
        return snapshot(self.admin, self.root)

    def file(self, content: bytes | str) -> str:
        path = self.tmp / f"input-{next(self.files)}.json"
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return str(path)

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> Result:
        return run(capsys, *argv, "--zookeeper", self.connect, "--timeout", "0.5")

    def reset(self, before: dict[str, tuple[bytes, int]]) -> None:
        """Undo what a successful command wrote, so every example starts from the same tree."""
        for path in sorted(set(self.tree()) - set(before), key=len, reverse=True):
            self.admin.delete(self.root + path, recursive=True)

    def close(self) -> None:
        for store in self.sessions:
            store.close()
        self.admin.delete(self.root, recursive=True)


@pytest.fixture(scope="module")
def env(
    zk_server: EmbeddedZooKeeper, zk_admin_client: KazooClient, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Env]:
    e = Env(zk_server, zk_admin_client, tmp_path_factory.mktemp("cli-fuzz"))
    yield e
    e.close()


def refused_cleanly(
    result: Result,
    before: dict[str, tuple[bytes, int]],
    after: dict[str, tuple[bytes, int]],
    max_length: int | None = None,
) -> None:
    assert result.code != 0
    line = result.error_line  # exactly one line on stderr
    assert line.startswith("kafka-controller"), line
    if max_length is not None:
        assert len(line) <= max_length, f"{len(line)}-character error line: {line[:120]}..."
    assert after == before, f"a refused command changed ZooKeeper: {sorted(set(after) ^ set(before))[:5]}"


# -- topics create ---------------------------------------------------------------------------------
NAMES = st.one_of(
    st.sampled_from(["good", "fresh", "fre.sh", "fre_sh", "", ".", "..", "a" * 250, "bad name", "t/x", "-x"]),
    st.text(max_size=20),
)
NUMBERS = st.one_of(
    st.sampled_from(["1", "3", "0", "-1", "4", "2147483648", "1e3", "x", "", " 2", "9" * 5000]),
    st.integers(-5, 40).map(str),
)
ASSIGNMENTS = st.one_of(
    st.sampled_from(["1:2,2:3", "1:2,2", "1:1", "1,2,3", "-1:2", "4:5", ":", "", "1:2,,3:1", "1:2:3,2:3:1"]),
    st.lists(st.lists(st.integers(-1, 5), min_size=1, max_size=3), min_size=1, max_size=4).map(
        lambda ps: ",".join(":".join(map(str, p)) for p in ps)
    ),
    st.text(alphabet="0123456789:,- ", max_size=12),
)
CONFIGS = st.one_of(
    st.sampled_from(
        [
            "retention.ms=1000",
            "retention.ms=-5",
            "cleanup.policy=compact",
            "cleanup.policy=nope",
            "nope=1",
            "min.insync.replicas=0",
            "unclean.leader.election.enable=maybe",
            "=",
            "retention.ms",
            "segment.bytes=1",
        ]
    ),
    st.tuples(st.text(max_size=10), st.text(max_size=10)).map("=".join),
)


@FUZZ
@given(
    topic=NAMES,
    partitions=st.one_of(st.none(), NUMBERS),
    rf=st.one_of(st.none(), NUMBERS),
    assignment=st.one_of(st.none(), ASSIGNMENTS),
    configs=st.lists(CONFIGS, max_size=3),
)
def test_topics_create(
    env: Env,
    capsys: pytest.CaptureFixture[str],
    topic: str,
    partitions: str | None,
    rf: str | None,
    assignment: str | None,
    configs: list[str],
) -> None:
    argv = ["topics", "create", f"--topic={topic}"]
    argv += [f"--partitions={partitions}"] if partitions is not None else []
    argv += [f"--replication-factor={rf}"] if rf is not None else []
    argv += [f"--replica-assignment={assignment}"] if assignment is not None else []
    for c in configs:
        argv += [f"--config={c}"]
    before = env.tree()
    result = env.cli(capsys, *argv)
    after = env.tree()
    if result.code != 0:
        refused_cleanly(result, before, after)
        return
    try:  # created: exactly one new topic, well formed, on live brokers only
        store = env.sessions[0]
        created = store.get_replica_assignment_and_topic_ids([topic])[topic]
        assert not isinstance(created, Exception), created
        replicas = [ra.replicas for ra in created.assignment.values()]
        assert sorted(tp.partition for tp in created.assignment) == list(range(len(replicas)))
        # Kafka accepts brokers that are not registered in an explicit --replica-assignment
        # (ZkAdminManager.createTopics: "we don't check that replicaAssignment contains unknown
        # brokers"); generated assignments use live brokers only.
        allowed = set(BROKERS) if assignment is None else {r for rs in replicas for r in rs if r >= 0}
        assert all(len(set(r)) == len(r) and set(r) <= allowed for r in replicas), replicas
        assert len({len(r) for r in replicas}) == 1, f"mixed replication factors {replicas}"
        new = {p.split("/")[3] for p in set(after) - set(before) if p.startswith("/brokers/topics/")}
        assert new == {topic}, new
    finally:
        env.reset(before)


# -- reassignment and election JSON files ------------------------------------------------------------
REASSIGNMENT = {
    "version": 1,
    "partitions": [
        {"topic": "good", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        {"topic": "good", "partition": 1, "replicas": [3, 1]},
    ],
}
ELECTION = {"partitions": [{"topic": "good", "partition": 0}, {"topic": "good", "partition": 2}]}


@FUZZ
@given(payload=S.corrupt_payloads(REASSIGNMENT))
def test_reassign_execute_through_the_legacy_znode(
    env: Env, capsys: pytest.CaptureFixture[str], payload: bytes | None
) -> None:
    before = env.tree()
    result = env.cli(
        capsys,
        "reassign",
        "--execute",
        "--legacy-znode",
        "--reassignment-json-file",
        env.file(payload or b""),
    )
    after = env.tree()
    if result.code != 0:
        refused_cleanly(result, before, after)
        return
    try:  # accepted: the znode holds the valid plan, and nothing else changed
        written = env.sessions[0].get_partition_reassignment()
        assert written, "exit 0 but no reassignment was written"
        for tp, replicas in written.items():
            assert tp.topic == "good" and 0 <= tp.partition < 3, tp
            assert replicas and len(set(replicas)) == len(replicas) and set(replicas) <= set(BROKERS), (
                replicas
            )
        assert set(after) - set(before) == {P.REASSIGN_PARTITIONS_PATH}, sorted(set(after) - set(before))
    finally:
        env.reset(before)


@FUZZ
@given(payload=S.corrupt_payloads(REASSIGNMENT), mode=st.sampled_from(["--verify", "--cancel"]))
def test_reassign_verify_and_cancel(
    env: Env, capsys: pytest.CaptureFixture[str], payload: bytes | None, mode: str
) -> None:
    before = env.tree()
    result = env.cli(capsys, "reassign", mode, "--reassignment-json-file", env.file(payload or b""))
    after = env.tree()
    if result.code != 0:
        refused_cleanly(result, before, after)
    else:
        assert after == before, f"{mode} changed ZooKeeper"


@FUZZ
@given(payload=S.corrupt_payloads(ELECTION), kind=st.sampled_from(["preferred", "unclean"]))
def test_elect_with_a_json_file(
    env: Env, capsys: pytest.CaptureFixture[str], payload: bytes | None, kind: str
) -> None:
    before = env.tree()
    result = env.cli(
        capsys, "elect", "--election-type", kind, "--path-to-json-file", env.file(payload or b"")
    )
    # No controller runs here: a valid file ends in a one-line "no controller" error as well.
    refused_cleanly(result, before, env.tree())


@FUZZ
@given(
    argv=st.lists(
        st.one_of(
            st.sampled_from(
                [
                    "--topic",
                    "good",
                    "--partition",
                    "0",
                    "-1",
                    "99",
                    "--all-topic-partitions",
                    "--election-type",
                    "preferred",
                    "unclean",
                    "PREFERRED",
                    "--path-to-json-file",
                    "/nonexistent",
                    "--json",
                    "--bogus",
                ]
            ),
            NUMBERS,
        ),
        max_size=7,
    )
)
def test_elect_arguments(env: Env, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    before = env.tree()
    result = env.cli(capsys, "elect", *argv)
    refused_cleanly(result, before, env.tree())


@FUZZ
@given(topic=NAMES)
def test_topics_delete_unknown_or_invalid_topics(
    env: Env, capsys: pytest.CaptureFixture[str], topic: str
) -> None:
    if topic == "good":
        topic = "not-good"
    before = env.tree()
    result = env.cli(capsys, "topics", "delete", f"--topic={topic}")
    refused_cleanly(result, before, env.tree())


def test_a_huge_number_is_refused_in_one_short_line(env: Env, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["topics", "create", "--topic", "fresh", "--partitions", "9" * 5000, "--replication-factor", "1"]
    before = env.tree()
    result = env.cli(capsys, *argv)
    refused_cleanly(result, before, env.tree(), max_length=500)


def test_a_huge_value_in_a_reassignment_file_is_refused_in_one_short_line(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = {"version": 1, "partitions": [{"topic": "good", "partition": list(range(5000)), "replicas": [1]}]}
    before = env.tree()
    result = env.cli(capsys, "reassign", "--verify", "--reassignment-json-file", env.file(S.serialize(plan)))
    refused_cleanly(result, before, env.tree(), max_length=500)


def test_a_duplicate_partition_in_an_election_file_is_named(
    env: Env, capsys: pytest.CaptureFixture[str]
) -> None:
    twice = {"partitions": [{"topic": "good", "partition": 0}, {"topic": "good", "partition": 0}]}
    before = env.tree()
    result = env.cli(
        capsys, "elect", "--election-type", "preferred", "--path-to-json-file", env.file(S.serialize(twice))
    )
    refused_cleanly(result, before, env.tree())
    assert "good-0" in result.error_line, result.error_line
