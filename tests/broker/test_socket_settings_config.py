"""The listener's settings: Kafka's names and defaults, and one line for each bad value."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kafka_controller.broker.config import BrokerConfig
from kafka_controller.broker.server import socket_settings
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.transport.limits import SocketSettings


def test_defaults_are_kafkas() -> None:
    settings = socket_settings(BrokerConfig.of(1).kafka)
    assert settings == SocketSettings(
        socket_request_max_bytes=104857600,
        sasl_server_max_receive_size=524288,
        queued_max_request_bytes=-1,
        connections_max_idle_ms=600000,
        max_connections=2**31 - 1,
        max_connections_per_ip=2**31 - 1,
        max_connections_per_ip_overrides={},
        num_io_threads=8,
    )


def test_settings_reach_the_listener() -> None:
    config = BrokerConfig.of(
        1,
        {
            "connections.max.idle.ms": "1500",
            "max.connections": "100",
            "max.connections.per.ip": "0",
            "max.connections.per.ip.overrides": "10.0.0.1:5, broker-2.example:0,::1:7",
            "queued.max.request.bytes": "209715200",
            "num.io.threads": "3",
        },
    )
    settings = socket_settings(config.kafka)
    assert (settings.connections_max_idle_ms, settings.max_connections, settings.num_io_threads) == (
        1500,
        100,
        3,
    )
    assert settings.max_connections_per_ip == 0 and settings.queued_max_request_bytes == 209715200
    assert settings.max_connections_per_ip_overrides == {"10.0.0.1": 5, "broker-2.example": 0, "::1": 7}


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "connections.max.idle.ms",
            "ten",
            "'ten' for connections.max.idle.ms: expected an integer",
        ),
        (
            "socket.request.max.bytes",
            "0",
            "0 for socket.request.max.bytes: must be between 1 and",
        ),
        ("max.connections", "-1", "invalid value -1 for max.connections: must be between 0 and"),
        ("max.connections.per.ip", "0", "max.connections.per.ip: it can be zero only if"),
        ("max.connections.per.ip.overrides", "host", "expected host:count"),
        ("max.connections.per.ip.overrides", "a:1,b:x", "the count of 'b' must be an integer >= 0"),
        ("queued.max.request.bytes", "1024", "must be <= 0 (no bound) or at least socket.request.max.bytes"),
        ("sasl.server.max.receive.size", "-5", "invalid value -5 for sasl.server.max.receive.size"),
        ("num.io.threads", "0", "invalid value 0 for num.io.threads"),
    ],
)
def test_bad_values_are_refused_in_one_line(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidArgumentError) as refused:
        BrokerConfig.of(1, {key: value})
    assert message in str(refused.value) and "\n" not in str(refused.value)


def test_the_broker_command_takes_them_and_refuses_bad_ones() -> None:
    base = [sys.executable, "-m", "kafka_controller.cli.main", "broker", "--broker-id", "1"]
    base += ["--zookeeper", "192.0.2.1:2181", "--config", "connections.max.idle.ms=500"]
    result = subprocess.run(
        [*base, "--config", "max.connections=x"], capture_output=True, text=True, timeout=60
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and "invalid value 'x' for max.connections: expected an integer" in lines[0]
