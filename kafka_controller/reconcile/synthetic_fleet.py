"""The synthetic fleet's world before it is written: what ``synthetic`` builds and plants problems in,
and ``synthetic_io`` writes as a snapshot and an audit history. Its own module so that neither of
those two imports the other's internals (the generator imports the writer, nothing imports back)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(slots=True)
class Fleet:
    """The world before it is written: padded matrices (-1 = empty slot) and per-row overrides."""

    n: int
    brokers: int
    ppt: int
    rep: np.ndarray  # (n, 4) replicas
    adding: np.ndarray  # (n, 1)
    removing: np.ndarray  # (n, 1)
    leader: np.ndarray
    epoch: np.ndarray
    isr: np.ndarray  # (n, 4)
    c_leader: np.ndarray
    c_epoch: np.ndarray
    c_state: np.ndarray  # object: Kafka state names
    leo: np.ndarray  # the leader's log end offset per partition
    a_rep: np.ndarray  # (n, 3) the assignment the audit history replays
    a_leader: np.ndarray  # the leader the last audited election chose
    view_overrides: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    audit_overrides: dict[tuple[int, int], dict[str, Any]] = field(default_factory=dict)
    audit_extra: list[dict[str, Any]] = field(default_factory=list)
    configs: list[tuple[str, str, str]] = field(default_factory=list)
    reassignments: list[dict[str, Any]] = field(default_factory=list)
    expected: list[tuple[str, str | None, int | None, int | None]] = field(default_factory=list)
    plan: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"preferred_election": [], "online_transition": [], "unclean_candidates": []}
    )

    def topic(self, i: int) -> str:
        return f"t{i // self.ppt:06d}"

    def tp(self, i: int) -> tuple[str, int]:
        return self.topic(i), i % self.ppt

    def expect(self, kind: str, i: int | None, broker: int | None = None) -> None:
        topic, partition = self.tp(i) if i is not None else (None, None)
        self.expected.append((kind, topic, partition, broker))

    def r(self, i: int, k: int) -> int:
        return int(self.rep[i, k])

    def dead_broker(self) -> int:
        return self.brokers + 1  # never registered
