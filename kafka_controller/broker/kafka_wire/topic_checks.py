"""Per-topic errors and the pure checks of Kafka's admin paths (``AdminZkClient``, ``LogConfig``), with
Kafka's error codes and words."""

from __future__ import annotations

from collections.abc import Mapping

from kio.schema.errors import ErrorCode as E

from kafka_controller.admin.topics import TOPIC_CONFIGS
from kafka_controller.domain.errors import InvalidArgumentError


class ApiException(Exception):
    """A per-topic failure with Kafka's code and message: Kafka's ``ApiException``, raised inside a handler
    and answered as that error (``controller.events.ApiError`` is the answer value, not an exception)."""

    def __init__(self, code: E, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message


def check_topic_configs(configs: Mapping[str, str], *, code: E = E.invalid_config) -> None:
    """Kafka's ``LogConfig.validate``: an unknown name is INVALID_CONFIG, a bad value ``code``."""
    for key, value in configs.items():
        check = TOPIC_CONFIGS.get(key)
        if check is None:
            raise ApiException(E.invalid_config, f"Unknown topic config name: {key}")
        try:
            check(key, value)
        except InvalidArgumentError as e:
            raise ApiException(code, str(e)) from None


def validate_added(added: Mapping[int, tuple[int, ...]], rf: int) -> None:
    """Kafka's ``AdminZkClient.validateReplicaAssignment`` for new partitions."""
    for p, rs in sorted(added.items()):
        if not rs:
            raise ApiException(
                E.invalid_replica_assignment, f"Cannot have replication factor of 0 for partition id {p}."
            )
        if len(set(rs)) != len(rs):
            raise ApiException(
                E.invalid_replica_assignment,
                f"Duplicate brokers not allowed in replica assignment: {', '.join(map(str, rs))} "
                f"for partition id {p}.",
            )
    bad = sorted((p, len(rs)) for p, rs in added.items() if len(rs) != rf)
    if bad:
        raise ApiException(
            E.invalid_replica_assignment,
            f"Inconsistent replication factor between partitions, partition 0 has {rf} while partitions "
            f"[{', '.join(str(p) for p, _ in bad)}] have replication factors "
            f"[{', '.join(str(n) for _, n in bad)}], respectively.",
        )


def render(assignment: Mapping[int, tuple[int, ...]]) -> str:
    return "{" + ", ".join(f"{p}: {list(rs)}" for p, rs in sorted(assignment.items())) + "}"
