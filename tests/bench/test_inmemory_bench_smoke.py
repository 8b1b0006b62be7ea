"""``bench/controller_inmemory.py`` at 1% of Kafka's layout, run as a user runs it: the RF 3
failover with one broker dead (``bench/failover.py --rf 3`` without ZooKeeper) exits 0 having
checked that every partition with a live replica is led by a live broker. No timing is asserted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.bench.benchrun import BENCH, run_bench


def test_inmemory_failover_with_a_dead_broker_leads_every_partition(tmp_path: Path) -> None:
    args = ["--rf", "3", "--dead", "1", "--scale", "0.01", "--no-shutdown", "--note", "smoke"]
    result = run_bench(tmp_path, "controller_inmemory.py", *args)
    run = result["failover"]
    assert (run["partitions"], run["rf"], run["dead_brokers"]) == (20 * 50, 3, 1)
    assert run["requests_sent"] > 0 and result["note"] == "smoke"
    assert "controlled_shutdown" not in result


def test_inmemory_bench_refuses_too_many_dead_brokers(tmp_path: Path) -> None:
    env = {**os.environ, "KAFKA_CONTROLLER_BENCH_RESULTS": str(tmp_path / "results")}
    proc = subprocess.run(
        [sys.executable, str(BENCH / "controller_inmemory.py"), "--dead", "4"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--dead must be in 0..3, got 4" in proc.stderr
    assert not (tmp_path / "results").exists()


def test_audit_rss_bench_writes_every_transition_of_the_failover(tmp_path: Path) -> None:
    args = ["--mode", "writer", "--scale", "0.01", "--note", "smoke"]
    result = run_bench(tmp_path, "audit_rss.py", *args)
    # 1,000 partitions RF 3, one broker of five dead: 3,000 replica and 200 election rows at least
    assert result["rows_written"] >= 3_200 and result["note"] == "smoke"
    assert result["max_rss_mb"] >= result["max_rss_mb_before_failover"] > 0
    assert result["event_thread_cpu_seconds"] is not None  # the event thread was found


def test_failover_requests_bench_replays_every_part(tmp_path: Path) -> None:
    result = run_bench(tmp_path, "failover_requests.py", "--scale", "0.01", "--reps", "1")
    assert (result["partitions"], result["reps"]) == (20 * 50, 1)
    assert result["requests"] > 0 and result["partition_states_sent"] > result["partitions"]
    for key in ("encode_cpu_s", "decode_answers_cpu_s", "brokers_cpu_s", "fetch_cpu_s"):
        assert result[key] > 0, key


def test_failover_phases_bench_times_every_phase(tmp_path: Path) -> None:
    """Each phase's method is still called by the failover (a rename would leave a phase at 0)."""
    result = run_bench(tmp_path, "failover_phases.py", "--scale", "0.01", "--reps", "1")
    assert (result["rf"], result["dead_brokers"], result["reps"]) == (3, 1, 1)
    phases = result["event_thread_cpu_s_by_phase"]
    assert len(phases) == 12
    assert all(seconds > 0 for seconds in phases.values()), phases


def test_failover_phases_bench_audited_times_the_recorders_too(tmp_path: Path) -> None:
    """With ``--audit`` the failover records to an ``AuditWriter``, and each recorder phase runs."""
    result = run_bench(tmp_path, "failover_phases.py", "--scale", "0.01", "--reps", "1", "--audit")
    phases = result["event_thread_cpu_s_by_phase"]
    assert result["audit"] is True and len(phases) == 17
    audit_phases = {name: seconds for name, seconds in phases.items() if name.startswith("a")}
    assert len(audit_phases) == 5 and all(seconds > 0 for seconds in audit_phases.values()), audit_phases


def test_response_decode_bench_times_the_answer_against_its_dict(tmp_path: Path) -> None:
    result = run_bench(tmp_path, "response_decode.py", "--partitions", "500", "--reps", "2")
    assert (result["partitions"], result["reps"]) == (500, 2) and result["answer_bytes"] > 500
    assert result["decode_and_ask_ms"] > 0 and result["baseline_decode_into_a_dict_ms"] > 0


def test_columnar_floor_bench_decides_and_encodes_what_the_controller_did(tmp_path: Path) -> None:
    """It exits 0 only if the columns' leaders, epochs and ISRs are the controller's, partition by
    partition; and it encodes as many partition states as the controller's requests held."""
    result = run_bench(tmp_path, "columnar_floor.py", "--scale", "0.01", "--reps", "1")
    assert (result["partitions"], result["rf"], result["reps"]) == (20 * 50, 3, 1)
    assert result["columns_partition_states_encoded"] == result["controller_partition_states_built"] > 1_000
    assert (
        result["controller_cpu_s"] > 0 and result["columns_cpu_s"] > 0 and result["columns_bytes_encoded"] > 0
    )
