"""Test doubles and harnesses shipped as product code
(docs/rules.md, fakes are part of the product).

The in-memory ZooKeeper, metadata store, recording channel and audit sink live in
``kafka_controller.dryrun`` (the dry run is built from them); harnesses here import them from there,
never the reverse. The ZooKeeper pytest harness (``.zk_harness``) and the private PostgreSQL helper
(``.postgres``) are imported from their submodules.
"""
