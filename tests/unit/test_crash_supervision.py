"""The session file (0600, atomic, only the writer removes it), the owner check that keeps a stale
record from closing anybody's session, and the exit supervisor that tells a crash from an exit its
owner asked for (real child processes, no ZooKeeper)."""

from __future__ import annotations

import logging
import os
import queue
import signal
import stat
import sys
import threading
from pathlib import Path

import pytest

from kafka_controller.cluster.process import BrokerProcess
from kafka_controller.cluster.supervisor import ExitedProcess, ExitSupervisor
from kafka_controller.domain.errors import StoreUnavailableError
from kafka_controller.testing.clock import ManualClock
from kafka_controller.zk.backend import Stat
from kafka_controller.zk.security import ZkClientConfig
from kafka_controller.zk.session_close import (
    CONFIRM_POLL_S,
    CONFIRM_S,
    FIRST_RETRY_PAUSE_S,
    CloseOutcome,
    check_owner,
    close_recorded_session,
)
from kafka_controller.zk.session_file import (
    SESSION_FILE_NAME,
    UNKNOWN_BROKER_EPOCH,
    SessionFileError,
    SessionRecord,
    process_start,
    read_session_file,
    remove_session_file,
    same_process_alive,
    write_session_file,
)
from tests.broker.helpers import wait_until

RECORD = SessionRecord(3, 4242, 99, 0x1234ABCD, bytes(range(16)), 0x500)


def _stat(owner: int, czxid: int) -> Stat:
    return Stat(czxid, czxid, 0, 0, 0, 0, 0, owner, 10, 0, czxid)


def test_the_record_round_trips_with_mode_0600_and_no_temporary_left(tmp_path: Path) -> None:
    path = write_session_file(tmp_path / "d", RECORD)
    assert read_session_file(tmp_path / "d") == RECORD
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert os.listdir(tmp_path / "d") == [SESSION_FILE_NAME]
    newer = RECORD._replace(session_id=7)
    write_session_file(tmp_path / "d", newer)  # replaced whole
    assert read_session_file(tmp_path / "d") == newer


def test_no_record_is_none_and_a_bad_one_is_a_one_line_error(tmp_path: Path) -> None:
    assert read_session_file(tmp_path) is None
    for text in ("{", "[]", '{"version": 1}', RECORD.to_json().replace('"pid": 4242', '"pid": "x"')):
        (tmp_path / SESSION_FILE_NAME).write_text(text)
        with pytest.raises(SessionFileError, match="is not a broker session file") as e:
            read_session_file(tmp_path)
        assert "\n" not in str(e.value)


def test_only_the_writing_process_removes_the_record(tmp_path: Path) -> None:
    write_session_file(tmp_path, RECORD)
    remove_session_file(tmp_path)  # this process is not pid 4242
    assert read_session_file(tmp_path) == RECORD
    remove_session_file(tmp_path, 4242)
    assert read_session_file(tmp_path) is None


def test_a_recycled_pid_is_not_the_recorded_process() -> None:
    me = os.getpid()
    assert same_process_alive(me, process_start(me))
    assert not same_process_alive(me, process_start(me) + 1)  # same pid, another start time


def test_only_the_session_holding_the_registration_it_was_written_for_is_closed() -> None:
    assert check_owner(RECORD, _stat(RECORD.session_id, RECORD.broker_epoch)) is None
    assert check_owner(RECORD, None) is CloseOutcome.NOT_REGISTERED
    assert check_owner(RECORD, _stat(RECORD.session_id + 1, RECORD.broker_epoch)) is CloseOutcome.NOT_OWNER
    assert check_owner(RECORD, _stat(RECORD.session_id, RECORD.broker_epoch + 1)) is CloseOutcome.NOT_OWNER


def test_a_record_written_before_registering_closes_its_session_whatever_its_registration() -> None:
    early = RECORD._replace(broker_epoch=UNKNOWN_BROKER_EPOCH)
    assert check_owner(early, _stat(early.session_id, 0x777)) is None  # registered after writing
    assert check_owner(early, None) is None  # died before or while registering: a create may be in flight
    assert check_owner(early, _stat(early.session_id + 1, 0x777)) is CloseOutcome.NOT_OWNER


class _FlakyReader:
    """A ``read_stat`` that fails as an unreachable ZooKeeper does ``failures`` times, then answers."""

    def __init__(self, failures: int, answer: Stat | None = None) -> None:
        self.failures, self.answer, self.paths = failures, answer, list[str]()

    def __call__(self, path: str) -> Stat | None:
        self.paths.append(path)
        if len(self.paths) <= self.failures:
            raise StoreUnavailableError("ZooKeeper unavailable (ConnectionLoss)", path=path)
        return self.answer


def test_closing_tries_again_while_zookeeper_cannot_be_reached() -> None:
    """An ensemble electing a leader drops every client for a moment: the close is tried again,
    from the owner check on, with growing pauses, instead of leaving the session to time out."""
    clock, reader = ManualClock(), _FlakyReader(failures=3)
    config = ZkClientConfig("127.0.0.1:1", connection_timeout_ms=10_000)
    assert (
        close_recorded_session(config, RECORD, read_stat=reader, clock=clock) is CloseOutcome.NOT_REGISTERED
    )
    assert reader.paths == ["/brokers/ids/3"] * 4
    assert clock.sleeps == [0.1, 0.2, 0.4]


def test_closing_gives_up_with_one_line_once_the_connection_timeout_has_passed() -> None:
    clock, reader = ManualClock(), _FlakyReader(failures=1_000)
    config = ZkClientConfig("127.0.0.1:1", connection_timeout_ms=3_000)
    started = clock.monotonic()
    with pytest.raises(StoreUnavailableError, match=r"ConnectionLoss.*tried for 3 s") as e:
        close_recorded_session(config, RECORD, read_stat=reader, clock=clock)
    assert "\n" not in str(e.value)
    assert clock.monotonic() - started == pytest.approx(3.0)
    assert max(clock.sleeps) == 1.0 and clock.sleeps[:4] == [0.1, 0.2, 0.4, 0.8]


class _LossyZooKeeper:
    """The recorded session's registration, and re-attaching clients whose close is lost on the way
    (the server dropped the connection) until the ``works_from``-th of them."""

    def __init__(self, works_from: int, unreadable_after_close: int = 0) -> None:
        self.works_from, self.attaches, self.owned = works_from, 0, True
        self.unreadable = unreadable_after_close  # reads that fail once a close went out

    def read_stat(self, path: str) -> Stat | None:
        assert path == "/brokers/ids/3"
        if self.attaches and self.unreadable > 0:
            self.unreadable -= 1
            raise StoreUnavailableError("ZooKeeper unavailable (ConnectionLoss)", path=path)
        return _stat(RECORD.session_id, RECORD.broker_epoch) if self.owned else None

    def connect(self, client_id: tuple[int, bytes], **_: object) -> object:
        zk = self

        class Attached:
            def start(self, timeout: float) -> None:
                assert client_id == (RECORD.session_id, RECORD.password)

            client_id = (RECORD.session_id, RECORD.password)

            def stop(self) -> None:
                zk.attaches += 1
                zk.owned = zk.owned and zk.attaches < zk.works_from

            def close(self) -> None:
                pass

        return Attached()


def test_a_close_that_was_lost_is_made_again_until_a_read_shows_it() -> None:
    clock, zk = ManualClock(), _LossyZooKeeper(works_from=2)
    config = ZkClientConfig("127.0.0.1:1", connection_timeout_ms=10_000)
    outcome = close_recorded_session(config, RECORD, read_stat=zk.read_stat, clock=clock, connect=zk.connect)
    assert outcome is CloseOutcome.CLOSED and zk.attaches == 2 and not zk.owned
    # the first close was read back for CONFIRM_S before it was taken as lost
    assert clock.monotonic() >= CONFIRM_S and FIRST_RETRY_PAUSE_S in clock.sleeps


def test_a_close_whose_read_back_failed_is_closed_once_a_later_look_finds_it_gone() -> None:
    """The reader's server went away right after the close: the next look, from the owner check
    on, finds no registration, which is this close's doing, not a session that was never there."""
    unreadable = int(CONFIRM_S / CONFIRM_POLL_S) + 5  # the read-back gives up, then ZooKeeper answers
    clock, zk = ManualClock(), _LossyZooKeeper(works_from=1, unreadable_after_close=unreadable)
    config = ZkClientConfig("127.0.0.1:1", connection_timeout_ms=10_000)
    outcome = close_recorded_session(config, RECORD, read_stat=zk.read_stat, clock=clock, connect=zk.connect)
    assert outcome is CloseOutcome.CLOSED and zk.attaches == 1


def test_a_close_that_never_shows_is_a_one_line_error_after_the_connection_timeout() -> None:
    clock, zk = ManualClock(), _LossyZooKeeper(works_from=1_000)
    config = ZkClientConfig("127.0.0.1:1", connection_timeout_ms=5_000)
    with pytest.raises(
        StoreUnavailableError, match=r"still holds /brokers/ids/3 after its close; tried for 5 s"
    ) as e:
        close_recorded_session(config, RECORD, read_stat=zk.read_stat, clock=clock, connect=zk.connect)
    assert "\n" not in str(e.value) and zk.attaches >= 2 and zk.owned


def _sleeper(tmp_path: Path, broker_id: int) -> BrokerProcess:
    proc = BrokerProcess(
        broker_id, [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / f"{broker_id}.log"
    )
    proc.start()
    return proc


def test_the_supervisor_reports_a_crash_but_not_an_exit_its_owner_asked_for(tmp_path: Path) -> None:
    crashed, asked = _sleeper(tmp_path, 1), _sleeper(tmp_path, 2)
    reports: queue.Queue[tuple[int, int | None]] = queue.Queue()
    supervisor = ExitSupervisor(lambda: [crashed, asked], lambda p: reports.put((p.broker_id, p.pid))).start()
    try:
        asked.kill()  # the owner's SIGKILL (exit_requested), reaped before the crash below
        for _ in range(2):  # the first incarnation, then a restarted one
            pid = crashed.pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)  # from elsewhere
            assert reports.get(timeout=10.0) == (1, pid)
            crashed.start()
        assert reports.empty()  # the asked-for exit was seen in the same passes, and not reported
    finally:
        supervisor.stop()
        crashed.kill()
        asked.kill()


def test_a_crash_is_handled_while_an_earlier_one_still_is(tmp_path: Path) -> None:
    first, second = _sleeper(tmp_path, 1), _sleeper(tmp_path, 2)
    first_handling, second_handled = threading.Event(), threading.Event()
    reports: queue.Queue[tuple[int, object]] = queue.Queue()

    def on_exit(p: ExitedProcess) -> None:
        if p.broker_id == 1:  # a close retrying while ZooKeeper cannot be reached
            first_handling.set()
            reports.put((1, second_handled.wait(10.0)))
        else:
            second_handled.set()
            reports.put((2, p.pid))

    supervisor = ExitSupervisor(lambda: [first, second], on_exit).start()
    try:
        assert first.pid is not None and second.pid is not None
        os.kill(first.pid, signal.SIGKILL)
        assert first_handling.wait(10.0)
        second_pid = second.pid
        os.kill(second_pid, signal.SIGKILL)
        assert reports.get(timeout=5.0) == (2, second_pid)  # not behind the first's handling
        assert reports.get(timeout=5.0) == (1, True)
    finally:
        supervisor.stop()
        first.kill()
        second.kill()


def test_a_clean_shutdown_asked_for_from_elsewhere_is_no_warning(tmp_path: Path, caplog) -> None:
    """A broker stopped by someone else's SIGTERM (a lifecycle backend restarting it) exits 0: the
    supervisor still handles it, at DEBUG; a crash is still a warning."""
    clean = BrokerProcess(
        1,
        [
            sys.executable,
            "-c",
            "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
            "pathlib.Path(sys.argv[1]).touch(); time.sleep(60)",
            str(tmp_path / "ready"),
        ],
        tmp_path / "1.log",
    )
    clean.start()
    crashed = _sleeper(tmp_path, 2)
    reports: queue.Queue[tuple[int, int | None]] = queue.Queue()
    caplog.set_level(logging.DEBUG, logger="kafka_controller.cluster.supervisor")
    supervisor = ExitSupervisor(
        lambda: [clean, crashed], lambda p: reports.put((p.broker_id, p.returncode))
    ).start()
    try:
        assert clean.pid is not None and crashed.pid is not None
        wait_until(lambda: (tmp_path / "ready").exists(), "the child's SIGTERM handler", 10.0)
        os.kill(clean.pid, signal.SIGTERM)  # from elsewhere, answered with a clean exit
        assert reports.get(timeout=10.0) == (1, 0)
        os.kill(crashed.pid, signal.SIGKILL)
        assert reports.get(timeout=10.0) == (2, -signal.SIGKILL)
    finally:
        supervisor.stop()
        clean.kill()
        crashed.kill()
    said = [
        (r.levelno, r.getMessage()) for r in caplog.records if r.name == "kafka_controller.cluster.supervisor"
    ]
    assert [level for level, message in said if "broker 1 " in message] == [logging.DEBUG]
    assert [level for level, message in said if "broker 2 " in message] == [logging.WARNING]
