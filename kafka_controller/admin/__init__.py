"""Validation and planning behind the admin CLI, kept apart from I/O so that bad input is refused
before anything is written and the rules are tested without a cluster.

* ``topics``: replica placement, ``--replica-assignment`` and ``--config`` checks;
* ``reassignment``: Kafka's reassignment JSON, ``--generate`` and ``--verify``;
* ``election``: Kafka's election JSON and result grouping;
* ``describe``: the cluster view (flags per partition, counts per broker) from batched reads.
"""

from kafka_controller.admin.describe import (
    BrokerView,
    ClusterView,
    PartitionView,
    TopicView,
    build_cluster_view,
    read_cluster_view,
)
from kafka_controller.admin.election import (
    ELECTION_TYPES,
    ElectionOutcome,
    election_targets,
    group_election_results,
    parse_election_json,
    render_election,
)
from kafka_controller.admin.reassignment import (
    PartitionVerification,
    encode_reassignment_json,
    generate_reassignment,
    parse_broker_list,
    parse_reassignment_json,
    parse_topics_to_move_json,
    validate_reassignment,
    verify_reassignment,
)
from kafka_controller.admin.topics import (
    TOPIC_CONFIG_KEYS,
    TopicCreationPlan,
    assign_replicas_to_brokers,
    parse_config_pairs,
    parse_replica_assignment,
    plan_topic_creation,
    validate_topic_config,
)

__all__ = [
    "ELECTION_TYPES",
    "TOPIC_CONFIG_KEYS",
    "BrokerView",
    "ClusterView",
    "ElectionOutcome",
    "PartitionVerification",
    "PartitionView",
    "TopicCreationPlan",
    "TopicView",
    "assign_replicas_to_brokers",
    "build_cluster_view",
    "election_targets",
    "encode_reassignment_json",
    "generate_reassignment",
    "group_election_results",
    "parse_broker_list",
    "parse_config_pairs",
    "parse_election_json",
    "parse_reassignment_json",
    "parse_replica_assignment",
    "parse_topics_to_move_json",
    "plan_topic_creation",
    "read_cluster_view",
    "render_election",
    "validate_reassignment",
    "validate_topic_config",
    "verify_reassignment",
]
