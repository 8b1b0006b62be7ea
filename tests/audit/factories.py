"""Plausible audit records for tests; every field can be overridden."""

from __future__ import annotations

from kafka_controller.domain.audit_records import (
    ControllerEventRecord,
    PartitionTransition,
    ReplicaTransition,
)


def partition_transition(seq: int, **overrides: object) -> PartitionTransition:
    """A plausible partition transition; every field can be overridden."""
    fields: dict[str, object] = {
        "topic": f"topic-{seq % 7}",
        "partition": seq % 5,
        "from_state": "OnlinePartition",
        "to_state": "OnlinePartition",
        "leader_before": seq % 3,
        "leader_after": (seq + 1) % 3,
        "isr_before": (0, 1, 2),
        "isr_after": ((seq + 1) % 3, (seq + 2) % 3),
        "leader_epoch_before": seq,
        "leader_epoch_after": seq + 1,
        "election_strategy": "OfflinePartitionLeaderElectionStrategy(false)",
        "controller_id": 1,
        "controller_epoch": 4,
        "event": "BrokerChange",
        "sequence": seq,
        "timestamp_ms": 1_700_000_000_000 + seq * 10,
    }
    fields.update(overrides)
    return PartitionTransition(**fields)  # type: ignore[arg-type]


def replica_transition(seq: int, **overrides: object) -> ReplicaTransition:
    fields: dict[str, object] = {
        "topic": f"topic-{seq % 7}",
        "partition": seq % 5,
        "replica": seq % 3,
        "from_state": "OnlineReplica",
        "to_state": "OfflineReplica",
        "leader_before": 1,
        "leader_after": 2,
        "isr_before": (1, 2),
        "isr_after": (2,),
        "leader_epoch_before": 3,
        "leader_epoch_after": 4,
        "controller_id": 1,
        "controller_epoch": 4,
        "event": "BrokerChange",
        "sequence": seq,
        "timestamp_ms": 1_700_000_000_000 + seq * 10,
    }
    fields.update(overrides)
    return ReplicaTransition(**fields)  # type: ignore[arg-type]


def controller_event(epoch: int, kind: str = "failover", **overrides: object) -> ControllerEventRecord:
    fields: dict[str, object] = {
        "kind": kind,
        "broker_id": epoch % 3,
        "controller_epoch": epoch,
        "started_ms": 1_700_000_000_000 + epoch * 1000,
        "duration_ms": 12.5,
        "detail": None,
    }
    fields.update(overrides)
    return ControllerEventRecord(**fields)  # type: ignore[arg-type]


BASE_MS = 1_700_000_000_000


def scenario(
    operation_ids: list[str], seed: int = 7, n_partition: int = 400, n_replica: int = 150
) -> tuple[list[PartitionTransition], list[ReplicaTransition], list[ControllerEventRecord]]:
    """A varied history over ~20 minutes: three brokers, some operations, unclean elections,
    invalid and failed transitions, deletions, and three controller failovers (one after a hard kill)."""
    import random

    rng = random.Random(seed)
    parts = []
    for seq in range(n_partition):
        outcome = rng.choices(["ok", "invalid", "failed"], weights=[8, 1, 1])[0]
        before = rng.choice([None, -1, 0, 1, 2])
        after = rng.choice([-1, 0, 1, 2, 2])
        parts.append(
            partition_transition(
                seq,
                topic=rng.choice(["orders", "payments", "<b>clicks&co</b>"]),
                partition=rng.randrange(6),
                to_state=rng.choice(["OnlinePartition"] * 5 + ["OfflinePartition", "NonExistentPartition"]),
                leader_before=before,
                leader_after=after,
                unclean=rng.random() < 0.1,
                outcome=outcome,
                error=None if outcome == "ok" else f"error {seq}",
                operation_id=rng.choice([None, None, *operation_ids]),
                timestamp_ms=BASE_MS + rng.randrange(20 * 60_000),
                controller_epoch=rng.choice([5, 6]),
            )
        )
    reps = [
        replica_transition(
            seq,
            outcome=(o := rng.choices(["ok", "invalid", "failed"], weights=[6, 1, 1])[0]),
            error=None if o == "ok" else f"replica error {seq}",
            operation_id=rng.choice([None, *operation_ids]),
            timestamp_ms=BASE_MS + rng.randrange(20 * 60_000),
        )
        for seq in range(n_replica)
    ]
    events = [
        controller_event(5, "elected", broker_id=1, started_ms=BASE_MS, duration_ms=1.0),
        controller_event(5, "failover", broker_id=1, started_ms=BASE_MS + 1, duration_ms=250.0),
        controller_event(5, "resigned", broker_id=1, started_ms=BASE_MS + 300_000, duration_ms=20.0),
        controller_event(6, "failover", broker_id=2, started_ms=BASE_MS + 300_500, duration_ms=400.0),
        # a drill killed epoch 7's controller (broker 2); broker 0 saw /controller go 6 s later
        controller_event(7, "lost", broker_id=2, started_ms=BASE_MS + 894_000, duration_ms=0.0),
        controller_event(
            8,
            "failover",
            broker_id=0,
            started_ms=BASE_MS + 900_000,
            duration_ms=125.5,
            previous_broker_id=2,
            lost_ms=BASE_MS + 899_990,
            offline_partitions=12,
            first_offline_ms=BASE_MS + 900_010,
            recovered_ms=BASE_MS + 900_120,
        ),
    ]
    return parts, reps, events


DRY_RUN_BROKER = 2_147_483_000


def dry_run_plan(
    operation_id: str,
) -> tuple[list[PartitionTransition], list[ReplicaTransition], list[ControllerEventRecord]]:
    """What a dry run records: its in-memory controller's failover and the transitions it planned,
    every row marked ``dry_run`` (as ``airflow.planner`` marks them)."""
    planned = {"controller_id": -1, "sequence": -1, "operation_id": operation_id, "event": "dry-run:failover"}
    parts = [
        partition_transition(10_000 + i, timestamp_ms=BASE_MS + 120_000 + i, dry_run=True, **planned)
        for i in range(7)
    ]
    reps = [
        replica_transition(20_000 + i, timestamp_ms=BASE_MS + 120_000 + i, dry_run=True, **planned)
        for i in range(5)
    ]
    events = [
        controller_event(
            9,
            "failover",
            broker_id=DRY_RUN_BROKER,
            started_ms=BASE_MS + 120_000,
            duration_ms=3.0,
            dry_run=True,
        )
    ]
    return parts, reps, events
