"""The request batch's state sharing: entries of one partition with the same inputs
share one LeaderAndIsr state, without a per-partition memo outliving the call that needed it, and
an UpdateMetadata state queued twice from the same inputs is an equal one."""

from __future__ import annotations

from kafka_controller.domain.requests import LeaderAndIsrRequest, UpdateMetadataRequest
from kafka_controller.domain.values import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from tests.unit.test_request_batch import CONTROLLER_EPOCH, FOO0, FOO1, assignment, harness


def _leadership(leader: int, isr: list[int]) -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr.initial(leader, isr), CONTROLLER_EPOCH)


def test_a_bulk_call_shares_each_partitions_state_across_brokers_and_keeps_no_memo() -> None:
    h = harness()
    infos = {FOO0: _leadership(1, [1, 2, 3]), FOO1: _leadership(2, [2, 3, 1])}
    full = {FOO0: assignment([1, 2, 3]), FOO1: assignment([2, 3, 1])}
    for tp, info in infos.items():
        h.ctx.put_partition_leadership_info(tp, info)
    h.batch.new_batch()
    # grouped by broker, as the replica state machine's OnlineReplica entries are
    entries = [((b,), tp, infos[tp], full[tp]) for b in (1, 2, 3) for tp in (FOO0, FOO1)]
    h.batch.add_leader_and_isr_requests(entries, False)
    queued = h.batch.leader_and_isr_request_map
    for tp in (FOO0, FOO1):
        assert queued[1][tp] is queued[2][tp] is queued[3][tp]
    assert h.batch._lai_memo == {}
    # different leadership objects for a partition: states of their own
    other = _leadership(1, [1, 2, 3])
    h.batch.add_leader_and_isr_requests([((1,), FOO0, other, full[FOO0])], False)
    assert queued[1][FOO0] is not queued[2][FOO0] and queued[1][FOO0] == queued[2][FOO0]
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    for b in (1, 2, 3):
        (request,) = h.channel.requests_to(b, LeaderAndIsrRequest)
        assert [(s.topic, s.partition) for s in request.partition_states] == [("foo", 0), ("foo", 1)]


def test_one_entry_calls_share_a_state_across_calls_until_the_send() -> None:
    h = harness()
    info, full = _leadership(1, [1, 2, 3]), assignment([1, 2, 3])
    h.ctx.put_partition_leadership_info(FOO0, info)
    h.batch.new_batch()
    for b in (1, 2, 3):
        h.batch.add_leader_and_isr_request_for_brokers([b], FOO0, info, full, True)
    queued = h.batch.leader_and_isr_request_map
    assert queued[1][FOO0] is queued[2][FOO0] is queued[3][FOO0]
    assert queued[1][FOO0].is_new
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    assert h.batch._lai_memo == {}


def test_update_metadata_queued_twice_from_the_same_inputs_sends_one_equal_state() -> None:
    h = harness()
    h.ctx.put_partition_leadership_info(FOO0, _leadership(1, [1, 2, 3]))
    h.batch.new_batch()
    h.batch.add_update_metadata_request_for_brokers([1, 2], [FOO0])
    first = h.batch.update_metadata_request_partition_info_map[FOO0]
    h.batch.add_update_metadata_request_for_brokers([1, 2], [FOO0, TopicPartition("bar", 0)])
    states = h.batch.update_metadata_request_partition_info_map
    assert list(states) == [FOO0] and states[FOO0] == first  # bar-0 has no leadership yet
    h.batch.send_requests_to_brokers(CONTROLLER_EPOCH)
    for b in (1, 2):
        (request,) = h.channel.requests_to(b, UpdateMetadataRequest)
        assert list(request.partition_states) == [first]
