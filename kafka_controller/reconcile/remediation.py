"""The remediation plan: what a reconciliation run proposes, in the format the recovery DAG accepts.

``remediation_plan.json``::

    {
      "version": 1,
      "preferred_election": [{"topic": "t", "partition": 0}, ...],
      "online_transition":  [{"topic": "t", "partition": 1, "expected_leader": 2}, ...],
      "unclean_candidates": [{"topic": "t", "partition": 2, "candidate": 3,
                              "live_replicas": [3], "unclean_enabled": false}, ...]
    }

* ``preferred_election``: led by a live broker other than its preferred replica, which is live and
  in the ISR, so a PREFERRED election (``kafka-controller elect --election-type preferred``) moves
  leadership back.
* ``online_transition``: offline (no leader, or the leader is not registered) with a live replica in
  the ISR (or no state znode yet and a live replica): a clean Offline/New -> Online transition would
  elect ``expected_leader`` (advisory: the controller decides).
* ``unclean_candidates``: offline with no live ISR replica but a live replica: only an UNCLEAN
  election brings it back, electing ``candidate`` and **losing committed data**; listed for a human
  to approve, never acted on automatically. ``unclean_enabled`` is the topic's
  ``unclean.leader.election.enable`` (when true the controller does it by itself).

Every entry has ``topic`` and ``partition``; the other keys are advisory and consumers ignore keys
they do not know. Lists are sorted by (topic, partition) and a partition appears in at most one
list. Topics queued for deletion never appear. ``load_plan`` validates a plan file for consumers.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kafka_controller.domain.errors import InvalidArgumentError

PLAN_VERSION = 1
PLAN_FILE = "remediation_plan.json"
PLAN_LISTS = ("preferred_election", "online_transition", "unclean_candidates")


def build_plan(
    preferred: Iterable[Mapping[str, Any]],
    online: Iterable[Mapping[str, Any]],
    unclean: Iterable[Mapping[str, Any]],
) -> dict[str, Any]:
    """Assemble and validate a plan from rows (extra row keys beyond the documented ones are dropped)."""

    def rows(items: Iterable[Mapping[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
        out = [{k: r[k] for k in ("topic", "partition", *keys) if k in r} for r in items]
        return sorted(out, key=lambda r: (r["topic"], r["partition"]))

    plan = {
        "version": PLAN_VERSION,
        "preferred_election": rows(preferred, ()),
        "online_transition": rows(online, ("expected_leader",)),
        "unclean_candidates": rows(unclean, ("candidate", "live_replicas", "unclean_enabled")),
    }
    validate_plan(plan)
    return plan


def validate_plan(plan: Any, where: str = "remediation plan") -> dict[str, Any]:
    """Check a plan's shape; raise ``InvalidArgumentError`` naming the first problem."""
    if not isinstance(plan, dict):
        raise InvalidArgumentError(f"{where}: expected a JSON object")
    if plan.get("version") != PLAN_VERSION:
        raise InvalidArgumentError(
            f"{where}: unsupported version {plan.get('version')!r} (expected {PLAN_VERSION})"
        )
    seen: dict[tuple[str, int], str] = {}
    for name in PLAN_LISTS:
        items = plan.get(name)
        if not isinstance(items, list):
            raise InvalidArgumentError(f"{where}: {name!r} must be a list")
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise InvalidArgumentError(f"{where}: {name}[{i}] must be an object")
            topic, partition = item.get("topic"), item.get("partition")
            if not isinstance(topic, str) or not topic:
                raise InvalidArgumentError(f"{where}: {name}[{i}].topic must be a non-empty string")
            if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
                raise InvalidArgumentError(f"{where}: {name}[{i}].partition must be a non-negative integer")
            other = seen.get((topic, partition))
            if other is not None:
                raise InvalidArgumentError(f"{where}: {topic}-{partition} is in both {other} and {name}")
            seen[(topic, partition)] = name
    return plan


def write_plan(plan: Mapping[str, Any], directory: str | os.PathLike[str]) -> Path:
    """Write ``remediation_plan.json`` into ``directory`` atomically (temp file + rename)."""
    validate_plan(dict(plan))
    path = Path(directory) / PLAN_FILE
    tmp = path.with_name(f".{PLAN_FILE}.tmp")
    tmp.write_text(json.dumps(plan, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def load_plan(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate a plan file (for the recovery DAG)."""
    p = Path(path)
    try:
        plan = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidArgumentError(f"remediation plan {p} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidArgumentError(f"remediation plan {p} is not readable JSON: {e}") from None
    return validate_plan(plan, f"remediation plan {p}")


def election_json(plan: Mapping[str, Any], kind: str = "preferred_election") -> dict[str, Any]:
    """One list as Kafka's ``--path-to-json-file`` election input: ``{"partitions":[{topic,partition}]}``."""
    if kind not in PLAN_LISTS:
        raise InvalidArgumentError(f"unknown plan list {kind!r}: use one of {PLAN_LISTS}")
    return {"partitions": [{"topic": r["topic"], "partition": r["partition"]} for r in plan[kind]]}
