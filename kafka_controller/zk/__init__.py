"""The metadata store's ZooKeeper side: paths, codecs, store logic, and the kazoo adapter.

Importing this package never imports kazoo (the in-memory store and the codecs must work without
it): ``KazooMetadataStore`` and ``KazooBackend`` load ``kazoo_backend`` on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_controller.zk.security import ZkClientConfig
from kafka_controller.zk.store import ZkMetadataStore

if TYPE_CHECKING:
    from kafka_controller.zk.kazoo_backend import KazooBackend, KazooMetadataStore

__all__ = ["KazooBackend", "KazooMetadataStore", "ZkClientConfig", "ZkMetadataStore"]


def __getattr__(name: str) -> Any:
    if name in ("KazooMetadataStore", "KazooBackend"):
        from kafka_controller.zk import kazoo_backend

        return getattr(kazoo_backend, name)
    raise AttributeError(name)
