"""CLI tests: in-process runs of ``kafka-controller`` and real-ZooKeeper fixtures for the ones
that must prove a refused command left ZooKeeper untouched."""

from __future__ import annotations

from kafka_controller.testing.zk_harness import *  # noqa: F403
