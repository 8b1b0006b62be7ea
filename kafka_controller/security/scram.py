"""SCRAM (RFC 5802, RFC 7677) as Kafka 2.8 speaks it: the key derivation, the stored credential
format, the four messages, and both ends of the exchange.

Kafka's ``ScramFormatter`` derives ``SaltedPassword = Hi(password, salt, i)`` (PBKDF2-HMAC, the
password's UTF-8 bytes, no SASLprep), ``ClientKey = HMAC(SaltedPassword, "Client Key")``,
``StoredKey = H(ClientKey)``, ``ServerKey = HMAC(SaltedPassword, "Server Key")``. A broker keeps
only ``salt``, ``StoredKey``, ``ServerKey`` and the iteration count (``ScramCredentialUtils``:
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>``), so the password itself is never
stored and cannot be read back from ZooKeeper.

``ScramServer`` is ``ScramSaslServer``: client-first (``n,,n=<user>,r=<nonce>``), server-first
with the combined nonce, the salt and the iterations, client-final with the proof, server-final
with the server's signature. The proof and every other secret comparison is constant-time
(``hmac.compare_digest``). Where Kafka 2.8.2 is lax this is not: the client-final's nonce must be
the server-first's (or, as librdkafka before 2.1 sends it, the client's nonce followed by it) and
its channel binding the client-first's GS2 header (RFC 5802 section 5.1).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from kafka_controller.domain.errors import InvalidArgumentError

SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
#: Mechanism name -> (hash name, Kafka's ``ScramMechanism`` byte in the admin APIs).
MECHANISMS: dict[str, tuple[str, int]] = {SCRAM_SHA_256: ("sha256", 1), SCRAM_SHA_512: ("sha512", 2)}
#: Kafka's ``ScramMechanism.minIterations`` (4096 for both) and the admin APIs' upper bound.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
#: What a client that asks a server for a credential will accept at most (PBKDF2 is the
#: server's to choose; a hostile server must not make us spin for minutes).
CLIENT_MAX_ITERATIONS = 1_000_000


class ScramError(Exception):
    """The exchange failed: bad message, unknown user, wrong proof (Kafka's ``SaslException``)."""


def mechanism_of_byte(code: int) -> str | None:
    return next((name for name, (_, c) in MECHANISMS.items() if c == code), None)


def _hash_name(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism][0]
    except KeyError:
        raise InvalidArgumentError(f"unknown SCRAM mechanism {mechanism!r}") from None


# -- the formatter (Kafka's ScramFormatter) ------------------------------------------------------------------
class ScramFormatter:
    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self.hash_name = _hash_name(mechanism)

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def hash(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)

    def client_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Client Key")

    def stored_key(self, client_key: bytes) -> bytes:
        return self.hash(client_key)

    def server_key(self, salted_password: bytes) -> bytes:
        return self.hmac(salted_password, b"Server Key")

    def client_signature(self, stored_key: bytes, auth_message: bytes) -> bytes:
        return self.hmac(stored_key, auth_message)

    def client_proof(self, salted_password: bytes, auth_message: bytes) -> bytes:
        client_key = self.client_key(salted_password)
        return _xor(client_key, self.client_signature(self.stored_key(client_key), auth_message))

    def server_signature(self, server_key: bytes, auth_message: bytes) -> bytes:
        return self.hmac(server_key, auth_message)

    def credential_from_salted(self, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
        """What AlterUserScramCredentials stores: the client sent the salt and SaltedPassword."""
        return ScramCredential(
            salt,
            self.stored_key(self.client_key(salted_password)),
            self.server_key(salted_password),
            iterations,
        )

    def credential(self, password: str, iterations: int, salt: bytes | None = None) -> ScramCredential:
        """A new credential; Kafka's salt is the UTF-8 of a random base-36 string (130 bits)."""
        salt = salt if salt is not None else random_string().encode("ascii")
        return self.credential_from_salted(salt, self.salted_password(password, salt, iterations), iterations)


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def random_string() -> str:
    """Kafka's ``secureRandomString``: 130 random bits printed in base 36."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if not value:
            return out


# -- the stored credential (Kafka's ScramCredential / ScramCredentialUtils) ------------------------------
@dataclass(frozen=True)
class ScramCredential:
    salt: bytes = field(repr=False)
    stored_key: bytes = field(repr=False)
    server_key: bytes = field(repr=False)
    iterations: int

    def to_config(self) -> str:
        b64 = base64.standard_b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @staticmethod
    def from_config(text: str) -> ScramCredential:
        """``ScramCredentialUtils.credentialFromString``: exactly the four keys."""
        values: dict[str, str] = {}
        for part in text.split(","):
            key, sep, value = part.partition("=")
            if not sep or key in values:
                raise InvalidArgumentError("invalid SCRAM credential: expected key=value pairs")
            values[key] = value
        if set(values) != {"salt", "stored_key", "server_key", "iterations"}:
            raise InvalidArgumentError(
                "invalid SCRAM credential: expected salt, stored_key, server_key and iterations"
            )
        try:
            return ScramCredential(
                base64.standard_b64decode(values["salt"]),
                base64.standard_b64decode(values["stored_key"]),
                base64.standard_b64decode(values["server_key"]),
                int(values["iterations"]),
            )
        except (binascii.Error, ValueError):
            raise InvalidArgumentError("invalid SCRAM credential: bad base64 or iterations") from None


# -- messages ------------------------------------------------------------------------------------------------
_PRINTABLE = r"[\x21-\x2B\x2D-\x7E]+"  # RFC 5802 printable, no comma
_SASLNAME = r"(?:[^=,\x00]|=2C|=3D)+"
_B64 = r"[A-Za-z0-9+/]*={0,2}"
_CLIENT_FIRST = re.compile(
    rf"(?P<gs2>n,(?:a=(?P<authzid>{_SASLNAME}))?,)(?:m=[^,]*,)?"
    rf"n=(?P<user>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})(?:,(?P<extensions>.*))?",
    re.DOTALL,
)
_SERVER_FIRST = re.compile(
    rf"(?:m=[^,]*,)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_B64}),i=(?P<iterations>[0-9]+)(?:,.*)?", re.DOTALL
)
_CLIENT_FINAL = re.compile(
    rf"(?P<bare>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE})(?:,[a-zA-Z]=[^,]*)*),p=(?P<proof>{_B64})",
    re.DOTALL,
)
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>[^,]*)|v=(?P<signature>{_B64}))(?:,.*)?", re.DOTALL)


def decode_saslname(name: str) -> str:
    """``=2C`` is ``,`` and ``=3D`` is ``=`` (RFC 5802 section 5.1; Kafka's ``ScramFormatter.username``)."""
    return name.replace("=2C", ",").replace("=3D", "=")


def encode_saslname(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error:
        raise ScramError(f"invalid base64 in the {what}") from None


def _text(message: bytes, what: str) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError(f"the {what} is not UTF-8") from None


#: ``lookup(username) -> credential`` (None: no such user, or none for this mechanism).
CredentialLookup = Callable[[str], ScramCredential | None]


class ScramServer:
    """One exchange, server side. ``evaluate`` takes each client message and returns the answer;
    it raises ``ScramError`` for anything wrong, after which the exchange is over."""

    def __init__(
        self, mechanism: str, lookup: CredentialLookup, nonce: Callable[[], str] = random_string
    ) -> None:
        self.mechanism = mechanism
        self._formatter = ScramFormatter(mechanism)
        self._lookup = lookup
        self._nonce = nonce
        self._step = 0
        self.username: str | None = None
        self.complete = False
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._gs2 = ""
        self._combined_nonce = ""
        self._client_nonce = ""

    def evaluate(self, message: bytes) -> bytes:
        step, self._step = self._step, -1  # any failure ends the exchange
        if step == 0:
            answer = self._first(_text(message, "client-first message"))
            self._step = 1
            return answer
        if step == 1:
            answer = self._final(_text(message, "client-final message"))
            self.complete = True
            self._step = 2
            return answer
        raise ScramError("unexpected SCRAM message after the exchange ended")

    def _first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise ScramError("invalid SCRAM client-first message")
        username = decode_saslname(match["user"])
        authzid = match["authzid"]
        if authzid is not None and decode_saslname(authzid) != username:
            raise ScramError("authorization id must be the user name")
        extensions = match["extensions"] or ""
        if any(part.strip() == "tokenauth=true" for part in extensions.split(",")):
            raise ScramError("delegation tokens are not supported")
        credential = self._lookup(username)
        if credential is None:
            raise ScramError("unknown user")
        if credential.iterations < MIN_ITERATIONS:
            raise ScramError("too few iterations in the stored credential")
        self.username = username
        self._credential = credential
        self._gs2 = match["gs2"]
        self._client_first_bare = text[len(match["gs2"]) :]
        combined = match["nonce"] + self._nonce()
        salt = base64.standard_b64encode(credential.salt).decode()
        self._server_first = f"r={combined},s={salt},i={credential.iterations}"
        self._combined_nonce = combined
        self._client_nonce = match["nonce"]
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise ScramError("invalid SCRAM client-final message")
        credential = self._credential
        assert credential is not None
        nonce = match["nonce"].encode()
        combined = self._combined_nonce.encode()
        # librdkafka before 2.1 sends its own nonce again in front of the combined one; the
        # AuthMessage the proof covers holds the server-first (our nonce) either way
        if not (
            hmac.compare_digest(nonce, combined)
            or hmac.compare_digest(nonce, self._client_nonce.encode() + combined)
        ):
            raise ScramError("the client-final nonce is not the server-first's")
        if not hmac.compare_digest(_b64decode(match["channel"], "channel binding"), self._gs2.encode()):
            raise ScramError("the channel binding is not the client-first's GS2 header")
        proof = _b64decode(match["proof"], "client proof")
        auth_message = f"{self._client_first_bare},{self._server_first},{match['bare']}".encode()
        f = self._formatter
        signature = f.client_signature(credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise ScramError("invalid client proof")
        if not hmac.compare_digest(f.hash(_xor(signature, proof)), credential.stored_key):
            raise ScramError("invalid client proof")
        server_signature = f.server_signature(credential.server_key, auth_message)
        return b"v=" + base64.standard_b64encode(server_signature)


class ScramClient:
    """One exchange, client side (the broker's inter-broker connections, and tests)."""

    def __init__(
        self, mechanism: str, username: str, password: str, nonce: Callable[[], str] = random_string
    ) -> None:
        self._formatter = ScramFormatter(mechanism)
        self._username = username
        self._password = password
        self._nonce = nonce()
        self._client_first_bare = ""
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        self._client_first_bare = f"n={encode_saslname(self._username)},r={self._nonce}"
        return f"n,,{self._client_first_bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _text(server_first, "server-first message")
        match = _SERVER_FIRST.fullmatch(text)
        if match is None:
            raise ScramError("invalid SCRAM server-first message")
        nonce = match["nonce"]
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise ScramError("the server's nonce does not extend ours")
        iterations = int(match["iterations"])
        if not MIN_ITERATIONS <= iterations <= CLIENT_MAX_ITERATIONS:
            raise ScramError(f"the server asks for {iterations} iterations")
        salt = _b64decode(match["salt"], "salt")
        f = self._formatter
        self._salted = f.salted_password(self._password, salt, iterations)
        bare = f"c=biws,r={nonce}"
        self._auth_message = f"{self._client_first_bare},{text},{bare}".encode()
        proof = f.client_proof(self._salted, self._auth_message)
        return f"{bare},p={base64.standard_b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        match = _SERVER_FINAL.fullmatch(_text(server_final, "server-final message"))
        if match is None:
            raise ScramError("invalid SCRAM server-final message")
        if match["error"] is not None:
            raise ScramError(f"the server refused: {match['error']}")
        f = self._formatter
        expected = f.server_signature(f.server_key(self._salted), self._auth_message)
        if not hmac.compare_digest(_b64decode(match["signature"], "server signature"), expected):
            raise ScramError("the server's signature is wrong: it does not know our credential")


__all__ = [
    "MAX_ITERATIONS",
    "MECHANISMS",
    "MIN_ITERATIONS",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "ScramClient",
    "ScramCredential",
    "ScramError",
    "ScramFormatter",
    "ScramServer",
    "decode_saslname",
    "encode_saslname",
    "mechanism_of_byte",
    "random_string",
]
