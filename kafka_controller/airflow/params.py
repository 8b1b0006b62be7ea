"""Run parameters: JSON-schema ``Param`` definitions for the DAGs' trigger forms, and the coercion
the operators apply to templated values, each mistake refused in one line naming the parameter.

The trigger form validates each parameter on its own (Airflow runs the schema before the run is
created); the rules that tie parameters together (unclean election needs named partitions and a
confirmation) are checked by the operators before they write anything.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import TopicPartition

if TYPE_CHECKING:
    from airflow.sdk import Param

_TP = re.compile(r"^(?P<topic>[A-Za-z0-9._-]+)-(?P<partition>\d+)$")
TP_PATTERN = r"^[A-Za-z0-9._-]+-[0-9]+$"


def as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise InvalidArgumentError(f"parameter {name!r} must be true or false, got {value!r}")


def as_int(name: str, value: Any, *, minimum: int | None = None) -> int:
    if isinstance(value, bool):
        raise InvalidArgumentError(f"parameter {name!r} must be an integer, got {value!r}")
    if isinstance(value, float) and value.is_integer():  # an operator default such as 300.0
        value = int(value)
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except ValueError:
        raise InvalidArgumentError(f"parameter {name!r} must be an integer, got {value!r}") from None
    if minimum is not None and number < minimum:
        raise InvalidArgumentError(f"parameter {name!r} must be at least {minimum}, got {number}")
    return number


def _items(value: Any) -> list[Any]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = orjson.loads(text)
            except orjson.JSONDecodeError:
                raise InvalidArgumentError(f"not a JSON list: {text[:60]!r}") from None
            return list(parsed) if isinstance(parsed, list) else [parsed]
        return [x.strip() for x in text.split(",") if x.strip()]
    if isinstance(value, Iterable) and not isinstance(value, dict):
        return list(value)
    return [value]


def as_int_list(name: str, value: Any) -> list[int]:
    """``[1, 2]``, ``"1,2"`` or ``"[1, 2]"``; duplicates refused."""
    try:
        out = [as_int(name, x, minimum=0) for x in _items(value)]
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"parameter {name!r}: {e}") from None
    if len(set(out)) != len(out):
        raise InvalidArgumentError(f"parameter {name!r} lists a broker twice: {out}")
    return out


def as_str_list(name: str, value: Any) -> list[str]:
    out = [str(x).strip() for x in _items(value)]
    if any(not x for x in out):
        raise InvalidArgumentError(f"parameter {name!r} has an empty entry")
    return list(dict.fromkeys(out))


def as_partitions(name: str, value: Any) -> list[TopicPartition]:
    """``"t-0,t-1"``, ``["t-0"]`` or ``[{"topic": "t", "partition": 0}]``; duplicates refused."""
    out: list[TopicPartition] = []
    for item in _items(value):
        if isinstance(item, dict):
            topic, partition = item.get("topic"), item.get("partition")
            if not isinstance(topic, str) or not topic or not isinstance(partition, int) or partition < 0:
                raise InvalidArgumentError(f"parameter {name!r}: bad partition entry {item!r}")
            tp = TopicPartition(topic, partition)
        else:
            m = _TP.match(str(item).strip())
            if m is None:
                raise InvalidArgumentError(
                    f"parameter {name!r}: {item!r} is not TOPIC-PARTITION (e.g. orders-3)"
                )
            tp = TopicPartition(m["topic"], int(m["partition"]))
        if tp in out:
            raise InvalidArgumentError(f"parameter {name!r} lists {tp} twice")
        out.append(tp)
    return out


def as_json(name: str, value: Any) -> Any:
    """A templated value that is JSON text (rendered without native objects) or already parsed."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        raise InvalidArgumentError(f"parameter {name!r} is not valid JSON") from None


def as_text(name: str, value: Any, *, required: bool = True) -> str | None:
    text = "" if value is None else str(value).strip()
    if not text:
        if required:
            raise InvalidArgumentError(f"parameter {name!r} must not be empty")
        return None
    return text


def refuse_unknown_conf(conf: object, known: Iterable[str], dag_id: str) -> None:
    """Refuse a run whose ``conf`` carries a key the DAG has no parameter for.

    Airflow merges extra ``conf`` keys into ``params`` without a word (a DAG's params cannot say
    ``additionalProperties: false``), so ``{"dryrun": false}`` would run the default dry run and
    report success. Every operator calls this first; the run then fails in one line."""
    keys = sorted(set(conf or {}) - set(known)) if isinstance(conf, dict) else []
    if not keys:
        return
    names = sorted(known)
    close = difflib.get_close_matches(keys[0], names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise InvalidArgumentError(
        f"unknown parameter {keys[0]!r}{hint} in the conf of a {dag_id} run; "
        f"its parameters are: {', '.join(names) or 'none'}"
    )


# -- trigger-form schemas (used by dags/) ------------------------------------------------------------


def common_params(*, dry_run_default: bool = True) -> dict[str, Param]:
    """``dry_run``, ``requester`` and ``reason``: on every mutating DAG."""
    from airflow.sdk import Param

    return {
        "dry_run": Param(
            dry_run_default,
            type="boolean",
            description="Plan only: run the controller logic on a copy of the metadata; change nothing.",
        ),
        "requester": Param(
            "", type=["string", "null"], maxLength=255, description="Who asks (default: the triggering user)."
        ),
        "reason": Param(
            "", type=["string", "null"], maxLength=10_000, description="Why (kept in the audit)."
        ),
    }


def broker_list_param(description: str) -> Param:
    from airflow.sdk import Param

    return Param(
        [], type="array", items={"type": "integer", "minimum": 0}, uniqueItems=True, description=description
    )


def partitions_param(description: str) -> Param:
    from airflow.sdk import Param

    return Param(
        [],
        type="array",
        items={"type": "string", "pattern": TP_PATTERN},
        uniqueItems=True,
        description=description,
    )
