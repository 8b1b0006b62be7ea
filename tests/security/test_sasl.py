"""SASL as Kafka's own clients meet it: kcat, confluent-kafka and kafka-python list metadata and
create topics over SASL_PLAINTEXT and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, and
are refused with a wrong password and without credentials; a user made with ``configs alter
--entity-type users`` is accepted by every broker without a restart; Kafka's errors on the wire
(v0 and v1 handshakes, an unknown mechanism, a request before authentication); a cluster whose
inter-broker listener is SASL_SSL elects and leads a topic; no password reaches the log."""

from __future__ import annotations

import base64
import json
import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.values import ReplicaAssignment, TopicPartition
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.dryrun.memory_zk import InMemoryZooKeeper
from kafka_controller.security import sasl_wire as wire
from kafka_controller.security.credentials import alter_user_credentials
from kafka_controller.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramClient, ScramFormatter
from kafka_controller.transport import framing
from tests.broker.helpers import wait_until
from tests.security.conftest import Pki

pytestmark = [pytest.mark.clients]

BROKER_PASSWORD = "broker-Secret-1"
ALICE_PASSWORD = "alice-Secret-2"
PLAIN_PASSWORD = "plain-Secret-3"
PASSWORDS = (BROKER_PASSWORD, ALICE_PASSWORD, PLAIN_PASSWORD)
MECHANISMS = ("PLAIN", SCRAM_SHA_256, SCRAM_SHA_512)
PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


def sasl_settings(listeners: dict[str, str], inter_broker: str, pki: Pki | None = None) -> dict[str, str]:
    """Kafka's settings for SASL listeners {NAME: PROTOCOL}: every mechanism enabled, the broker's
    own credentials SCRAM-SHA-512 on ``inter_broker``; PLAIN users ``broker`` and ``carol``."""
    out = {
        "listeners": ",".join(f"{name}://127.0.0.1:0" for name in listeners),
        "listener.security.protocol.map": ",".join(f"{n}:{p}" for n, p in listeners.items()),
        "inter.broker.listener.name": inter_broker,
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "sasl.mechanism.inter.broker.protocol": SCRAM_SHA_512,
    }
    for name in listeners:
        prefix = f"listener.name.{name.lower()}"
        out[f"{prefix}.plain.sasl.jaas.config"] = (
            f'{PLAIN_MODULE} required username="broker" password="{BROKER_PASSWORD}" '
            f'user_broker="{BROKER_PASSWORD}" user_carol="{PLAIN_PASSWORD}";'
        )
        out[f"{prefix}.scram-sha-256.sasl.jaas.config"] = f"{SCRAM_MODULE} required;"
        out[f"{prefix}.scram-sha-512.sasl.jaas.config"] = (
            f'{SCRAM_MODULE} required username="broker" password="{BROKER_PASSWORD}";'
        )
    if pki is not None:
        out.update(pki.broker_tls())
    return out


def add_user(store: InMemoryMetadataStore, user: str, password: str) -> None:
    credentials = {m: ScramFormatter(m).credential(password, 4096) for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
    alter_user_credentials(store, user, credentials)


@pytest.fixture
def cluster(
    pki: Pki, start_broker: Callable[..., BrokerServer], caplog: pytest.LogCaptureFixture
) -> Iterator[tuple[BrokerServer, InMemoryZooKeeper]]:
    """One broker with a SASL_PLAINTEXT and a SASL_SSL listener (the inter-broker one); SCRAM
    users ``broker`` and ``alice`` exist before it starts."""
    caplog.set_level(logging.DEBUG)
    tree = InMemoryZooKeeper()
    store = InMemoryMetadataStore(tree)
    store.create_top_level_paths()
    add_user(store, "broker", BROKER_PASSWORD)
    add_user(store, "alice", ALICE_PASSWORD)
    settings = sasl_settings({"SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL"}, "SASL_SSL", pki)
    server = start_broker(1, settings, tree)
    wait_until(lambda: server.controller.is_active, "broker 1 to become controller")
    yield server, tree
    assert_no_password_logged(caplog)


def assert_no_password_logged(caplog: pytest.LogCaptureFixture) -> None:
    text = "\n".join(r.getMessage() + (r.exc_text or "") for r in caplog.records)
    for password in PASSWORDS:
        assert password not in text
        assert base64.b64encode(password.encode()).decode() not in text


def _address(server: BrokerServer, listener: str) -> str:
    return f"127.0.0.1:{server.transport.ports[listener]}"


def _user_for(mechanism: str) -> tuple[str, str]:
    return ("carol", PLAIN_PASSWORD) if mechanism == "PLAIN" else ("alice", ALICE_PASSWORD)


def _refused_by_the_broker(caplog: pytest.LogCaptureFixture, mechanism: str, since: int) -> None:
    """The broker itself refused (the client giving up on its own, e.g. on the server's signature,
    would not do): one line naming the peer and the mechanism."""
    wait_until(
        lambda: [
            r
            for r in caplog.records[since:]
            if r.getMessage().startswith("Failed authentication with 127.0.0.1:")
            and f"(SASL mechanism {mechanism})" in r.getMessage()
        ],
        f"the broker to log a refused {mechanism} authentication",
    )


CASES = [(listener, mechanism) for listener in ("SASL_PLAINTEXT", "SASL_SSL") for mechanism in MECHANISMS]


# -- confluent-kafka --------------------------------------------------------------------------------
def _confluent(server: BrokerServer, listener: str, pki: Pki, **settings: Any) -> Any:
    from confluent_kafka.admin import AdminClient

    config = {"bootstrap.servers": _address(server, listener), "security.protocol": listener.lower()}
    if listener == "SASL_SSL":
        config["ssl.ca.location"] = str(pki.truststore)
    return AdminClient({**config, **settings})


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_confluent_kafka_lists_and_creates_over_sasl(
    cluster: tuple[BrokerServer, InMemoryZooKeeper], pki: Pki, listener: str, mechanism: str
) -> None:
    from confluent_kafka.admin import NewTopic

    server, tree = cluster
    user, password = _user_for(mechanism)
    admin = _confluent(
        server,
        listener,
        pki,
        **{"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password},
    )
    metadata = admin.list_topics(timeout=15)
    assert [f"{b.host}:{b.port}" for b in metadata.brokers.values()] == [_address(server, listener)]
    topic = f"ck-{listener}-{mechanism}".lower()
    for future in admin.create_topics([NewTopic(topic, 1, 1)], request_timeout=15).values():
        future.result(timeout=30)
    assert InMemoryMetadataStore(tree).topic_exists(topic)


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_confluent_kafka_is_refused_with_a_wrong_password_and_without_credentials(
    cluster: tuple[BrokerServer, InMemoryZooKeeper],
    pki: Pki,
    listener: str,
    mechanism: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from confluent_kafka import KafkaException

    server, _ = cluster
    user, _ = _user_for(mechanism)
    wrong = {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": "not-it"}
    since = len(caplog.records)
    with pytest.raises(KafkaException):
        _confluent(server, listener, pki, **wrong).list_topics(timeout=3)
    _refused_by_the_broker(caplog, mechanism, since)
    plain_protocol = {"security.protocol": "ssl" if listener == "SASL_SSL" else "plaintext"}
    with pytest.raises(KafkaException):
        _confluent(server, listener, pki, **plain_protocol).list_topics(timeout=3)


# -- kafka-python -----------------------------------------------------------------------------------
def _kafka_python(server: BrokerServer, listener: str, pki: Pki, **settings: Any) -> Any:
    from kafka.admin import KafkaAdminClient

    if listener == "SASL_SSL":
        settings.setdefault("ssl_cafile", str(pki.truststore))
    settings.setdefault("security_protocol", listener)
    return KafkaAdminClient(
        bootstrap_servers=_address(server, listener), request_timeout_ms=10_000, **settings
    )


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_kafka_python_lists_and_creates_over_sasl(
    cluster: tuple[BrokerServer, InMemoryZooKeeper], pki: Pki, listener: str, mechanism: str
) -> None:
    from kafka.admin import NewTopic

    server, tree = cluster
    user, password = _user_for(mechanism)
    admin = _kafka_python(
        server,
        listener,
        pki,
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
    )
    try:
        topic = f"kp-{listener}-{mechanism}".lower()
        admin.create_topics([NewTopic(topic, 1, 1)])
        assert topic in admin.list_topics()
        assert [f"{b.host}:{b.port}" for b in admin._client.cluster.brokers()] == [_address(server, listener)]
    finally:
        admin.close()
    assert InMemoryMetadataStore(tree).topic_exists(topic)


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_kafka_python_is_refused_with_a_wrong_password_and_without_credentials(
    cluster: tuple[BrokerServer, InMemoryZooKeeper],
    pki: Pki,
    listener: str,
    mechanism: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from kafka.errors import KafkaError

    server, _ = cluster
    user, _ = _user_for(mechanism)
    refusals = (
        {"sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": "nope"},
        {"security_protocol": "SSL" if listener == "SASL_SSL" else "PLAINTEXT"},  # no SASL at all
    )
    for i, settings in enumerate(refusals):
        since = len(caplog.records)
        with pytest.raises(KafkaError):
            _kafka_python(server, listener, pki, bootstrap_timeout_ms=4000, **settings).list_topics()
        if i == 0:
            _refused_by_the_broker(caplog, mechanism, since)


# -- kcat -------------------------------------------------------------------------------------------
def _kcat(
    server: BrokerServer, listener: str, pki: Pki, *settings: str, wait_s: int = 10, topic: str | None = None
) -> Any:
    kcat = shutil.which("kcat")
    assert kcat is not None, "kcat is not installed (Debian's kcat package; .ci/bootstrap installs it)"
    args = [kcat, "-L", "-J", "-b", _address(server, listener), "-m", str(wait_s)]
    args += [] if topic is None else ["-t", topic]
    args += ["-X", f"security.protocol={listener.lower()}"]
    if listener == "SASL_SSL":
        args += ["-X", f"ssl.ca.location={pki.truststore}"]
    for setting in settings:
        args += ["-X", setting]
    return subprocess.run(args, capture_output=True, text=True, timeout=wait_s + 20, check=False)


@pytest.mark.parametrize(("listener", "mechanism"), CASES)
def test_kcat_lists_and_creates_over_sasl_and_is_refused_without_the_password(
    cluster: tuple[BrokerServer, InMemoryZooKeeper],
    pki: Pki,
    listener: str,
    mechanism: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server, tree = cluster
    user, password = _user_for(mechanism)
    login = (f"sasl.mechanisms={mechanism}", f"sasl.username={user}", f"sasl.password={password}")
    ok = _kcat(server, listener, pki, *login)
    assert ok.returncode == 0, ok.stderr
    listed = json.loads(ok.stdout)
    assert [f"{b['name']}" for b in listed["brokers"]] == [_address(server, listener)]
    # kcat makes a topic the way it can: metadata for an unknown topic, which the broker
    # auto-creates (auto.create.topics.enable, Kafka's default)
    topic = f"kcat-{listener}-{mechanism}".lower()
    assert _kcat(server, listener, pki, *login, topic=topic).returncode == 0
    wait_until(lambda: InMemoryMetadataStore(tree).topic_exists(topic), "kcat's topic to be created")
    wait_until(
        lambda: (
            topic in [t["topic"] for t in json.loads(_kcat(server, listener, pki, *login).stdout)["topics"]]
        ),
        "kcat to list its topic",
    )
    since = len(caplog.records)
    wrong = _kcat(
        server,
        listener,
        pki,
        f"sasl.mechanisms={mechanism}",
        f"sasl.username={user}",
        "sasl.password=nope",
        wait_s=3,
    )
    assert wrong.returncode != 0
    assert "Authentication failed" in wrong.stderr
    _refused_by_the_broker(caplog, mechanism, since)
    no_sasl = "security.protocol=ssl" if listener == "SASL_SSL" else "security.protocol=plaintext"
    assert _kcat(server, listener, pki, no_sasl, wait_s=3).returncode != 0


# -- Kafka's frames, as the wire carries them --------------------------------------------------------
def _call(sock: socket.socket, payload: bytes) -> bytes | None:
    """Send one frame, read one (a raw SASL reply may be empty); None when the broker closed."""
    framing.write_frame(sock, payload)
    try:
        header = framing.recv_exact(sock, 4)
        if header is None:
            return None
        (length,) = struct.unpack(">i", header)
        answer = framing.recv_exact(sock, length) if length else bytearray()
    except ConnectionResetError:
        return None
    return None if answer is None else bytes(answer)


def _authenticate(cid: int, version: int, token: bytes) -> bytes:
    head = struct.pack(">hhi", wire.SASL_AUTHENTICATE, version, cid) + struct.pack(">h", 1) + b"t"
    if version >= 2:
        assert len(token) < 127  # a one-byte varint
        return head + b"\0" + bytes([len(token) + 1]) + token + b"\0"
    return head + struct.pack(">i", len(token)) + token


def test_scram_over_v1_frames_then_kafka_requests_and_errors(
    cluster: tuple[BrokerServer, InMemoryZooKeeper],
) -> None:
    server, _ = cluster
    with socket.create_connection(("127.0.0.1", server.transport.ports["SASL_PLAINTEXT"]), timeout=10) as s:
        answer = _call(s, wire.handshake_request(1, "GSSAPI", "t"))
        assert answer is not None
        _, error, enabled = wire.read_handshake_response(wire.SaslReader(answer))
        assert (error, enabled) == (wire.UNSUPPORTED_SASL_MECHANISM, list(MECHANISMS))
        s.settimeout(5)
        assert s.recv(1) == b""  # and closes
    with socket.create_connection(("127.0.0.1", server.transport.ports["SASL_PLAINTEXT"]), timeout=10) as s:
        # a Metadata request before authenticating: closed without an answer
        assert (
            _call(s, struct.pack(">hhi", 3, 1, 7) + struct.pack(">h", 1) + b"t" + struct.pack(">i", -1))
            is None
        )
    with socket.create_connection(("127.0.0.1", server.transport.ports["SASL_PLAINTEXT"]), timeout=10) as s:
        answer = _call(s, wire.handshake_request(1, SCRAM_SHA_256, "t"))
        assert answer is not None and wire.read_handshake_response(wire.SaslReader(answer))[1] == 0
        client = ScramClient(SCRAM_SHA_256, "alice", "wrong")
        first = _call(s, _authenticate(2, 2, client.first()))
        assert first is not None
        reader = wire.SaslReader(first)
        assert reader.int32() == 2
        reader.skip_tagged_fields()
        assert reader.int16() == 0
        assert reader.uvarint() == 0  # a null error message
        token = reader.compact_bytes()
        final = client.final(token)
        refused = _call(s, wire.authenticate_request(3, final, "t"))
        assert refused is not None
        _, code, message, _ = wire.read_authenticate_response(wire.SaslReader(refused))
        assert code == wire.SASL_AUTHENTICATION_FAILED
        assert message == (
            "Authentication failed during authentication due to invalid credentials "
            "with SASL mechanism SCRAM-SHA-256"
        )
        s.settimeout(5)
        assert s.recv(1) == b""  # then the broker closes the connection, as Kafka's does


def test_plain_over_a_v0_handshake_with_raw_tokens(cluster: tuple[BrokerServer, InMemoryZooKeeper]) -> None:
    server, _ = cluster
    port = server.transport.ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        v0 = (
            struct.pack(">hhi", wire.SASL_HANDSHAKE, 0, 1)
            + struct.pack(">h", 1)
            + b"t"
            + struct.pack(">h", 5)
            + b"PLAIN"
        )
        answer = _call(s, v0)
        assert answer is not None and wire.read_handshake_response(wire.SaslReader(answer))[1] == 0
        assert _call(s, f"\0carol\0{PLAIN_PASSWORD}".encode()) == b""  # the empty raw reply
        # authenticated: an ApiVersions request is served, SaslHandshake is now ILLEGAL_SASL_STATE
        versions = _call(s, struct.pack(">hhi", 18, 0, 5) + struct.pack(">h", 1) + b"t")
        assert versions is not None
        keys = {
            struct.unpack(">h", versions[10 + 6 * i : 12 + 6 * i])[0]
            for i in range(struct.unpack(">i", versions[6:10])[0])
        }
        assert {17, 36, 50, 51} <= keys
        again = _call(s, wire.handshake_request(6, "PLAIN", "t"))
        assert (
            again is not None
            and wire.read_handshake_response(wire.SaslReader(again))[1] == wire.ILLEGAL_SASL_STATE
        )
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert _call(s, v0) is not None
        assert _call(s, b"\0carol\0wrong") is None  # v0: a refusal closes without an answer


def test_a_frame_above_the_sasl_receive_size_is_refused_before_authentication(
    cluster: tuple[BrokerServer, InMemoryZooKeeper],
) -> None:
    server, _ = cluster
    with socket.create_connection(("127.0.0.1", server.transport.ports["SASL_PLAINTEXT"]), timeout=10) as s:
        s.sendall(struct.pack(">i", 524288 + 1) + b"\0")
        assert framing.read_frame(s, 1 << 20) is None


# -- users made at run time -------------------------------------------------------------------------
def test_a_user_added_with_configs_alter_is_accepted_by_every_broker_without_a_restart(
    pki: Pki, start_broker: Callable[..., BrokerServer]
) -> None:
    from confluent_kafka import KafkaException

    tree = InMemoryZooKeeper()
    store = InMemoryMetadataStore(tree)
    store.create_top_level_paths()
    add_user(store, "broker", BROKER_PASSWORD)
    settings = sasl_settings({"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, "SASL_PLAINTEXT")
    brokers = [start_broker(b, settings, tree) for b in (1, 2)]
    wait_until(lambda: len(store.get_sorted_broker_list()) == 2, "two brokers registered")

    def works(server: BrokerServer, password: str) -> bool:
        config = {"sasl.mechanism": SCRAM_SHA_512, "sasl.username": "dave", "sasl.password": password}
        try:
            return bool(_confluent(server, "SASL_PLAINTEXT", pki, **config).list_topics(timeout=3).brokers)
        except KafkaException:
            return False

    assert not works(brokers[0], "dave-Pw-9")
    from kafka_controller.cli import configs_users

    args = _args(entity_name="dave", bootstrap_server=None, json=False, entity_default=False, zk_connect=None)
    with _patched_store(store):
        assert configs_users.run_alter(args, {SCRAM_SHA_512: "iterations=8192,password=dave-Pw-9"}, []) == 0
    stored = store.get_entity_config("users", "dave")[SCRAM_SHA_512]
    assert stored.endswith(",iterations=8192") and "dave-Pw-9" not in stored
    for server in brokers:
        wait_until(lambda server=server: works(server, "dave-Pw-9"), "the new user to be accepted")
    with _patched_store(store):
        assert configs_users.run_alter(args, {}, [SCRAM_SHA_512]) == 0
    for server in brokers:
        wait_until(lambda server=server: not works(server, "dave-Pw-9"), "the deleted user to be refused")


def _args(**values: Any) -> Any:
    import argparse

    return argparse.Namespace(**values)


class _patched_store:
    """``configs_users`` opens ZooKeeper through ``connections.open_store``: hand it the test's tree."""

    def __init__(self, store: InMemoryMetadataStore) -> None:
        self.store = store

    def __enter__(self) -> None:
        import contextlib

        from kafka_controller.cli import configs_users

        self.saved = configs_users._store
        configs_users._store = lambda args: contextlib.nullcontext(self.store)  # type: ignore[assignment]

    def __exit__(self, *exc: object) -> None:
        from kafka_controller.cli import configs_users

        configs_users._store = self.saved  # type: ignore[assignment]


def test_alter_and_describe_user_scram_credentials_over_kafkas_protocol(
    cluster: tuple[BrokerServer, InMemoryZooKeeper], pki: Pki
) -> None:
    from kafka.admin import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion

    server, _ = cluster
    admin = _kafka_python(
        server,
        "SASL_PLAINTEXT",
        pki,
        sasl_mechanism=SCRAM_SHA_512,
        sasl_plain_username="alice",
        sasl_plain_password=ALICE_PASSWORD,
    )
    try:
        result = admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion("erin", SCRAM_SHA_256, "erin-pw", iterations=4096),
                UserScramCredentialUpsertion("frank", SCRAM_SHA_256, "x", iterations=100),
                UserScramCredentialDeletion("gina", SCRAM_SHA_512),
            ]
        )
        assert result == {
            "erin": None,
            "frank": "Too few iterations",
            "gina": "Attempt to delete a user credential that does not exist",
        }
        described = admin.describe_user_scram_credentials(["erin", "nobody"])
        assert described["erin"]["credential_infos"] == [
            {"mechanism": ScramMechanism.SCRAM_SHA_256, "iterations": 4096}
        ]
        assert described["nobody"]["error"].startswith(
            "Attempt to describe a user credential that does not exist"
        )
        everyone = admin.describe_user_scram_credentials()
        assert sorted(everyone) == ["alice", "broker", "erin"]
    finally:
        admin.close()
    wait_until(
        lambda: server.credentials.get(SCRAM_SHA_256, "erin") is not None, "the broker's cache to have erin"
    )


# -- the inter-broker listener ----------------------------------------------------------------------
def test_a_cluster_whose_inter_broker_listener_is_sasl_ssl_elects_and_leads(
    pki: Pki, start_broker: Callable[..., BrokerServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    tree = InMemoryZooKeeper()
    store = InMemoryMetadataStore(tree)
    store.create_top_level_paths()
    add_user(store, "broker", BROKER_PASSWORD)
    settings = {
        **sasl_settings({"SASL_SSL": "SASL_SSL"}, "SASL_SSL", pki),
        "replica.lag.time.max.ms": "2000",
    }
    brokers = {b: start_broker(b, settings, tree) for b in (1, 2, 3)}
    wait_until(
        lambda: store.get_controller_id() is not None and len(store.get_sorted_broker_list()) == 3,
        "a controller and three registered brokers",
    )
    topic = "over-sasl-ssl"
    tps = [TopicPartition(topic, p) for p in range(3)]
    store.create_topic(topic, {p: ReplicaAssignment.of([p + 1, (p + 1) % 3 + 1]) for p in range(3)})

    def states() -> dict[int, tuple[int, int]]:
        out = {}
        for tp, s in store.get_partition_states(tps).items():
            if s is not None and not isinstance(s, Exception):
                out[tp.partition] = (s.leader_and_isr.leader, len(s.leader_and_isr.isr))
        return out

    wait_until(lambda: states() == {0: (1, 2), 1: (2, 2), 2: (3, 2)}, "every partition led with a full ISR")
    for b, broker in brokers.items():  # each leader learnt it from the controller, over SASL_SSL
        wait_until(
            lambda broker=broker, b=b: (
                TopicPartition(topic, b - 1) in broker.replica_manager.partitions_led()
            ),
            f"broker {b} to lead partition {b - 1}",
        )
    assert any(
        "authenticated as User:broker with SCRAM-SHA-512 on listener SASL_SSL" in r.getMessage()
        for r in caplog.records
    )
    assert_no_password_logged(caplog)


def test_a_broker_refuses_to_start_with_an_unsupported_mechanism_or_no_jaas_entry(
    start_broker: Callable[..., BrokerServer],
) -> None:
    from kafka_controller.domain.errors import InvalidArgumentError

    settings = sasl_settings({"SASL_PLAINTEXT": "SASL_PLAINTEXT"}, "SASL_PLAINTEXT")
    with pytest.raises(InvalidArgumentError, match="GSSAPI"):
        start_broker(1, {**settings, "sasl.enabled.mechanisms": "GSSAPI,PLAIN"})
    missing = {k: v for k, v in settings.items() if not k.endswith("scram-sha-256.sasl.jaas.config")}
    with pytest.raises(InvalidArgumentError, match=r"scram-sha-256\.sasl\.jaas\.config") as info:
        start_broker(2, missing)
    assert all(p not in str(info.value) for p in PASSWORDS)


def test_cli_users_help_and_bad_input_never_echo_the_password() -> None:
    env = {**os.environ, "KAFKA_CONTROLLER_ZOOKEEPER": "127.0.0.1:1"}
    cli = [str(Path(sys.executable).with_name("kafka-controller"))]
    bad = subprocess.run(
        [
            *cli,
            "configs",
            "alter",
            "--entity-type",
            "users",
            "--entity-name",
            "u",
            "--add-config",
            "SCRAM-SHA-512=[iterations=10,password=Leak-Me-7]",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert bad.returncode != 0 and "iterations must be 4096-16384" in bad.stderr
    assert "Leak-Me-7" not in bad.stderr + bad.stdout
    worse = subprocess.run(
        [
            *cli,
            "configs",
            "alter",
            "--entity-type",
            "users",
            "--entity-name",
            "u",
            "--add-config",
            "SCRAM-SHA-512=[password=Leak-Me-7",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert worse.returncode != 0 and "Leak-Me-7" not in worse.stderr + worse.stdout


def test_configs_alter_users_on_a_real_zookeeper_reaches_running_brokers(zk_connect: str, pki: Pki) -> None:
    """The command as an operator runs it: ``kafka-controller configs alter --entity-type users``
    writes ZooKeeper (a real server) and both running brokers accept the user at once; ``describe``
    shows the mechanism and iterations only; ``--delete-config`` takes it away again."""
    from confluent_kafka import KafkaException

    from kafka_controller.broker.config import BrokerConfig
    from tests.security.conftest import BASE_SETTINGS

    settings = {
        **BASE_SETTINGS,
        "listeners": "INTERNAL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.enabled.mechanisms": SCRAM_SHA_512,
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": f"{SCRAM_MODULE} required;",
    }
    brokers = [BrokerServer(BrokerConfig.of(b, settings), zk_connect) for b in (1, 2)]
    try:
        for broker in brokers:
            broker.startup()
        cli = [str(Path(sys.executable).with_name("kafka-controller")), "configs"]
        where = ["--zookeeper", zk_connect, "--entity-type", "users", "--entity-name", "dave"]
        secret = "dave-Real-Zk-5"
        added = subprocess.run(
            [*cli, "alter", *where, "--add-config", f"SCRAM-SHA-512=[iterations=8192,password={secret}]"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert added.returncode == 0, added.stderr
        assert secret not in added.stdout + added.stderr

        def works(server: BrokerServer) -> bool:
            config = {"sasl.mechanism": SCRAM_SHA_512, "sasl.username": "dave", "sasl.password": secret}
            try:
                return bool(
                    _confluent(server, "SASL_PLAINTEXT", pki, **config).list_topics(timeout=3).brokers
                )
            except KafkaException:
                return False

        for server in brokers:
            wait_until(lambda server=server: works(server), "a running broker to accept the new user")
        described = subprocess.run(
            [*cli, "describe", *where, "--json"], capture_output=True, text=True, timeout=120, check=False
        )
        assert described.returncode == 0, described.stderr
        assert json.loads(described.stdout)["users"] == {
            "dave": [{"mechanism": SCRAM_SHA_512, "iterations": 8192}]
        }
        deleted = subprocess.run(
            [*cli, "alter", *where, "--delete-config", SCRAM_SHA_512],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert deleted.returncode == 0, deleted.stderr
        for server in brokers:
            wait_until(lambda server=server: not works(server), "the deleted user to be refused")
    finally:
        for broker in brokers:
            broker.crash()


def test_a_refusal_waits_connection_failed_authentication_delay_ms_then_closes(
    start_broker: Callable[..., BrokerServer],
) -> None:
    settings = {
        **sasl_settings({"SASL_PLAINTEXT": "SASL_PLAINTEXT", "INTERNAL": "PLAINTEXT"}, "INTERNAL"),
        "connection.failed.authentication.delay.ms": "5000",
    }
    server = start_broker(1, settings)
    port = server.transport.ports["SASL_PLAINTEXT"]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        assert _call(s, wire.handshake_request(1, "PLAIN", "t")) is not None
        framing.write_frame(s, wire.authenticate_request(2, b"\0carol\0wrong", "t"))
        s.settimeout(1)
        with pytest.raises(TimeoutError):  # held back: not answered at once
            s.recv(1)
        s.settimeout(10)
        answer = framing.read_frame(s, 1 << 20)
        assert answer is not None
        assert wire.read_authenticate_response(wire.SaslReader(answer))[1] == wire.SASL_AUTHENTICATION_FAILED
        assert s.recv(1) == b""  # then closed
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:  # a good login is not held
        assert _call(s, wire.handshake_request(1, "PLAIN", "t")) is not None
        s.settimeout(4)  # well inside the 5 s a refusal waits
        ok = _call(s, wire.authenticate_request(2, f"\0carol\0{PLAIN_PASSWORD}".encode(), "t"))
        assert ok is not None and wire.read_authenticate_response(wire.SaslReader(ok))[1] == 0
