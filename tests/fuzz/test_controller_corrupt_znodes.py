"""A running ``KafkaController`` fed znodes that other systems wrote badly
(docs/controller-behaviour.md §7.1, §8).

Each example starts an in-process cluster (``controller_probe``), writes one corrupt or hostile
znode the controller watches, and then holds the rule for bad input: a clear error, nothing
partially written, the controller keeps running — and still works (a new topic and a failover).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_controller.domain.values import LeaderAndIsr, TopicPartition
from kafka_controller.zk import paths as P
from kafka_controller.zk.backend import EPHEMERAL, PERSISTENT_SEQUENTIAL
from tests.controller.cluster import Answer, wait_until
from tests.fuzz import strategies as S
from tests.fuzz.controller_probe import TIMEOUT_S, controller_probe

# Each example runs a small cluster (~20 ms); keep the budget in seconds, not minutes.
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GOOD0 = TopicPartition("good", 0)  # replicas [2, 3]: led by 2
LONG_LIST = list(range(300))


def payloads(valid: dict[str, object]) -> st.SearchStrategy[bytes | None]:
    return S.corrupt_payloads(valid, huge=LONG_LIST)


NAMES = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=1, max_size=40).filter(
    lambda n: n not in (".", "..", "good") and not n.startswith("probe")
)


@FUZZ
@given(payload=payloads(S.VALID_TOPIC), name=NAMES)
def test_new_topic_znode(payload: bytes | None, name: str) -> None:
    with controller_probe() as probe:
        probe.write(P.topic_path(name), payload)
        probe.assert_still_in_charge()
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


@FUZZ
@given(payload=payloads(S.VALID_TOPIC))
def test_existing_topic_znode_rewritten(payload: bytes | None) -> None:
    with controller_probe() as probe:
        probe.write(P.topic_path("good"), payload)
        probe.assert_still_in_charge()
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


@FUZZ
@given(payload=payloads(S.VALID_PARTITION_STATE))
def test_partition_state_znode_then_its_leader_fails(payload: bytes | None) -> None:
    with controller_probe() as probe:
        path = P.topic_partition_state_path(GOOD0)
        probe.write(path, payload)
        probe.assert_still_in_charge()
        undecodable = isinstance(probe.states()[GOOD0], Exception)
        probe.cluster.stop(2)  # leader of good-0 and good-2: both need an election now
        probe.cluster.wait_idle()
        probe.assert_still_in_charge()
        good2 = probe.cluster.state(TopicPartition("good", 2))
        assert good2 is not None and good2.leader_and_isr.leader == 1, f"good-2 not moved: {good2}"
        if undecodable:
            probe.assert_failure_reported(GOOD0)
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


@FUZZ
@given(payload=payloads(S.VALID_REASSIGNMENT))
def test_reassignment_znode(payload: bytes | None) -> None:
    with controller_probe() as probe:
        probe.write(P.REASSIGN_PARTITIONS_PATH, payload)
        probe.assert_still_in_charge()
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


@FUZZ
@given(payload=payloads(S.VALID_PREFERRED))
def test_preferred_replica_election_znode(payload: bytes | None) -> None:
    with controller_probe() as probe:
        probe.write(P.PREFERRED_REPLICA_ELECTION_PATH, payload)
        probe.assert_still_in_charge()
        # Processed or not, the request must not stay behind and block the next one (Kafka's
        # admin tool refuses to start an election while the znode exists).
        wait_until(
            lambda: probe.raw.exists(P.PREFERRED_REPLICA_ELECTION_PATH) is None,
            "the preferred-election znode is consumed",
            TIMEOUT_S,
        )
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


@FUZZ
@given(payload=payloads(S.VALID_ISR_CHANGE))
def test_isr_change_notification(payload: bytes | None) -> None:
    with controller_probe() as probe:
        prefix = f"{P.ISR_CHANGE_NOTIFICATION_PATH}/{P.ISR_CHANGE_NOTIFICATION_PREFIX}"
        probe.write(prefix, payload, PERSISTENT_SEQUENTIAL)
        probe.assert_still_in_charge()
        wait_until(
            lambda: not probe.cluster.admin.get_all_isr_change_notifications(),
            "the notification is consumed",
            TIMEOUT_S,
        )
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


@FUZZ
@given(payload=payloads(S.VALID_LOG_DIR_EVENT))
def test_log_dir_event_notification(payload: bytes | None) -> None:
    with controller_probe() as probe:
        prefix = f"{P.LOG_DIR_EVENT_NOTIFICATION_PATH}/{P.LOG_DIR_EVENT_NOTIFICATION_PREFIX}"
        probe.write(prefix, payload, PERSISTENT_SEQUENTIAL)
        probe.assert_still_in_charge()
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


@FUZZ
@given(payload=payloads(S.VALID_BROKER), broker_id=st.sampled_from([4, 9, 1000, 2**31 - 1]))
def test_broker_registration(payload: bytes | None, broker_id: int) -> None:
    """A registration that does not decode is a broker that is not there (Kafka skips it)."""
    with controller_probe() as probe:
        other = probe.cluster.tree.open_session()  # its own session, as a broker has
        other.create(P.broker_id_path(broker_id), payload, EPHEMERAL)
        probe.touched.add(P.broker_id_path(broker_id))
        probe.cluster.wait_idle()
        probe.assert_still_in_charge()
        probe.assert_owned_state_consistent()
        probe.assert_still_works()
        other.close()


@FUZZ
@given(name=st.one_of(NAMES, st.just("good")), payload=st.one_of(st.none(), st.binary(max_size=32)))
def test_topic_deletion_request(name: str, payload: bytes | None) -> None:
    """Unknown topics' requests are dropped; a known topic is deleted whatever the node holds."""
    with controller_probe() as probe:
        probe.write(P.delete_topic_path(name), payload)
        if name == "good":
            probe.touched.add(P.topic_path("good"))  # being deleted: not expected back on failover
        probe.assert_still_in_charge()
        if name != "good":
            wait_until(
                lambda: probe.raw.exists(P.delete_topic_path(name)) is None,
                f"the deletion request for unknown topic {name!r} is dropped",
                TIMEOUT_S,
            )
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


@FUZZ
@given(payload=payloads(S.VALID_CONFIG))
def test_topic_config_read_by_an_offline_election(payload: bytes | None) -> None:
    """good-2 ([2, 1]) with ISR [2]: when 2 fails, only the topic config may allow leader 1."""
    with controller_probe() as probe:
        tp = TopicPartition("good", 2)
        state = probe.cluster.state(tp)
        assert state is not None
        lai = state.leader_and_isr
        answer = Answer()
        shrunk = {tp: LeaderAndIsr(2, lai.leader_epoch, (2,), lai.zk_version)}
        probe.active.alter_isr(2, probe.cluster.brokers[2].epoch, shrunk, answer)
        assert isinstance(answer.get(), dict)
        probe.write(P.topic_config_path("good"), payload)
        probe.cluster.stop(2)
        probe.cluster.wait_idle()
        probe.assert_still_in_charge()
        after = probe.cluster.state(tp)
        assert after is not None
        config = probe.cluster.admin.get_log_configs(["good"], {})
        unclean = config[0].get("good", {}).get("unclean.leader.election.enable") == "true"
        expected = 1 if unclean else -1
        assert after.leader_and_isr.leader == expected, f"config {config}: {after}"
        probe.assert_owned_state_consistent()
        probe.assert_still_works()


# Deterministic: with a /feature that never decodes, candidates fail over again and again, and
# *how* a failing run fails depends on timing (hypothesis would call that flaky). The decoder
# itself is fuzzed in ``test_znode_codecs``.
@pytest.mark.parametrize(
    "payload",
    [
        b"{",
        b'{"version":1,"status":1,"features":[]}',
        b'{"version":1,"status":7,"features":{}}',
    ],
    ids=["truncated", "features-array", "status-7"],
)
def test_undecodable_feature_znode_does_not_stop_failover(payload: bytes) -> None:
    """The controller owns ``/feature`` (docs/controller-behaviour.md §7.1, KIP-584): one it cannot
    read must not keep every candidate from becoming controller."""
    with controller_probe() as probe:
        probe.write(P.FEATURE_PATH, payload)
        probe.assert_still_in_charge()
        probe.assert_still_works()


def test_topic_znode_with_a_partition_number_beyond_the_int_digit_limit() -> None:
    """One such topic znode must cost that topic, not every failover (see test_znode_codecs)."""
    with controller_probe() as probe:
        probe.write(P.topic_path("huge"), b'{"version":3,"partitions":{"' + b"9" * 5000 + b'":[1]}}')
        probe.assert_still_in_charge()
        probe.assert_still_works()


@FUZZ
@given(payload=st.one_of(st.binary(max_size=24), S.TRICKY_STRINGS.map(str.encode)))
def test_controller_epoch_znode_read_by_the_next_election(payload: bytes) -> None:
    """With ``/controller_epoch`` unreadable no one can be elected: the candidates must write
    nothing (no ``/controller`` left behind), keep running, and elect once it is repaired."""
    with controller_probe() as probe:
        c = probe.cluster
        probe.write(P.CONTROLLER_EPOCH_PATH, payload)
        c.stop(probe.controller_id)
        c.wait_idle()
        for b in c.running():
            assert b.controller.event_manager.thread.is_alive()
        readable = _epoch_or_none(payload)
        if readable is None:
            assert c.admin.get_controller_id() is None, "a controller registered without an epoch"
            assert c.tree.get(P.CONTROLLER_EPOCH_PATH)[0] == payload, "the epoch znode was rewritten"
            probe.raw.set_data(P.CONTROLLER_EPOCH_PATH, b"41", -1)
            c.start(4)  # a starting broker runs an election
        assert probe.wait_for_controller().controller.is_active


def _epoch_or_none(payload: bytes) -> int | None:
    """What a reader of ``/controller_epoch`` can make of ``payload``
    (decimal text, docs/controller-behaviour.md §7.1)."""
    text = payload.decode("utf-8", "replace").strip()
    if not re.fullmatch(r"-?[0-9]+", text) or len(text) > 4000:
        return None
    return int(text)


@pytest.mark.parametrize("child", ["abc", "-1", "007", "1e3"])
def test_non_numeric_broker_ids_are_ignored(child: str) -> None:
    with controller_probe() as probe:
        other = probe.cluster.tree.open_session()
        other.create(f"{P.BROKER_IDS_PATH}/{child}", b"{}", EPHEMERAL)
        probe.cluster.wait_idle()
        probe.assert_still_in_charge()
        assert set(probe.active.controller_context.live_broker_ids) == {1, 2, 3}
        probe.assert_still_works()


def test_broker_registration_with_a_port_beyond_the_int_digit_limit() -> None:
    """``int()`` refuses more than 4300 digits with ValueError, which the store does not treat as a
    decode error: one such registration must cost that broker only, not every failover."""
    with controller_probe() as probe:
        other = probe.cluster.tree.open_session()
        registration = b'{"version":5,"endpoints":["PLAINTEXT://h:' + b"9" * 5000 + b'"],"host":"h","port":1}'
        other.create(P.broker_id_path(7), registration, EPHEMERAL)
        probe.cluster.wait_idle()
        probe.assert_still_in_charge()
        probe.assert_still_works()
        other.close()
