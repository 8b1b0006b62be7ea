"""The guard rails of broker maintenance, on plain cluster views."""

from __future__ import annotations

import pytest

from kafka_controller.airflow.maintenance import (
    broker_caught_up,
    check_stop,
    leaderless_with_live_isr,
    preferred_partitions_of,
    recoverable_offline,
    restart_order,
)
from kafka_controller.domain.errors import InvalidArgumentError
from tests.airflow.views import tp, view


def test_the_active_controller_goes_last_and_requests_are_checked() -> None:
    assert restart_order([3, 1, 2], controller_id=1) == [2, 3, 1]
    assert restart_order([1, 2, 3], controller_id=2, requested=[2, 1]) == [1, 2]
    assert restart_order([1, 2, 3], controller_id=None) == [1, 2, 3]
    with pytest.raises(InvalidArgumentError, match="broker 9 is not registered"):
        restart_order([1, 2], 1, requested=[9])
    with pytest.raises(InvalidArgumentError, match="listed twice"):
        restart_order([1, 2], 1, requested=[2, 2])


def test_stopping_the_last_in_sync_replica_is_refused() -> None:
    v = view(
        [1, 2, 3],
        {
            "solo-0": ((2,), 2, (2,)),  # RF=1 on broker 2
            "shrunk-0": ((2, 3), 2, (2,)),  # ISR has shrunk to broker 2
            "fine-0": ((2, 3), 2, (2, 3)),
            "other-0": ((1, 3), 1, (1,)),  # at risk, but not on broker 2
        },
    )
    check = check_stop(v, 2)
    assert not check.safe
    assert set(check.at_risk) == {tp("solo-0"), tp("shrunk-0")}
    assert check.under_replicated == (tp("shrunk-0"),)
    assert "would take 2 partition(s) offline" in check.reason and "solo-0" in check.reason
    assert check_stop(v, 3).safe and check_stop(v, 3).reason == ""


def test_a_dead_isr_member_does_not_count_as_a_safe_harbour() -> None:
    v = view([1, 2], {"t-0": ((1, 3), 1, (1, 3))})  # 3 is in the ISR but not registered
    assert check_stop(v, 1).at_risk == (tp("t-0"),)


def test_caught_up_means_registered_in_every_isr_and_nothing_under_replicated() -> None:
    healthy = {"t-0": ((1, 2), 1, (1, 2)), "t-1": ((2, 1), 2, (2, 1))}
    assert broker_caught_up(view([1, 2], healthy), 2)
    assert not broker_caught_up(view([1], healthy), 2)  # not registered
    lagging = {**healthy, "t-1": ((2, 1), 1, (1,))}
    assert not broker_caught_up(view([1, 2], lagging), 2)
    elsewhere = {**healthy, "u-0": ((1, 3), 1, (1,))}  # broker 2 is fine, the cluster is not
    assert not broker_caught_up(view([1, 2, 3], elsewhere), 2)


def test_preferred_partitions_and_failover_recovery_checks() -> None:
    v = view([1, 2], {"t-0": ((1, 2), 2, (1, 2)), "t-1": ((2, 1), 2, (2, 1)), "t-2": ((3, 1), -1, (3, 1))})
    assert preferred_partitions_of(v, 1) == [tp("t-0")]
    assert leaderless_with_live_isr(v) == [tp("t-2")]  # 1 is live and in its ISR


def test_recoverable_offline_lists_live_replicas_of_offline_partitions_only() -> None:
    v = view(
        [1, 2],
        {"a-0": ((3, 2), -1, (3,)), "b-0": ((3, 4), -1, (3,)), "c-0": ((1, 2), 1, (1, 2))},
    )
    assert recoverable_offline(v) == {tp("a-0"): [2], tp("b-0"): []}
    assert recoverable_offline(v, [tp("a-0"), tp("c-0")]) == {tp("a-0"): [2]}
