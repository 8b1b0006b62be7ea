"""ControllerEventManager with a real consumer thread (docs/controller-behaviour.md §8.1;
Kafka ControllerEventManagerTest)."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from dataclasses import dataclass

import pytest

from kafka_controller.controller.controller_state import ControllerState
from kafka_controller.controller.event_manager import (
    CONTROLLER_EVENT_THREAD_NAME,
    ControllerEventManager,
    create_event_manager,
)
from kafka_controller.controller.metrics import (
    CONTROLLER_STATE,
    EVENT_QUEUE_SIZE,
    EVENT_QUEUE_TIME_MS,
    MetricsRegistry,
    new_rate_and_time_metrics,
    rate_and_time_metric,
)
from kafka_controller.domain.errors import IllegalControllerStateError, InvalidArgumentError
from kafka_controller.ports import SystemClock
from tests.runtime.fakes import (
    DEADLINE_S,
    BrokerChangeEv,
    Ev,
    ManualClock,
    RecordingProcessor,
    UpdateMetadataEv,
    wait_until,
)


class Gate:
    """Blocks an event inside ``process`` until released; signals when it got there."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.entered.set()
        assert self.release.wait(DEADLINE_S), "gate never released"


@pytest.fixture
def processor() -> RecordingProcessor:
    return RecordingProcessor()


@pytest.fixture
def manager(processor: RecordingProcessor) -> Iterator[ControllerEventManager]:
    m = ControllerEventManager(1, processor, SystemClock())
    yield m
    m.close()


def test_events_are_processed_in_fifo_order_on_the_named_thread(processor: RecordingProcessor) -> None:
    threads: list[str] = []
    m = ControllerEventManager(1, processor, SystemClock())
    names = [f"e{i}" for i in range(200)]
    for name in names[:100]:  # queued before the thread starts
        m.put(Ev(name, action=lambda: threads.append(threading.current_thread().name)))
    m.start()
    for name in names[100:]:
        m.put(Ev(name))
    assert processor.wait_processed(200) == names
    assert set(threads) == {CONTROLLER_EVENT_THREAD_NAME}
    m.close()
    assert not m.thread.is_alive()


def test_thread_survives_an_exception_from_process(
    manager: ControllerEventManager, processor: RecordingProcessor
) -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    manager.start()
    manager.put(BrokerChangeEv("bad", action=boom))
    manager.put(Ev("good"))
    assert processor.wait_processed(2) == ["bad", "good"]
    assert manager.thread.is_alive()
    wait_until(lambda: manager.state is ControllerState.IDLE, what="state back to Idle")


def test_clear_and_put_preempts_queued_events_once_and_never_processes_them(
    manager: ControllerEventManager, processor: RecordingProcessor
) -> None:
    gate = Gate()
    manager.start()
    manager.put(Ev("blocking", action=gate))
    assert gate.entered.wait(DEADLINE_S)
    b, c = Ev("b"), Ev("c")
    qb, qc = manager.put(b), manager.put(c)
    qd = manager.clear_and_put(Ev("d"))

    assert processor.preempted == ["b", "c"]
    assert b.preempted == ["b"] and c.preempted == ["c"]
    assert qb.spent and qc.spent and not qd.spent
    assert manager.queue_size == 1

    gate.release.set()
    assert processor.wait_processed(2) == ["blocking", "d"]
    # A spent event can neither be processed nor preempted again.
    qb.process(processor)
    qb.preempt(processor)
    assert processor.processed == ["blocking", "d"]
    assert processor.preempted == ["b", "c"] and b.preempted == ["b"]
    assert not qb.processing_started.is_set()
    assert qd.await_processing(DEADLINE_S)


def test_event_blocked_in_process_is_not_preempted(
    manager: ControllerEventManager, processor: RecordingProcessor
) -> None:
    gate = Gate()
    blocking = Ev("blocking", action=gate)
    manager.start()
    q_blocking = manager.put(blocking)
    assert q_blocking.await_processing(DEADLINE_S)
    assert gate.entered.wait(DEADLINE_S)
    manager.clear_and_put(Ev("after"))
    q_blocking.preempt(processor)  # too late: it is already being processed
    assert processor.preempted == [] and blocking.preempted == []
    gate.release.set()
    assert processor.wait_processed(2) == ["blocking", "after"]


@dataclass
class KeyedEv(Ev):
    """An event a newer one with the same ``key`` supersedes (a broker's AlterIsr resend)."""

    key: str = ""

    def supersede_key(self) -> Hashable | None:
        return self.key or None


def test_a_newer_event_with_the_same_key_supersedes_the_queued_one(
    manager: ControllerEventManager, processor: RecordingProcessor
) -> None:
    """While a long event runs, resends from one sender stay one queued event, the newest; an
    event the thread already took runs, and other events keep their order."""
    gate = Gate()
    manager.start()
    manager.put(KeyedEv("running", action=gate, key="broker-1"))
    assert gate.entered.wait(DEADLINE_S)
    first = KeyedEv("first", key="broker-1")
    queued_first = manager.put(first)
    manager.put(Ev("other"))
    for i in range(100):
        manager.put(KeyedEv(f"resend-{i}", key="broker-1"))
    manager.put(KeyedEv("broker-2", key="broker-2"))
    assert manager.queue_size == 3  # other, resend-99, broker-2
    assert queued_first.spent and first.preempted == ["first"]
    assert processor.preempted == ["first", *(f"resend-{i}" for i in range(99))]

    gate.release.set()
    assert processor.wait_processed(4) == ["running", "other", "resend-99", "broker-2"]


def test_close_preempts_queued_events_behind_a_blocking_one(processor: RecordingProcessor) -> None:
    """Kafka's testPreemptionOnControllerShutdown: close() while the thread is busy."""
    gate = Gate()
    m = ControllerEventManager(1, processor, SystemClock())
    m.start()
    m.put(Ev("blocking", action=gate))
    assert gate.entered.wait(DEADLINE_S)
    e1, e2 = Ev("e1"), Ev("e2")
    m.put(e1)
    m.put(e2)

    closer = threading.Thread(target=m.close, name="closer")
    closer.start()
    wait_until(lambda: processor.preempted == ["e1", "e2"], what="queued events preempted")
    assert closer.is_alive(), "close() must wait for the event being processed"
    gate.release.set()
    closer.join(DEADLINE_S)
    assert not closer.is_alive() and not m.thread.is_alive()
    assert processor.processed == ["blocking"]
    assert e1.preempted == ["e1"] and e2.preempted == ["e2"]

    late = Ev("late")
    q_late = m.put(late)
    assert q_late.spent and late.preempted == ["late"] and processor.processed == ["blocking"]


def test_close_before_start_preempts_everything(processor: RecordingProcessor) -> None:
    m = ControllerEventManager(1, processor, SystemClock())
    m.put(Ev("a"))
    m.put(Ev("b"))
    m.close()
    assert processor.preempted == ["a", "b"] and processor.processed == []
    with pytest.raises(IllegalControllerStateError):
        m.start()


def test_start_twice_and_bad_idle_poll_are_refused(manager: ControllerEventManager) -> None:
    manager.start()
    with pytest.raises(IllegalControllerStateError, match="already started"):
        manager.start()
    with pytest.raises(InvalidArgumentError, match="idle_poll_s must be > 0, got 0"):
        ControllerEventManager(1, RecordingProcessor(), SystemClock(), idle_poll_s=0)


def test_state_gauge_reports_the_processing_events_state() -> None:
    registry = MetricsRegistry()
    seen: list[float] = []
    box: dict[str, ControllerEventManager] = {}
    processor = RecordingProcessor(states_seen=lambda: box["m"].state)
    m = ControllerEventManager(1, processor, SystemClock())
    box["m"] = m
    registry.gauge(CONTROLLER_STATE, lambda: m.state.value)
    assert registry.snapshot()[CONTROLLER_STATE] == ControllerState.IDLE.value
    m.start()
    m.put(BrokerChangeEv("bc", action=lambda: seen.append(registry.snapshot()[CONTROLLER_STATE])))
    m.put(UpdateMetadataEv("um", action=lambda: seen.append(registry.snapshot()[CONTROLLER_STATE])))
    processor.wait_processed(2)
    assert processor.states == [
        ControllerState.BROKER_CHANGE,
        ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED,
    ]
    assert seen == [2, 16]
    wait_until(lambda: registry.snapshot()[CONTROLLER_STATE] == 0, what="gauge back to Idle (0)")
    m.close()


def test_queue_time_and_rate_and_time_are_recorded_on_the_injected_clock() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    timers = new_rate_and_time_metrics(registry)
    hist = registry.histogram(EVENT_QUEUE_TIME_MS)
    processor = RecordingProcessor()
    m = ControllerEventManager(
        1, processor, clock, rate_and_time_metrics=timers, event_queue_time_histogram=hist
    )
    gate = Gate()
    m.start()
    m.put(BrokerChangeEv("first", action=gate))
    assert gate.entered.wait(DEADLINE_S)
    m.put(UpdateMetadataEv("second"))
    clock.advance(0.25)  # "second" waits 250 ms behind "first", which runs for 250 ms
    gate.release.set()
    processor.wait_processed(2)
    wait_until(lambda: hist.count == 2, what="two queue-time samples")
    snap = hist.snapshot()
    assert snap["min"] == 0.0 and snap["max"] == pytest.approx(250.0)

    broker_change = registry.snapshot()[rate_and_time_metric(ControllerState.BROKER_CHANGE)]
    assert broker_change["count"] == 1 and broker_change["max"] == pytest.approx(250.0)
    assert ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED not in timers
    assert sum(t.count for t in timers.values()) == 1
    m.close()


def test_queue_time_histogram_is_reset_after_an_idle_poll() -> None:
    processor = RecordingProcessor()
    m = ControllerEventManager(1, processor, SystemClock(), idle_poll_s=0.02)
    m.start()
    m.put(Ev("one"))
    processor.wait_processed(1)
    wait_until(lambda: m.event_queue_time.count == 0, what="idle reset of EventQueueTimeMs")
    m.put(Ev("two"))  # the thread still serves events after the reset
    assert processor.wait_processed(2) == ["one", "two"]
    m.close()


def test_a_failing_preempt_does_not_stop_the_others(processor: RecordingProcessor) -> None:
    class Bad(Ev):
        def preempt(self) -> None:
            raise RuntimeError("bad callback")

    m = ControllerEventManager(1, processor, SystemClock())
    good = Ev("good")
    m.put(Bad("bad"))
    m.put(good)
    m.clear_and_put(Ev("x"))
    assert processor.preempted == ["bad", "good"] and good.preempted == ["good"]
    m.close()


def test_create_event_manager_registers_kafkas_metrics() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    processor = RecordingProcessor()
    m = create_event_manager(1, processor, clock, registry)
    for name in ("a", "b", "c"):
        m.put(BrokerChangeEv(name))
    snap = registry.snapshot()
    assert snap[EVENT_QUEUE_SIZE] == 3 and snap[CONTROLLER_STATE] == 0
    assert {rate_and_time_metric(s) for s in ControllerState if s.rate_and_time_metric_name} <= set(snap)
    m.start()
    processor.wait_processed(3)
    wait_until(lambda: registry.snapshot()[EVENT_QUEUE_TIME_MS]["count"] == 3, what="queue-time samples")
    assert registry.snapshot()[EVENT_QUEUE_SIZE] == 0
    assert registry.snapshot()[rate_and_time_metric(ControllerState.BROKER_CHANGE)]["count"] == 3
    m.close()
