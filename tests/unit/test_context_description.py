"""The columnar description of a ControllerContext (DescribeControllerContext's answer): what it holds,
its rows, and the checks a document from the wire goes through."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.context_description import (
    DESCRIPTION_VERSION,
    check_description,
    describe_context,
    description_rows,
    expand_description,
)
from kafka_controller.domain.states import PartitionState, ReplicaState
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)

A0, A1, B0 = TopicPartition("a", 0), TopicPartition("a", 1), TopicPartition("b", 0)


@pytest.fixture
def context() -> ControllerContext:
    """a-0 online and led; a-1 being reassigned [1,2] -> [2,3]; b-0 queued for deletion, no state."""
    ctx = ControllerContext()
    ctx.epoch, ctx.epoch_zk_version = 4, 5
    ctx.update_partition_full_replica_assignment(A0, ReplicaAssignment.of((1, 2)))
    ctx.update_partition_full_replica_assignment(A1, ReplicaAssignment.of((2, 3, 1), (3,), (1,)))
    ctx.update_partition_full_replica_assignment(B0, ReplicaAssignment.of((3,)))
    ctx.partitions_being_reassigned.add(A1)
    ctx.topics_to_be_deleted.add("b")
    ctx.put_partition_state(A0, PartitionState.ONLINE_PARTITION)
    ctx.put_partition_state(A1, PartitionState.ONLINE_PARTITION)
    ctx.put_partition_leadership_info(A0, LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 7, (1, 2), 9), 3))
    ctx.put_partition_leadership_info(A1, LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 2, (2, 1), 4), 4))
    for r in (1, 2):
        ctx.put_replica_state(PartitionAndReplica(A0, r), ReplicaState.ONLINE_REPLICA)
    ctx.put_replica_state(PartitionAndReplica(B0, 3), ReplicaState.OFFLINE_REPLICA)
    return ctx


def test_rows_say_what_the_context_holds(context: ControllerContext) -> None:
    doc = describe_context(context, 2)
    assert (doc["version"], doc["controller_id"], doc["epoch"], doc["epoch_zk_version"]) == (1, 2, 4, 5)
    partitions, replicas, reassignments = description_rows(check_description(doc))
    assert partitions == [
        {
            "topic": "a",
            "partition": 0,
            "state": "OnlinePartition",
            "leader": 1,
            "leader_epoch": 7,
            "isr": [1, 2],
            "controller_epoch": 3,
            "zk_version": 9,
            "replicas": [1, 2],
            "adding_replicas": [],
            "removing_replicas": [],
            "queued_for_deletion": False,
        },
        {
            "topic": "a",
            "partition": 1,
            "state": "OnlinePartition",
            "leader": 2,
            "leader_epoch": 2,
            "isr": [2, 1],
            "controller_epoch": 4,
            "zk_version": 4,
            "replicas": [2, 3, 1],
            "adding_replicas": [3],
            "removing_replicas": [1],
            "queued_for_deletion": False,
        },
        {
            "topic": "b",
            "partition": 0,
            "state": None,
            "leader": None,
            "leader_epoch": None,
            "isr": None,
            "controller_epoch": None,
            "zk_version": None,
            "replicas": [3],
            "adding_replicas": [],
            "removing_replicas": [],
            "queued_for_deletion": True,
        },
    ]
    assert replicas == [
        {"topic": "a", "partition": 0, "replica": 1, "state": "OnlineReplica"},
        {"topic": "a", "partition": 0, "replica": 2, "state": "OnlineReplica"},
        {"topic": "b", "partition": 0, "replica": 3, "state": "OfflineReplica"},
    ]
    assert reassignments == [
        {"topic": "a", "partition": 1, "target_replicas": [2, 3], "source": "controller", "started_ms": None}
    ]


def test_values_are_sent_once_and_survive_json(context: ControllerContext) -> None:
    doc = describe_context(context, 2)
    assert doc["topics"] == ["a", "b"]
    assert sorted(doc["states"]) == ["OfflineReplica", "OnlinePartition", "OnlineReplica"]
    assert len(doc["replica_sets"]) == len({tuple(s) for s in doc["replica_sets"]})  # each list once
    decoded = check_description(orjson.loads(orjson.dumps(doc)))
    assert decoded == doc
    rows = description_rows(decoded)
    rows[0][0]["isr"].append(99)  # rows own their lists: the document is untouched
    assert description_rows(decoded)[0][0]["isr"] == [1, 2]
    expanded = expand_description(decoded)
    assert expanded["partitions"]["replicas"] == [[1, 2], [2, 3, 1], [3]]
    assert expanded["reassignments"]["target_replicas"] == [[2, 3]]


def test_an_empty_context_is_an_empty_document() -> None:
    doc = check_description(describe_context(ControllerContext(), 1))
    assert description_rows(doc) == ([], [], [])
    assert doc["topics"] == [] and doc["partitions"]["partition"] == []


def _broken(doc: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    bad = copy.deepcopy(doc)
    target = bad
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return bad


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("version",), DESCRIPTION_VERSION + 1, "unsupported version 2"),
        (("epoch",), "4", "'epoch' must be an integer"),
        (("topics",), ["a", 7], "'topics' must be a list of str"),
        (("replica_sets",), [[1, "2"]], "'replica_sets' must be a list of lists of integers"),
        (("partitions",), [], "'partitions' must be an object of columns"),
        (("partitions", "leader"), [1, 2], "column partitions.leader must be a list of 3 values"),
        (("partitions", "partition"), [0, None, 0], "column partitions.partition must hold int values"),
        (("partitions", "queued_for_deletion"), [0, 0, 1], "must hold bool values"),
        (("partitions", "topic"), [0, 0, 2], "column partitions.topic has indexes outside its 'topics'"),
        (("partitions", "isr"), [0, -1, None], "column partitions.isr has indexes outside"),
        (("replicas", "state"), KeyError, "column replicas.state must be a list of 3 values"),
        (("reassignments", "target_replicas"), [None], "must hold int values"),
    ],
)
def test_a_malformed_document_is_one_line(
    context: ControllerContext, path: tuple[str, ...], value: Any, message: str
) -> None:
    doc = describe_context(context, 2)
    with pytest.raises(ValueError, match=message) as e:
        check_description(_broken(doc, path, value))
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="expected a JSON object, got list"):
        check_description([doc])
