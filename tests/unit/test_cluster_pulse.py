"""``ClusterPulse.changes``: what the demo narrates between two looks at ZooKeeper."""

from __future__ import annotations

from kafka_controller.cluster.pulse import ClusterPulse


def test_nothing_changed_says_nothing() -> None:
    look = ({1: 10, 2: 11}, 1, 1)
    assert ClusterPulse.changes(look, look) == []


def test_a_bounce_between_looks_shows_as_a_new_broker_epoch() -> None:
    before = ({1: 10, 2: 11, 3: 12}, 1, 1)
    assert ClusterPulse.changes(before, ({1: 10, 3: 12}, 1, 1)) == ["broker 2 deregistered"]
    assert ClusterPulse.changes(({1: 10, 3: 12}, 1, 1), ({1: 10, 2: 20, 3: 12}, 1, 1)) == [
        "broker 2 registered (broker epoch 20)"
    ]
    assert ClusterPulse.changes(before, ({1: 10, 2: 20, 3: 12}, 1, 1)) == [
        "broker 2 registered again (broker epoch 20)"
    ]


def test_controller_resigning_then_a_new_epoch() -> None:
    brokers = {1: 10, 2: 11}
    assert ClusterPulse.changes((brokers, 1, 1), (brokers, None, 1)) == [
        "/controller is empty: broker 1 no longer controls"
    ]
    assert ClusterPulse.changes((brokers, None, 1), (brokers, 2, 2)) == [
        "controller: broker 2, controller epoch 2"
    ]
    assert ClusterPulse.changes(({**brokers, 3: 12}, 1, 1), (brokers, 2, 2)) == [
        "broker 3 deregistered",
        "controller: broker 2, controller epoch 2",
    ]
