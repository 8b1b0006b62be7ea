"""Inter-broker protocol versions (Kafka's ``ApiVersion`` / 3.x ``MetadataVersion``), totally ordered.

The controller's wire behaviour is gated on ``inter.broker.protocol.version``: which version of
LeaderAndIsr, UpdateMetadata and StopReplica it sends (docs/controller-behaviour.md §6), whether
AlterIsr replaces the ISR watches (2.7-IV2) and whether topics get ids (2.8-IV0). The list is
Kafka's, through 3.6, so that every value a real cluster may carry parses; the default (``latest``)
is 2.8-IV1, the version this project targets. 3.x values switch on the 3.x request versions only
(docs/controller-behaviour.md §10).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_controller.domain.errors import InvalidArgumentError


@dataclass(frozen=True, slots=True, order=True)
class InterBrokerProtocolVersion:
    """One IBP value. Ordered by its position in Kafka's list; equal iff the same version."""

    ordinal: int
    short_version: str = field(compare=False)
    sub_version: str = field(compare=False)

    @property
    def version(self) -> str:
        """Kafka's full spelling: ``0.9.0`` before 0.10, ``2.8-IV1`` from then on."""
        return f"{self.short_version}-{self.sub_version}" if self.sub_version else self.short_version

    def __str__(self) -> str:
        return self.version

    def __repr__(self) -> str:
        return f"InterBrokerProtocolVersion({self.version!r})"

    @staticmethod
    def parse(value: str | InterBrokerProtocolVersion) -> InterBrokerProtocolVersion:
        """Kafka's ``ApiVersion.apply``: "2.8-IV1", "2.8" (newest IV of 2.8), "2.8.1", "0.10.0-IV1".

        Only the first two segments (three before 1.0) are significant, as in Kafka ("0.10.0.1").
        """
        if isinstance(value, InterBrokerProtocolVersion):
            return value
        if not isinstance(value, str):
            raise InvalidArgumentError(
                f"inter.broker.protocol.version must be a string like '2.8-IV1', got {type(value).__name__}"
            )
        text = value.strip()
        segments = text.split(".")
        key = ".".join(segments[: 3 if text.startswith("0.") else 2])
        found = _BY_NAME.get(key)
        if found is None:
            raise InvalidArgumentError(
                f"invalid inter.broker.protocol.version {value!r}: not a known version "
                f"(expected e.g. '2.8-IV1', '2.8' or '0.10.0-IV1'; known {_ALL[0]} .. {_ALL[-1]})"
            )
        return found

    @staticmethod
    def all_versions() -> tuple[InterBrokerProtocolVersion, ...]:
        """Every known version, oldest first (Kafka's ``ApiVersion.allVersions`` plus 3.0-3.6)."""
        return _ALL

    # --------------------------------------------------------------- feature gates (Kafka 2.8 / 3.x)
    @property
    def is_alter_isr_supported(self) -> bool:
        """KIP-497: leaders change the ISR through the controller (no ISR-change watches)."""
        return self >= IBP_2_7_IV2

    @property
    def is_feature_versioning_supported(self) -> bool:
        """KIP-584: the controller maintains ``/feature`` (KafkaConfig.isFeatureVersioningSupported)."""
        return self >= IBP_2_7_IV0

    @property
    def uses_topic_id(self) -> bool:
        """KIP-516: topic ids are assigned on creation and failover (KafkaConfig.usesTopicId)."""
        return self >= IBP_2_8_IV0

    @property
    def is_leader_recovery_supported(self) -> bool:
        """KIP-704 (3.2+): an unclean leader is marked RECOVERING."""
        return self >= IBP_3_2_IV0

    # ------------------------------------------ request versions (docs/controller-behaviour.md §6)
    @property
    def leader_and_isr_request_version(self) -> int:
        if self >= IBP_3_4_IV0:
            return 7
        if self >= IBP_3_2_IV0:
            return 6
        if self >= IBP_2_8_IV1:
            return 5
        if self >= IBP_2_4_IV1:
            return 4
        if self >= IBP_2_4_IV0:
            return 3
        if self >= IBP_2_2_IV0:
            return 2
        if self >= IBP_1_0_IV0:
            return 1
        return 0

    @property
    def update_metadata_request_version(self) -> int:
        if self >= IBP_3_4_IV0:
            return 8
        if self >= IBP_2_8_IV1:
            return 7
        if self >= IBP_2_4_IV1:
            return 6
        if self >= IBP_2_2_IV0:
            return 5
        if self >= IBP_1_0_IV0:
            return 4
        if self >= IBP_0_10_2_IV0:
            return 3
        if self >= IBP_0_10_0_IV1:
            return 2
        if self >= IBP_0_9_0:
            return 1
        return 0

    @property
    def stop_replica_request_version(self) -> int:
        if self >= IBP_3_4_IV0:
            return 4
        if self >= IBP_2_6_IV0:
            return 3
        if self >= IBP_2_4_IV1:
            return 2
        if self >= IBP_2_2_IV0:
            return 1
        return 0


_ALL_LIST: list[InterBrokerProtocolVersion] = []


def _v(short_version: str, sub_version: str = "") -> InterBrokerProtocolVersion:
    version = InterBrokerProtocolVersion(len(_ALL_LIST), short_version, sub_version)
    _ALL_LIST.append(version)
    return version


# Kafka's list, in order (2.8.2 ApiVersion.allVersions, then 3.6.2 MetadataVersion).
IBP_0_8_0 = _v("0.8.0")
IBP_0_8_1 = _v("0.8.1")
IBP_0_8_2 = _v("0.8.2")
IBP_0_9_0 = _v("0.9.0")
IBP_0_10_0_IV0 = _v("0.10.0", "IV0")
IBP_0_10_0_IV1 = _v("0.10.0", "IV1")
IBP_0_10_1_IV0 = _v("0.10.1", "IV0")
IBP_0_10_1_IV1 = _v("0.10.1", "IV1")
IBP_0_10_1_IV2 = _v("0.10.1", "IV2")
IBP_0_10_2_IV0 = _v("0.10.2", "IV0")
IBP_0_11_0_IV0 = _v("0.11.0", "IV0")
IBP_0_11_0_IV1 = _v("0.11.0", "IV1")
IBP_0_11_0_IV2 = _v("0.11.0", "IV2")
IBP_1_0_IV0 = _v("1.0", "IV0")
IBP_1_1_IV0 = _v("1.1", "IV0")
IBP_2_0_IV0 = _v("2.0", "IV0")
IBP_2_0_IV1 = _v("2.0", "IV1")
IBP_2_1_IV0 = _v("2.1", "IV0")
IBP_2_1_IV1 = _v("2.1", "IV1")
IBP_2_1_IV2 = _v("2.1", "IV2")
IBP_2_2_IV0 = _v("2.2", "IV0")
IBP_2_2_IV1 = _v("2.2", "IV1")
IBP_2_3_IV0 = _v("2.3", "IV0")
IBP_2_3_IV1 = _v("2.3", "IV1")
IBP_2_4_IV0 = _v("2.4", "IV0")
IBP_2_4_IV1 = _v("2.4", "IV1")
IBP_2_5_IV0 = _v("2.5", "IV0")
IBP_2_6_IV0 = _v("2.6", "IV0")
IBP_2_7_IV0 = _v("2.7", "IV0")
IBP_2_7_IV1 = _v("2.7", "IV1")
IBP_2_7_IV2 = _v("2.7", "IV2")
IBP_2_8_IV0 = _v("2.8", "IV0")
IBP_2_8_IV1 = _v("2.8", "IV1")
IBP_3_0_IV0 = _v("3.0", "IV0")
IBP_3_0_IV1 = _v("3.0", "IV1")
IBP_3_1_IV0 = _v("3.1", "IV0")
IBP_3_2_IV0 = _v("3.2", "IV0")
IBP_3_3_IV0 = _v("3.3", "IV0")
IBP_3_3_IV1 = _v("3.3", "IV1")
IBP_3_3_IV2 = _v("3.3", "IV2")
IBP_3_3_IV3 = _v("3.3", "IV3")
IBP_3_4_IV0 = _v("3.4", "IV0")
IBP_3_5_IV0 = _v("3.5", "IV0")
IBP_3_5_IV1 = _v("3.5", "IV1")
IBP_3_5_IV2 = _v("3.5", "IV2")
IBP_3_6_IV0 = _v("3.6", "IV0")
IBP_3_6_IV1 = _v("3.6", "IV1")
IBP_3_6_IV2 = _v("3.6", "IV2")

_ALL: tuple[InterBrokerProtocolVersion, ...] = tuple(_ALL_LIST)

#: Full names, plus each short name mapped to its newest internal version ("2.8" -> 2.8-IV1).
_BY_NAME: dict[str, InterBrokerProtocolVersion] = {
    **{v.short_version: v for v in _ALL},
    **{v.version: v for v in _ALL},
}

#: The version this project targets and the default of ``inter.broker.protocol.version``.
latest: InterBrokerProtocolVersion = IBP_2_8_IV1
