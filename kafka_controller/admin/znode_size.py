"""How big a topic znode (``/brokers/topics/<t>``) will be, checked before anything is written.

ZooKeeper refuses a request packet larger than its ``jute.maxbuffer`` (0xfffff = 1,048,575 bytes
by default) by dropping the connection, which the client sees as ConnectionLoss, not as "too big";
a Java client (Kafka's own brokers) likewise drops a reply larger than its own ``jute.maxbuffer``.
A topic's whole assignment lives in that one znode, so the partition count, the replica lists and
an in-flight reassignment's adding/removing lists all count against it. Every path that writes a
topic znode (``topics create`` over ZooKeeper, CreateTopics, CreatePartitions, reassignments) asks
here first and refuses at once with one line naming the limit: no placement of two billion
partitions, no write that ZooKeeper would drop.

The sizes are those of the project's encoding (``zk.codecs.encode_topic``: compact JSON, version 3,
a 22-character topic id). From counts alone (``topic_znode_bound``) the size is an upper bound that
assumes every broker id is as long as the largest one; from a concrete assignment
(``assignment_znode_size``, ``check_reassignment``) it is exact. Both cost O(1) or O(replicas),
never an encoding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.zk.admin_codecs import encode_entity_config, encode_reassignment

#: ZooKeeper's default ``jute.maxbuffer`` (0xfffff), for servers and clients alike.
DEFAULT_JUTE_MAXBUFFER = 0xFFFFF
#: What travels in the same packet as the znode's data: the request or reply header, the path, the
#: stat, the ACLs and, on creation, the multi's other op (measured against ZooKeeper 3.9: a topic
#: znode of 1,048,358 bytes was created, one of 1,048,370 dropped the connection). Config data
#: written in the same multi is counted on top (``extra``).
HEADROOM = 4096

#: ``{"version":3,"partitions":{`` ... ``},"topic_id":"<22>","adding_replicas":{},"removing_replicas":{}}``
_FIXED = len('{"version":3,"partitions":{}') + len(',"topic_id":""') + 22 + len(',"adding_replicas":{}')
_FIXED += len(',"removing_replicas":{}}')


class ZnodeTooLargeError(InvalidArgumentError):
    """A topic znode that ZooKeeper would refuse; the message names the size and the limit."""


def data_limit(jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER) -> int:
    """The most bytes of znode data a write may carry under ``jute_maxbuffer``."""
    return max(0, jute_maxbuffer - HEADROOM)


def _digits(n: int) -> int:
    return len(str(n))


def digits_total(start: int, stop: int) -> int:
    """``sum(len(str(i)) for i in range(start, stop))`` for ``0 <= start``, in O(number of digits)."""
    if stop <= start:
        return 0
    total, low, width = 0, 0, 1
    high = 10
    while low < stop:
        a, b = max(start, low), min(stop, high)
        if a < b:
            total += (b - a) * width
        low, high, width = high, high * 10, width + 1
    return total


def topic_znode_bound(
    n_partitions: int, replication_factor: int, max_broker_id: int, *, first_partition: int = 0
) -> int:
    """An upper bound of the topic znode's bytes for partitions ``first_partition`` .. ``n_partitions-1``
    (so ``first_partition`` > 0 counts the partitions a CreatePartitions adds), each of
    ``replication_factor`` replicas whose ids are at most ``max_broker_id``."""
    n = max(0, n_partitions - first_partition)
    if n == 0:
        return _FIXED
    replicas = n * max(0, replication_factor) * (_digits(max(0, max_broker_id)) + 1)
    # "p":[r,r] and a comma between partitions: digits(p) + 5 + each replica's digits and comma, - 1
    return _FIXED + digits_total(first_partition, n_partitions) + 5 * n + replicas - 1


def assignment_znode_size(
    assignment: Mapping[int, Sequence[int]],
    adding: Mapping[int, Sequence[int]] | None = None,
    removing: Mapping[int, Sequence[int]] | None = None,
) -> int:
    """The exact bytes of the topic znode holding ``assignment`` (and a reassignment's lists)."""

    def part(m: Mapping[int, Sequence[int]]) -> int:
        size = 0
        for p, rs in m.items():
            size += _digits(p) + 5 + sum(_digits(b) for b in rs) + len(rs)
        return size - (1 if m else 0) - sum(1 for rs in m.values() if not rs)

    return _FIXED + part(assignment) + part(adding or {}) + part(removing or {})


def check_topic_znode(
    topic: str,
    size: int,
    *,
    extra: int = 0,
    jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER,
    what: str = "",
    fits: int | None = None,
) -> None:
    """Refuse a topic znode of ``size`` bytes (plus ``extra`` written in the same request) that
    cannot fit under ``jute_maxbuffer``; ``what`` says what made it big, ``fits`` how many
    partitions would have fitted."""
    limit = data_limit(jute_maxbuffer)
    if size + extra <= limit:
        return
    because = f" ({what})" if what else ""
    hint = f"; at most {fits:,} such partitions fit" if fits is not None else ""
    raise ZnodeTooLargeError(
        f"topic {topic!r}{because} needs a znode of about {size + extra:,} bytes, over ZooKeeper's "
        f"jute.maxbuffer of {jute_maxbuffer:,} bytes (at most {limit:,} bytes of data){hint}"
    )


def max_partitions(
    replication_factor: int,
    max_broker_id: int,
    *,
    extra: int = 0,
    jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER,
) -> int:
    """The most partitions of ``replication_factor`` replicas a topic znode can hold (binary search
    over ``topic_znode_bound``, about 40 steps)."""
    limit = data_limit(jute_maxbuffer) - extra
    lo, hi = 0, max(1, limit)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if topic_znode_bound(mid, replication_factor, max_broker_id) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_partition_count(
    topic: str,
    n_partitions: int,
    replication_factor: int,
    broker_ids: Iterable[int],
    *,
    extra: int = 0,
    jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER,
) -> None:
    """Before placing ``n_partitions`` x ``replication_factor`` replicas over ``broker_ids``: refuse a
    count whose topic znode cannot fit, in O(1), so an absurd count fails at once."""
    if n_partitions <= 0 or replication_factor <= 0:
        return  # the caller's own checks name these
    max_id = max(broker_ids, default=0)
    plural = "" if replication_factor == 1 else "s"
    size = topic_znode_bound(n_partitions, replication_factor, max_id)
    if size + extra <= data_limit(jute_maxbuffer):
        return
    check_topic_znode(
        topic,
        size,
        extra=extra,
        jute_maxbuffer=jute_maxbuffer,
        what=f"{n_partitions:,} partitions of {replication_factor} replica{plural}",
        fits=max_partitions(replication_factor, max_id, extra=extra, jute_maxbuffer=jute_maxbuffer),
    )


def check_reassignment(
    topic: str,
    current: Mapping[int, ReplicaAssignment],
    targets: Mapping[int, Sequence[int] | None],
    *,
    jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER,
) -> None:
    """The topic znode while ``targets`` move (``None`` cancels): each moving partition holds its
    target and origin replicas together plus the adding and removing lists, as the controller
    writes them (``ReplicaAssignment.reassign_to``); the other partitions keep what they hold."""
    replicas: dict[int, Sequence[int]] = {}
    adding: dict[int, Sequence[int]] = {}
    removing: dict[int, Sequence[int]] = {}
    moving = 0
    for p, ra in current.items():
        target = targets.get(p)
        if target is not None:
            ra = ra.reassign_to(target)
            moving += 1
        elif p in targets:  # a cancellation goes back to the origin replicas
            ra = ReplicaAssignment.of(ra.origin_replicas)
        replicas[p] = ra.replicas
        if ra.adding_replicas:
            adding[p] = ra.adding_replicas
        if ra.removing_replicas:
            removing[p] = ra.removing_replicas
    check_topic_znode(
        topic,
        assignment_znode_size(replicas, adding, removing),
        jute_maxbuffer=jute_maxbuffer,
        what=f"{len(current):,} partitions, {moving:,} of them moving",
    )


def check_reassignment_plan(
    current: Mapping[TopicPartition, ReplicaAssignment],
    plan: Mapping[TopicPartition, Sequence[int] | None],
    *,
    legacy_znode: bool = False,
    jute_maxbuffer: int = DEFAULT_JUTE_MAXBUFFER,
) -> None:
    """A reassignment JSON's moves, topic by topic (``current`` holds every partition of each
    topic moved); with ``legacy_znode`` also the ``/admin/reassign_partitions`` znode the plan is
    written to whole."""
    by_topic: dict[str, dict[int, ReplicaAssignment]] = {}
    for tp, ra in current.items():
        by_topic.setdefault(tp.topic, {})[tp.partition] = ra
    targets: dict[str, dict[int, Sequence[int] | None]] = {}
    for tp, target in plan.items():
        targets.setdefault(tp.topic, {})[tp.partition] = target
    for topic, moves in sorted(targets.items()):
        check_reassignment(topic, by_topic.get(topic, {}), moves, jute_maxbuffer=jute_maxbuffer)
    if legacy_znode:
        size = len(encode_reassignment({tp: r for tp, r in plan.items() if r is not None}))
        limit = data_limit(jute_maxbuffer)
        if size > limit:
            raise ZnodeTooLargeError(
                f"/admin/reassign_partitions for {len(plan):,} partitions needs about {size:,} bytes, over "
                f"ZooKeeper's jute.maxbuffer of {jute_maxbuffer:,} bytes (at most {limit:,} bytes of data); "
                "start the moves through the admin API instead (without --legacy-znode)"
            )


def config_size(config: Mapping[str, str]) -> int:
    """The bytes of the ``/config/topics/<t>`` znode written in the same multi as the topic."""
    return len(encode_entity_config(dict(config)))
