"""Kafka's listener settings as a broker reads them: defaults, the ``--listener`` shorthand, Kafka's
cross-checks (each a one-line error), TLS settings per listener, the principal of a client
certificate, and the warning for a PLAINTEXT listener other machines can reach."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from kafka_controller.broker.server import BrokerServer
from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security import certs
from kafka_controller.security.listeners import BrokerListeners, ListenerConfig
from kafka_controller.security.tls import PrincipalMapper, ssl_principal, subject_dn
from tests.security.conftest import Pki


def test_defaults_and_the_shorthand_are_one_plaintext_listener() -> None:
    default = BrokerListeners.of({})
    assert default.listeners == (ListenerConfig("PLAINTEXT", "127.0.0.1", 0, "PLAINTEXT"),)
    assert default.inter_broker_listener_name == "PLAINTEXT" and default.advertised == default.listeners
    shorthand = BrokerListeners.of({}, ("10.1.2.3", 9092))
    assert shorthand.listeners == (ListenerConfig("PLAINTEXT", "10.1.2.3", 9092, "PLAINTEXT"),)


def test_listeners_advertised_listeners_and_protocol_map(pki: Pki) -> None:
    parsed = BrokerListeners.of(
        {
            "listeners": "internal://127.0.0.1:9093,EXTERNAL://:9094,PLAINTEXT://127.0.0.1:0",
            "advertised.listeners": "INTERNAL://broker1.local:9093,EXTERNAL://kafka.example.com:443",
            "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT",
            "inter.broker.listener.name": "internal",
            **pki.broker_tls(),
        }
    )
    names = [(listener.name, listener.security_protocol) for listener in parsed.listeners]
    assert names == [("INTERNAL", "SSL"), ("EXTERNAL", "SASL_SSL"), ("PLAINTEXT", "PLAINTEXT")]
    assert parsed.inter_broker.connection_string() == "INTERNAL://broker1.local:9093"
    registered = parsed.registered({"INTERNAL": 9093, "EXTERNAL": 9094, "PLAINTEXT": 5555})
    assert [ep.connection_string() for ep in registered] == [
        "INTERNAL://broker1.local:9093",
        "EXTERNAL://kafka.example.com:443",
    ]
    assert set(parsed.tls_settings) == {"INTERNAL", "EXTERNAL"}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listeners": "PLAINTEXT://:1,PLAINTEXT://:2"}, "names listener PLAINTEXT twice"),
        ({"listeners": "PLAINTEXT://:9092,SSL://:9092"}, "uses port 9092 twice"),
        ({"listeners": "CLIENT://:9092"}, "no security protocol defined for listener CLIENT"),
        ({"listeners": "PLAINTEXT//host:1"}, "expected NAME://HOST:PORT"),
        ({"listener.security.protocol.map": "A:TLS"}, "PROTOCOL one of"),
        ({"advertised.listeners": "SSL://h:1"}, "not one of listeners"),
        ({"inter.broker.listener.name": "SSL"}, "SSL is not one of PLAINTEXT"),
        (
            {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"},
            "only one of inter.broker.listener.name and security.inter.broker.protocol",
        ),
        ({"control.plane.listener.name": "PLAINTEXT"}, "must differ from the inter-broker listener"),
        ({"control.plane.listener.name": "CONTROL"}, "must be a listener"),
        (
            {"listeners": "SSL://:0", "security.inter.broker.protocol": "SSL", "ssl.keystore.type": "JKS"},
            "ssl.keystore.type=JKS is not supported",
        ),
        (
            {"listeners": "SSL://:0", "security.inter.broker.protocol": "SSL", "ssl.keystore.location": "/x"},
            "requires ssl.key.password",
        ),
        (
            {
                "ssl.principal.mapping.rules": "RULE:(/x/",
                "listeners": "SSL://:0",
                "security.inter.broker.protocol": "SSL",
            },
            "ssl.principal.mapping.rules",
        ),
    ],
)
def test_kafkas_cross_checks_refuse_bad_settings(settings: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        BrokerListeners.of(settings)


def test_listeners_and_the_shorthand_together_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="--listener and the listeners setting"):
        BrokerListeners.of({"listeners": "PLAINTEXT://127.0.0.1:0"}, ("127.0.0.1", 0))


def test_per_listener_ssl_settings_win_and_sasl_ssl_takes_only_its_own_client_auth(pki: Pki) -> None:
    parsed = BrokerListeners.of(
        {
            "listeners": "SSL://:0,SASL_SSL://:0,MTLS://:0",
            "listener.security.protocol.map": "SSL:SSL,SASL_SSL:SASL_SSL,MTLS:SSL",
            "security.inter.broker.protocol": "SSL",
            "ssl.client.auth": "required",
            "listener.name.mtls.ssl.client.auth": "requested",
            "listener.name.mtls.ssl.truststore.location": "/elsewhere/ca.pem",
            **pki.broker_tls(),
        }
    )
    tls = parsed.tls_settings
    assert tls["SSL"].client_auth == "required"
    assert tls["SASL_SSL"].client_auth == "none"  # the broker-wide setting does not apply there
    assert tls["MTLS"].client_auth == "requested"
    assert tls["MTLS"].truststore_location == "/elsewhere/ca.pem"
    assert tls["SSL"].truststore_location == str(pki.truststore)
    assert pki.key_password not in repr(tls["SSL"])


def test_a_wrong_key_password_is_one_line_without_the_password(pki: Pki) -> None:
    settings = {"listeners": "SSL://127.0.0.1:0", "security.inter.broker.protocol": "SSL", **pki.broker_tls()}
    settings["ssl.key.password"] = "not-the-password-123"
    with pytest.raises(InvalidArgumentError) as caught:
        BrokerListeners.of(settings).check()
    assert "cannot load ssl.keystore.location" in str(caught.value)
    assert "not-the-password-123" not in str(caught.value) and "\n" not in str(caught.value)


def test_the_broker_command_refuses_bad_listener_settings_before_starting(pki: Pki) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kafka_controller.cli.main",
            "broker",
            "--broker-id",
            "1",
            "--zookeeper",
            "127.0.0.1:1",
            "--listener",
            "127.0.0.1:0",
            "--config",
            "listeners=SSL://127.0.0.1:0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "kafka-controller broker: error: "
        "--listener and the listeners setting both say where to listen: give one"
    ]


def _der(path: Path) -> bytes:
    from cryptography import x509

    return x509.load_pem_x509_certificate(path.read_bytes()).public_bytes(serialization.Encoding.DER)


def test_the_principal_of_a_client_certificate_is_its_subject_as_java_prints_it(pki: Pki) -> None:
    assert ssl_principal(_der(pki.client_cert), PrincipalMapper()) == "User:CN=client,O=org"
    assert ssl_principal(None, PrincipalMapper()) == "User:ANONYMOUS"
    # Java's X500Principal.getName() (RFC 2253) escapes "," and "+" with a backslash
    ca = certs.make_ca()
    odd = certs.issue(ca, "client, x", organization="org+1").certificate
    assert subject_dn(odd.public_bytes(serialization.Encoding.DER)) == r"CN=client\, x,O=org\+1"


def test_principal_mapping_rules() -> None:
    rules = PrincipalMapper(r"RULE:^CN=(.*?),O=svc$/$1/L, RULE:^CN=([^,]*),.*$/$1@other/, DEFAULT")
    assert rules.name("CN=Alice,O=svc") == "alice"
    assert rules.name("CN=bob,O=x") == "bob@other"
    assert rules.name("O=nobody") == "O=nobody"
    strict = PrincipalMapper(r"RULE:^CN=(.*),O=svc$/$1/U")
    assert strict.name("CN=a,O=svc") == "A"
    with pytest.raises(InvalidArgumentError, match=r"no ssl\.principal\.mapping\.rules rule matches"):
        strict.name("CN=a,O=other")


def test_one_warning_line_for_plaintext_listeners_other_machines_reach(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger("tests.security.warn")
    quiet = BrokerListeners.of(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,LOCAL://localhost:0",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,LOCAL:PLAINTEXT",
        }
    )
    with caplog.at_level(logging.WARNING, logger="tests.security.warn"):
        assert quiet.warn_exposed(logger) is None
        assert not caplog.records
        loud = BrokerListeners.of(
            {
                "listeners": "PLAINTEXT://0.0.0.0:0,OUTSIDE://:0,LOOP://127.0.0.1:0",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OUTSIDE:PLAINTEXT,LOOP:PLAINTEXT",
            }
        )
        line = loud.warn_exposed(logger)
    assert [r.getMessage() for r in caplog.records] == [line]
    assert line is not None and "PLAINTEXT://0.0.0.0:0" in line and "OUTSIDE://:0" in line
    assert "LOOP" not in line


def test_an_ipv6_endpoint_is_registered_in_brackets_and_read_back() -> None:
    import json

    from kafka_controller.domain.values import Broker, EndPoint
    from kafka_controller.zk.codecs import decode_broker, encode_broker

    parsed = BrokerListeners.of({}, ("::1", 9092))
    (registered,) = parsed.registered({"PLAINTEXT": 9092})
    assert registered.connection_string() == "PLAINTEXT://[::1]:9092"
    broker = Broker(1, (registered, EndPoint("127.0.0.1", 9093, "SSL", "SSL")))
    data = encode_broker(broker, 1)
    assert json.loads(data)["endpoints"] == ["PLAINTEXT://[::1]:9092", "SSL://127.0.0.1:9093"]
    assert decode_broker(1, data).endpoints == broker.endpoints


def test_a_broker_binding_plaintext_on_every_address_says_so_once(
    start_broker: Callable[..., BrokerServer], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="kafka_controller.broker.server"):
        server = start_broker(1, {"listeners": "PLAINTEXT://0.0.0.0:0"})
    lines = [r.getMessage() for r in caplog.records if "other machines can reach" in r.getMessage()]
    assert lines == [
        "PLAINTEXT listener PLAINTEXT://0.0.0.0:0 binds an address other machines can reach: anyone who "
        "reaches it is User:ANONYMOUS, unencrypted (use an SSL or SASL_SSL listener, or bind 127.0.0.1)"
    ]
    assert server.broker_info is not None and server.broker_info.endpoints[0].port == server.port
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kafka_controller.broker.server"):
        start_broker(2, {})  # 127.0.0.1: nothing to say
    assert not [r for r in caplog.records if "other machines can reach" in r.getMessage()]
