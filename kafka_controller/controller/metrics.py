"""A small metrics registry with Kafka's MBean names, a Prometheus exposition and a JSON snapshot.

No external dependency: the controller needs gauges, meters, histograms and timers (Yammer's four
kinds, which Kafka uses) and nothing else. Rates decay as Yammer's do (exponentially weighted, a
5-second tick) but tick lazily on read or mark, so no background thread exists and a fake clock
drives them in tests. Histograms keep a sliding window of the last ``reservoir_size`` samples for
percentiles, plus exact count, sum, min and max over their whole life.

Prometheus names are the MBean's domain, ``type`` and ``name`` lowercased and joined by ``_``:
``kafka.controller:type=KafkaController,name=ActiveControllerCount`` is exposed as
``kafka_controller_kafkacontroller_activecontrollercount``.
"""

from __future__ import annotations

import math
import re
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from kafka_controller.controller.controller_state import TIMED_STATES, ControllerState
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.ports import Clock, SystemClock

_KC = "kafka.controller:type=KafkaController,name="
ACTIVE_CONTROLLER_COUNT = _KC + "ActiveControllerCount"
OFFLINE_PARTITIONS_COUNT = _KC + "OfflinePartitionsCount"
PREFERRED_REPLICA_IMBALANCE_COUNT = _KC + "PreferredReplicaImbalanceCount"
CONTROLLER_STATE = _KC + "ControllerState"
GLOBAL_TOPIC_COUNT = _KC + "GlobalTopicCount"
GLOBAL_PARTITION_COUNT = _KC + "GlobalPartitionCount"
TOPICS_TO_DELETE_COUNT = _KC + "TopicsToDeleteCount"
REPLICAS_TO_DELETE_COUNT = _KC + "ReplicasToDeleteCount"
TOPICS_INELIGIBLE_TO_DELETE_COUNT = _KC + "TopicsIneligibleToDeleteCount"
REPLICAS_INELIGIBLE_TO_DELETE_COUNT = _KC + "ReplicasIneligibleToDeleteCount"
ACTIVE_BROKER_COUNT = _KC + "ActiveBrokerCount"
FENCED_BROKER_COUNT = _KC + "FencedBrokerCount"
#: The gauges ``KafkaController`` registers (docs/controller-behaviour.md §8.15), in Kafka's order.
KAFKA_CONTROLLER_GAUGES: tuple[str, ...] = (
    ACTIVE_CONTROLLER_COUNT,
    OFFLINE_PARTITIONS_COUNT,
    PREFERRED_REPLICA_IMBALANCE_COUNT,
    CONTROLLER_STATE,
    GLOBAL_TOPIC_COUNT,
    GLOBAL_PARTITION_COUNT,
    TOPICS_TO_DELETE_COUNT,
    REPLICAS_TO_DELETE_COUNT,
    TOPICS_INELIGIBLE_TO_DELETE_COUNT,
    REPLICAS_INELIGIBLE_TO_DELETE_COUNT,
    ACTIVE_BROKER_COUNT,
    FENCED_BROKER_COUNT,
)
UNCLEAN_LEADER_ELECTIONS_PER_SEC = "kafka.controller:type=ControllerStats,name=UncleanLeaderElectionsPerSec"
EVENT_QUEUE_TIME_MS = "kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs"
EVENT_QUEUE_SIZE = "kafka.controller:type=ControllerEventManager,name=EventQueueSize"

_MBEAN = re.compile(r"^([A-Za-z][\w.]*):type=(\w+),name=(\w+)(?:,([A-Za-z][\w-]*)=([\w.-]+))?$")
_TICK_S = 5.0
QUANTILES: tuple[float, ...] = (0.5, 0.75, 0.95, 0.98, 0.99, 0.999)


def rate_and_time_metric(state: ControllerState) -> str:
    """The MBean name of a state's timer; raises for states without one."""
    name = state.rate_and_time_metric_name
    if name is None:
        raise InvalidArgumentError(f"controller state {state} has no rate-and-time metric")
    return f"kafka.controller:type=ControllerStats,name={name}"


def prometheus_name(mbean: str) -> str:
    """``domain:type=T,name=N`` -> ``domain_t_n`` (dots to underscores, lowercased); one more tag
    (Kafka's ``,broker-id=1``) becomes a label: ``domain_t_n{broker_id="1"}``."""
    m = _MBEAN.match(mbean)
    if m is None:
        raise InvalidArgumentError(f"metric name {mbean!r} is not of the form 'domain:type=T,name=N[,tag=V]'")
    domain, type_, name, tag, value = m.groups()
    label = "" if tag is None else f'{{{tag.replace("-", "_")}="{value}"}}'
    return f"{domain.replace('.', '_')}_{type_}_{name}".lower() + label


class Meter:
    """A count and its mean, 1-, 5- and 15-minute rates (events per second), Yammer-style."""

    _ALPHAS = tuple(1.0 - math.exp(-_TICK_S / 60.0 / minutes) for minutes in (1, 5, 15))

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._count = 0
        self._uncounted = 0
        self._start = clock.monotonic()
        self._last_tick = self._start
        self._rates: list[float | None] = [None, None, None]

    def mark(self, n: int = 1) -> None:
        with self._lock:
            self._tick()
            self._count += n
            self._uncounted += n

    def _tick(self) -> None:
        now = self._clock.monotonic()
        ticks = int((now - self._last_tick) / _TICK_S)
        if ticks <= 0:
            return
        self._last_tick += ticks * _TICK_S
        instant = self._uncounted / _TICK_S
        self._uncounted = 0
        for i, alpha in enumerate(self._ALPHAS):
            rate = self._rates[i]
            rate = instant if rate is None else rate + alpha * (instant - rate)
            # The remaining ticks saw no events: the rate only decays.
            self._rates[i] = rate * (1.0 - alpha) ** (ticks - 1)

    @property
    def count(self) -> int:
        return self._count

    def rates(self) -> dict[str, float]:
        """``mean_rate`` and the three moving averages, in events per second."""
        with self._lock:
            self._tick()
            elapsed = self._clock.monotonic() - self._start
            mean = self._count / elapsed if elapsed > 0 else 0.0
            one, five, fifteen = (r or 0.0 for r in self._rates)
        return {
            "mean_rate": mean,
            "one_minute_rate": one,
            "five_minute_rate": five,
            "fifteen_minute_rate": fifteen,
        }


class Histogram:
    """Exact count/sum/min/max, and percentiles over the last ``reservoir_size`` samples."""

    def __init__(self, reservoir_size: int = 1028) -> None:
        if reservoir_size < 1:
            raise InvalidArgumentError(f"reservoir_size must be >= 1, got {reservoir_size}")
        self._lock = threading.Lock()
        self._window: deque[float] = deque(maxlen=reservoir_size)
        self._count = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = -math.inf

    def update(self, value: float) -> None:
        with self._lock:
            self._window.append(value)
            self._count += 1
            self._sum += value
            self._min = min(self._min, value)
            self._max = max(self._max, value)

    def clear(self) -> None:
        """Forget everything (Kafka resets EventQueueTimeMs after an idle poll)."""
        with self._lock:
            self._window.clear()
            self._count = 0
            self._sum = 0.0
            self._min = math.inf
            self._max = -math.inf

    @property
    def count(self) -> int:
        return self._count

    def snapshot(self) -> dict[str, float]:
        """count, sum, min, max, mean and each of ``QUANTILES`` as ``p50`` ... ``p999``."""
        with self._lock:
            values = sorted(self._window)
            count, total = self._count, self._sum
            lo, hi = (self._min, self._max) if count else (0.0, 0.0)
        out: dict[str, float] = {
            "count": count,
            "sum": total,
            "min": lo,
            "max": hi,
            "mean": total / count if count else 0.0,
        }
        for q in QUANTILES:
            out[_quantile_key(q)] = quantile(values, q)
        return out


def _quantile_key(q: float) -> str:
    return "p" + f"{q * 100:g}".replace(".", "")


def quantile(sorted_values: list[float], q: float) -> float:
    """Yammer's snapshot quantile: position ``q * (n + 1)``, linear between neighbours."""
    n = len(sorted_values)
    if n == 0:
        return 0.0
    pos = q * (n + 1)
    if pos < 1:
        return sorted_values[0]
    if pos >= n:
        return sorted_values[-1]
    lower = sorted_values[int(pos) - 1]
    upper = sorted_values[int(pos)]
    return lower + (pos - math.floor(pos)) * (upper - lower)


class Timer:
    """A meter of events and a histogram of their durations in milliseconds (Yammer's Timer)."""

    def __init__(self, clock: Clock, reservoir_size: int = 1028) -> None:
        self.meter = Meter(clock)
        self.histogram = Histogram(reservoir_size)

    def update(self, duration_ms: float) -> None:
        self.meter.mark()
        self.histogram.update(duration_ms)

    @property
    def count(self) -> int:
        return self.histogram.count


Metric = Callable[[], float] | Meter | Histogram | Timer
_HELP_ESCAPE = str.maketrans({"\\": "\\\\", "\n": "\\n"})


class MetricsRegistry:
    """Metrics by MBean name. Registering a name twice replaces the metric (a new controller)."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._lock = threading.Lock()
        self._metrics: dict[str, tuple[Metric, str]] = {}
        self._collectors: list[tuple[Callable[[], dict[str, float]], str]] = []

    def _add(self, name: str, metric: Metric, help_text: str) -> None:
        prometheus_name(name)  # validates the name before anything is registered
        with self._lock:
            self._metrics[name] = (metric, help_text)

    def gauge(self, name: str, fn: Callable[[], float], help_text: str = "") -> None:
        """Register ``fn``; it is called at every scrape, so it must be cheap and thread-safe."""
        self._add(name, fn, help_text)

    def collector(self, fn: Callable[[], dict[str, float]], help_text: str = "") -> None:
        """Gauges named at scrape time (one per broker, say): ``fn`` returns MBean name -> value."""
        for name in fn():
            prometheus_name(name)
        with self._lock:
            self._collectors.append((fn, help_text))

    def meter(self, name: str, help_text: str = "") -> Meter:
        meter = Meter(self.clock)
        self._add(name, meter, help_text)
        return meter

    def histogram(self, name: str, help_text: str = "", reservoir_size: int = 1028) -> Histogram:
        histogram = Histogram(reservoir_size)
        self._add(name, histogram, help_text)
        return histogram

    def timer(self, name: str, help_text: str = "", reservoir_size: int = 1028) -> Timer:
        timer = Timer(self.clock, reservoir_size)
        self._add(name, timer, help_text)
        return timer

    def remove(self, name: str) -> None:
        with self._lock:
            self._metrics.pop(name, None)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._metrics)

    def get(self, name: str) -> Metric | None:
        with self._lock:
            entry = self._metrics.get(name)
        return entry[0] if entry else None

    def _items(self) -> list[tuple[str, Metric, str]]:
        with self._lock:
            items: list[tuple[str, Metric, str]] = [(n, m, h) for n, (m, h) in self._metrics.items()]
            collectors = list(self._collectors)
        for fn, h in collectors:
            items += [(n, _constant(v), h) for n, v in fn().items()]
        return sorted(items, key=lambda item: item[0])

    def snapshot(self) -> dict[str, Any]:
        """Every metric by MBean name: a number for gauges, a dict for the other kinds."""
        out: dict[str, Any] = {}
        for name, metric, _ in self._items():
            if isinstance(metric, Meter):
                out[name] = {"count": metric.count, **metric.rates()}
            elif isinstance(metric, Histogram):
                out[name] = metric.snapshot()
            elif isinstance(metric, Timer):
                out[name] = {**metric.histogram.snapshot(), **metric.meter.rates()}
            else:
                out[name] = _gauge_value(metric)
        return out

    def render_prometheus(self) -> str:
        """Text exposition format 0.0.4: gauges, counters (+ rate gauges), and summaries in ms."""
        lines: list[str] = []
        families: set[str] = set()
        for name, metric, help_text in self._items():
            base = prometheus_name(name)
            help_line = f"{help_text or name}".translate(_HELP_ESCAPE)
            if isinstance(metric, Meter):
                _render_meter(lines, base, help_line, metric)
            elif isinstance(metric, Histogram | Timer):
                hist = metric if isinstance(metric, Histogram) else metric.histogram
                lines += [f"# HELP {base} {help_line}", f"# TYPE {base} summary"]
                snap = hist.snapshot()
                for q in QUANTILES:
                    lines.append(f'{base}{{quantile="{q}"}} {_fmt(snap[_quantile_key(q)])}')
                lines += [f"{base}_sum {_fmt(snap['sum'])}", f"{base}_count {int(snap['count'])}"]
                if isinstance(metric, Timer):
                    _render_meter(lines, base + "_events", help_line, metric.meter)
            else:
                family = base.split("{", 1)[0]
                if family not in families:  # a labelled family's series share one HELP and TYPE
                    families.add(family)
                    lines += [f"# HELP {family} {help_line}", f"# TYPE {family} gauge"]
                lines.append(f"{base} {_fmt(_gauge_value(metric))}")
        return "\n".join(lines) + "\n" if lines else ""


def _constant(value: float) -> Callable[[], float]:
    return lambda: value


def _render_meter(lines: list[str], base: str, help_line: str, meter: Meter) -> None:
    lines += [f"# HELP {base}_total {help_line}", f"# TYPE {base}_total counter"]
    lines.append(f"{base}_total {meter.count}")
    lines += [f"# HELP {base}_rate {help_line} (events per second)", f"# TYPE {base}_rate gauge"]
    for key, value in meter.rates().items():
        lines.append(f'{base}_rate{{window="{key.removesuffix("_rate")}"}} {_fmt(value)}')


def _gauge_value(fn: Callable[[], float]) -> float:
    try:
        return float(fn())
    except Exception:  # a broken gauge must not break the scrape
        return math.nan


def _fmt(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(int(value)) if float(value).is_integer() else repr(float(value))


def new_rate_and_time_metrics(registry: MetricsRegistry) -> dict[ControllerState, Timer]:
    """Register one ``<State>RateAndTimeMs`` timer per timed state (Kafka's ``ControllerStats``)."""
    return {
        state: registry.timer(rate_and_time_metric(state), f"{state} events: rate and time (ms)")
        for state in TIMED_STATES
    }
