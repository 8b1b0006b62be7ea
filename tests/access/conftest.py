"""Access tests run on the session's embedded ZooKeeper (fixtures from the shipped harness)."""

from kafka_controller.testing.zk_harness import *  # noqa: F403
