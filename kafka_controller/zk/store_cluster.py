"""Controller election and epoch, broker registrations, cluster id, broker sequence ids, ``/feature``
and the top-level paths (docs/controller-behaviour.md §7.1, §7.2, Kafka's ``KafkaZkClient``)."""

from __future__ import annotations

import logging

from kafka_controller.domain.errors import (
    ControllerMovedError,
    NodeExistsError,
    NoNodeError,
    ZNodeDecodeError,
)
from kafka_controller.domain.values import Broker
from kafka_controller.ports import FeatureZNode
from kafka_controller.zk import paths as P
from kafka_controller.zk.admin_codecs import (
    decode_cluster_id,
    decode_feature,
    encode_cluster_id,
    encode_feature,
)
from kafka_controller.zk.backend import (
    BADVERSION,
    CREATE,
    EPHEMERAL,
    NODEEXISTS,
    NONODE,
    OK,
    PERSISTENT,
    SET_DATA,
    error_for_code,
)
from kafka_controller.zk.codecs import (
    decode_broker,
    decode_controller,
    decode_controller_epoch,
    encode_broker,
    encode_controller,
    encode_controller_epoch,
)
from kafka_controller.zk.store_base import StoreCore

log = logging.getLogger(__name__)


class ClusterZNodes:
    """The cluster-wide znodes: ``/controller``, ``/controller_epoch``, ``/brokers/ids``,
    ``/cluster/id``, ``/feature``. It receives the shared ``StoreCore`` and keeps nothing else."""

    def __init__(self, core: StoreCore) -> None:
        self._core = core

    # -- controller ---------------------------------------------------------------------------------

    def get_controller_id(self) -> int | None:
        """The active controller's broker id, or None. Not fenced."""
        read = self._core.read(P.CONTROLLER_PATH)
        return None if read is None else decode_controller(read[0], P.CONTROLLER_PATH)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        """``(epoch, epoch_zk_version)`` from ``/controller_epoch``, or None when absent."""
        read = self._core.read(P.CONTROLLER_EPOCH_PATH)
        if read is None:
            return None
        return decode_controller_epoch(read[0], P.CONTROLLER_EPOCH_PATH), read[1].version

    def register_controller_and_increment_controller_epoch(self, broker_id: int) -> tuple[int, int]:
        """Become controller (docs/controller-behaviour.md §7.2): one multi of
        create(/controller, ephemeral) and a conditional set of ``/controller_epoch`` to epoch + 1.
        Returns ``(epoch, epoch_zk_version)``; raises ``ControllerMovedError`` when another broker
        won. Not fenced."""
        current = self.get_controller_epoch()
        if current is None:
            try:
                self._core.backend.create(P.CONTROLLER_EPOCH_PATH, encode_controller_epoch(0), PERSISTENT)
                current = (0, 0)
            except NodeExistsError:
                current = self.get_controller_epoch()
                if current is None:
                    raise ControllerMovedError("/controller_epoch vanished during election") from None
        epoch, zkv = current
        ops = [
            (CREATE, P.CONTROLLER_PATH, encode_controller(broker_id, self._core.clock.time_ms()), EPHEMERAL),
            (SET_DATA, P.CONTROLLER_EPOCH_PATH, encode_controller_epoch(epoch + 1), zkv),
        ]
        outcome = self._core.backend.multi([ops])[0]
        if outcome.ok:
            assert outcome.values is not None
            return epoch + 1, int(outcome.values[1])
        if outcome.error_code in (NODEEXISTS, BADVERSION):
            return self._check_controller_and_epoch(broker_id, epoch + 1)
        raise error_for_code(outcome.error_code, ops[outcome.failed_index][1])

    def _check_controller_and_epoch(self, broker_id: int, new_epoch: int) -> tuple[int, int]:
        """Kafka's ``checkControllerAndEpoch``: succeed only if a retried multi had in fact won."""
        controller = self.get_controller_id()
        if controller is None:
            raise ControllerMovedError("the controller moved to another broker (no /controller)")
        current = self.get_controller_epoch()
        if controller == broker_id and current is not None and current[0] == new_epoch:
            return current
        raise ControllerMovedError(f"the controller moved to broker {controller}")

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/controller`` (Kafka's ``triggerControllerMove``). Fenced; missing is fine."""
        self._core.delete_all([P.CONTROLLER_PATH], expected_controller_epoch_zk_version)

    # -- brokers ------------------------------------------------------------------------------------

    def register_broker(self, broker: Broker, *, jmx_port: int = -1) -> int:
        """Create ``/brokers/ids/<id>`` (ephemeral, version 5); returns the broker epoch (czxid).

        A znode left by this very session (a retried create) counts as ours; one owned by another
        session raises ``NodeExistsError``. Not fenced."""
        path = P.broker_id_path(broker.id)
        data = encode_broker(broker, self._core.clock.time_ms(), jmx_port)
        try:
            return self._core.backend.create(path, data, EPHEMERAL)[1].czxid
        except NodeExistsError:
            stat = self._core.backend.exists(path)
            if stat is not None and stat.ephemeral_owner == self._core.backend.session_id:
                return stat.czxid
            raise

    def update_broker_info(self, broker: Broker, *, jmx_port: int = -1) -> None:
        """Overwrite this broker's registration (unconditional set). NoNodeError if unregistered."""
        path = P.broker_id_path(broker.id)
        self._core.run_one((SET_DATA, path, encode_broker(broker, self._core.clock.time_ms(), jmx_port), -1))

    def get_sorted_broker_list(self) -> list[int]:
        return sorted(int(c) for c in self._core.children(P.BROKER_IDS_PATH) if _is_int(c))

    def get_broker(self, broker_id: int) -> Broker | None:
        """The registration of ``broker_id``, or None. A corrupt one raises ``ZNodeDecodeError``."""
        path = P.broker_id_path(broker_id)
        read = self._core.read(path)
        return None if read is None else decode_broker(broker_id, read[0], path)

    def get_all_brokers_and_epochs(self) -> dict[Broker, int]:
        """Every registered broker with its epoch (czxid), in one batched read. A registration that
        does not decode is logged and left out: the broker is treated as not (yet) registered."""
        ids = self.get_sorted_broker_list()
        paths = [P.broker_id_path(b) for b in ids]
        out: dict[Broker, int] = {}
        for b, path, (code, data, stat) in zip(ids, paths, self._core.read_many(paths), strict=True):
            if code == NONODE:
                continue
            if code != OK or stat is None:
                raise error_for_code(code, path)
            try:
                out[decode_broker(b, data, path)] = stat.czxid
            except ZNodeDecodeError as e:  # skip this broker only
                log.warning("ignoring broker %d: %s", b, e)
        return out

    def generate_broker_sequence_id(self) -> int:
        """Kafka's ``generateBrokerSequenceId``: bump ``/brokers/seqid`` and return its version."""
        try:
            stat = self._core.backend.set_data(P.BROKER_SEQUENCE_ID_PATH, b"", -1)
        except NoNodeError:
            self._core.ensure_paths([P.BROKER_SEQUENCE_ID_PATH])
            stat = self._core.backend.set_data(P.BROKER_SEQUENCE_ID_PATH, b"", -1)
        return stat.version

    # -- cluster id, feature --------------------------------------------------------------------------

    def get_cluster_id(self) -> str | None:
        read = self._core.read(P.CLUSTER_ID_PATH)
        return None if read is None else decode_cluster_id(read[0], P.CLUSTER_ID_PATH)

    def create_or_get_cluster_id(self, proposed_cluster_id: str) -> str:
        """Create-if-absent ``/cluster/id``; returns whichever id is stored."""
        data = encode_cluster_id(proposed_cluster_id)
        existing = self.get_cluster_id()
        if existing is not None:
            return existing
        self._core.ensure_paths([P.parent_path(P.CLUSTER_ID_PATH)])
        try:
            self._core.backend.create(P.CLUSTER_ID_PATH, data, PERSISTENT)
            return proposed_cluster_id
        except NodeExistsError:
            stored = self.get_cluster_id()
            if stored is None:
                raise
            return stored

    def get_feature_znode(self) -> tuple[FeatureZNode, int] | None:
        """``(feature, zk_version)`` or None when absent. Not fenced."""
        read = self._core.read(P.FEATURE_PATH)
        return None if read is None else (decode_feature(read[0], P.FEATURE_PATH), read[1].version)

    def create_feature_znode(self, feature: FeatureZNode) -> None:
        """Create ``/feature`` (not fenced, as in Kafka); ``NodeExistsError`` if present."""
        self._core.backend.create(P.FEATURE_PATH, encode_feature(feature), PERSISTENT)

    def update_feature_znode(self, feature: FeatureZNode) -> int:
        """Overwrite ``/feature`` (any version, not fenced); returns the new zk version."""
        return self._core.backend.set_data(P.FEATURE_PATH, encode_feature(feature), -1).version

    # -- paths ------------------------------------------------------------------------------------------

    def create_top_level_paths(self) -> None:
        """Kafka's ``createTopLevelPaths``: create-if-absent every persistent top-level path."""
        self._core.ensure_paths(P.TOP_LEVEL_PATHS)


def _is_int(text: str) -> bool:
    return text.isdigit() or (text.startswith("-") and text[1:].isdigit())
