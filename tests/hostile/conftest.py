"""Hostile-client tests: the real-ZooKeeper fixtures, as the broker process tests use them."""

from kafka_controller.testing.zk_harness import *  # noqa: F403
