"""The partition states (docs/controller-behaviour.md §7.4): the store's hot path, batched multi-reads
and fenced batched multis, with the memos that let a failover's 100,000 states share their few
distinct values; and the topic configs a failover reads with them."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from itertools import chain

from kafka_controller.domain.errors import (
    ControllerMovedError,
    MetadataStoreError,
    ZNodeDecodeError,
)
from kafka_controller.domain.values import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
    build_leader_and_isr,
)
from kafka_controller.ports import (
    PartitionStateRead,
    TopicIdReplicaAssignment,
    UpdateLeaderAndIsrResult,
    WatchHandler,
)
from kafka_controller.zk import paths as P
from kafka_controller.zk.admin_codecs import decode_entity_config
from kafka_controller.zk.backend import (
    BADVERSION,
    CREATE,
    NONODE,
    OK,
    PERSISTENT,
    SET_DATA,
    DataVersions,
    Op,
    error_for_code,
)
from kafka_controller.zk.codecs import decode_partition_state, encode_leader_and_isr, encode_partition_state
from kafka_controller.zk.store_base import StoreCore
from kafka_controller.zk.store_topics import TopicZNodes

_state_path = P.topic_partition_state_path
#: The bound of ``get_partition_states``' memo of decoded states.
_DECODED_STATES_MAX = 4096
#: The bound of ``update_leader_and_isr``'s memo of encoded states.
_ENCODED_STATES_MAX = 4096


class PartitionStateZNodes:
    """``/brokers/topics/<t>/partitions/<p>/state`` and the topic configs read with them. It
    receives the shared ``StoreCore`` and the ``TopicZNodes`` whose assignment reads it overlaps
    with its state reads."""

    def __init__(self, core: StoreCore, topics: TopicZNodes) -> None:
        self._core = core
        self._topics = topics

    def get_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, PartitionStateRead]:
        """Batched read of the state znodes: value, None (missing/empty) or the per-znode error."""
        paths = list(map(_state_path, partitions))
        return _decode_states(partitions, paths, self._core.backend.iter_data_versions_many(paths))

    def get_replica_assignments_and_partition_states(
        self, topics: Collection[str], *, watch_handler: WatchHandler | None = None
    ) -> tuple[
        dict[str, TopicIdReplicaAssignment | MetadataStoreError], dict[TopicPartition, PartitionStateRead]
    ]:
        """``get_replica_assignment_and_topic_ids``, then ``get_partition_states`` of every
        partition it found, overlapped: a topic's state reads go out as soon as it is decoded, so
        ZooKeeper answers them while the later topics are decoded (a failover's context load)."""
        assignments: dict[str, TopicIdReplicaAssignment | MetadataStoreError] = {}
        partitions: list[TopicPartition] = []
        paths: list[str] = []

        def state_paths_by_topic() -> Iterator[list[str]]:
            for topic, read in self._topics.decoded_topics(topics, watch_handler):
                assignments[topic] = read
                if not isinstance(read, MetadataStoreError):
                    topic_paths = list(map(_state_path, read.assignment))
                    partitions.extend(read.assignment)
                    paths.extend(topic_paths)
                    yield topic_paths

        # A topic's paths at a time: the reads take them through ``chain``, and the decoding above
        # is resumed once per topic rather than once per partition.
        state_paths = chain.from_iterable(state_paths_by_topic())
        states = _decode_states(
            partitions, paths, self._core.backend.iter_data_versions_streamed(state_paths)
        )
        return assignments, states

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, MetadataStoreError | None]:
        """Create-if-absent, fenced: first the missing ``partitions``/``partitions/<p>`` parents
        (results ignored, as Kafka), then every state znode; ``None`` = created."""
        if not states:
            return {}
        tps = list(states)
        parents = list(dict.fromkeys(P.topic_partitions_path(tp[0]) for tp in tps))
        parents += [P.topic_partition_path(tp) for tp in tps]
        missing = [
            p
            for p, (code, _, _) in zip(parents, self._core.read_many(parents), strict=True)
            if code == NONODE
        ]
        if missing:
            self._core.run(
                [(CREATE, p, None, PERSISTENT) for p in missing], expected_controller_epoch_zk_version
            )
        ops = [(CREATE, _state_path(tp), encode_partition_state(states[tp]), PERSISTENT) for tp in tps]
        result = self._core.run(ops, expected_controller_epoch_zk_version)
        return {tp: _store_error(result.error(i, ops[i][1])) for i, tp in enumerate(tps)}

    def update_leader_and_isr(
        self,
        leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        """Conditional set of each state znode on its ``zk_version``, fenced, batched
        (docs/controller-behaviour.md §7.4; Kafka's ``KafkaZkClient.updateLeaderAndIsr``).

        BADVERSION -> ``to_retry`` (input order); other per-znode errors are final. A whole-call
        failure other than ``ControllerMovedError`` fails every partition, with nothing to retry.
        """
        # The ops are a stream: each is encoded as its batch goes out and let go once it settles,
        # so a failover's 60,000 encoded writes never exist at once (the batcher's docs).
        ops = _set_state_ops(leader_and_isrs, controller_epoch)
        out = UpdateLeaderAndIsrResult()
        try:
            result = self._core.run(ops, expected_controller_epoch_zk_version)
        except ControllerMovedError:
            raise
        except MetadataStoreError as e:
            out.finished = dict.fromkeys(leader_and_isrs, e)
            return out
        codes = result.codes
        if codes.count(OK) == len(codes):  # the usual outcome, in bulk
            out.finished = dict(
                zip(
                    leader_and_isrs,
                    map(_with_zk_version, leader_and_isrs.values(), result.values),
                    strict=True,
                )
            )
            return out
        finished, to_retry = out.finished, out.to_retry
        for (tp, lai), code, version in zip(leader_and_isrs.items(), codes, result.values, strict=True):
            if code == OK:
                finished[tp] = lai.with_zk_version(version)
            elif code == BADVERSION:
                to_retry.append(tp)
            else:
                finished[tp] = error_for_code(code, _state_path(tp))
        return out

    def get_log_configs(
        self, topics: Collection[str], broker_defaults: Mapping[str, str]
    ) -> tuple[dict[str, dict[str, str]], dict[str, MetadataStoreError]]:
        """Each topic's ``/config/topics/<t>`` merged over the defaults; per-topic failures apart."""
        names = list(dict.fromkeys(topics))
        configs: dict[str, dict[str, str]] = {}
        failures: dict[str, MetadataStoreError] = {}
        reads = self._core.decode_many(
            [P.topic_config_path(t) for t in names],
            lambda data, _stat, path: decode_entity_config(data, path),
        )
        for topic, read in zip(names, reads, strict=True):
            if isinstance(read, MetadataStoreError):
                failures[topic] = read
            else:
                configs[topic] = {**broker_defaults, **(read or {})}
        return configs, failures


def _with_zk_version(lai: LeaderAndIsr, zk_version: int) -> LeaderAndIsr:
    return build_leader_and_isr(lai[0], lai[1], lai[2], zk_version)


def _set_state_ops(
    leader_and_isrs: Mapping[TopicPartition, LeaderAndIsr], controller_epoch: int
) -> Iterator[Op]:
    """The conditional sets of ``update_leader_and_isr``, made as they are taken. A failover's
    states repeat (a few dozen distinct leader, epoch and ISR), so each distinct payload is encoded
    once and its bytes shared, up to ``_ENCODED_STATES_MAX`` of them; states that seldom repeat
    are encoded directly once that many have been seen with fewer hits."""
    memo: dict[tuple[int, int, tuple[int, ...]], bytes] | None = {}
    hits = 0
    for tp, lai in leader_and_isrs.items():
        if memo is None:
            data = encode_leader_and_isr(lai, controller_epoch)
        else:
            key = lai[:3]
            data = memo.get(key)  # type: ignore[assignment]
            if data is None:
                if len(memo) >= _ENCODED_STATES_MAX:
                    memo = {} if hits >= _ENCODED_STATES_MAX else None
                    hits = 0
                data = encode_leader_and_isr(lai, controller_epoch)
                if memo is not None:
                    memo[key] = data
            else:
                hits += 1
        yield (SET_DATA, _state_path(tp), data, lai[3])


def _store_error(e: Exception | None) -> MetadataStoreError | None:
    return e if e is None or isinstance(e, MetadataStoreError) else MetadataStoreError(str(e))


def _decode_states(
    partitions: Sequence[TopicPartition], paths: Sequence[str], replies: Iterable[DataVersions]
) -> dict[TopicPartition, PartitionStateRead]:
    """Each reply's states, for ``partitions[k]`` at ``paths[k]`` in reply order (both may still
    grow while ``replies`` is iterated: ``get_replica_assignments_and_partition_states``)."""
    out: dict[TopicPartition, PartitionStateRead] = {}
    # A settled cluster's states repeat: at 100,000 partitions a few dozen distinct (data, zk
    # version) pairs. Each is decoded once per call and its (immutable) value shared by every
    # partition that has it: equal to decoding each, without the JSON parse, the checks and
    # the two tuples per partition. Failures are not kept (each is reported with its path).
    # A long-lived cluster's states may all differ (each partition its own leader epoch): once
    # the memo is full with fewer hits than entries, the rest is decoded directly, so the memo
    # costs such a cluster little (``memo`` None from then on).
    memo: dict[tuple[bytes | None, int], LeaderIsrAndControllerEpoch | None] | None = {}
    hits = 0
    done = 0
    # Chunk by chunk as the replies arrive: a failover's 100,000 states are decoded while the
    # rest are still being read, and the raw replies never all exist at once. Each chunk comes
    # as columns (codes, data, versions); a chunk whose every state the memo holds is shared
    # out in C-speed bulk (``map``/``zip``), the others partition by partition.
    for codes, datas, versions in replies:
        n = min(len(codes), len(paths) - done)  # a surplus answer is ignored, as before
        chunk_tps = partitions[done : done + n]
        if memo is not None and codes.count(OK) == len(codes):
            shared = list(map(memo.get, zip(datas, versions, strict=True)))
            if None not in shared:
                out.update(zip(chunk_tps, shared, strict=False))
                hits += n
                done += n
                continue
        for i in range(n):
            tp = chunk_tps[i]
            code = codes[i]
            if code == OK:
                key = (datas[i], versions[i])
                if memo is not None:
                    state = memo.get(key)
                    if state is not None:
                        hits += 1
                        out[tp] = state
                        continue
                try:
                    state = decode_partition_state(key[0], key[1], paths[done + i])
                except ZNodeDecodeError as e:
                    out[tp] = e
                    continue
                out[tp] = state
                if memo is not None and state is not None:
                    if len(memo) >= _DECODED_STATES_MAX:
                        # Keep no raw replies alive; stop sharing if the states seldom repeat.
                        memo = {} if hits >= _DECODED_STATES_MAX else None
                        hits = 0
                    if memo is not None:
                        memo[key] = state
            elif code == NONODE:
                out[tp] = None
            else:
                out[tp] = error_for_code(code, paths[done + i])
        done += n
    if done < len(paths):
        raise MetadataStoreError(f"the store answered fewer than the {len(paths)} partition state reads")
    return out
