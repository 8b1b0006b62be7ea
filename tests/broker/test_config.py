"""Broker settings and the command line: bad input is one line and exit 2, before anything starts."""

from __future__ import annotations

import pytest

from kafka_controller.broker.config import BrokerConfig, parse_assignments
from kafka_controller.cli.broker_cmd import parse_listener
from kafka_controller.cli.main import main
from kafka_controller.domain.errors import InvalidArgumentError


def test_kafka_and_simulation_keys_with_defaults() -> None:
    cfg = BrokerConfig.of(3, {"controlled.shutdown.max.retries": "5", "sim.produce.rate.per.sec": "2.5"})
    assert cfg.broker_id == 3
    assert cfg.kafka.controlled_shutdown_max_retries == 5
    assert cfg.kafka.controlled_shutdown_retry_backoff_ms == 5000  # Kafka's default
    assert cfg.produce_rate_per_s == 2.5
    assert (cfg.fetch_interval_ms, cfg.alter_isr_retry_backoff_ms) == (200, 200)
    assert "sim.produce.rate.per.sec" not in cfg.kafka.originals()  # never reaches the controller


@pytest.mark.parametrize(
    "props, message",
    [
        ({"no.such.key": "1"}, "unknown broker config 'no.such.key'"),
        ({"sim.nope": "1"}, "unknown broker config 'sim.nope'"),
        (
            {"controlled.shutdown.max.retries": "many"},
            "invalid value 'many' for controlled.shutdown.max.retries",
        ),
        ({"unclean.leader.election.enable": "yes"}, "invalid value 'yes' for unclean.leader.election.enable"),
        ({"sim.produce.rate.per.sec": "-1"}, "invalid value '-1' for sim.produce.rate.per.sec"),
        ({"sim.produce.rate.per.sec": "nan"}, "invalid value 'nan' for sim.produce.rate.per.sec"),
        ({"sim.fetch.interval.ms": "0"}, "invalid value 0 for sim.fetch.interval.ms"),
    ],
)
def test_bad_settings_are_refused_with_one_line(props: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgumentError) as error:
        BrokerConfig.of(1, props)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_unknown_key_message_lists_the_simulation_keys_too() -> None:
    with pytest.raises(InvalidArgumentError, match=r"known: .*sim\.fetch\.interval\.ms"):
        BrokerConfig.of(1, {"bogus": "1"})


def test_key_value_parsing() -> None:
    assert parse_assignments(["a=1", "b = x=y ", "a=2"]) == {"a": "2", "b": "x=y"}
    with pytest.raises(InvalidArgumentError, match="expected KEY=VALUE"):
        parse_assignments(["novalue"])
    with pytest.raises(InvalidArgumentError, match="expected KEY=VALUE"):
        parse_assignments(["=1"])


def test_listener_parsing() -> None:
    assert parse_listener("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listener(":9092") == ("0.0.0.0", 9092)
    assert parse_listener("[::1]:9092") == ("::1", 9092)
    for bad in ("localhost", "host:port", "h:70000"):
        with pytest.raises(InvalidArgumentError, match="invalid --listener"):
            parse_listener(bad)


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--config", "no.such.key=1"], "unknown broker config 'no.such.key'"),
        (["--config", "replica.lag.time.max.ms=soon"], "invalid value 'soon' for replica.lag.time.max.ms"),
        (["--listener", "nowhere"], "invalid --listener 'nowhere'"),
    ],
)
def test_cli_refuses_bad_input_before_connecting(
    extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The ZooKeeper address is unroutable: reaching it would hang, so exit 2 proves nothing started.
    code = main(["broker", "--broker-id", "1", "--zookeeper", "192.0.2.1:2181", *extra])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1 and err[0].startswith("kafka-controller broker: error: ") and needle in err[0]
