"""Sending a ``ControllerBrokerRequestBatch``: Kafka's ``sendRequestsToBrokers`` and the
``sendLeaderAndIsrRequest`` / ``sendUpdateMetadataRequests`` / ``sendStopReplicaRequests`` it calls
(``ControllerChannelManager.scala``), as an object ``ControllerBrokerRequestBatch`` builds over the
queues it fills; see ``core.request_batch`` for what each request carries per version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from operator import attrgetter

from kafka_controller.core.context import ControllerContext
from kafka_controller.core.events import (
    leader_and_isr_callback,
    stop_replica_callback,
    update_metadata_callback,
)
from kafka_controller.domain.errors import IllegalControllerStateError
from kafka_controller.domain.requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafka_controller.domain.values import (
    NO_EPOCH,
    Broker,
    EndPoint,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from kafka_controller.ports import BrokerChannel

__all__ = ["ZERO_UUID", "RequestBatchSender", "summarize_requests"]

#: Kafka's ``Uuid.ZERO_UUID`` in its base64 spelling: "no topic id".
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"

_LEADER = attrgetter("leader")
_TOPIC = attrgetter("topic")

#: Per-partition memo of the last LeaderAndIsr state built by a one-entry call and its inputs.
LeaderAndIsrMemo = dict[
    TopicPartition,
    tuple[LeaderIsrAndControllerEpoch, ReplicaAssignment, bool, LeaderAndIsrPartitionState],
]

state_change_log = logging.getLogger("kafka_controller.state_change")

_DEBUG = logging.DEBUG
_INFO = logging.INFO


class RequestBatchSender:
    """The send half of a ``ControllerBrokerRequestBatch``: it drains the queues it is given (the
    batch's own dicts and set, which the batch fills and never replaces) into one request per
    broker and kind, and empties them as each kind is handed to the channel. A separate object so
    that what a send reads (the context's brokers and epochs, the channel, the versions) is its
    constructor's arguments, not attributes shared with the queueing code."""

    def __init__(
        self,
        controller_id: int,
        context: ControllerContext,
        channel: BrokerChannel,
        event_sink: Callable[[object], None],
        versions: tuple[int, int, int],
        listener: str | None,
        queues: tuple[
            dict[int, dict[TopicPartition, LeaderAndIsrPartitionState]],
            dict[int, dict[TopicPartition, StopReplicaPartitionState]],
            set[int],
            dict[TopicPartition, UpdateMetadataPartitionState],
            LeaderAndIsrMemo,
        ],
    ) -> None:
        """``versions``: LeaderAndIsr, UpdateMetadata and StopReplica request versions;
        ``queues``: the batch's LeaderAndIsr, StopReplica, UpdateMetadata broker and partition
        queues and its LeaderAndIsr memo (cleared with the LeaderAndIsr queue)."""
        self.controller_id = controller_id
        self._context = context
        self._channel = channel
        self._event_sink = event_sink
        self._lai_version, self._um_version, self._sr_version = versions
        self._listener = listener
        self._lai, self._sr, self._um_brokers, self._um_partitions, self._lai_memo = queues

    def send(self, controller_epoch: int) -> None:
        """LeaderAndIsr, then UpdateMetadata, then StopReplica, each only to live-or-shutting-down
        brokers; the UpdateMetadata broker set is resolved already (the batch's caller did)."""
        epochs = self._context.live_broker_id_and_epochs
        self._send_leader_and_isr_requests(controller_epoch, epochs)
        self._send_update_metadata_requests(controller_epoch, epochs)
        self._send_stop_replica_requests(controller_epoch, epochs)

    def _send_leader_and_isr_requests(self, controller_epoch: int, epochs: Mapping[int, int]) -> None:
        version = self._lai_version
        ctx = self._context
        topic_ids = ctx.topic_ids
        info_enabled = state_change_log.isEnabledFor(_INFO)
        debug_enabled = state_change_log.isEnabledFor(_DEBUG)
        nodes: dict[int, Broker | None] = {}
        sink = self._event_sink
        for broker_id, states in self._lai.items():
            broker_epoch = epochs.get(broker_id)
            if broker_epoch is None:
                continue
            values = tuple(states.values())
            leaders_of = list(map(_LEADER, values))  # C-speed passes: 60,000 states per broker
            leader_ids = set(leaders_of)
            if debug_enabled:
                for s in values:
                    kind = "become-leader" if s.leader == broker_id else "become-follower"
                    state_change_log.debug(
                        "Sending %s LeaderAndIsr request %s to broker %d for partition %s-%d",
                        kind,
                        s,
                        broker_id,
                        s.topic,
                        s.partition,
                    )
            if info_enabled:
                leaders = leaders_of.count(broker_id)
                state_change_log.info(
                    "Sending LeaderAndIsr request to broker %d with %d become-leader and %d "
                    "become-follower partitions",
                    broker_id,
                    leaders,
                    len(values) - leaders,
                )
            live_leaders: list[Broker] = []
            for leader_id in sorted(leader_ids):
                if leader_id not in nodes:
                    nodes[leader_id] = self._leader_node(leader_id)
                node = nodes[leader_id]
                if node is not None:
                    live_leaders.append(node)
            ids: dict[str, str]
            if version >= 5:
                ids = {t: topic_ids.get(t, ZERO_UUID) for t in set(map(_TOPIC, values))}
            elif version >= 2:  # topics are grouped on the wire, but the id field does not exist yet
                ids = dict.fromkeys(set(map(_TOPIC, values)), ZERO_UUID)
            else:
                ids = {}
            request = LeaderAndIsrRequest(
                version, self.controller_id, controller_epoch, broker_epoch, values, ids, tuple(live_leaders)
            )
            self._channel.send_request(broker_id, request, leader_and_isr_callback(sink, broker_id))
        self._lai.clear()
        self._lai_memo.clear()

    def _leader_node(self, broker_id: int) -> Broker | None:
        broker = self._context.live_or_shutting_down_broker(broker_id)
        if broker is None or self._listener is None:
            return broker
        endpoint = next((e for e in broker.endpoints if e.listener_name == self._listener), None)
        if endpoint is None:
            raise IllegalControllerStateError(
                f"broker {broker_id} has no endpoint for the inter-broker listener {self._listener}"
            )
        return Broker(broker.id, (endpoint,), broker.rack)

    def _send_update_metadata_requests(self, controller_epoch: int, epochs: Mapping[int, int]) -> None:
        if not self._um_brokers:
            self._um_partitions.clear()
            return
        if state_change_log.isEnabledFor(_INFO):
            state_change_log.info(
                "Sending UpdateMetadata request to brokers %s for %d partitions",
                sorted(self._um_brokers),
                len(self._um_partitions),
            )
        version = self._um_version
        ctx = self._context
        sink = self._event_sink
        states = tuple(self._um_partitions.values())
        live_brokers = tuple(ctx.live_or_shutting_down_brokers)
        if version == 0:  # version 0 only carries the PLAINTEXT endpoint
            live_brokers = tuple(_plaintext_only(b) for b in live_brokers)
        topic_ids: dict[str, str] = {}
        if version >= 7:
            known = ctx.topic_ids
            topic_ids = {t: known[t] for t in set(map(_TOPIC, states)) if t in known}
        for broker_id in sorted(self._um_brokers):
            broker_epoch = epochs.get(broker_id)
            if broker_epoch is None:
                continue
            request = UpdateMetadataRequest(
                version, self.controller_id, controller_epoch, broker_epoch, states, live_brokers, topic_ids
            )
            self._channel.send_request(broker_id, request, update_metadata_callback(sink, broker_id))
        self._um_brokers.clear()
        self._um_partitions.clear()

    def _send_stop_replica_requests(self, controller_epoch: int, epochs: Mapping[int, int]) -> None:
        version = self._sr_version
        started = self._context.topics_with_deletion_started
        sink = self._event_sink
        debug_enabled = state_change_log.isEnabledFor(_DEBUG)
        info_enabled = state_change_log.isEnabledFor(_INFO)
        for broker_id, states in self._sr.items():
            broker_epoch = epochs.get(broker_id)
            if broker_epoch is None:
                continue
            if debug_enabled:
                for tp, s in states.items():
                    state_change_log.debug(
                        "Sending StopReplica request %s to broker %d for partition %s", s, broker_id, tp
                    )
            if version >= 3:
                grouped = _group_by_topic(states)
                deleting = frozenset(
                    tp for tp, s in grouped.items() if s.delete_partition and tp.topic in started
                )
                if info_enabled:
                    state_change_log.info(
                        "Sending StopReplica request for %d replicas to broker %d", len(grouped), broker_id
                    )
                request = StopReplicaRequest(
                    version, self.controller_id, controller_epoch, broker_epoch, False, grouped
                )
                self._channel.send_request(
                    broker_id, request, stop_replica_callback(sink, broker_id, deleting)
                )
                continue
            # Before 2.6 (v0-v2): no per-partition flag or leader epoch on the wire, so up to two
            # requests, the delete=true one first.
            with_delete = _group_by_topic({tp: s for tp, s in states.items() if s.delete_partition})
            without_delete = _group_by_topic({tp: s for tp, s in states.items() if not s.delete_partition})
            for delete, part in ((True, with_delete), (False, without_delete)):
                if not part:
                    continue
                if info_enabled:
                    state_change_log.info(
                        "Sending StopReplica request (delete = %s) for %d replicas to broker %d",
                        str(delete).lower(),
                        len(part),
                        broker_id,
                    )
                wire = {tp: StopReplicaPartitionState(tp.partition, NO_EPOCH, delete) for tp in part}
                request = StopReplicaRequest(
                    version, self.controller_id, controller_epoch, broker_epoch, delete, wire
                )
                deleting = frozenset(tp for tp in part if delete and tp.topic in started)
                self._channel.send_request(
                    broker_id, request, stop_replica_callback(sink, broker_id, deleting)
                )
        self._sr.clear()


def _group_by_topic(
    states: Mapping[TopicPartition, StopReplicaPartitionState],
) -> dict[TopicPartition, StopReplicaPartitionState]:
    """The same entries with each topic's partitions contiguous (topics in first-seen order)."""
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in states:
        per_topic = by_topic.get(tp.topic)
        if per_topic is None:
            by_topic[tp.topic] = [tp]
        else:
            per_topic.append(tp)
    if len(by_topic) <= 1:
        return dict(states)
    return {tp: states[tp] for tps in by_topic.values() for tp in tps}


def _plaintext_only(broker: Broker) -> Broker:
    endpoint = next((e for e in broker.endpoints if e.listener_name == "PLAINTEXT"), None)
    if endpoint is None:
        raise IllegalControllerStateError(
            f"broker {broker.id} has no PLAINTEXT endpoint, which UpdateMetadata v0 requires"
        )
    return Broker(broker.id, (EndPoint(endpoint.host, endpoint.port),), broker.rack)


def summarize_requests(requests: Mapping[int, Mapping[TopicPartition, object]]) -> str:
    """A one-line, bounded description of a per-broker map (the maps can hold 100,000 entries)."""
    return "{" + ", ".join(f"broker {b}: {len(m)} partitions" for b, m in sorted(requests.items())) + "}"
