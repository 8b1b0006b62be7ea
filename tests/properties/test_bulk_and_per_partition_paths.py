"""A new controller's startup and a bulk event after it give the same writes, the same requests and
the same audit rows through their bulk branches as through Kafka's per-partition code
(docs/bulk-path.md).

The bulk branches of the state machines and the request batch (``hotpath``, ``core.replica_runs``,
``core.request_batch_states``, the bulk moves of ``core.replica_offline`` and the replica state
machine) each fall back to the per-partition code when a state change is to be logged on its own.
So the same events run twice on the same random cluster: once as the controller runs them, once
with the state-change log at DEBUG, which sends every replica and partition through the
per-partition code. Each example draws a cluster (topics, RF 1-3, shrunk ISRs, writes behind the
controller's back, leaderless partitions, unclean topics, a topic queued for deletion, one or two
dead brokers, sometimes a failed log dir: ``test_offline_leaders_left_to_election``'s builder, from
a drawn seed) and the controller's wiring (offline leaders left to the election, early writes);
then, on the same cluster, another bulk event: a broker's failure, a controlled shutdown, or a dead
broker's return.

Compared: every partition state in the store (leader, leader epoch, ISR, zk version, controller
epoch), the cache and every partition and replica state, every request sent in order with all of
its fields, and the audit rows, bulk records expanded into their rows.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.domain.audit_records import expand_records
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch
from kafka_controller.testing.core_harness import CoreHarness
from tests.unit.test_isr_prewrite import _write_early
from tests.unit.test_offline_leaders_left_to_election import BROKERS, _startup

STATE_CHANGE_LOG = logging.getLogger("kafka_controller.state_change")


@contextmanager
def _each_change_logged() -> Iterator[None]:
    """The state-change log at DEBUG (its lines dropped): the per-partition code everywhere."""
    level, propagate = STATE_CHANGE_LOG.level, STATE_CHANGE_LOG.propagate
    sink = logging.NullHandler()
    STATE_CHANGE_LOG.addHandler(sink)
    STATE_CHANGE_LOG.setLevel(logging.DEBUG)
    STATE_CHANGE_LOG.propagate = False
    try:
        yield
    finally:
        STATE_CHANGE_LOG.removeHandler(sink)
        STATE_CHANGE_LOG.setLevel(level)
        STATE_CHANGE_LOG.propagate = propagate


def _everything(h: CoreHarness, start: int) -> dict[str, Any]:
    ctx = h.context
    tps = sorted(ctx.all_partitions)
    stored = h.store.get_partition_states(tps)
    return {
        "store": {
            tp: (*s.leader_and_isr, s.controller_epoch) if isinstance(s, LeaderIsrAndControllerEpoch) else s
            for tp, s in stored.items()
        },
        "cache": dict(ctx.partitions_leadership_info),
        "partition_states": dict(ctx.partition_states),
        "replica_states": dict(ctx.replica_states),
        "requests": [(s.broker_id, s.request) for s in h.channel.sent[start:]],
        "audit": expand_records(h.audit.records),  # type: ignore[attr-defined]
    }


#: What follows the startup: nothing, or another of the bulk events, on a broker the seed picks.
THEN = ("nothing", "broker_failure", "controlled_shutdown", "broker_startup")


def _then(h: CoreHarness, then: str, seed: int) -> None:
    ctx = h.context
    live = sorted(ctx.live_broker_ids)
    dead = sorted(set(BROKERS) - set(live))
    pick = random.Random(seed).choice
    if then == "broker_failure":
        h.fail_brokers([pick(live)])
    elif then == "controlled_shutdown":
        h.controlled_shutdown(pick(live))
    elif then == "broker_startup":
        h.start_brokers([pick(dead)])


def _run(seed: int, leave: bool, early: bool, then: str, logged: bool) -> dict[str, Any]:
    def wire(h: CoreHarness) -> None:
        _write_early(h, early, leave=leave)

    with _each_change_logged() if logged else nullcontext():
        h, start = _startup(seed, leave, wire)
        _then(h, then, seed)
    return _everything(h, start)


@given(
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    leave=st.booleans(),
    early=st.booleans(),
    then=st.sampled_from(THEN),
)
def test_the_bulk_branches_write_send_and_audit_what_the_per_partition_code_does(
    seed: int, leave: bool, early: bool, then: str
) -> None:
    bulk = _run(seed, leave, early, then, logged=False)
    one_at_a_time = _run(seed, leave, early, then, logged=True)
    for key in bulk:
        assert bulk[key] == one_at_a_time[key], key
    assert bulk["requests"] and bulk["audit"], "the startup sent or recorded nothing"
