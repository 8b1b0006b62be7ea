"""The metadata store's ZooKeeper side: paths, codecs, store logic, and the kazoo adapter.

Importing this package never imports kazoo (the in-memory store and the codecs must work without
it): only ``kazoo_backend`` and ``kazoo_reads`` do. Names are imported from the module that defines
them (``zk.store.ZkMetadataStore``, ``zk.kazoo_backend.KazooMetadataStore``).
"""
