"""The metrics registry: Yammer-style rates on an injected clock, percentiles, and the exposition."""

from __future__ import annotations

import math
import random
import re
import statistics
import urllib.error
import urllib.request

import orjson
import pytest

from kafka_controller.controller.controller_state import TIMED_STATES, ControllerState
from kafka_controller.controller.metrics import (
    ACTIVE_CONTROLLER_COUNT,
    EVENT_QUEUE_SIZE,
    EVENT_QUEUE_TIME_MS,
    KAFKA_CONTROLLER_GAUGES,
    QUANTILES,
    UNCLEAN_LEADER_ELECTIONS_PER_SEC,
    Histogram,
    MetricsRegistry,
    new_rate_and_time_metrics,
    prometheus_name,
    rate_and_time_metric,
)
from kafka_controller.controller.metrics_http import serve_metrics
from kafka_controller.domain.errors import InvalidArgumentError
from tests.runtime.fakes import ManualClock

_SAMPLE = re.compile(
    r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_]\w*="[^"]*"(,[a-zA-Z_]\w*="[^"]*")*)?\})? (\S+)$'
)


def parse_exposition(
    text: str,
) -> tuple[dict[str, str], dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    """A strict reader of text format 0.0.4: family types, and samples keyed by name and labels."""
    types: dict[str, str] = {}
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    helped: set[str] = set()
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ", 3)[2]
            assert name not in helped, f"duplicate HELP for {name}"
            helped.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in {"counter", "gauge", "summary", "histogram", "untyped"}
            assert name not in types, f"duplicate TYPE for {name}"
            types[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"not a sample line: {line!r}"
            name, _, labels, _, value = m.groups()
            family = name if name in types else re.sub(r"_(sum|count)$", "", name)
            assert family in types, f"sample {name} before its TYPE line"
            pairs = tuple(tuple(p.split("=", 1)) for p in labels.split(",")) if labels else ()
            key = (name, tuple((k, v.strip('"')) for k, v in pairs))
            assert key not in samples, f"duplicate sample {key}"
            samples[key] = float(value)
    assert set(types) == helped
    return types, samples


def test_prometheus_names_follow_the_mbean() -> None:
    assert (
        prometheus_name(ACTIVE_CONTROLLER_COUNT) == "kafka_controller_kafkacontroller_activecontrollercount"
    )
    assert (
        prometheus_name(rate_and_time_metric(ControllerState.BROKER_CHANGE))
        == "kafka_controller_controllerstats_leaderelectionrateandtimems"
    )
    with pytest.raises(InvalidArgumentError, match="not of the form"):
        prometheus_name("no colon here")
    with pytest.raises(InvalidArgumentError, match="no rate-and-time metric"):
        rate_and_time_metric(ControllerState.IDLE)


def test_registering_a_bad_name_registers_nothing() -> None:
    registry = MetricsRegistry()
    with pytest.raises(InvalidArgumentError):
        registry.meter("kafka.controller:type=X")
    assert registry.names() == []


def test_meter_rates_decay_like_yammers_ewma() -> None:
    clock = ManualClock()
    meter = MetricsRegistry(clock).meter(UNCLEAN_LEADER_ELECTIONS_PER_SEC)
    meter.mark(60)
    clock.advance(5.0)  # one tick: the instant rate is 60 events / 5 s
    first = meter.rates()
    assert first["one_minute_rate"] == pytest.approx(12.0)
    assert first["fifteen_minute_rate"] == pytest.approx(12.0)
    assert first["mean_rate"] == pytest.approx(60 / 5.0)
    clock.advance(60.0)  # twelve idle ticks: each multiplies the rate by exp(-5 s / window)
    later = meter.rates()
    assert later["one_minute_rate"] == pytest.approx(12.0 * math.exp(-60.0 / 60.0))
    assert later["five_minute_rate"] == pytest.approx(12.0 * math.exp(-60.0 / 300.0))
    assert later["mean_rate"] == pytest.approx(60 / 65.0)
    assert meter.count == 60


def test_histogram_percentiles_match_the_n_plus_one_rule() -> None:
    rng = random.Random(7)
    values = [rng.uniform(0, 1000) for _ in range(1028)]
    hist = Histogram(reservoir_size=1028)
    for v in values:
        hist.update(v)
    snap = hist.snapshot()
    cuts = statistics.quantiles(values, n=1000, method="exclusive")
    keys = dict(zip(QUANTILES, ("p50", "p75", "p95", "p98", "p99", "p999"), strict=True))
    for q, key in keys.items():
        assert snap[key] == pytest.approx(cuts[round(q * 1000) - 1]), key
    assert snap["count"] == 1028 and snap["min"] == min(values) and snap["max"] == max(values)
    assert snap["mean"] == pytest.approx(statistics.fmean(values))


def test_histogram_window_is_bounded_but_totals_are_exact() -> None:
    hist = Histogram(reservoir_size=100)
    for v in range(2000):
        hist.update(float(v))
    snap = hist.snapshot()
    assert snap["count"] == 2000 and snap["sum"] == sum(range(2000))
    assert snap["min"] == 0 and snap["max"] == 1999
    assert snap["p50"] == pytest.approx(statistics.quantiles(range(1900, 2000), n=2, method="exclusive")[0])
    hist.clear()
    assert hist.snapshot()["count"] == 0 and hist.snapshot()["p99"] == 0.0


def test_exposition_parses_back_with_every_kind() -> None:
    clock = ManualClock()
    registry = MetricsRegistry(clock)
    gauge_values = {name: float(i * 3) for i, name in enumerate(KAFKA_CONTROLLER_GAUGES)}
    for name, value in gauge_values.items():
        registry.gauge(name, lambda v=value: v, f"help for {name}\nsecond line")
    registry.gauge(EVENT_QUEUE_SIZE, lambda: 4)
    unclean = registry.meter(UNCLEAN_LEADER_ELECTIONS_PER_SEC)
    unclean.mark(3)
    timers = new_rate_and_time_metrics(registry)
    for ms in (5.0, 10.0, 15.0):
        timers[ControllerState.TOPIC_CHANGE].update(ms)
    queue_time = registry.histogram(EVENT_QUEUE_TIME_MS)
    queue_time.update(2.5)

    text = registry.render_prometheus()
    assert "help for" in text and "\\nsecond line" in text  # newlines in HELP are escaped
    types, samples = parse_exposition(text)

    for name, value in gauge_values.items():
        pname = prometheus_name(name)
        assert types[pname] == "gauge" and samples[(pname, ())] == value
    assert samples[(prometheus_name(EVENT_QUEUE_SIZE), ())] == 4
    counter = prometheus_name(UNCLEAN_LEADER_ELECTIONS_PER_SEC) + "_total"
    assert types[counter] == "counter" and samples[(counter, ())] == 3
    topic_change = prometheus_name(rate_and_time_metric(ControllerState.TOPIC_CHANGE))
    assert types[topic_change] == "summary"
    assert samples[(topic_change + "_count", ())] == 3 and samples[(topic_change + "_sum", ())] == 30
    assert samples[(topic_change, (("quantile", "0.5"),))] == 10.0
    assert samples[(topic_change + "_events_total", ())] == 3
    assert {q for (n, labels) in samples if n == topic_change for _, q in labels} == {
        str(q) for q in QUANTILES
    }
    qt = prometheus_name(EVENT_QUEUE_TIME_MS)
    assert types[qt] == "summary" and samples[(qt + "_sum", ())] == 2.5
    summaries = {n for n, k in types.items() if k == "summary"}
    assert len(summaries) == len(TIMED_STATES) + 1


def test_a_failing_gauge_reads_nan_without_breaking_the_scrape() -> None:
    registry = MetricsRegistry()

    def broken() -> float:
        raise RuntimeError("no")

    registry.gauge(ACTIVE_CONTROLLER_COUNT, broken)
    registry.gauge(EVENT_QUEUE_SIZE, lambda: 1)
    _, samples = parse_exposition(registry.render_prometheus())
    assert math.isnan(samples[(prometheus_name(ACTIVE_CONTROLLER_COUNT), ())])
    assert samples[(prometheus_name(EVENT_QUEUE_SIZE), ())] == 1


def test_http_endpoint_serves_the_exposition_and_json() -> None:
    registry = MetricsRegistry()
    level = {"v": 1}
    registry.gauge(ACTIVE_CONTROLLER_COUNT, lambda: level["v"])
    server = serve_metrics(registry, "127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(base + "/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            _, samples = parse_exposition(resp.read().decode())
        assert samples[(prometheus_name(ACTIVE_CONTROLLER_COUNT), ())] == 1
        level["v"] = 0  # gauges are read at scrape time
        with urllib.request.urlopen(base + "/metrics.json", timeout=10) as resp:
            assert orjson.loads(resp.read()) == {ACTIVE_CONTROLLER_COUNT: 0}
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/other", timeout=10)
        assert err.value.code == 404
    finally:
        server.close()
