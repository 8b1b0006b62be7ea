"""Session-wide test configuration.

Fixtures for ZooKeeper live in ``kafka_controller.testing.zk_harness`` (shipped with the product so
that other projects can test against an embedded ZooKeeper too).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

pytest_plugins = ["kafka_controller.testing.zk_harness"]

# CI gets more examples; local runs stay quick. Deadlines are off: the machines are shared and noisy.
settings.register_profile("ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
