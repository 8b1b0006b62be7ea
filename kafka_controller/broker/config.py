"""A broker's settings: Kafka's broker keys (``KafkaConfig``) plus the simulated data plane's own.

The simulation keys carry the project prefix ``sim.`` so they can never clash with a Kafka name:

=============================  =======  ==========================================================
key                            default  meaning
=============================  =======  ==========================================================
sim.produce.rate.per.sec       100      records per second appended to every partition this broker
                                        leads (a real number >= 0; 0 = idle logs)
sim.fetch.interval.ms          200      pause between a follower's fetches from one leader
sim.alter.isr.retry.backoff.ms 200      wait before resending an AlterIsr that got no answer
=============================  =======  ==========================================================

Everything is checked before anything starts: an unknown key, a malformed ``KEY=VALUE`` or a bad
value raises ``InvalidArgumentError`` with one line naming it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_controller.controller.config import KNOWN_KEYS, KafkaConfig
from kafka_controller.domain.errors import InvalidArgumentError, brief
from kafka_controller.ports import Clock, MetadataStore
from kafka_controller.zk.client_security import ZK_CLIENT_KEYS, client_settings
from kafka_controller.zk.security import ZkClientConfig

SIM_PRODUCE_RATE_PER_SEC = "sim.produce.rate.per.sec"
SIM_FETCH_INTERVAL_MS = "sim.fetch.interval.ms"
SIM_ALTER_ISR_RETRY_BACKOFF_MS = "sim.alter.isr.retry.backoff.ms"
SIM_KEYS: tuple[str, ...] = (SIM_ALTER_ISR_RETRY_BACKOFF_MS, SIM_FETCH_INTERVAL_MS, SIM_PRODUCE_RATE_PER_SEC)


def parse_assignments(items: Iterable[str]) -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; the last of repeated keys wins."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise InvalidArgumentError(f"invalid --config {brief(item)}: expected KEY=VALUE")
        out[key] = value.strip()
    return out


def _rate(key: str, value: Any) -> float:
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"invalid value {brief(value)} for {key}: expected a number") from None
    if not math.isfinite(rate) or rate < 0:
        raise InvalidArgumentError(f"invalid value {brief(value)} for {key}: must be a finite number >= 0")
    return rate


def _positive_int(key: str, value: Any) -> int:
    try:
        number = int(str(value).strip())
    except ValueError:
        raise InvalidArgumentError(f"invalid value {brief(value)} for {key}: expected an integer") from None
    if number < 1:
        raise InvalidArgumentError(f"invalid value {number} for {key}: must be at least 1")
    return number


@dataclass(frozen=True)
class BrokerConfig:
    """``kafka`` holds the Kafka keys (what the controller reads); the rest drive the simulation."""

    kafka: KafkaConfig
    produce_rate_per_s: float = 100.0
    fetch_interval_ms: int = 200
    alter_isr_retry_backoff_ms: int = 200

    @property
    def broker_id(self) -> int:
        return self.kafka.broker_id

    @staticmethod
    def of(broker_id: int, props: Mapping[str, Any] | None = None) -> BrokerConfig:
        given = dict(props or {})
        unknown = sorted(k for k in given if k.startswith("sim.") and k not in SIM_KEYS)
        if unknown:
            raise InvalidArgumentError(
                f"unknown broker config {brief(unknown[0])} (simulation keys: {', '.join(SIM_KEYS)})"
            )
        kafka_props = {k: v for k, v in given.items() if k not in SIM_KEYS}
        try:
            kafka = KafkaConfig.of(broker_id, kafka_props)
        except InvalidArgumentError as e:
            message = str(e)
            if message.startswith("unknown broker config"):
                known = ", ".join((*KNOWN_KEYS, *SIM_KEYS))
                message = f"{message.split(' (known:')[0]} (known: {known})"
            raise InvalidArgumentError(message) from None
        return BrokerConfig(
            kafka,
            produce_rate_per_s=_rate(SIM_PRODUCE_RATE_PER_SEC, given.get(SIM_PRODUCE_RATE_PER_SEC, 100.0)),
            fetch_interval_ms=_positive_int(SIM_FETCH_INTERVAL_MS, given.get(SIM_FETCH_INTERVAL_MS, 200)),
            alter_isr_retry_backoff_ms=_positive_int(
                SIM_ALTER_ISR_RETRY_BACKOFF_MS, given.get(SIM_ALTER_ISR_RETRY_BACKOFF_MS, 200)
            ),
        )


def zookeeper_store(connect: str, config: BrokerConfig, clock: Clock) -> MetadataStore:
    """The broker's ZooKeeper client, its session timeout from ``zookeeper.session.timeout.ms``,
    its SASL login from ``$KAFKA_OPTS``'s JAAS file and its TLS and ACLs from ``zookeeper.*``."""
    # Imported on use: kazoo is optional (the 'zk' extra).
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    session_ms = config.kafka.zookeeper_session_timeout_ms
    props = {k: v for k, v in config.kafka.security_originals().items() if k in ZK_CLIENT_KEYS}
    return KazooMetadataStore(
        ZkClientConfig(
            connect,
            session_timeout_ms=session_ms,
            connection_timeout_ms=max(session_ms, 10_000),
            **client_settings(props),  # SASL from $KAFKA_OPTS, zookeeper.ssl.*, zookeeper.set.acl
        ),
        clock=clock,
    )
