"""``ClusterPulse``: while something else drives the cluster (a DAG run), print what ZooKeeper shows
changing: brokers leaving and registering again, the controller resigning and a new one elected.

A background thread samples the broker registrations and ``/controller`` (three reads) every
``interval`` and prints one line per change, stamped with the seconds since the pulse started.
Sampling can merge changes closer together than the interval; it is narration, not evidence.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from kafka_controller.domain.errors import KafkaControllerError

State = tuple[dict[int, int], int | None, int | None]


class ClusterPulse:
    """A context manager around the activity to narrate; ``cluster`` is a started ``LocalCluster``."""

    def __init__(self, cluster: Any, say: Callable[[str], None], interval: float = 0.1) -> None:
        self.cluster = cluster
        self.say = say
        self.interval = interval
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = 0.0

    def _look(self) -> State | None:
        try:
            cid, epoch = self.cluster.controller()
            return self.cluster.registered(), cid, epoch
        except KafkaControllerError:  # ZooKeeper busy or reconnecting: look again next time
            return None

    @staticmethod
    def changes(before: State, after: State) -> list[str]:
        """What differs between two looks, one phrase per change."""
        (brokers0, cid0, epoch0), (brokers1, cid1, epoch1) = before, after
        out = [f"broker {b} deregistered" for b in sorted(set(brokers0) - set(brokers1))]
        for b in sorted(brokers1):
            if b not in brokers0:
                out.append(f"broker {b} registered (broker epoch {brokers1[b]})")
            elif brokers0[b] != brokers1[b]:
                out.append(f"broker {b} registered again (broker epoch {brokers1[b]})")
        if (cid0, epoch0) != (cid1, epoch1):
            if cid1 is None:
                out.append(f"/controller is empty: broker {cid0} no longer controls")
            else:
                out.append(f"controller: broker {cid1}, controller epoch {epoch1}")
        return out

    def _run(self, first: State) -> None:
        last = first
        while not self._stop.wait(self.interval):
            now = self._look()
            if now is None:
                continue
            for change in self.changes(last, now):
                line = f"   {time.monotonic() - self._started:6.1f}s  {change}"
                self.lines.append(line)
                self.say(line)
            last = now

    def __enter__(self) -> ClusterPulse:
        self._started = time.monotonic()
        first = self._look() or ({}, None, None)
        self._thread = threading.Thread(target=self._run, args=(first,), name="cluster-pulse", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
