"""What the runbooks share: the progress callback, their two errors, the wait timeouts, and the
``Watch`` that samples the cluster while a runbook waits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafka_controller.admin.describe import ClusterView
from kafka_controller.airflow.maintenance import broker_caught_up
from kafka_controller.domain.errors import KafkaControllerError

if TYPE_CHECKING:
    from kafka_controller.airflow.hooks.cluster import KafkaClusterHook

__all__ = ["OperationFailedError", "RefusedError", "Say", "Timeouts", "Watch"]

Say = Callable[[str], None]


def _quiet(_message: str) -> None:
    """The default ``say``: progress goes nowhere (callers that log pass their logger)."""


def _caught_up(broker_id: int, view: ClusterView) -> bool:
    return broker_caught_up(view, broker_id)


class RefusedError(KafkaControllerError):
    """A guard refused the operation before anything was changed."""


class OperationFailedError(KafkaControllerError):
    """The cluster refused or failed part of the work; the message says which partitions and why."""


@dataclass
class Timeouts:
    shutdown_s: float = 120.0
    start_s: float = 120.0
    catch_up_s: float = 300.0
    election_s: float = 60.0


@dataclass
class Watch:
    """Samples the cluster while waiting: the most partitions seen offline at once, and which."""

    hook: KafkaClusterHook
    max_offline: int = 0
    offline_seen: set[str] = field(default_factory=set)

    def view(self) -> ClusterView:
        view: ClusterView = self.hook.describe()
        offline = [str(p.topic_partition) for p in view.partitions if p.offline]
        self.max_offline = max(self.max_offline, len(offline))
        self.offline_seen.update(offline)
        return view

    def until(self, predicate: Callable[[ClusterView], bool], timeout_s: float, what: str) -> ClusterView:
        def probe() -> ClusterView | None:
            view = self.view()
            return view if predicate(view) else None

        result: ClusterView = self.hook.wait_for(probe, timeout_s, what)
        return result
