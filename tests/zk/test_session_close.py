"""The supervisor's session close against a real ZooKeeper that goes away between the owner check
and the re-attach, as every member of an ensemble does while it elects a leader."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.zk.backend import Stat
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.security import ZkClientConfig
from kafka_controller.zk.session_close import CloseOutcome, close_recorded_session
from kafka_controller.zk.session_file import SessionRecord

pytestmark = pytest.mark.zk

PATH = "/brokers/ids/7"


def test_a_close_whose_zookeeper_went_away_after_the_owner_check_is_made_once_it_is_back(
    tmp_path: Path,
) -> None:
    zk = EmbeddedZooKeeper(data_dir=tmp_path / "zk").start()
    # The dead broker's session: its client tries once when the server goes, then no more.
    owner = KazooClient(hosts=zk.connect_string, timeout=30.0, connection_retry={"max_tries": 0})
    reader = KazooClient(hosts=zk.connect_string, connection_retry={"max_tries": -1, "max_delay": 0.5})
    try:
        owner.start(30)
        owner.create(PATH, b"{}", ephemeral=True, makepath=True)
        registered = Stat._make(owner.exists(PATH))
        session_id, password = owner.client_id
        record = SessionRecord(7, 1, -1, session_id, password, registered.czxid)
        reader.start(30)
        zk.stop()  # sessions outlive a server restart
        owner_checked = threading.Event()

        def read_stat(path: str) -> Stat | None:
            if not owner_checked.is_set():  # the owner check, answered just before the server went
                owner_checked.set()
                return registered
            try:
                raw = reader.exists(path)
            except Exception as e:
                raise StoreUnavailableError(f"cannot read {path}: {type(e).__name__}") from None
            return None if raw is None else Stat._make(raw)

        back = threading.Timer(1.5, lambda: zk.start(30))
        back.start()
        try:
            config = ZkClientConfig(zk.connect_string, connection_timeout_ms=20_000)
            outcome = close_recorded_session(config, record, read_stat=read_stat)
        finally:
            back.join()
        assert outcome is CloseOutcome.CLOSED
        assert reader.exists(PATH) is None
    finally:
        for client in (owner, reader):
            client.stop()
            client.close()
        zk.close()
