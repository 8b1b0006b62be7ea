"""The end-to-end benchmarks at a small scale, run as a user runs them: a subprocess that exits 0 and
prints one JSON object whose facts were checked against ZooKeeper by the benchmark itself (every
partition led after the failover, nothing led by the broker at its exit). Timing goals are not
asserted here; they live in the benchmarks' own output."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.failover import TIMELINE
from tests.bench.benchrun import run_bench

pytestmark = [pytest.mark.integration, pytest.mark.zk, pytest.mark.slow]


def test_failover_benchmark_fails_over_and_leads_every_partition(tmp_path: Path) -> None:
    result = run_bench(tmp_path, "failover.py", "--rf", "3", "--scale", "0.01", "--no-audit")
    run = result["rf3"]["audit_off"]
    assert result["partitions"] == 20 * 50
    assert run["epochs"][1] == run["epochs"][0] + 1
    assert run["new_controller"] != run["old_controller"]
    # RF 3 on 5 brokers: the partitions the dead controller led were re-elected and every replica
    # it held left the ISR, so state znodes were written, and every one is led by a live broker.
    assert run["state_znodes_written"] > 0
    assert run["floor"]["seconds"] > 0 and run["failover_seconds"] > 0
    assert next(iter(run["controller_cpu_seconds_by_thread"])) == "process"  # its own account
    # The CPU from the election on is part of the CPU from the kill on, for the same processes.
    after, total = run["cpu_seconds_after_election_by_process"], run["cpu_seconds_by_process"]
    assert after.keys() == total.keys() and all(0 <= after[n] <= total[n] for n in total)
    assert "audit_on" not in result["rf3"]
    # The new controller logged every step of its failover, in order, the last one its "Ready" line.
    timeline = run["timeline_after_election_seconds"]
    assert list(timeline) == list(TIMELINE)
    assert list(timeline.values()) == sorted(timeline.values())
    assert timeline[TIMELINE[-1]] == run["ready_log_after_election_seconds"]
    # The 10,000-partition RF 2 case, at the same scale (100 partitions), on the default settings.
    small = result["rf2_10k"]
    assert small["partitions"] == 2 * 50 and result["broker_config"] == "defaults"
    assert small["audit_off"]["new_controller"] != small["audit_off"]["old_controller"]
    assert small["audit_off"]["state_znodes_written"] > 0
    # A Kafka client (librdkafka) listed a survivor's metadata from before the kill until every
    # partition was led by a live broker and the dead one gone, which it cannot see before the new
    # controller is elected: the survivors learn of the death from it.
    seen = small["audit_off"]
    assert seen["client_listings_after_kill"] >= 1 and seen["client_listing_seconds"] > 0
    assert seen["client_after_election_seconds"] > seen["client_not_yet_after_election_seconds"]
    assert seen["client_after_election_seconds"] > 0
    assert seen["client_all_led_seconds"] > seen["detection_seconds"]
    assert "client_all_led_seconds" not in run  # not at the 100,000-partition layout's cases


def test_failover_benchmark_on_a_sasl_ssl_cluster_beside_plaintext(tmp_path: Path) -> None:
    result = run_bench(
        tmp_path, "failover.py", "--rf", "3", "--scale", "0.01", "--no-audit", "--no-10k",
        "--security", "plaintext", "sasl_ssl",
    )  # fmt: skip
    plain, secured = result["rf3"], result["secured"]["sasl_ssl"]["rf3"]
    assert plain["audit_off"]["listeners"] == ["PLAINTEXT"]
    assert secured["audit_off"]["listeners"] == ["SASL_SSL"]  # the brokers really were secured
    assert secured["audit_off"]["new_controller"] != secured["audit_off"]["old_controller"]
    assert secured["audit_off"]["state_znodes_written"] > 0
    assert secured["failover_to_plaintext"] == round(
        secured["audit_off"]["failover_seconds"] / plain["audit_off"]["failover_seconds"], 2
    )


def test_controlled_shutdown_benchmark_leaves_the_broker_leading_nothing(tmp_path: Path) -> None:
    result = run_bench(tmp_path, "controlled_shutdown.py", "--scale", "0.01", "--reps", "2")
    for case in ("audit_off", "audit_on"):
        run = result[case]
        assert run["exit_code"] == 0
        assert run["led_by_broker"] > 0 and run["led_at_exit"] == 0
        assert run["shut_down_broker"] != run["controller"]
        assert next(iter(run["controller_cpu_seconds_by_thread"])) == "process"  # its own account
        assert sum(n.startswith("broker_") for n in run["other_cpu_seconds_by_process"]) == 3
        assert len(run["seconds_all"]) == 2 and run["seconds"] in run["seconds_all"]
    assert result["audit_on"]["floor"]["seconds"] > 0
    # Twice the layout: the broker leads twice as many partitions (10,000 at full scale).
    assert result["topics"] == 250 and result["leads_10k"]["topics"] == 500
    for case in ("audit_off", "audit_on"):
        kafka_run, twice = result[case], result["leads_10k"][case]
        assert twice["led_by_broker"] == 2 * kafka_run["led_by_broker"] and twice["led_at_exit"] == 0
    assert set(result["goal_checks"]) == {"kafka_layout", "leads_10k"}
    assert result["meets_goal"] == all(result["goal_checks"].values())


@pytest.mark.clients
def test_kafka_clients_benchmark_reads_every_partition_three_ways(tmp_path: Path) -> None:
    """kafka-python, kcat and the internal protocol each read every partition back (the benchmark
    asserts the counts itself), and both load levels got answers."""
    result = run_bench(tmp_path, "kafka_clients.py", "--partitions", "300", "--reps", "1", "--seconds", "0.5")
    assert result["partitions"] == 300
    for key in ("kafka_python_describe_topics_s", "kcat_metadata_s", "internal_protocol_metadata_s"):
        assert result[key] > 0
    assert [s["clients"] for s in result["small"]] == [1, 16]
    assert all(s["requests"] > 0 for s in result["small"])


@pytest.mark.parametrize("zk_servers", [1, 3])
def test_crash_detection_benchmark_closes_the_session_only_when_supervised(
    tmp_path: Path, zk_servers: int
) -> None:
    result = run_bench(
        tmp_path,
        "crash_detection.py",
        *("--scale", "0.01", "--reps", "1", "--session-timeout-ms", "6000", "--zk-servers", str(zk_servers)),
    )
    assert result["partitions"] == 2 * 50 and result["zookeeper_servers"] == zk_servers
    for mode, closed in (("supervised", True), ("unsupervised", False)):
        (run,) = result["runs"][mode]
        assert run["session_closed"] is closed
        assert run["new_controller"] != run["old_controller"]
        assert run["epochs"][1] == run["epochs"][0] + 1
        assert run["all_led_seconds"] >= run["elected_seconds"] > 0
        # a Kafka client (librdkafka) saw every partition led by a live broker, after the kill
        assert run["client_all_led_seconds"] >= run["client_listing_seconds"] > 0
        assert run["client_listings_after_kill"] >= 1
    assert result["unsupervised"]["client_all_led_seconds"] > result["supervised"]["client_all_led_seconds"]


def test_kafka_admin_apis_benchmark_answers_every_partition(tmp_path: Path) -> None:
    result = run_bench(tmp_path, "kafka_admin_apis.py", "--partitions", "200", "--reps", "1")
    (run,) = result["runs"]
    assert run["partitions"] == 200 and run["response_bytes"] > run["request_bytes"]


def test_kafka_metadata_benchmark_matches_kio_byte_for_byte(tmp_path: Path) -> None:
    """The benchmark asserts itself that kio's encoding of the v11 answer equals the project's."""
    result = run_bench(tmp_path, "kafka_metadata.py", "--partitions", "500", "--reps", "1")
    v11 = next(r for r in result["runs"] if r["version"] == 11)
    assert v11["partitions"] == 500 and v11["kio_response_bytes"] == v11["response_bytes"] - 5


def test_idle_cpu_benchmark_measures_every_broker_on_the_default_settings(tmp_path: Path) -> None:
    result = run_bench(tmp_path, "idle_cpu.py", "--scale", "0.01", "--seconds", "1")
    assert result["partitions"] == 2 * 50 and result["rf"] == 2 and result["broker_config"] == {}
    brokers = {k: v for k, v in result["cores_by_process"].items() if k.startswith("broker_")}
    assert len(brokers) == result["brokers"] == 5
    assert all(v >= 0 for v in brokers.values()) and result["broker_cores_max"] == max(brokers.values())
