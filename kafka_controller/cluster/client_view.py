"""What a Kafka client sees of the cluster, checked against ZooKeeper: the demo's proof that the
brokers are members of Kafka's ecosystem and not only of this project's.

kafka-python's ``KafkaAdminClient`` (a maintained client nobody here wrote) bootstraps from one
broker's listener and reads every topic's partitions with Metadata v11, as a user's tooling would;
each partition's leader, replicas and ISR are then compared with ``/brokers/topics/<t>/partitions/
<p>/state`` and the topic's assignment in ZooKeeper.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_controller.domain.errors import MetadataStoreError
from kafka_controller.domain.values import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from kafka_controller.ports import MetadataStore

CLIENT_ID = "kafka-controller-ops/demo"


@dataclass
class ClientView:
    """One look: what the client read, and every partition where it differs from ZooKeeper."""

    client: str
    bootstrap: str
    partitions: dict[str, int]
    leaders: dict[int, int]  #: broker id -> partitions it leads, as the client read it
    mismatches: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "bootstrap": self.bootstrap,
            "partitions": self.partitions,
            "leaders": self.leaders,
            "mismatches": self.mismatches,
        }


def kafka_client_view(bootstrap: str, topics: Sequence[str], store: MetadataStore) -> ClientView:
    """Read ``topics`` through kafka-python from ``bootstrap`` and compare with ZooKeeper."""
    import kafka  # a dependency of the operations package
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id=CLIENT_ID, request_timeout_ms=30_000)
    try:
        described = admin.describe_topics(list(topics))
    finally:
        admin.close()
    seen: dict[TopicPartition, dict[str, Any]] = {}
    for t in described:
        for p in t["partitions"]:
            seen[TopicPartition(t["name"], p["partition_index"])] = p
    assignment: dict[TopicPartition, ReplicaAssignment] = {}
    for read in store.get_replica_assignment_and_topic_ids(set(topics)).values():
        if isinstance(read, MetadataStoreError):
            raise read
        assignment.update(read.assignment)
    states = store.get_partition_states(list(assignment))
    view = ClientView(
        client=f"kafka-python {kafka.__version__}",
        bootstrap=bootstrap,
        partitions={t: sum(1 for tp in seen if tp.topic == t) for t in topics},
        leaders={},
    )
    for tp, ra in sorted(assignment.items()):
        got = seen.get(tp)
        state = states.get(tp)
        if got is None:
            view.mismatches.append(f"{tp.topic}-{tp.partition}: not in the client's metadata")
            continue
        view.leaders[got["leader_id"]] = view.leaders.get(got["leader_id"], 0) + 1
        if not isinstance(state, LeaderIsrAndControllerEpoch):
            view.mismatches.append(f"{tp.topic}-{tp.partition}: no state in ZooKeeper ({state})")
            continue
        lai = state.leader_and_isr
        expected = (lai.leader, sorted(lai.isr), list(ra.replicas))
        actual = (got["leader_id"], sorted(got["isr_nodes"]), list(got["replica_nodes"]))
        if actual != expected:
            view.mismatches.append(f"{tp.topic}-{tp.partition}: client {actual}, ZooKeeper {expected}")
    return view
