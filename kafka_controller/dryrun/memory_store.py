"""``InMemoryMetadataStore``: the metadata-store port over an in-process ZooKeeper tree.

The same store logic as the kazoo store (``ZkMetadataStore``: fencing, batching, codecs, paths)
over ``memory_zk.InMemorySession``, so unit tests, core benchmarks, demos and dry runs exercise the
real code paths without a server. Several stores can share one tree, each with its own session,
so brokers and controllers in one process see each other's ephemerals::

    tree = InMemoryZooKeeper()
    controller, broker = InMemoryMetadataStore(tree), InMemoryMetadataStore(tree)
    tree.expire_session(broker.session)   # its /brokers/ids/<id> goes away
"""

from __future__ import annotations

from kafka_controller.dryrun.memory_zk import InMemorySession, InMemoryZooKeeper
from kafka_controller.ports import Clock, MetadataStore
from kafka_controller.zk.backend import ZkBackend
from kafka_controller.zk.batching import DEFAULT_MAX_BATCH_BYTES, DEFAULT_MAX_BATCH_OPS
from kafka_controller.zk.store import ZkMetadataStore


class InMemoryMetadataStore(ZkMetadataStore):
    """A store with its own session on ``tree`` (a new tree when omitted)."""

    def __init__(
        self,
        tree: InMemoryZooKeeper | None = None,
        *,
        clock: Clock | None = None,
        create_paths: bool = True,
        max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
        max_batch_ops: int = DEFAULT_MAX_BATCH_OPS,
    ) -> None:
        self.tree = tree if tree is not None else InMemoryZooKeeper(clock.time_ms if clock else None)
        self.session: InMemorySession = self.tree.open_session()
        super().__init__(
            self.session, clock=clock, max_batch_bytes=max_batch_bytes, max_batch_ops=max_batch_ops
        )
        if create_paths:
            self.create_top_level_paths()

    def expire_session(self) -> None:
        """Expire this store's session (ephemerals and watches go; a new session follows)."""
        self.tree.expire_session(self.session)

    def disconnect(self) -> None:
        """Drop the connection but keep the session: SUSPENDED, writes fail fast."""
        self.session.disconnect()

    def reconnect(self) -> None:
        self.session.reconnect()


def _conforms(store: InMemoryMetadataStore) -> MetadataStore:
    return store  # mypy proves the fake implements the whole port


def _session_conforms(session: InMemorySession) -> ZkBackend:
    return session
