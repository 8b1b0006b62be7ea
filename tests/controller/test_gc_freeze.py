"""After a failover the loaded context is moved out of the collector's generations (``gc.freeze``);
resigning gives it back, so nothing the old context held is kept from collection."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from kafka_controller.domain.values import TopicPartition
from tests.controller.cluster import Cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    gc.unfreeze()
    c = Cluster()
    yield c
    c.close()
    gc.unfreeze()


def test_failover_freezes_the_loaded_context_and_resignation_unfreezes_it(cluster: Cluster) -> None:
    cluster.admin.create_topic("t", {0: [0]})
    cluster.start_all([0])
    active = cluster.active()
    assert active.controller.controller_context.partition_leadership_info(TopicPartition("t", 0)) is not None
    assert gc.get_freeze_count() > 0
    cluster.stop(0)
    assert gc.get_freeze_count() == 0
