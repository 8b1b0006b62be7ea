"""Partition reassignment, KIP-455 (docs/controller-behaviour.md §8.8, its leader-epoch bumps included).

A reassignment is persisted in the topic znode as RS (all replicas), AR (adding) and RR
(removing) and then driven in phases, each re-entered from scratch when something changes (the
target joins the ISR, a broker comes back, the controller fails over):

* U — record the new RS/AR/RR in the store and the context; stop replicas a previous
  reassignment added that this one drops.
* A — not complete yet (TRS not all in the ISR): bump the leader epoch so that every replica
  learns the new RS (A1), and start the adding replicas (A2).
* B — complete: AR online (B1), RS := TRS (B2), move the leader if needed (B3), stop and delete
  RR (B4/B5), persist RS = TRS (B6), drop the request (B7), tell every broker (B8).

Requests arrive through ``/admin/reassign_partitions`` (not validated, as in Kafka) or the
AlterPartitionReassignments API (validated); the API wins over a pending ZooKeeper request.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from kafka_controller.controller.events import (
    API_ERROR_NONE,
    AlterReassignmentsCallback,
    ApiError,
    ListReassignmentsCallback,
)
from kafka_controller.controller.reassignment_phases import ReassignmentPhases
from kafka_controller.controller.services import ControllerServices, log
from kafka_controller.domain.errors import (
    ControllerMovedError,
)
from kafka_controller.domain.requests import Errors
from kafka_controller.domain.values import (
    ReplicaAssignment,
    TopicPartition,
)

_UNKNOWN_PARTITION = ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")


class Reassignments:
    """ZkPartitionReassignment, ApiPartitionReassignment, PartitionReassignmentIsrChange,
    ListPartitionReassignments. The phases themselves are ``ReassignmentPhases``'."""

    def __init__(self, services: ControllerServices, phases: ReassignmentPhases) -> None:
        self._s = services
        self._phases = phases

    # ------------------------------------------------------------------ entry points
    def process_zk_partition_reassignment(self) -> set[TopicPartition]:
        """Trigger what ``/admin/reassign_partitions`` asks for; returns the partitions started."""
        if not self._s.is_active or not self._s.store.watch_partition_reassignment(
            self._s.watches.on_reassign_partitions
        ):
            return set()
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in self._phases.read_zk_reassignment().items():
            built = self.maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)
            else:
                to_reassign[tp] = built
        results.update(self.maybe_trigger_partition_reassignment(to_reassign))
        failed = {tp for tp, e in results.items() if not e.is_success}
        if failed:
            self._phases.maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in failed)
        return {tp for tp, e in results.items() if e.is_success}

    def process_api_partition_reassignment(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        callback: AlterReassignmentsCallback,
    ) -> None:
        if not self._s.is_active:
            callback(ApiError(Errors.NOT_CONTROLLER))
            return
        results: dict[TopicPartition, ApiError] = {}
        to_reassign: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in reassignments.items():
            error = self.validate_replicas(tp, target) if target is not None else None
            if error is not None:
                results[tp] = error
                continue
            built = self.maybe_build_reassignment(tp, target)
            if built is None:
                results[tp] = ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)
            else:
                to_reassign[tp] = built
        # The latest request wins: an API request overrides a pending ZooKeeper one.
        self._phases.maybe_remove_from_zk_reassignment(lambda tp, _replicas: tp in to_reassign)
        results.update(self.maybe_trigger_partition_reassignment(to_reassign))
        callback(results)

    def process_partition_reassignment_isr_change(self, tp: TopicPartition) -> None:
        if self._s.is_active:
            self._phases.maybe_complete_reassignments([tp])

    def process_list_partition_reassignments(
        self, partitions: Collection[TopicPartition] | None, callback: ListReassignmentsCallback
    ) -> None:
        if not self._s.is_active:
            callback(ApiError(Errors.NOT_CONTROLLER))
            return
        ctx = self._s.controller_context
        wanted = list(ctx.partitions_being_reassigned) if partitions is None else partitions
        results: dict[TopicPartition, ReplicaAssignment] = {}
        for tp in wanted:
            assignment = ctx.partition_full_replica_assignment(tp)
            if assignment.is_being_reassigned:
                results[tp] = assignment
        callback(results)

    # ------------------------------------------------------------------ building and validating
    def validate_replicas(self, tp: TopicPartition, replicas: Sequence[int]) -> ApiError | None:
        if not replicas:
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
            )
        if len(set(replicas)) != len(replicas):
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Duplicate replica ids in partition reassignment replica list: {list(replicas)}",
            )
        if any(r < 0 for r in replicas):
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {list(replicas)}"
            )
        ctx = self._s.controller_context
        adding = ctx.partition_full_replica_assignment(tp).reassign_to(replicas).adding_replicas
        live = ctx.live_broker_ids
        if not set(adding) <= live:
            return ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment has brokers that are not alive. Replica list: {list(adding)}, "
                f"live broker list: {sorted(live)}",
            )
        return None

    def maybe_build_reassignment(
        self, tp: TopicPartition, target: Sequence[int] | None
    ) -> ReplicaAssignment | None:
        """The new full assignment; None cancels an ongoing reassignment (back to the origin)."""
        current = self._s.controller_context.partition_full_replica_assignment(tp)
        if current.is_being_reassigned:
            return current.reassign_to(current.origin_replicas if target is None else target)
        return None if target is None else current.reassign_to(target)

    def maybe_trigger_partition_reassignment(
        self, reassignments: Mapping[TopicPartition, ReplicaAssignment]
    ) -> dict[TopicPartition, ApiError]:
        """Start (or cancel) every reassignment of the request together: the phases run batched
        across partitions (``on_partition_reassignments``), and each partition gets its own result.
        A batched call that fails as a whole (the store unreachable, say) fails every partition of
        the request with that error, where Kafka's loop would fail them one after the other."""
        ctx = self._s.controller_context
        results: dict[TopicPartition, ApiError] = {}
        valid: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, reassignment in reassignments.items():
            if self._s.topic_deletion_manager.is_topic_queued_up_for_deletion(tp.topic) or not (
                ctx.partition_replica_assignment(tp)
            ):
                results[tp] = _UNKNOWN_PARTITION
            else:
                valid[tp] = reassignment
        try:
            failed = self._phases.on_partition_reassignments(valid)
        except ControllerMovedError:
            log.error("Error completing reassignment of %d partitions: the controller moved", len(valid))
            raise
        except Exception as e:
            log.exception("Error completing reassignment of %d partitions", len(valid))
            failed = dict.fromkeys(valid, e)
        for tp in valid:
            error = failed.get(tp)
            if error is None:
                results[tp] = API_ERROR_NONE
            else:
                log.error("Error completing reassignment of partition %s: %s", tp, error)
                results[tp] = ApiError(Errors.UNKNOWN_SERVER_ERROR, str(error) or None)
        return results

    def initialize_partition_reassignments(self) -> None:
        """Failover: requests made through ZooKeeper meanwhile, then API reassignments in flight."""
        resumed = self.process_zk_partition_reassignment()
        self._phases.maybe_resume_reassignments(lambda tp, _a: tp not in resumed)
