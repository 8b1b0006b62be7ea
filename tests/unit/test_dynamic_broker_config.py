"""The pure merge of dynamic broker configs: per-broker > cluster default > static > Kafka's default,
only the keys the controller follows, bad values ignored one by one (``controller.dynamic_config``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_controller.controller.config import KafkaConfig
from kafka_controller.controller.dynamic_config import (
    CLUSTER_DEFAULT,
    PER_BROKER,
    STATIC,
    ConfigTransition,
    config_transition,
    effective_broker_config,
)
from kafka_controller.domain.config_keys import AUTO_LEADER_REBALANCE_ENABLE as AUTO
from kafka_controller.domain.config_keys import UNCLEAN_LEADER_ELECTION_ENABLE as UNCLEAN


def test_without_dynamic_configs_the_static_config_is_effective() -> None:
    static = KafkaConfig.of(1, {UNCLEAN: "true"})
    effective = effective_broker_config(static, {}, {})
    assert effective.config is static
    assert effective.sources == {UNCLEAN: STATIC}
    assert effective.ignored == {}
    assert effective.describe() == (
        "auto.leader.rebalance.enable=true (default), unclean.leader.election.enable=true (static)"
    )


def test_cluster_default_overrides_static() -> None:
    static = KafkaConfig.of(1, {AUTO: "true", "leader.imbalance.check.interval.seconds": "7"})
    effective = effective_broker_config(static, {AUTO: "false"}, {})
    assert effective.config.auto_leader_rebalance_enable is False
    assert effective.config.leader_imbalance_check_interval_seconds == 7  # the rest stays static
    assert effective.sources == {AUTO: CLUSTER_DEFAULT}
    assert static.auto_leader_rebalance_enable is True  # the static config is left as given


def test_per_broker_overrides_the_cluster_default() -> None:
    static = KafkaConfig.of(1)
    effective = effective_broker_config(static, {AUTO: "false", UNCLEAN: "true"}, {AUTO: "true"})
    assert effective.config.auto_leader_rebalance_enable is True
    assert effective.config.unclean_leader_election_enable is True
    assert effective.sources == {AUTO: PER_BROKER, UNCLEAN: CLUSTER_DEFAULT}
    # elections merge topic configs over the originals: the dynamic unclean default is in them
    assert effective.config.originals()[UNCLEAN] == "true"


def test_removing_a_dynamic_value_falls_back_to_static() -> None:
    static = KafkaConfig.of(1, {AUTO: "false"})
    paused_then_resumed = effective_broker_config(static, {AUTO: "true"}, {})
    assert paused_then_resumed.config.auto_leader_rebalance_enable is True
    assert effective_broker_config(static, {}, {}).config.auto_leader_rebalance_enable is False


def test_non_dynamic_and_bad_values_are_ignored_and_named() -> None:
    static = KafkaConfig.of(1, {UNCLEAN: "true"})
    effective = effective_broker_config(
        static,
        {"leader.imbalance.check.interval.seconds": "1", UNCLEAN: "maybe", AUTO: "false"},
        {"leader.replication.throttled.rate": "1000", AUTO: "nope"},
    )
    config = effective.config
    assert config.leader_imbalance_check_interval_seconds == 300  # read-only in Kafka 2.8
    assert config.unclean_leader_election_enable is True  # the bad default left the static value
    assert config.auto_leader_rebalance_enable is False  # the bad per-broker value left the default's
    assert effective.sources == {UNCLEAN: STATIC, AUTO: CLUSTER_DEFAULT}
    assert sorted(effective.ignored) == [
        "auto.leader.rebalance.enable (per-broker)",
        "leader.imbalance.check.interval.seconds (cluster default)",
        "unclean.leader.election.enable (cluster default)",
    ]
    assert "maybe" in effective.ignored["unclean.leader.election.enable (cluster default)"]
    # a throttle is another component's key: neither applied nor reported
    assert "leader.replication.throttled.rate" not in config.originals()


_BOOL = st.sampled_from(["true", "false", "TRUE", " false "])
_LEVEL = st.dictionaries(st.sampled_from([AUTO, UNCLEAN]), _BOOL)


@given(static=_LEVEL, default=_LEVEL, per_broker=_LEVEL)
def test_precedence_for_any_combination(
    static: dict[str, str], default: dict[str, str], per_broker: dict[str, str]
) -> None:
    config = effective_broker_config(KafkaConfig.of(2, static), default, per_broker).config
    for key, value in (
        (AUTO, config.auto_leader_rebalance_enable),
        (UNCLEAN, config.unclean_leader_election_enable),
    ):
        expected = per_broker.get(key, default.get(key, static.get(key)))
        kafka_default = key == AUTO
        assert value == (kafka_default if expected is None else expected.strip().lower() == "true")


def test_transitions() -> None:
    on = KafkaConfig.of(1)
    paused = on.with_overrides({AUTO: "false"})
    unclean = on.with_overrides({UNCLEAN: "true"})
    assert config_transition(on, on) == ConfigTransition()
    assert config_transition(on, paused) == ConfigTransition(rebalance_paused=True)
    assert config_transition(paused, on) == ConfigTransition(rebalance_resumed=True)
    assert config_transition(on, unclean) == ConfigTransition(unclean_enabled=True, unclean_changed=True)
    assert config_transition(unclean, on) == ConfigTransition(unclean_changed=True)
