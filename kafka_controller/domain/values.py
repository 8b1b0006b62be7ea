"""Plain values of the controller's world (docs/controller-behaviour.md §5.1).

Frozen, hashable and slotted: the controller holds hundreds of thousands of them, and they are
used as dict keys and compared structurally in tests, exactly as Kafka's case classes are.

The values built by the million in a failover (``TopicPartition``, ``PartitionAndReplica``,
``LeaderAndIsr``, ``LeaderIsrAndControllerEpoch`` and the request partition states in
``domain.requests``) are ``typing.NamedTuple``: immutable, slotted, hashed and compared by value
like a frozen dataclass (being tuples, they also unpack and equal a plain tuple of the same
values), and 2-5x cheaper to build, since a frozen dataclass's ``__init__`` assigns every field
through ``object.__setattr__``. Their ``build_*`` functions are the positional constructors for
hot paths: ``hotpath.new_tuple`` over the fields in declaration order, the object ``cls(...)`` builds.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from kafka_controller.hotpath import new_tuple, new_tuples

NO_LEADER = -1
NO_EPOCH = -1
LEADER_DURING_DELETE = -2
EPOCH_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0
INITIAL_CONTROLLER_EPOCH = 0
INITIAL_CONTROLLER_EPOCH_ZK_VERSION = 0
UNKNOWN_BROKER_EPOCH = -1
MATCH_ANY_VERSION = -1
UNKNOWN_VERSION = -2


class TopicPartition(NamedTuple):
    """A partition of a topic. A NamedTuple: cheap to hash and to build in bulk."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def topic_partitions(topics: Iterable[str], partitions: Iterable[int]) -> Iterator[TopicPartition]:
    """``map(TopicPartition, topics, partitions)``, lazily: decoders build 100,000 at a time."""
    return new_tuples(TopicPartition, zip(topics, partitions, strict=True))


class PartitionAndReplica(NamedTuple):
    """One replica: a partition hosted on broker ``replica``."""

    topic_partition: TopicPartition
    replica: int

    @property
    def topic(self) -> str:
        return self.topic_partition.topic

    @property
    def partition(self) -> int:
        return self.topic_partition.partition

    def __str__(self) -> str:
        return f"[Topic={self.topic},Partition={self.partition},Replica={self.replica}]"


class LeaderAndIsr(NamedTuple):
    """Leader, leader epoch, ISR, and the znode version expected by the next conditional write.

    ``zk_version`` is the *expected* data version of the state znode: ``new_leader_and_isr`` keeps
    it, because the value it returns is about to be written conditionally on it.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    zk_version: int

    @staticmethod
    def initial(leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        """Kafka's two-argument constructor: leader epoch 0 and zk version 0."""
        return LeaderAndIsr(leader, INITIAL_LEADER_EPOCH, tuple(isr), INITIAL_ZK_VERSION)

    @staticmethod
    def during_delete(isr: Iterable[int]) -> LeaderAndIsr:
        """What UpdateMetadata carries for a topic queued for deletion (leader -2, epoch 0)."""
        return LeaderAndIsr(LEADER_DURING_DELETE, INITIAL_LEADER_EPOCH, tuple(isr), INITIAL_ZK_VERSION)

    def new_leader_and_isr(self, leader: int, isr: Iterable[int]) -> LeaderAndIsr:
        return build_leader_and_isr(leader, self.leader_epoch + 1, tuple(isr), self.zk_version)

    def new_leader(self, leader: int) -> LeaderAndIsr:
        return build_leader_and_isr(leader, self.leader_epoch + 1, self.isr, self.zk_version)

    def new_epoch_and_zk_version(self) -> LeaderAndIsr:
        return build_leader_and_isr(self.leader, self.leader_epoch + 1, self.isr, self.zk_version)

    def with_zk_version(self, zk_version: int) -> LeaderAndIsr:
        return build_leader_and_isr(self.leader, self.leader_epoch, self.isr, zk_version)

    def equals_ignore_zk(self, other: LeaderAndIsr) -> bool:
        return (
            self.leader == other.leader and self.leader_epoch == other.leader_epoch and self.isr == other.isr
        )

    def __str__(self) -> str:
        isr = ",".join(map(str, self.isr))
        return f"(Leader:{self.leader},ISR:{isr},LeaderEpoch:{self.leader_epoch},ZkVersion:{self.zk_version})"


class LeaderIsrAndControllerEpoch(NamedTuple):
    """A partition's state znode: the LeaderAndIsr and the epoch of the controller that wrote it."""

    leader_and_isr: LeaderAndIsr
    controller_epoch: int

    def __str__(self) -> str:
        return f"{self.leader_and_isr},ControllerEpoch:{self.controller_epoch}"


def build_leader_and_isr(
    leader: int, leader_epoch: int, isr: tuple[int, ...], zk_version: int
) -> LeaderAndIsr:
    """``LeaderAndIsr(leader, leader_epoch, isr, zk_version)``, for hot paths."""
    return new_tuple(LeaderAndIsr, (leader, leader_epoch, isr, zk_version))


def build_leader_isr_and_controller_epoch(
    leader_and_isr: LeaderAndIsr, controller_epoch: int
) -> LeaderIsrAndControllerEpoch:
    """``LeaderIsrAndControllerEpoch(leader_and_isr, controller_epoch)``, for hot paths."""
    return new_tuple(LeaderIsrAndControllerEpoch, (leader_and_isr, controller_epoch))


def seq_diff(a: Sequence[int], b: Iterable[int]) -> tuple[int, ...]:
    """Scala's ``a.diff(b)``: keep ``a``'s order, removing one occurrence per element of ``b``."""
    remove: dict[int, int] = {}
    for x in b:
        remove[x] = remove.get(x, 0) + 1
    out: list[int] = []
    for x in a:
        n = remove.get(x, 0)
        if n:
            remove[x] = n - 1
        else:
            out.append(x)
    return tuple(out)


def _distinct(xs: Iterable[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(xs))


@dataclass(frozen=True, slots=True)
class ReplicaAssignment:
    """A partition's full replica set (RS) with the replicas being added (AR) and removed (RR)."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...] = field(default=())
    removing_replicas: tuple[int, ...] = field(default=())

    @staticmethod
    def of(
        replicas: Iterable[int], adding: Iterable[int] = (), removing: Iterable[int] = ()
    ) -> ReplicaAssignment:
        return ReplicaAssignment(tuple(replicas), tuple(adding), tuple(removing))

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return seq_diff(self.replicas, self.adding_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return seq_diff(self.replicas, self.removing_replicas)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas) or bool(self.removing_replicas)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """Target replicas first, in the requested order, then the origin replicas being removed."""
        origin = self.origin_replicas
        full = _distinct((*target, *origin))
        return ReplicaAssignment(full, seq_diff(full, origin), seq_diff(full, target))

    def remove_replica(self, replica: int) -> ReplicaAssignment:
        return ReplicaAssignment(
            tuple(r for r in self.replicas if r != replica),
            tuple(r for r in self.adding_replicas if r != replica),
            tuple(r for r in self.removing_replicas if r != replica),
        )

    def __str__(self) -> str:
        return (
            f"ReplicaAssignment(replicas={','.join(map(str, self.replicas))}, "
            f"addingReplicas={','.join(map(str, self.adding_replicas))}, "
            f"removingReplicas={','.join(map(str, self.removing_replicas))})"
        )


EMPTY_ASSIGNMENT = ReplicaAssignment(())


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One listener of a broker: ``LISTENER://host:port``."""

    host: str
    port: int
    listener_name: str = "PLAINTEXT"
    security_protocol: str = "PLAINTEXT"

    def connection_string(self) -> str:
        """Kafka's ``EndPoint.connectionString``: an IPv6 host in brackets."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Broker:
    """A registered broker as the controller caches it (``/brokers/ids/<id>``)."""

    id: int
    endpoints: tuple[EndPoint, ...] = ()
    rack: str | None = None
    features: tuple[tuple[str, int, int], ...] = ()

    def endpoint(self, listener_name: str = "PLAINTEXT") -> EndPoint | None:
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return self.endpoints[0] if self.endpoints else None
