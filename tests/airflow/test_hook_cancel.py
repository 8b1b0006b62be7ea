"""A killed task's hook stops polling and opens no new ZooKeeper session (``on_kill`` runs in
another thread than ``execute``)."""

from __future__ import annotations

import threading

import pytest

from kafka_controller.airflow.hooks.cluster import KafkaClusterHook, OperationCancelledError
from kafka_controller.testing.clock import ManualClock

pytestmark = pytest.mark.airflow


def test_a_cancelled_hook_stops_waiting_and_refuses_to_reconnect() -> None:
    hook = KafkaClusterHook("never_resolved", clock=ManualClock())
    polls: list[int] = []

    def probe() -> None:
        polls.append(1)
        if len(polls) == 3:
            hook.cancel()  # as on_kill does, between two polls

    with pytest.raises(OperationCancelledError, match="the task was killed"):
        hook.wait_for(probe, timeout_s=3600, what="something that never happens", interval_s=1)
    assert len(polls) == 3
    with pytest.raises(OperationCancelledError):
        hook.get_store()  # the connection is never even looked up


def test_cancel_from_another_thread_ends_a_wait_in_progress() -> None:
    hook = KafkaClusterHook("never_resolved")
    started = threading.Event()
    outcome: list[BaseException] = []

    def wait() -> None:
        try:
            hook.wait_for(lambda: started.set(), timeout_s=600, what="forever", interval_s=0.01)
        except BaseException as e:
            outcome.append(e)

    t = threading.Thread(target=wait)
    t.start()
    assert started.wait(10)
    hook.cancel()
    t.join(10)
    assert not t.is_alive() and isinstance(outcome[0], OperationCancelledError)
