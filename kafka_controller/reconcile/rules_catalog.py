"""The finding kinds: name, severity, which input each needs, and what it means. No Spark here, so
the pandas baseline, the CLI and the tests share it with ``rules.py``."""

from __future__ import annotations

CRITICAL, ERROR, WARNING, INFO = "critical", "error", "warning", "info"
#: Most severe first.
SEVERITIES = (CRITICAL, ERROR, WARNING, INFO)
SEVERITY_RANK = {CRITICAL: 4, ERROR: 3, WARNING: 2, INFO: 1}

#: kind -> (severity, input it needs: zk | brokers | controller | audit, meaning)
CATALOG: dict[str, tuple[str, str, str]] = {
    "offline_partition": (CRITICAL, "zk", "no leader recorded (-1) or no state znode"),
    "leader_on_dead_broker": (CRITICAL, "zk", "leader is not registered in /brokers/ids"),
    "leader_not_in_isr": (ERROR, "zk", "a live leader missing from its own ISR"),
    "isr_not_subset_of_replicas": (ERROR, "zk", "the ISR names brokers that are not replicas"),
    "under_replicated": (WARNING, "zk", "ISR smaller than the replication factor"),
    "under_min_isr": (ERROR, "zk", "ISR smaller than min.insync.replicas"),
    "not_on_preferred_leader": (INFO, "zk", "leader is not the preferred (first) replica"),
    "leader_skew": (WARNING, "zk", "broker above leader.imbalance.per.broker.percentage"),
    "reassignment_stuck": (WARNING, "zk", "reassignment running longer than the threshold"),
    "broker_view_mismatch": (ERROR, "brokers", "a broker's own view (leader, epoch, role) != ZooKeeper"),
    "controller_view_mismatch": (ERROR, "controller", "the controller's context != ZooKeeper"),
    "audit_state_mismatch": (WARNING, "audit", "the last audited leadership != ZooKeeper"),
    "illegal_transition": (ERROR, "audit", "an audited transition the state machines reject"),
    "leader_epoch_regression": (ERROR, "audit", "an audited leader epoch went down"),
    "hw_regression": (
        CRITICAL,
        "brokers",
        "a high watermark above the leader's log end: committed data lost",
    ),
}
RULE_SEVERITY = {kind: v[0] for kind, v in CATALOG.items()}
RULE_KINDS = tuple(CATALOG)
