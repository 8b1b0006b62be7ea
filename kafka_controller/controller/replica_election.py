"""Preferred and unclean leader elections on request, and the periodic auto rebalance
(docs/controller-behaviour.md §8.11, §8.13; a preferred election never falls back, §2.2).

Requests come from ``/admin/preferred_replica_election`` (ZooKeeper-triggered: the znode is
deleted afterwards, whatever the outcome), from the ElectLeaders API (admin-triggered: results go
back per partition, and only there may an UNCLEAN election really be unclean), and from the
scheduler (auto-triggered: brokers whose preferred-leader imbalance is above
``leader.imbalance.per.broker.percentage``). Each is one batched partition-state-machine call.

The auto rebalance obeys the *effective* ``auto.leader.rebalance.enable``, which a dynamic broker
config may set (a deviation from Kafka 2.8, see ``dynamic_config``): while it is false each
scheduled check moves nothing and records what it held back; the schedule itself goes on.
"""

from __future__ import annotations

from collections.abc import Collection

from kafka_controller.controller.events import (
    ApiError,
    AutoPreferredReplicaLeaderElection,
    ElectionTrigger,
    ElectionType,
    ElectLeadersCallback,
    ReplicaLeaderElection,
)
from kafka_controller.controller.services import ControllerServices, log
from kafka_controller.core.election import preferred_replica_partition_leader_election
from kafka_controller.core.strategies import (
    OfflinePartitionLeaderElectionStrategy,
    PartitionLeaderElectionStrategy,
    PreferredReplicaPartitionLeaderElectionStrategy,
)
from kafka_controller.domain.config_keys import AUTO_LEADER_REBALANCE_ENABLE
from kafka_controller.domain.errors import ControllerMovedError, StateChangeFailedError, ZNodeDecodeError
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.states import PartitionState
from kafka_controller.domain.values import NO_LEADER, LeaderAndIsr, TopicPartition

#: Kafka starts auto rebalance this long after failover (``KafkaController.onControllerFailover``).
AUTO_REBALANCE_FIRST_DELAY_S = 5.0
_ADMIN = ElectionTrigger.ADMIN_CLIENT_TRIGGERED
_AUTO = AUTO_LEADER_REBALANCE_ENABLE


class ReplicaElections:
    """ReplicaLeaderElection, AutoPreferredReplicaLeaderElection, unclean enables."""

    def __init__(self, services: ControllerServices) -> None:
        self._s = services

    def process_replica_leader_election(
        self,
        partitions: Collection[TopicPartition] | None,
        election_type: ElectionType,
        trigger: ElectionTrigger,
        callback: ElectLeadersCallback,
    ) -> None:
        if not self._s.is_active:
            callback(dict.fromkeys(partitions or (), ApiError(Errors.NOT_CONTROLLER)))
            return
        ctx = self._s.controller_context
        requested: set[TopicPartition] = set()
        znode_exists = (
            trigger is ElectionTrigger.ZK_TRIGGERED
            and self._s.store.watch_preferred_replica_election(self._s.watches.on_preferred_replica_election)
        )
        if znode_exists:
            requested |= self._read_preferred_replica_election()
        requested |= set(partitions or ())
        if not requested:  # nothing asked (e.g. the watch re-armed on an absent znode): no election
            if znode_exists:
                # An empty or corrupt request: Kafka leaves it, blocking every later one; drop it.
                self.remove_partitions_from_preferred_replica_election((), False)
            callback({})
            return
        assignments = ctx.partition_assignments
        known = {tp for tp in requested if tp.partition in assignments.get(tp.topic, {})}
        unknown = requested - known
        for tp in sorted(unknown):
            log.info(
                "Skipping replica leader election (%s) for partition %s by %s since it doesn't exist.",
                election_type.value,
                tp,
                trigger.value,
            )
        queued = ctx.topics_to_be_deleted
        being_deleted = {tp for tp in known if tp.topic in queued}
        if being_deleted:
            log.warning(
                "Skipping replica leader election (%s) for partitions %s by %s since the topic is being "
                "deleted",
                election_type.value,
                sorted(being_deleted),
                trigger.value,
            )
        electable: list[TopicPartition] = []
        not_needed: list[TopicPartition] = []
        live = ctx.live_broker_ids
        for tp in sorted(known - being_deleted):
            info = ctx.partition_leadership_info(tp)
            leader = info.leader_and_isr.leader if info is not None else NO_LEADER
            if election_type is ElectionType.PREFERRED:
                needed = info is None or leader != ctx.partition_replica_assignment(tp)[0]
            else:
                needed = leader == NO_LEADER or leader not in live
            (electable if needed else not_needed).append(tp)

        results: dict[TopicPartition, int | ApiError] = {}
        failure = (
            Errors.PREFERRED_LEADER_NOT_AVAILABLE
            if election_type is ElectionType.PREFERRED
            else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
        )
        for tp, outcome in self.on_replica_election(electable, election_type, trigger).items():
            if isinstance(outcome, LeaderAndIsr):
                results[tp] = outcome.leader
            elif isinstance(outcome, StateChangeFailedError):
                results[tp] = ApiError(failure, str(outcome))
            elif isinstance(outcome, ControllerMovedError):
                results[tp] = ApiError(Errors.NOT_CONTROLLER, str(outcome))
            else:
                results[tp] = ApiError(Errors.UNKNOWN_SERVER_ERROR, str(outcome) or None)
        for tp in not_needed:
            results[tp] = ApiError(Errors.ELECTION_NOT_NEEDED)
        for tp in being_deleted:
            results[tp] = ApiError(Errors.INVALID_TOPIC_EXCEPTION, "The topic is being deleted")
        for tp in unknown:
            results[tp] = ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
        callback(results)

    def on_replica_election(
        self, partitions: Collection[TopicPartition], election_type: ElectionType, trigger: ElectionTrigger
    ) -> dict[TopicPartition, LeaderAndIsr | Exception]:
        log.info(
            "Starting replica leader election (%s) for partitions %s triggered by %s",
            election_type.value,
            sorted(partitions),
            trigger.value,
        )
        try:
            strategy: PartitionLeaderElectionStrategy = (
                PreferredReplicaPartitionLeaderElectionStrategy()
                if election_type is ElectionType.PREFERRED
                else OfflinePartitionLeaderElectionStrategy(allow_unclean=trigger is _ADMIN)
            )
            results = self._s.partition_state_machine.handle_state_changes(
                list(partitions), PartitionState.ONLINE_PARTITION, strategy
            )
            if trigger is not _ADMIN:
                for tp, outcome in results.items():
                    if isinstance(outcome, ControllerMovedError):
                        log.info(
                            "Error completing replica leader election (%s) for partition %s because "
                            "controller has moved to another broker.",
                            election_type.value,
                            tp,
                        )
                        raise outcome
                    if isinstance(outcome, Exception):
                        log.error(
                            "Error completing replica leader election (%s) for partition %s: %s",
                            election_type.value,
                            tp,
                            outcome,
                        )
            return results
        finally:
            if trigger is not _ADMIN:
                self.remove_partitions_from_preferred_replica_election(
                    partitions, trigger is ElectionTrigger.AUTO_TRIGGERED
                )

    def remove_partitions_from_preferred_replica_election(
        self, partitions: Collection[TopicPartition], is_triggered_by_auto_rebalance: bool
    ) -> None:
        ctx = self._s.controller_context
        for tp in partitions:
            info = ctx.partition_leadership_info(tp)
            replicas = ctx.partition_replica_assignment(tp)
            leader = info.leader_and_isr.leader if info is not None else NO_LEADER
            if replicas and leader == replicas[0]:
                log.info(
                    "Partition %s completed preferred replica leader election. New leader is %d", tp, leader
                )
            else:
                log.warning(
                    "Partition %s failed to complete preferred replica leader election to %s. Leader is "
                    "still %d",
                    tp,
                    replicas[0] if replicas else None,
                    leader,
                )
        if not is_triggered_by_auto_rebalance:
            self._s.store.delete_preferred_replica_election(ctx.epoch_zk_version)
            # Re-arm the creation watch, so that future requests are seen.
            self._s.enqueue(ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK_TRIGGERED))

    def fetch_pending_preferred_replica_elections(self) -> set[TopicPartition]:
        """Failover step 11: what ``/admin/preferred_replica_election`` still asks for, minus
        partitions already led by their preferred replica and those of deleted or queued topics."""
        ctx = self._s.controller_context
        pending: set[TopicPartition] = set()
        for tp in self._read_preferred_replica_election():
            replicas = ctx.partition_replica_assignment(tp)
            if not replicas or tp.topic in ctx.topics_to_be_deleted:
                continue
            info = ctx.partition_leadership_info(tp)
            if info is not None and info.leader_and_isr.leader == replicas[0]:
                continue
            pending.add(tp)
        log.info("Partitions undergoing preferred replica election: %s", sorted(pending))
        return pending

    def _read_preferred_replica_election(self) -> set[TopicPartition]:
        """The znode's partitions; a corrupt znode is logged and treated as empty (it is then
        deleted like any processed request)."""
        try:
            return self._s.store.get_preferred_replica_election()
        except ZNodeDecodeError as e:
            log.error("Ignoring an undecodable /admin/preferred_replica_election: %s", e)
            return set()

    # ------------------------------------------------------------------ auto rebalance
    def schedule_auto_leader_rebalance_task(self, delay_s: float) -> None:
        enqueue = self._s.enqueue
        self._s.kafka_scheduler.schedule(
            "auto-leader-rebalance-task", lambda: enqueue(AutoPreferredReplicaLeaderElection()), delay_s
        )
        self._s.auto_rebalance_epoch = self._s.controller_context.epoch

    def process_auto_preferred_replica_leader_election(self) -> None:
        if not self._s.is_active:
            return
        try:
            if self._s.config.auto_leader_rebalance_enable:
                log.info("Processing automatic preferred replica leader election")
                self.check_and_trigger_auto_leader_rebalance()
            else:
                self._skip_auto_leader_rebalance()
        finally:
            self.schedule_auto_leader_rebalance_task(
                float(self._s.config.leader_imbalance_check_interval_seconds)
            )

    def check_and_trigger_auto_leader_rebalance(self) -> None:
        """Per preferred broker: if more than the allowed share of its partitions are led by
        someone else, elect it back where it can lead (online and in the ISR)."""
        for _broker, candidates in sorted(self.auto_leader_rebalance_candidates().items()):
            self.on_replica_election(candidates, ElectionType.PREFERRED, ElectionTrigger.AUTO_TRIGGERED)

    def auto_leader_rebalance_candidates(self) -> dict[int, list[TopicPartition]]:
        """``{preferred broker: partitions to elect it for}``, for the brokers above the imbalance
        threshold (docs/controller-behaviour.md §8.11). Partitions without leadership count only in
        the denominator."""
        ctx = self._s.controller_context
        queued = ctx.topics_to_be_deleted
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp, assignment in ctx.iter_assignments():
            if tp.topic not in queued and assignment.replicas:
                by_preferred.setdefault(assignment.replicas[0], []).append(tp)
        threshold = self._s.config.leader_imbalance_per_broker_percentage / 100.0
        leadership = ctx.partitions_leadership_info
        out: dict[int, list[TopicPartition]] = {}
        for broker, tps in sorted(by_preferred.items()):
            not_preferred = [
                tp
                for tp in tps
                if (info := leadership.get(tp)) is not None and info.leader_and_isr.leader != broker
            ]
            ratio = len(not_preferred) / len(tps)
            log.debug("Leader imbalance ratio for broker %d is %f", broker, ratio)
            if ratio <= threshold:
                continue
            out[broker] = [
                tp
                for tp in not_preferred
                if not ctx.partitions_being_reassigned
                and tp.topic not in ctx.topics_to_be_deleted
                and tp.topic in ctx.all_topics
                and self.can_preferred_replica_be_leader(tp)
            ]
        return out

    def _skip_auto_leader_rebalance(self) -> None:
        """Paused by a dynamic ``auto.leader.rebalance.enable=false`` (see ``dynamic_config``):
        move nothing, but say what would have moved (log and audit)."""
        held = sum(len(tps) for tps in self.auto_leader_rebalance_candidates().values())
        detail = f"{held} partition(s) left off their preferred leader"
        log.info("Automatic preferred replica leader election is paused (%s=false): %s", _AUTO, detail)
        self._s.audit.record_controller_event("rebalance_paused", self._s.clock.time_ms(), 0.0, detail)

    def can_preferred_replica_be_leader(self, tp: TopicPartition) -> bool:
        ctx = self._s.controller_context
        assignment = ctx.partition_replica_assignment(tp)
        live = {r for r in assignment if ctx.is_replica_online(r, tp)}
        info = ctx.partition_leadership_info(tp)
        isr = info.leader_and_isr.isr if info is not None else ()
        return preferred_replica_partition_leader_election(assignment, isr, live) is not None

    # ------------------------------------------------------------------ unclean election enabled
    def process_unclean_leader_election_enable(self) -> None:
        """The broker default became true: rebuild with it and retry offline partitions."""
        if not self._s.is_active:
            return
        log.info("Unclean leader election has been enabled by default")
        self._s.partition_state_machine.trigger_online_partition_state_change()

    def process_topic_unclean_leader_election_enable(self, topic: str) -> None:
        if not self._s.is_active:
            return
        log.info("Unclean leader election has been enabled for topic %s", topic)
        self._s.partition_state_machine.trigger_online_partition_state_change(topic)
