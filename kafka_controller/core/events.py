"""What the request batch makes of a broker's response: one notice, which the controller turns into
Kafka's ``*ResponseReceived`` event (``controller.events``) on its queue.

The request batch's response callbacks run on channel threads, so they do nothing but build one of
these and hand it to the controller's event sink (docs/rules.md, callbacks only enqueue); the
controller handles them on its event thread. Core cannot import the controller's event classes,
hence a notice of its own under its own name. ``controller_state`` names the Kafka
``ControllerState`` the event is timed under (``ControllerState.kafka_name`` in
``controller.controller_state``), and ``preempt`` does nothing, as in Kafka (nobody waits on these
events).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

from kafka_controller.domain.requests import (
    ControlResponse,
    Errors,
    LeaderAndIsrResponse,
    StopReplicaResponse,
    UpdateMetadataResponse,
)
from kafka_controller.domain.values import TopicPartition
from kafka_controller.ports import ResponseCallback

_R = TypeVar("_R", LeaderAndIsrResponse, UpdateMetadataResponse, StopReplicaResponse)


@dataclass(frozen=True, slots=True)
class LeaderAndIsrResponseNotice:
    """A broker answered a LeaderAndIsr request (the controller then checks for offline dirs)."""

    controller_state: ClassVar[str] = "LeaderAndIsrResponseReceived"

    response: LeaderAndIsrResponse
    broker_id: int

    def preempt(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class UpdateMetadataResponseNotice:
    """A broker answered an UpdateMetadata request (the controller logs a stale-broker-epoch error)."""

    controller_state: ClassVar[str] = "UpdateMetadataResponseReceived"

    response: UpdateMetadataResponse
    broker_id: int

    def preempt(self) -> None:
        return None


@dataclass(frozen=True, slots=True)
class TopicDeletionStopReplicaResponseNotice:
    """A broker answered StopReplica(delete=true) for partitions of topics whose deletion started.

    ``partition_errors`` holds only those partitions (never empty); ``error`` is the top-level error
    of the response (Kafka's ``replicaId``, ``requestError``, ``partitionErrors``).
    """

    controller_state: ClassVar[str] = "TopicDeletion"

    broker_id: int
    error: Errors
    partition_errors: dict[TopicPartition, Errors] = field(default_factory=dict)

    def preempt(self) -> None:
        return None


ResponseEvent = (
    LeaderAndIsrResponseNotice | UpdateMetadataResponseNotice | TopicDeletionStopReplicaResponseNotice
)


# ---------------------------------------------------------------------- response callbacks
# Built by the request batch, run on channel threads: each builds one event and hands it to the
# controller's event sink, touching no controller state (docs/rules.md, callbacks only enqueue).
EventSink = Callable[[object], None]


def leader_and_isr_callback(sink: EventSink, broker_id: int) -> ResponseCallback:
    def on_response(response: ControlResponse) -> None:
        sink(LeaderAndIsrResponseNotice(_expect(response, LeaderAndIsrResponse, broker_id), broker_id))

    return on_response


def update_metadata_callback(sink: EventSink, broker_id: int) -> ResponseCallback:
    def on_response(response: ControlResponse) -> None:
        sink(UpdateMetadataResponseNotice(_expect(response, UpdateMetadataResponse, broker_id), broker_id))

    return on_response


def stop_replica_callback(
    sink: EventSink, broker_id: int, deleting: frozenset[TopicPartition]
) -> ResponseCallback | None:
    """Report the ``deleting`` partitions (sent with delete=true, topic deletion started) it answers.

    Kafka decides "deletion started" when the response arrives, reading the context from the
    channel thread; the batch decides it at send time, so this callback reads no controller state.
    In the controller's flow the two agree: deletion is begun before its StopReplica(delete=true)
    is queued, and it is not completed until these responses have been handled. Nothing to report:
    no callback at all.
    """
    if not deleting:
        return None

    def on_response(response: ControlResponse) -> None:
        response = _expect(response, StopReplicaResponse, broker_id)
        if response.partition_errors:
            errors = {tp: e for tp, e in response.partition_errors.items() if tp in deleting}
        elif response.error is not Errors.NONE:
            # An error response without per-partition errors: every partition failed with it, as
            # in Kafka's getErrorResponse.
            errors = dict.fromkeys(deleting, response.error)
        else:
            errors = {}
        if errors:
            sink(TopicDeletionStopReplicaResponseNotice(broker_id, response.error, errors))

    return on_response


def _expect(response: ControlResponse, kind: type[_R], broker_id: int) -> _R:
    if not isinstance(response, kind):
        raise TypeError(f"expected a {kind.__name__} from broker {broker_id}, got {type(response).__name__}")
    return response
