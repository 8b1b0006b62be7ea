"""Broker tests: the real-ZooKeeper fixtures for the multi-process suite."""

from kafka_controller.testing.zk_harness import *  # noqa: F403
