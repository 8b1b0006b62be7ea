"""Test doubles and harnesses shipped as product code
(docs/rules.md, fakes are part of the product).

The names below are light to import. The in-memory metadata store
(``kafka_controller.testing.memory_store``), the ZooKeeper pytest harness (``.zk_harness``) and the
private PostgreSQL helper (``.postgres``) are imported from their submodules.
"""
