"""What an invariant checker reports: one broken invariant, named, with its subject and how."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Violation:
    """One broken invariant: which, about what (a partition, a controller epoch), and how."""

    invariant: str
    subject: str
    detail: str
    #: Numbers a report may group by, e.g. the controller epoch that wrote a mismatching state.
    facts: Mapping[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.invariant}: {self.subject}: {self.detail}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "facts": dict(self.facts)}
