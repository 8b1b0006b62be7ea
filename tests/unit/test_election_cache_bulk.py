"""Elections cache their new states in one ``put_partition_leadership_infos`` call, not
one ``put_partition_leadership_info`` per partition: the same cache and preferred-replica imbalance
count, recomputed from scratch after each flow, on random layouts (new, offline, preferred and
controlled-shutdown elections)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kafka_controller.core.context import ControllerContext, has_preferred_leader
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE
from kafka_controller.testing.core_harness import CoreHarness

BROKERS = [1, 2, 3, 4, 5]


def _imbalance(ctx: ControllerContext) -> int:
    return sum(
        not has_preferred_leader(ctx.partition_full_replica_assignment(tp), info)
        for tp, info in ctx.partitions_leadership_info.items()
        if tp.topic not in ctx.topics_to_be_deleted
    )


@pytest.mark.parametrize("seed", range(25))
def test_elections_keep_the_cache_and_imbalance_count(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    single_puts: list[Any] = []
    put_one = ControllerContext.put_partition_leadership_info

    def counting(self: ControllerContext, *args: Any) -> None:
        single_puts.append(args)
        put_one(self, *args)

    monkeypatch.setattr(ControllerContext, "put_partition_leadership_info", counting)
    rng = random.Random(seed)
    h = CoreHarness(BROKERS, broker_config={UNCLEAN_LEADER_ELECTION_ENABLE: "false"})
    ctx = h.context
    for t in range(rng.randint(1, 4)):
        rf = rng.randint(1, 3)
        h.create_topic(f"t{t}", [rng.sample(BROKERS, rf) for _ in range(rng.randint(1, 15))])
    assert ctx.preferred_replica_imbalance_count == _imbalance(ctx)
    single_puts.clear()  # a new partition's first state is cached on its own, as in Kafka

    dead = rng.sample(BROKERS, rng.randint(1, 2))
    h.fail_brokers(dead)
    assert ctx.preferred_replica_imbalance_count == _imbalance(ctx)
    h.start_brokers(dead)
    h.preferred_election(list(ctx.all_partitions))
    assert ctx.preferred_replica_imbalance_count == _imbalance(ctx)
    h.controlled_shutdown(rng.choice(BROKERS))
    assert ctx.preferred_replica_imbalance_count == _imbalance(ctx)
    assert not single_puts
