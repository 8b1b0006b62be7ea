"""Kafka's replica placement (``AdminUtils.assignReplicasToBrokers``), rack-aware when brokers have racks.

Kafka's rule: when no broker has a rack the placement is rack-unaware (``topics.assign_replicas_to_
brokers``); when every broker has one, replicas of a partition go to as many racks as possible over a
broker list that alternates racks; a mix is an error. A fixed start index (adding partitions) makes the
placement deterministic; otherwise start index and shift are random, as in Kafka, so that topics do not
all lead on one broker. Errors carry Kafka's words; the caller maps the kind to an error code.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from kafka_controller.admin.topics import assign_replicas_to_brokers


class PlacementError(ValueError):
    """``kind`` is ``partitions``, ``replication_factor`` or ``racks``: which input was wrong."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def assign_replicas(
    brokers: Mapping[int, str | None],
    n_partitions: int,
    replication_factor: int,
    *,
    fixed_start_index: int = -1,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, tuple[int, ...]]:
    """``{partition: replicas}`` for ``n_partitions`` partitions numbered from ``start_partition``."""
    if n_partitions <= 0:
        raise PlacementError("partitions", "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise PlacementError("replication_factor", "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise PlacementError(
            "replication_factor",
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )
    rng = rng or random.Random()
    racks = {b: r for b, r in brokers.items() if r is not None}
    if not racks:
        start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(len(brokers))
        shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(len(brokers))
        return assign_replicas_to_brokers(
            n_partitions,
            replication_factor,
            brokers,
            start_index=start,
            replica_shift=shift,
            start_partition=start_partition,
        )
    if len(racks) != len(brokers):
        raise PlacementError(
            "racks", "Not all brokers have rack information for replica rack aware assignment."
        )
    return _rack_aware(racks, n_partitions, replication_factor, fixed_start_index, start_partition, rng)


def rack_alternated_brokers(racks: Mapping[int, str]) -> list[int]:
    """Brokers taken one per rack in turn (racks sorted, brokers sorted within a rack)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    order = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    depth = 0
    while len(out) < len(racks):
        out.extend(brokers[depth] for brokers in order if depth < len(brokers))
        depth += 1
    return out


def _rack_aware(
    racks: Mapping[int, str],
    n_partitions: int,
    replication_factor: int,
    fixed_start_index: int,
    start_partition: int,
    rng: random.Random,
) -> dict[int, tuple[int, ...]]:
    arranged = rack_alternated_brokers(racks)
    n = len(arranged)
    n_racks = len(set(racks.values()))
    start = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(n)
    out: dict[int, tuple[int, ...]] = {}
    partition = max(0, start_partition)
    for _ in range(n_partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        leader = arranged[first]
        replicas = [leader]
        used_racks, used_brokers = {racks[leader]}, {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[(first + 1 + (shift * n_racks + k) % (n - 1)) % n]
                rack = racks[broker]
                k += 1
                # Skip a rack that has a replica while some rack has none, and a broker likewise.
                if (rack not in used_racks or len(used_racks) == n_racks) and (
                    broker not in used_brokers or len(used_brokers) == n
                ):
                    replicas.append(broker)
                    used_racks.add(rack)
                    used_brokers.add(broker)
                    break
        out[partition] = tuple(replicas)
        partition += 1
    return out
