"""``broker.kafka_admin.KafkaAdmin``: the operations package's elections and reassignments over a Kafka
client (kafka-python), here with a recording fake of ``KafkaAdminClient``: which brokers it
bootstraps from, the client id that carries the operation id, the translation of answers into the
private client's response values, retries while no controller answers, and one-line errors."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from kafka_controller.broker.kafka_admin import (
    KafkaAdmin,
    KafkaAdminError,
    brokers_from_zookeeper,
    client_id,
    parse_bootstrap_servers,
)
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import (
    Broker,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
OP = "0b8d3c1e-52a4-4f0e-9a55-1c2d3e4f5a6b"


class FakeStore:
    def __init__(self, controller: int | None = 2) -> None:
        self.controller = controller
        self.brokers = [Broker(i, (EndPoint(f"h{i}", 9090 + i),)) for i in (3, 1, 2)]
        self.leaders: dict[TopicPartition, int] = {}

    def get_all_brokers_and_epochs(self) -> dict[Broker, int]:
        return dict.fromkeys(self.brokers, 1)

    def get_controller_id(self) -> int | None:
        return self.controller

    def get_partition_states(self, tps: list[TopicPartition]) -> dict[TopicPartition, Any]:
        return {
            tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(self.leaders[tp], 1, (1,), 0), 1)
            for tp in tps
            if tp in self.leaders
        }


class FakeKafkaAdminClient:
    """Records its configs and calls; ``answers[name]`` is a value, or an exception list to raise first."""

    made: list[FakeKafkaAdminClient] = []
    #: Shared by every client made (a failed attempt's client is replaced by a new one).
    answers: dict[str, Any] = {}
    failures: list[Exception] = []
    calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def __init__(self, **configs: Any) -> None:
        self.configs = configs
        self._controller_id: int | None = None
        self.closed = False
        FakeKafkaAdminClient.made.append(self)

    def _answer(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((name, args, kwargs))
        if self.failures:
            raise self.failures.pop(0)
        return self.answers[name]

    def elect_leaders(self, *args: Any, **kwargs: Any) -> Any:
        return self._answer("elect_leaders", *args, **kwargs)

    def alter_partition_reassignments(self, *args: Any, **kwargs: Any) -> Any:
        return self._answer("alter_partition_reassignments", *args, **kwargs)

    def list_partition_reassignments(self, *args: Any, **kwargs: Any) -> Any:
        return self._answer("list_partition_reassignments", *args, **kwargs)

    def close(self) -> None:
        self.closed = True


@pytest.fixture(autouse=True)
def _fresh() -> None:
    for shared in (FakeKafkaAdminClient.made, FakeKafkaAdminClient.calls, FakeKafkaAdminClient.failures):
        shared.clear()
    FakeKafkaAdminClient.answers.clear()


def admin(store: FakeStore | None = None, bootstrap: str | None = None, **kw: Any) -> KafkaAdmin:
    fake: Any = store
    return KafkaAdmin(
        bootstrap, fake, client_factory=FakeKafkaAdminClient, sleep=lambda s: None, timeout_s=5.0, **kw
    )


def elect_answer(*rows: tuple[str, int, int, str | None], top: int = 0) -> Any:
    topics: dict[str, list[Any]] = {}
    for topic, p, code, message in rows:
        topics.setdefault(topic, []).append(
            SimpleNamespace(partition_id=p, error_code=code, error_message=message)
        )
    return SimpleNamespace(
        error_code=top,
        replica_election_results=[SimpleNamespace(topic=t, partition_result=ps) for t, ps in topics.items()],
    )


def test_client_ids_and_bootstrap_servers() -> None:
    assert client_id(None) == "kafka-controller-ops"
    assert client_id(OP) == f"kafka-controller-ops/op={OP}"
    with pytest.raises(InvalidArgumentError, match="operation id"):
        client_id("x" * 37)
    assert parse_bootstrap_servers(" a:1, b:2 ,") == ("a:1", "b:2")
    assert parse_bootstrap_servers(["a:1"]) == ("a:1",)
    assert parse_bootstrap_servers("") is None and parse_bootstrap_servers(None) is None
    for bad in ("a", "a:", ":1", "a:x", "a:70000"):
        with pytest.raises(InvalidArgumentError, match="is not host:port"):
            parse_bootstrap_servers(bad)


def test_brokers_come_from_zookeeper_the_controller_first() -> None:
    assert brokers_from_zookeeper(FakeStore(controller=2)) == ("h2:9092",)  # type: ignore[arg-type]
    assert brokers_from_zookeeper(FakeStore(controller=None)) == ("h1:9091", "h2:9092", "h3:9093")  # type: ignore[arg-type]
    empty = FakeStore()
    empty.brokers = []
    with pytest.raises(KafkaAdminError, match="no broker is registered"):
        brokers_from_zookeeper(empty)  # type: ignore[arg-type]


def test_one_client_per_operation_id_seeded_with_the_controller() -> None:
    a = admin(FakeStore(controller=2))
    first, again, other = a.client(OP), a.client(OP), a.client(None)
    assert first is again and first is not other
    assert first.configs["client_id"] == f"kafka-controller-ops/op={OP}"
    assert other.configs["client_id"] == "kafka-controller-ops"
    assert first.configs["bootstrap_servers"] == ["h2:9092"] and first._controller_id == 2
    explicit = admin(FakeStore(), bootstrap="k1:9092,k2:9092").client()
    assert explicit.configs["bootstrap_servers"] == ["k1:9092", "k2:9092"]
    a.close()
    assert first.closed and other.closed


def test_elect_leaders_translates_and_reads_the_leaders_back() -> None:
    store = FakeStore()
    store.leaders[T0] = 3
    a = admin(store)
    client = a.client(OP)
    client.answers["elect_leaders"] = elect_answer(("t", 0, 0, None), ("t", 1, 84, None), ("u", 0, 3, "gone"))
    response = a.elect_leaders("Unclean", [T0, T1, TopicPartition("u", 0)], OP)
    ((name, args, kwargs),) = client.calls
    assert (name, args) == ("elect_leaders", (1, {"t": [0, 1], "u": [0]}))
    assert kwargs["raise_errors"] is False
    got = {tp: (r.error, r.leader, r.message) for tp, r in response.results.items()}
    assert got == {
        T0: ("NONE", 3, None),
        T1: ("ELECTION_NOT_NEEDED", -1, None),
        TopicPartition("u", 0): ("UNKNOWN_TOPIC_OR_PARTITION", -1, "gone"),
    }


def test_elect_leaders_for_every_partition_leaves_out_the_not_needed() -> None:
    a = admin(FakeStore())
    a.client().answers["elect_leaders"] = elect_answer(("t", 0, 84, None), ("t", 1, 80, "no"))
    response = a.elect_leaders("preferred")
    assert FakeKafkaAdminClient.made[0].calls[0][1] == (0, None)
    assert {tp: r.error for tp, r in response.results.items()} == {T1: "PREFERRED_LEADER_NOT_AVAILABLE"}


def test_retries_while_no_controller_answers_then_one_line() -> None:
    from kafka import TopicPartition as KTopicPartition

    a = admin(FakeStore())
    client = a.client()
    client.failures = [RuntimeError("Failed to find active controller id!")]
    client.answers["list_partition_reassignments"] = {
        KTopicPartition("t", 1): {
            "replicas": [3, 1],
            "adding_replicas": [3],
            "removing_replicas": [1],
        }
    }
    listed = a.list_partition_reassignments([T1])
    assert listed.reassignments == {T1: ReplicaAssignment((3, 1), (3,), (1,))}
    assert [c[1] for c in client.calls] == [({"t": [1]},), ({"t": [1]},)]
    assert client.closed and len(FakeKafkaAdminClient.made) == 2  # the failed client was replaced
    now = [0.0]
    slow = admin(FakeStore(), clock=lambda: now[0])
    FakeKafkaAdminClient.failures[:] = [TimeoutError("no answer")] * 100

    def tick(_s: float) -> None:
        now[0] += 1.0

    slow._sleep = tick
    with pytest.raises(
        KafkaAdminError, match=r"^listing reassignments failed after 5s: TimeoutError: no answer$"
    ):
        slow.list_partition_reassignments()


def test_alter_partition_reassignments_per_partition_errors() -> None:
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import NoReassignmentInProgressError

    a = admin(FakeStore())
    client = a.client(OP)
    client.answers["alter_partition_reassignments"] = {
        KTopicPartition("t", 0): None,
        KTopicPartition("t", 1): NoReassignmentInProgressError,
    }
    response = a.alter_partition_reassignments({T0: (2, 1), T1: None}, OP)
    assert client.calls[0][1] == ({KTopicPartition("t", 0): [2, 1], KTopicPartition("t", 1): None},)
    assert {tp: r.error for tp, r in response.results.items()} == {
        T0: "NONE",
        T1: "NO_REASSIGNMENT_IN_PROGRESS",
    }
    assert a.alter_partition_reassignments({}).results == {}


def test_a_top_level_error_and_bad_input() -> None:
    a = admin(FakeStore())
    a.client().answers["elect_leaders"] = elect_answer(top=31)
    with pytest.raises(KafkaAdminError, match="preferred election refused: CLUSTER_AUTHORIZATION_FAILED"):
        a.elect_leaders("preferred", [T0])
    with pytest.raises(InvalidArgumentError, match="invalid election type"):
        a.elect_leaders("sideways", [T0])
    with pytest.raises(InvalidArgumentError, match="no brokers to connect to"):
        KafkaAdmin(None, None)
