"""Real broker processes on a real ZooKeeper: ``kafka-controller broker`` as an operator runs it.

One scenario on three processes, every check read from ZooKeeper (or from a broker's own
DescribeReplicas): a controller is elected, a new topic gets leaders, SIGTERM on the broker that
leads the most makes it move its leadership away and exit 0 within the controlled-shutdown budget,
a restarted broker rejoins every ISR, SIGKILL on a leader makes the controller elect new leaders
once its session lapses, and the killed broker, restarted, rejoins the ISR with its high watermark
advancing. Deadlines are generous (the machine is shared); nothing waits by sleeping.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_controller.broker.admin_client import AdminClient
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.ports import MetadataStore
from tests.broker.helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.zk]

MAX_RETRIES, BACKOFF_MS, SESSION_MS = 3, 500, 3000
SETTINGS = [
    f"zookeeper.session.timeout.ms={SESSION_MS}",
    f"controlled.shutdown.max.retries={MAX_RETRIES}",
    f"controlled.shutdown.retry.backoff.ms={BACKOFF_MS}",
    "controller.socket.timeout.ms=10000",
    "replica.lag.time.max.ms=4000",
    "auto.leader.rebalance.enable=false",
    "sim.fetch.interval.ms=100",
]
#: What a SIGTERM may take: every attempt's request time and back-off, plus process teardown.
SHUTDOWN_BUDGET_S = MAX_RETRIES * (10 + BACKOFF_MS / 1000) + 15
TOPIC = "orders"
#: Broker 1 prefers 3 partitions, broker 2 prefers 2, broker 3 prefers 1: broker 1 leads the most.
ASSIGNMENT = {0: (1, 2, 3), 1: (1, 3, 2), 2: (1, 2, 3), 3: (2, 3, 1), 4: (2, 1, 3), 5: (3, 1, 2)}
TPS = [TopicPartition(TOPIC, p) for p in ASSIGNMENT]
DEADLINE_S = 60.0


class Brokers:
    """Broker processes on one connect string, with their logs kept for failure reports."""

    def __init__(self, connect: str, log_dir: Path) -> None:
        self.connect = connect
        self.log_dir = log_dir
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.starts = 0

    def start(self, broker_id: int, *extra: str) -> subprocess.Popen[bytes]:
        self.starts += 1
        log = open(self.log_dir / f"broker-{broker_id}-{self.starts}.log", "wb")  # noqa: SIM115
        args = [
            sys.executable,
            "-m",
            "kafka_controller.cli.main",
            "broker",
            "--broker-id",
            str(broker_id),
            "--zookeeper",
            self.connect,
        ]
        for setting in (*SETTINGS, *extra):
            args += ["--config", setting]
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        self.procs[broker_id] = proc
        return proc

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in sorted(self.log_dir.glob("*.log")))

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(SHUTDOWN_BUDGET_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def store(zk_connect: str) -> Iterator[MetadataStore]:
    from kafka_controller.zk.kazoo_backend import KazooMetadataStore

    s = KazooMetadataStore(zk_connect)
    yield s
    s.close()


@pytest.fixture
def brokers(zk_connect: str, tmp_path: Path) -> Iterator[Brokers]:
    b = Brokers(zk_connect, tmp_path)
    yield b
    b.stop_all()


def states(store: MetadataStore) -> dict[int, tuple[int, tuple[int, ...]]]:
    out = {}
    for tp, s in store.get_partition_states(TPS).items():
        if s is not None and not isinstance(s, Exception):
            out[tp.partition] = (s.leader_and_isr.leader, s.leader_and_isr.isr)
    return out


def led_by(store: MetadataStore, broker_id: int) -> list[int]:
    return [p for p, (leader, _) in states(store).items() if leader == broker_id]


def full_isrs(store: MetadataStore, members: set[int]) -> bool:
    current = states(store)
    return len(current) == len(TPS) and all(set(isr) == members for _, isr in current.values())


def test_bounce_cycle_of_three_broker_processes(store: MetadataStore, brokers: Brokers) -> None:
    try:
        _scenario(store, brokers)
    except BaseException:
        print(brokers.logs())
        raise


def _scenario(store: MetadataStore, brokers: Brokers) -> None:
    for b in (1, 2, 3):
        brokers.start(b)
    wait_until(
        lambda: store.get_controller_id() is not None and store.get_sorted_broker_list() == [1, 2, 3],
        "a controller and brokers 1-3 registered",
        DEADLINE_S,
    )
    first_epoch = store.get_controller_epoch()
    assert first_epoch is not None and first_epoch[0] == 1  # the first controller of an empty tree

    store.create_topic(TOPIC, {p: ReplicaAssignment.of(r) for p, r in ASSIGNMENT.items()})
    wait_until(lambda: full_isrs(store, {1, 2, 3}), "leaders and full ISRs for the new topic", DEADLINE_S)
    assert {p: leader for p, (leader, _) in states(store).items()} == {p: r[0] for p, r in ASSIGNMENT.items()}

    # SIGTERM: controlled shutdown of the broker that leads the most.
    heavy = max((1, 2, 3), key=lambda b: len(led_by(store, b)))
    assert heavy == 1 and len(led_by(store, 1)) == 3
    started = time.monotonic()
    brokers.procs[heavy].send_signal(signal.SIGTERM)
    assert brokers.procs[heavy].wait(SHUTDOWN_BUDGET_S) == 0
    assert time.monotonic() - started < SHUTDOWN_BUDGET_S
    assert led_by(store, heavy) == [], "the stopped broker still leads partitions"
    assert heavy not in store.get_sorted_broker_list()
    assert all(heavy not in isr for _, isr in states(store).values())

    brokers.start(heavy)  # a bounce: back in every ISR
    wait_until(lambda: full_isrs(store, {1, 2, 3}), f"broker {heavy} back in every ISR", DEADLINE_S)

    # SIGKILL a leader: its session lapses and the controller moves its partitions.
    victim = 2
    victim_led = led_by(store, victim)
    assert victim_led
    brokers.procs[victim].kill()
    brokers.procs[victim].wait()
    # (After a controller failover the replica state machine writes leader -1 before the partition
    # state machine elects, as Kafka's does: wait for live leaders, not just for "not the victim".)
    wait_until(
        lambda: all(leader in (1, 3) and victim not in isr for leader, isr in states(store).values()),
        f"new leaders for broker {victim}'s partitions",
        DEADLINE_S,
    )

    brokers.start(victim)
    wait_until(lambda: full_isrs(store, {1, 2, 3}), f"broker {victim} back in every ISR", DEADLINE_S)
    with AdminClient(store) as admin:

        def high_watermarks() -> dict[int, int]:
            return {r.partition: r.high_watermark for r in admin.describe_replicas(victim).replicas}

        before = high_watermarks()
        assert set(before) == set(ASSIGNMENT)
        wait_until(
            lambda: all(hw > before[p] for p, hw in high_watermarks().items()),
            "the restarted broker's high watermarks advancing",
            DEADLINE_S,
        )
        elected = admin.elect_leaders("preferred", TPS)  # every leader back on its preferred replica
    assert {r.error for r in elected.results.values()} <= {"NONE", "ELECTION_NOT_NEEDED"}
    moved = {tp.partition: r.leader for tp, r in elected.results.items() if r.error == "NONE"}
    assert set(victim_led) - {p for p in ASSIGNMENT if ASSIGNMENT[p][0] != victim} <= set(moved)
    assert moved == {p: ASSIGNMENT[p][0] for p in moved}
    assert {p: leader for p, (leader, _) in states(store).items()} == {p: r[0] for p, r in ASSIGNMENT.items()}


def test_bad_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for setting, needle in (
        ("no.such.key=1", "unknown broker config 'no.such.key'"),
        ("controlled.shutdown.max.retries=-3", "controlled.shutdown.max.retries"),
    ):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "kafka_controller.cli.main",
                "broker",
                "--broker-id",
                "1",
                "--zookeeper",
                "192.0.2.1:2181",
                "--config",
                setting,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2, result.stderr
        assert (
            len(lines) == 1 and needle in lines[0] and lines[0].startswith("kafka-controller broker: error:")
        )
