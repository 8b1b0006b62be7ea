"""Leader elections as ``kafka-leader-election.sh`` asks for them: the target partitions from the
command line or Kafka's JSON file, and the per-partition results grouped the way Kafka prints them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_controller.admin.reassignment import load_json
from kafka_controller.domain.errors import InvalidArgumentError, brief
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import TopicPartition

ELECTION_TYPES = ("preferred", "unclean")


def parse_election_json(text: str | bytes, what: str = "election JSON") -> tuple[TopicPartition, ...]:
    """``{"partitions": [{"topic": "t", "partition": 0}, ...]}`` -> partitions, in file order.

    Other fields of a partition entry are ignored, as Kafka's ``LeaderElectionCommand`` ignores them,
    so a reassignment plan (``replicas``, ``log_dirs``) serves as election JSON too. Unknown top-level
    fields are still refused: ``{"partition": [...]}`` is a typo, not a plan to ignore."""
    doc = load_json(text, what)
    if type(doc) is not dict:
        raise InvalidArgumentError(f"{what} must be a JSON object")
    unknown = sorted(set(doc) - {"partitions", "version"})
    if unknown:
        raise InvalidArgumentError(f"{what} has unknown field {brief(unknown[0])}")
    entries = doc.get("partitions")
    if type(entries) is not list:
        raise InvalidArgumentError(f"{what}: 'partitions' must be a list")
    if not entries:
        raise InvalidArgumentError(f"{what}: 'partitions' is empty")
    out: list[TopicPartition] = []
    for i, entry in enumerate(entries):
        where = f"{what}: partitions[{i}]"
        if type(entry) is not dict:
            raise InvalidArgumentError(f"{where} must be a JSON object")
        topic, partition = entry.get("topic"), entry.get("partition")
        if type(topic) is not str or not topic:
            raise InvalidArgumentError(f"{where}: 'topic' must be a non-empty string")
        if type(partition) is not int or partition < 0:
            raise InvalidArgumentError(f"{where}: 'partition' must be an integer >= 0")
        tp = TopicPartition(topic, partition)
        if tp in out:
            raise InvalidArgumentError(f"{what}: {tp} is listed twice")
        out.append(tp)
    return tuple(out)


def election_targets(
    *,
    topic: str | None,
    partition: int | None,
    all_topic_partitions: bool,
    json_partitions: tuple[TopicPartition, ...] | None,
) -> tuple[TopicPartition, ...] | None:
    """Exactly one way of naming partitions; None means every partition (``--all-topic-partitions``)."""
    given = sum(
        [topic is not None or partition is not None, all_topic_partitions, json_partitions is not None]
    )
    if given != 1:
        raise InvalidArgumentError(
            "name the partitions one way: --topic with --partition, --all-topic-partitions, "
            "or --path-to-json-file"
        )
    if all_topic_partitions:
        return None
    if json_partitions is not None:
        return json_partitions
    if topic is None or partition is None:
        raise InvalidArgumentError("--topic and --partition must be given together")
    if partition < 0:
        raise InvalidArgumentError(f"--partition must be >= 0, got {partition}")
    return (TopicPartition(topic, partition),)


@dataclass(frozen=True, slots=True)
class ElectionOutcome:
    """Kafka's grouping: elected (with the new leader), not needed, failed (error name + message)."""

    succeeded: dict[TopicPartition, int] = field(default_factory=dict)
    not_needed: list[TopicPartition] = field(default_factory=list)
    failed: dict[TopicPartition, tuple[str, str | None]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


def group_election_results(results: Mapping[TopicPartition, tuple[str, int, str | None]]) -> ElectionOutcome:
    """``{tp: (error name, leader, message)}`` -> an ``ElectionOutcome`` (sorted by partition)."""
    outcome = ElectionOutcome()
    for tp in sorted(results):
        error, leader, message = results[tp]
        if error == Errors.NONE:
            outcome.succeeded[tp] = leader
        elif error == Errors.ELECTION_NOT_NEEDED:
            outcome.not_needed.append(tp)
        else:
            outcome.failed[tp] = (str(error), message)
    return outcome


def render_election(outcome: ElectionOutcome, election_type: str) -> list[str]:
    """Kafka's ``LeaderElectionCommand`` lines, one per group, then one per failed partition."""
    kind = election_type.upper()
    lines: list[str] = []
    if outcome.succeeded:
        parts = ", ".join(f"{tp} (leader {leader})" for tp, leader in outcome.succeeded.items())
        lines.append(f"Successfully completed leader election ({kind}) for partitions {parts}")
    if outcome.not_needed:
        lines.append(
            f"Valid replica already elected for partitions {', '.join(map(str, outcome.not_needed))}"
        )
    for tp, (error, message) in outcome.failed.items():
        detail = f": {message}" if message else ""
        lines.append(f"Error completing leader election ({kind}) for partition {tp}: {error}{detail}")
    if not lines:
        lines.append("No partitions to elect leaders for")
    return lines
