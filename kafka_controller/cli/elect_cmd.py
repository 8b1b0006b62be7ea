"""``kafka-controller elect``: Kafka's ``kafka-leader-election.sh`` over the ElectLeaders admin API
(Kafka's protocol, so it works on any ZooKeeper-mode Kafka 2.4+ too).

``preferred`` moves leadership back to each partition's first replica when it is live and in the
ISR; ``unclean`` elects a live replica outside the ISR for partitions without a live leader (a
guarded manual recovery step: it may lose committed data). Results are printed per partition with
Kafka's error names; exit 0 when every partition was elected or needed no election, 1 otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kafka_controller.admin.election import (
    election_targets,
    group_election_results,
    parse_election_json,
    render_election,
)
from kafka_controller.cli import audit_options, common, connections

PROG = "kafka-controller elect"


def register(subparsers: Any, summary: str) -> None:
    p = subparsers.add_parser(
        "elect",
        help=summary,
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common.add_zookeeper_option(p, bootstrap=True)
    p.add_argument(
        "--election-type", required=True, choices=("preferred", "unclean"), help="kind of election"
    )
    p.add_argument("--topic", help="the topic of the one partition to elect (with --partition)")
    p.add_argument("--partition", type=int, help="the partition to elect (with --topic)")
    p.add_argument("--all-topic-partitions", action="store_true", help="every partition of every topic")
    p.add_argument(
        "--path-to-json-file",
        type=Path,
        metavar="FILE",
        help='partitions from Kafka\'s JSON: {"partitions":[{"topic":"t","partition":0}]}',
    )
    common.add_json_option(p)
    p.set_defaults(func=run)
    audit_options.add_audit_options(p, lambda a: f"{a.election_type}_leader_election")


def run(args: argparse.Namespace) -> int:
    common.check_timeout(args)
    json_partitions = (
        None
        if args.path_to_json_file is None
        else parse_election_json(common.read_text_file(args.path_to_json_file, "election JSON"))
    )
    targets = election_targets(
        topic=args.topic,
        partition=args.partition,
        all_topic_partitions=args.all_topic_partitions,
        json_partitions=json_partitions,
    )
    with connections.open_store(args) as store, connections.open_kafka_admin(args, store) as admin:
        scope = "every partition" if targets is None else f"{len(targets)} partition(s)"
        common.left_undone(
            f"the {args.election_type} election of {scope} may have been requested from the controller "
            "and may go on; check the leaders with `kafka-controller describe`"
        )
        response = admin.elect_leaders(args.election_type, targets, operation_id=common.operation_id(args))
    common.left_undone(f"nothing is left undone: the {args.election_type} election has been answered")
    outcome = group_election_results(
        {tp: (r.error, r.leader, r.message) for tp, r in response.results.items()}
    )
    if args.json:
        common.print_json(
            {
                "election_type": args.election_type,
                "results": [
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "error": r.error,
                        "leader": r.leader,
                        "message": r.message,
                    }
                    for tp, r in sorted(response.results.items())
                ],
            }
        )
    else:
        for line in render_election(outcome, args.election_type):
            common.say(line)
    if not outcome.ok:
        tp, (error, _message) = next(iter(outcome.failed.items()))
        raise common.CommandFailedError(
            f"election failed for {len(outcome.failed)} partition(s), e.g. {tp}: {error}"
        )
    return 0
