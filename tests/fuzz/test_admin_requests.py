"""Admin requests from anyone on a broker's listener: a clear answer, nothing partially written,
the controller keeps running (docs/controller-behaviour.md §8.8, §8.11; Kafka 2.8's
``validateReplicas``).

Three ``BrokerServer``s in this process (real controllers, request handlers, sockets and simulated
replicas on one in-memory ZooKeeper tree), shared by the module. Hypothesis sends raw JSON bodies
to the active controller's listener, so the server's own decoding is exercised, not the client's.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_controller.broker import apis as A
from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.transport import framing
from tests.broker.helpers import wait_until
from tests.fuzz import strategies as S

FUZZ = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SETTINGS = {
    "auto.leader.rebalance.enable": "false",
    "replica.lag.time.max.ms": "2000",
    "sim.fetch.interval.ms": "50",
    "controller.socket.timeout.ms": "5000",
}
BROKERS = (1, 2, 3)
PARTITIONS = 4
KNOWN_ERRORS = {e.value for e in Errors} | {A.NOT_LEADER_OR_FOLLOWER, A.UNKNOWN_LEADER_EPOCH}


class Brokers:
    """The in-process cluster and a raw line to whichever broker is the controller."""

    def __init__(self) -> None:
        self.tree = InMemoryZooKeeper()
        self.zk = InMemoryMetadataStore(self.tree)
        self.servers = {
            b: BrokerServer(BrokerConfig.of(b, SETTINGS), InMemoryMetadataStore(self.tree)).startup()
            for b in BROKERS
        }
        wait_until(lambda: self.zk.get_controller_id() in BROKERS, "a controller")
        self.zk.create_topic(
            "good",
            {p: ReplicaAssignment.of([BROKERS[(p + i) % 3] for i in range(2)]) for p in range(PARTITIONS)},
        )
        wait_until(lambda: all(s is not None for s in self.states().values()), "every partition led")
        self._cid = 0

    def states(self) -> dict[TopicPartition, LeaderIsrAndControllerEpoch | None]:
        tps = [TopicPartition("good", p) for p in range(PARTITIONS)]
        return {
            tp: s if isinstance(s, LeaderIsrAndControllerEpoch) else None
            for tp, s in self.zk.get_partition_states(tps).items()
        }

    def send(self, api: str, body: Any) -> dict[str, Any]:
        """One raw request to the active controller; the decoded answer envelope."""
        controller = self.zk.get_controller_id()
        assert controller is not None
        self._cid += 1
        with socket.create_connection(("127.0.0.1", self.servers[controller].port), timeout=10) as sock:
            sock.settimeout(10)
            framing.write_frame(
                sock, S.serialize({"api": api, "v": framing.WIRE_VERSION, "cid": self._cid, "body": body})
            )
            payload = framing.read_frame(sock, framing.DEFAULT_MAX_FRAME_BYTES)
        assert payload is not None, f"{api}: the broker closed the connection without answering"
        return orjson.loads(payload)

    def close(self) -> None:
        for server in self.servers.values():
            server.crash()
        self.zk.close()


@pytest.fixture(scope="module")
def brokers() -> Iterator[Brokers]:
    b = Brokers()
    yield b
    b.close()


def answered_cleanly(api: str, answer: dict[str, Any]) -> dict[str, Any] | None:
    """An INVALID_REQUEST refusal (None) or a body whose errors are Kafka error names; never the
    handler's UNKNOWN_SERVER_ERROR (an exception bad input should not have caused)."""
    if "error" in answer:
        assert answer["error"]["code"] == Errors.INVALID_REQUEST, f"{api}: {answer['error']}"
        assert "\n" not in answer["error"]["message"]
        return None
    body = answer["body"]
    assert body["error"] in KNOWN_ERRORS and body["error"] != Errors.UNKNOWN_SERVER_ERROR, f"{api}: {body}"
    return body


def assert_controller_unmoved(brokers: Brokers, before: tuple[int | None, object]) -> None:
    assert (brokers.zk.get_controller_id(), brokers.zk.get_controller_epoch()) == before, (
        "the controller moved"
    )


TOPICS = st.one_of(st.just("good"), st.just("nope"), S.TRICKY_STRINGS, S.JSON_VALUES)
PARTITION_NUMBERS = st.one_of(st.integers(0, PARTITIONS + 1), S.EDGE_INTS, S.JSON_VALUES)
REPLICA_LISTS = st.one_of(
    st.lists(st.sampled_from([1, 2, 3]), max_size=4),
    st.lists(S.EDGE_INTS, max_size=4),
    st.lists(st.sampled_from([1, 2, 3, 4, 99, -1]), min_size=1, max_size=3),
    st.just(list(range(2000))),
    st.none(),
    S.JSON_VALUES,
)


@FUZZ
@given(
    entries=st.lists(
        st.fixed_dictionaries({"topic": TOPICS, "partition": PARTITION_NUMBERS, "replicas": REPLICA_LISTS}),
        max_size=4,
    )
)
def test_alter_partition_reassignments(brokers: Brokers, entries: list[dict[str, Any]]) -> None:
    before_controller = (brokers.zk.get_controller_id(), brokers.zk.get_controller_epoch())
    before = brokers.zk.get_replica_assignment_and_topic_ids(["good"])["good"]
    body = answered_cleanly(
        A.ALTER_PARTITION_REASSIGNMENTS,
        brokers.send(A.ALTER_PARTITION_REASSIGNMENTS, {"reassignments": entries}),
    )
    assert_controller_unmoved(brokers, before_controller)
    after = brokers.zk.get_replica_assignment_and_topic_ids(["good"])["good"]
    assert brokers.zk.get_all_topics() == {"good"}, "a topic appeared"
    if body is None:  # refused as a whole: nothing may have changed
        assert after == before or _only_progressed(before, after)
        return
    live = set(BROKERS)
    for result in body["results"]:
        tp = TopicPartition(result["topic"], result["partition"])
        if result["error"] == Errors.NONE:
            # the last entry for a partition wins, as in the request's map
            target = [e["replicas"] for e in entries if (e["topic"], e["partition"]) == tuple(tp)][-1]
            if target is not None:  # None cancels
                assert target and len(set(target)) == len(target) and set(target) <= live, (
                    f"{tp}: accepted the invalid target {target}"
                )
        elif tp.topic == "good" and tp in before.assignment:  # type: ignore[union-attr]
            ra_before, ra_after = before.assignment[tp], after.assignment[tp]  # type: ignore[union-attr]
            assert ra_after.replicas == ra_before.replicas or _only_progressed(before, after), (
                f"{tp}: refused ({result['error']}) but its assignment changed {ra_before} -> {ra_after}"
            )
    _no_leader_outside_isr(brokers)


def _only_progressed(before: Any, after: Any) -> bool:
    """A reassignment accepted earlier may complete meanwhile: its target becomes the assignment."""
    for tp, ra in before.assignment.items():
        now = after.assignment[tp]
        if now != ra and now.replicas != ra.target_replicas and not ra.is_being_reassigned:
            return False
    return True


def _no_leader_outside_isr(brokers: Brokers) -> None:
    for tp, s in brokers.states().items():
        assert s is not None, f"{tp} lost its state znode"
        lai = s.leader_and_isr
        assert lai.leader == -1 or lai.leader in lai.isr, f"{tp}: leader {lai.leader} outside ISR {lai.isr}"


@FUZZ
@given(
    election_type=st.one_of(st.sampled_from(["preferred", "unclean", "PREFERRED", ""]), S.JSON_VALUES),
    partitions=st.one_of(
        st.none(), st.lists(st.tuples(TOPICS, PARTITION_NUMBERS).map(list), max_size=5), S.JSON_VALUES
    ),
)
def test_elect_leaders(brokers: Brokers, election_type: Any, partitions: Any) -> None:
    before = (brokers.zk.get_controller_id(), brokers.zk.get_controller_epoch())
    body = answered_cleanly(
        A.ELECT_LEADERS,
        brokers.send(A.ELECT_LEADERS, {"election_type": election_type, "partitions": partitions}),
    )
    assert_controller_unmoved(brokers, before)
    if body is not None:
        for result in body["results"]:
            if (result["topic"], result["partition"]) not in [("good", p) for p in range(PARTITIONS)]:
                assert result["error"] in (Errors.UNKNOWN_TOPIC_OR_PARTITION, Errors.INVALID_REQUEST), result
    _no_leader_outside_isr(brokers)


@FUZZ
@given(
    broker_id=st.one_of(S.EDGE_INTS, S.JSON_VALUES).filter(lambda b: b not in BROKERS),
    broker_epoch=S.EDGE_INTS,
)
def test_controlled_shutdown_of_brokers_that_do_not_exist(
    brokers: Brokers, broker_id: Any, broker_epoch: int
) -> None:
    before = (brokers.zk.get_controller_id(), brokers.zk.get_controller_epoch())
    body = answered_cleanly(
        A.CONTROLLED_SHUTDOWN,
        brokers.send(A.CONTROLLED_SHUTDOWN, {"broker_id": broker_id, "broker_epoch": broker_epoch}),
    )
    assert_controller_unmoved(brokers, before)
    if body is not None:
        assert body["error"] != Errors.NONE, f"controlled shutdown of unknown broker {broker_id!r} accepted"
    controller = brokers.servers[before[0]].controller  # type: ignore[index]
    assert not controller.controller_context.shutting_down_broker_ids, "a broker was marked as shutting down"


@FUZZ
@given(data=st.data())
def test_alter_isr_with_a_wrong_broker_epoch_writes_nothing(brokers: Brokers, data: st.DataObject) -> None:
    epochs = {b: s.broker_epoch for b, s in brokers.servers.items()}
    broker_id = data.draw(st.sampled_from(BROKERS))
    broker_epoch = data.draw(S.EDGE_INTS.filter(lambda e: e != epochs[broker_id]))
    isr = data.draw(st.lists(S.EDGE_INTS, max_size=4))
    tp = TopicPartition("good", data.draw(st.integers(0, PARTITIONS - 1)))
    current = brokers.states()[tp]
    assert current is not None
    lai = current.leader_and_isr
    request = {
        "broker_id": broker_id,
        "broker_epoch": broker_epoch,
        "topics": [
            {
                "name": "good",
                "partitions": [
                    {
                        "partition": tp.partition,
                        "leader_epoch": lai.leader_epoch,
                        "new_isr": isr,
                        "current_isr_version": lai.zk_version,
                    }
                ],
            }
        ],
    }
    body = answered_cleanly(A.ALTER_ISR, brokers.send(A.ALTER_ISR, request))
    # STALE_BROKER_EPOCH is a whole-request answer given before anything is written (KIP-380).
    assert body is None or (body["error"] == Errors.STALE_BROKER_EPOCH and not body["topics"]), body


@FUZZ
@given(
    api=st.sampled_from([A.LIST_PARTITION_REASSIGNMENTS, A.DESCRIBE_REPLICAS, A.METADATA]), body=S.JSON_VALUES
)
def test_read_only_apis_with_any_body(brokers: Brokers, api: str, body: Any) -> None:
    before = (brokers.zk.get_controller_id(), brokers.zk.get_controller_epoch())
    answered_cleanly(api, brokers.send(api, body))
    assert_controller_unmoved(brokers, before)
