"""The SCRAM formatter and both ends of the exchange against the RFCs' published examples:
RFC 7677 section 3 (SCRAM-SHA-256) and, as a check of the formatter's generic steps, RFC 5802
section 5 (SCRAM-SHA-1, which Kafka does not offer; the formatter is driven with sha1 directly).
Also the stored form of a credential (Kafka's ScramCredentialUtils) and the JAAS parser."""

from __future__ import annotations

import base64

import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security import jaas
from kafka_controller.security.scram import (
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    ScramClient,
    ScramCredential,
    ScramError,
    ScramFormatter,
    ScramServer,
    decode_saslname,
    encode_saslname,
)

# RFC 7677 section 3
R7677_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
R7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
R7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
R7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
R7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
R7677_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
R7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc7677_server(password: str = "pencil") -> ScramServer:
    credential = ScramFormatter(SCRAM_SHA_256).credential(password, 4096, R7677_SALT)
    return ScramServer(SCRAM_SHA_256, {"user": credential}.get, nonce=lambda: R7677_SERVER_NONCE)


def test_rfc7677_server_side() -> None:
    server = _rfc7677_server()
    assert server.evaluate(R7677_CLIENT_FIRST) == R7677_SERVER_FIRST
    assert server.evaluate(R7677_CLIENT_FINAL) == R7677_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_rfc7677_client_side() -> None:
    client = ScramClient(SCRAM_SHA_256, "user", "pencil", nonce=lambda: R7677_CLIENT_NONCE)
    assert client.first() == R7677_CLIENT_FIRST
    assert client.final(R7677_SERVER_FIRST) == R7677_CLIENT_FINAL
    client.verify(R7677_SERVER_FINAL)
    with pytest.raises(ScramError, match="signature"):
        client.verify(b"v=" + base64.b64encode(b"\0" * 32))


def test_rfc5802_sha1_formatter() -> None:
    """RFC 5802 section 5: the same steps with SHA-1 give the published proof and signature."""
    f = ScramFormatter(SCRAM_SHA_256)
    f.hash_name = "sha1"
    salt = base64.b64decode("QSXCR+Q6sek8bf92")
    salted = f.salted_password("pencil", salt, 4096)
    auth = (
        b"n=user,r=fyko+d2lbbFgONRv9qkxdawL,"
        b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096,"
        b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j"
    )
    assert base64.b64encode(f.client_proof(salted, auth)) == b"v0X8v3Bz2T0CJGbJQyF0X+HI4Ts="
    assert base64.b64encode(f.server_signature(f.server_key(salted), auth)) == b"rmF9pqV8S7suAoZWja4dJRkFsKQ="


def test_wrong_password_fails_the_proof() -> None:
    server = _rfc7677_server(password="not-pencil")
    server.evaluate(R7677_CLIENT_FIRST)
    with pytest.raises(ScramError, match="proof"):
        server.evaluate(R7677_CLIENT_FINAL)
    assert not server.complete
    with pytest.raises(ScramError):  # the exchange is over
        server.evaluate(R7677_CLIENT_FINAL)


@pytest.mark.parametrize(
    ("first", "final", "why"),
    [
        (R7677_CLIENT_FIRST, R7677_CLIENT_FINAL.replace(b"k0,p", b"k1,p"), "nonce"),
        (R7677_CLIENT_FIRST, R7677_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "channel binding"),
        (b"y,,n=user,r=abc", None, "client-first"),
        (b"n,a=other,n=user,r=abc", None, "authorization id"),
        (b"n,,n=nobody,r=abc", None, "unknown user"),
        (b"n,,n=us=er,r=abc", None, "client-first"),
        (b"n,,n=user,r=abc,tokenauth=true", None, "delegation tokens"),
        (R7677_CLIENT_FIRST, b"c=biws,r=x", "client-final"),
    ],
)
def test_bad_messages_are_refused(first: bytes, final: bytes | None, why: str) -> None:
    server = _rfc7677_server()
    with pytest.raises(ScramError, match=why):
        server.evaluate(first)
        assert final is not None
        server.evaluate(final)
    assert not server.complete


def test_stored_iterations_below_kafkas_minimum_are_refused() -> None:
    credential = ScramFormatter(SCRAM_SHA_512).credential("pw", 1000)
    server = ScramServer(SCRAM_SHA_512, {"u": credential}.get)
    with pytest.raises(ScramError, match="iterations"):
        server.evaluate(b"n,,n=u,r=abc")


@pytest.mark.parametrize("mechanism", [SCRAM_SHA_256, SCRAM_SHA_512])
def test_client_and_server_agree_with_escaped_names(mechanism: str) -> None:
    name = "a=b,c"
    credential = ScramFormatter(mechanism).credential("s3cret", 4096)
    server = ScramServer(mechanism, {name: credential}.get)
    client = ScramClient(mechanism, name, "s3cret")
    assert encode_saslname(name) == "a=3Db=2Cc" and decode_saslname("a=3Db=2Cc") == name
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.complete and server.username == name


def test_credential_round_trips_kafkas_stored_form() -> None:
    credential = ScramFormatter(SCRAM_SHA_256).credential("pencil", 4096, R7677_SALT)
    text = credential.to_config()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_config(text) == credential
    assert "pencil" not in text and "pencil" not in repr(credential)
    for bad in ("salt=a,stored_key=b,server_key=c", text + ",extra=1", text.replace("4096", "x")):
        with pytest.raises(InvalidArgumentError):
            ScramCredential.from_config(bad)


def test_kafka_salt_is_a_base36_string() -> None:
    credential = ScramFormatter(SCRAM_SHA_512).credential("pw", 4096)
    assert credential.salt.decode("ascii").isalnum() and len(credential.salt) >= 20


def test_jaas_parses_kafkas_syntax() -> None:
    entry = jaas.parse(
        "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
        '  username="admin" password="a-s\\"x" /* c */ user_admin="a-s" // comment\n'
        "  user_alice=alice1;"
    )
    assert entry.login_module == jaas.PLAIN_LOGIN_MODULE
    assert entry.flag == "required"
    assert entry.options == {
        "username": "admin",
        "password": 'a-s"x',
        "user_admin": "a-s",
        "user_alice": "alice1",
    }
    assert "a-s" not in repr(entry)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('org.x.Module required username="a"', "end with ';'"),
        ("org.x.Module mandatory;", "flag"),
        ('org.x.Module required a="1"; org.y.Module required;', "exactly one"),
        ("org.x.Module required a=1;", "value"),
        ("org.x.Module required a;", "expected '='"),
        ("", "login module"),
    ],
)
def test_jaas_refuses_bad_text_without_echoing_it(text: str, why: str) -> None:
    with pytest.raises(InvalidArgumentError, match=why) as info:
        jaas.parse(text)
    assert '"a"' not in str(info.value)
