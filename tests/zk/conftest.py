"""ZooKeeper adapter tests use the embedded-server fixtures registered in ``tests/conftest.py``."""
