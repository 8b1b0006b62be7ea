"""``reassign --execute/--cancel --batch-size N``: the plan sent N partitions per request with a
progress line on stderr after each; starting stops after a refused batch, and before a batch when
partitions already sent are no longer moving to their targets (cancelled meanwhile). The admin
client and the store are fakes here: what is checked is what is sent, and when sending stops."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from kafka_controller.broker.controller_apis import (
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsResponse,
    ReassignmentResult,
)
from kafka_controller.cli import common
from kafka_controller.cli.reassign_extras import before_run, send_in_batches
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.ports import TopicIdReplicaAssignment

PLAN = {TopicPartition("t", p): (2, 3) for p in range(5)}
ORIGIN = (1, 2)


class FakeAdmin:
    """Records each AlterPartitionReassignments; ``refuse`` partitions get an error. The
    partitions sent are moving, except those in ``cancelled``, which are back on their origin
    (the controller's list and the topic znodes agree)."""

    def __init__(
        self, refuse: Sequence[TopicPartition] = (), cancelled: Sequence[TopicPartition] = ()
    ) -> None:
        self.requests: list[list[TopicPartition]] = []
        self.refuse = set(refuse)
        self.cancelled = set(cancelled)
        self.completed: set[TopicPartition] = set()
        self.lists = 0

    def assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        sent = any(tp in request for request in self.requests)
        if not sent or tp in self.cancelled:
            return ReplicaAssignment.of(ORIGIN)
        if tp in self.completed:
            return ReplicaAssignment.of(PLAN[tp])
        return ReplicaAssignment.of([2, 3, 1], [3], [1])

    def list_partition_reassignments(self, partitions: Sequence[TopicPartition]) -> Any:
        self.lists += 1
        moving = {tp: ra for tp in partitions if (ra := self.assignment(tp)).is_being_reassigned}
        return ListPartitionReassignmentsResponse(Errors.NONE, moving)

    def alter_partition_reassignments(
        self, reassignments: Mapping[TopicPartition, Sequence[int] | None], operation_id: str | None = None
    ) -> AlterPartitionReassignmentsResponse:
        self.requests.append(list(reassignments))
        return AlterPartitionReassignmentsResponse(
            Errors.NONE,
            {
                tp: ReassignmentResult("INVALID_REPLICA_ASSIGNMENT" if tp in self.refuse else "NONE")
                for tp in reassignments
            },
        )


class FakeStore:
    """Topic ``t``'s znode as the fake controller left it."""

    def __init__(self, admin: FakeAdmin) -> None:
        self.admin = admin

    def get_replica_assignment_and_topic_ids(self, topics: Sequence[str]) -> dict[str, Any]:
        return {"t": TopicIdReplicaAssignment("t", None, {tp: self.admin.assignment(tp) for tp in PLAN})}


def _args(**kw: Any) -> argparse.Namespace:
    base = {
        "execute": True,
        "verify": False,
        "cancel": False,
        "generate": False,
        "list": False,
        "additional": False,
        "legacy_znode": False,
        "wait": False,
        "throttle": None,
        "preserve_throttles": False,
        "decommission_brokers": None,
        "batch_size": 2,
    }
    return argparse.Namespace(**{**base, **kw})


def test_the_plan_goes_in_batches_with_a_progress_line_each(capsys: pytest.CaptureFixture[str]) -> None:
    admin = FakeAdmin()
    results, unsent = send_in_batches(_args(), FakeStore(admin), admin, PLAN, "started")  # type: ignore[arg-type]
    assert admin.requests == [list(PLAN)[0:2], list(PLAN)[2:4], list(PLAN)[4:5]]
    assert unsent == 0 and sorted(results) == sorted(PLAN)
    assert capsys.readouterr().err.splitlines() == [
        "kafka-controller reassign: batch 1/3: started 2/5 partitions",
        "kafka-controller reassign: batch 2/3: started 4/5 partitions",
        "kafka-controller reassign: batch 3/3: started 5/5 partitions",
    ]


def test_without_batch_size_the_plan_is_one_request_and_no_progress_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    admin = FakeAdmin()
    send_in_batches(_args(batch_size=None), FakeStore(admin), admin, PLAN, "started")  # type: ignore[arg-type]
    assert admin.requests == [list(PLAN)]
    assert capsys.readouterr().err == ""


def test_starting_stops_when_a_sent_partition_was_cancelled_meanwhile() -> None:
    admin = FakeAdmin(cancelled=[TopicPartition("t", 1)])
    with pytest.raises(common.CommandFailedError) as e:
        send_in_batches(_args(), FakeStore(admin), admin, PLAN, "started")  # type: ignore[arg-type]
    assert admin.requests == [list(PLAN)[0:2]]  # nothing after the cancelled batch
    assert admin.lists == 1  # asked the controller, behind whatever it was asked before
    assert str(e.value) == (
        "stopped after 2 of 5 partitions: 1 already sent are no longer moving to the plan's targets "
        "(cancelled?), e.g. t-1; the other 3 were not sent"
    )


def test_moves_that_completed_meanwhile_do_not_stop_the_sending() -> None:
    admin = FakeAdmin()
    admin.completed = set(PLAN)  # each completes as soon as it is sent
    _, unsent = send_in_batches(_args(), FakeStore(admin), admin, PLAN, "started")  # type: ignore[arg-type]
    assert len(admin.requests) == 3 and unsent == 0


def test_starting_stops_after_a_refused_batch_but_cancelling_goes_on() -> None:
    admin = FakeAdmin(refuse=[TopicPartition("t", 2)])
    results, unsent = send_in_batches(_args(), FakeStore(admin), admin, PLAN, "started")  # type: ignore[arg-type]
    assert len(admin.requests) == 2 and unsent == 1
    assert results[TopicPartition("t", 2)].error == "INVALID_REPLICA_ASSIGNMENT"

    admin = FakeAdmin(refuse=[TopicPartition("t", 2)])
    cancel = dict.fromkeys(PLAN)
    _, unsent = send_in_batches(_args(), FakeStore(admin), admin, cancel, "cancelled")  # type: ignore[arg-type]
    assert len(admin.requests) == 3 and unsent == 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"execute": False, "verify": True}, "--batch-size is only for --execute and --cancel"),
        ({"batch_size": 0}, "--batch-size must be a positive number of partitions, got 0"),
        (
            {"legacy_znode": True},
            "--batch-size cannot be used with --legacy-znode (the znode takes the whole plan at once)",
        ),
    ],
)
def test_batch_size_is_checked_before_anything_is_sent(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as e:
        before_run(_args(**overrides))
    assert str(e.value) == message
