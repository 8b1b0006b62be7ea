"""``kafka-controller describe``: the cluster at a glance, read from ZooKeeper in batched reads.

Controller and epoch, registered brokers with their leader and replica counts, then every
partition's leader, leader epoch, ISR and flags. The summary line carries what operators look at
first (Cruise Control's ``kafka_cluster_state``, CMAK's columns): offline, under-replicated,
under-min-ISR, not on the preferred leader, the preferred-leader share and the leader skew.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kafka_controller.admin.describe import read_cluster_view
from kafka_controller.cli import common, connections
from kafka_controller.domain.errors import InvalidArgumentError

if TYPE_CHECKING:
    from kafka_controller.admin.describe import ClusterView

PROG = "kafka-controller describe"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "describe",
        help=summary,
        description="Controller, epoch, brokers and every partition's leader, ISR and flags "
        "(offline, under-replicated, under-min-isr, not-preferred-leader, reassigning).",
    )
    common.add_zookeeper_option(p)
    p.add_argument("--topic", action="append", metavar="T", help="only these topics (repeatable)")
    p.add_argument("--problems-only", action="store_true", help="list only partitions that carry a flag")
    common.add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    with connections.open_store(args) as store:
        if args.topic:
            missing = sorted(set(args.topic) - store.get_all_topics())
            if missing:
                raise InvalidArgumentError(f"topic {missing[0]!r} does not exist")
        view = read_cluster_view(store, args.topic)
    if args.json:
        doc = view.to_json()
        if args.problems_only:
            doc["partitions"] = [p for p in doc["partitions"] if p["flags"]]
        common.print_json(doc)
    else:
        for line in render_cluster_view(view, problems_only=args.problems_only):
            common.say(line)
    return 0


def render_cluster_view(view: ClusterView, *, problems_only: bool = False) -> list[str]:
    """Readable lines: controller, brokers table, summary, partitions table."""
    lines: list[str] = []
    if view.controller_id is None:
        lines.append(f"Controller: none (epoch {_v(view.controller_epoch)})")
    else:
        lines.append(
            f"Controller: broker {view.controller_id} (epoch {view.controller_epoch}, "
            f"epoch zkVersion {view.controller_epoch_zk_version})"
        )
    lines.append(f"Brokers: {len(view.brokers)} registered")
    rows = [
        [
            str(b.id),
            ",".join(b.endpoints),
            b.rack or "-",
            str(b.epoch),
            str(b.leaders),
            str(b.replicas),
            str(b.preferred),
        ]
        for b in view.brokers
    ]
    lines += [
        "  " + r
        for r in common.format_table(
            rows, ["ID", "ENDPOINTS", "RACK", "EPOCH", "LEADERS", "REPLICAS", "PREFERRED"]
        )
    ]
    s = view.summary
    lines.append(
        f"Partitions: {s['partitions']} in {s['topics']} topics (offline {s['offline']}, "
        f"under-replicated {s['under_replicated']}, under-min-isr {s['under_min_isr']}, "
        f"led by a non-preferred replica {s['not_preferred_leader']}, "
        f"PreferredReplicaImbalanceCount {s['preferred_replica_imbalance']} (Kafka's count: offline "
        f"included, topics being deleted not), reassigning {s['reassigning']}; "
        f"preferred-leader share {s['preferred_leader_share']:.0%}, leader skew {s['leader_skew']})"
    )
    parts = [p for p in view.partitions if p.flags or not problems_only]
    if parts:
        prow = [
            [
                p.topic,
                str(p.partition),
                "none" if p.leader < 0 else str(p.leader),
                str(p.leader_epoch),
                _ids(p.isr),
                _ids(p.replicas),
                ",".join(p.flags) or "-",
            ]
            for p in parts
        ]
        lines += [
            "  " + r
            for r in common.format_table(
                prow, ["TOPIC", "PARTITION", "LEADER", "EPOCH", "ISR", "REPLICAS", "FLAGS"]
            )
        ]
    deleting = [t.name for t in view.topics if t.marked_for_deletion]
    if deleting:
        lines.append(f"Marked for deletion: {', '.join(deleting)}")
    return lines


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids)) or "-"


def _v(value: object) -> str:
    return "none" if value is None else str(value)
