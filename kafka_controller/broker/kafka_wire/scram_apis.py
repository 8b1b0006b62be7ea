"""SaslHandshake (17) v0-1 and SaslAuthenticate (36) v0-2 after authentication, and
DescribeUserScramCredentials (50) v0 / AlterUserScramCredentials (51) v0, as Kafka 2.8's
``KafkaApis`` and ``ZkAdminManager`` answer them.

The SASL exchange itself happens before a request reaches these handlers
(``kafka_controller.security.sasl``); a SaslHandshake or SaslAuthenticate that arrives afterwards,
or on a listener without SASL, is ILLEGAL_SASL_STATE, as in ``KafkaApis``. Listing both here puts
them in ApiVersions, which is how a client learns the broker speaks SASL at Kafka 2.8's versions.

AlterUserScramCredentials is served by the active controller only (else NOT_CONTROLLER for every
user); the client sends the salt and the salted password (never the password), the broker derives
the stored and server keys and writes ``/config/users/<user>`` plus a ``/config/changes``
notification (``kafka_controller.security.credentials``). Per user, in Kafka's order: an empty
name, an unknown mechanism byte, iterations outside 4096-16384, the same (user, mechanism) twice,
deleting a credential the user lacks; a user with any such entry is not written.

Who may call them is the authorizer's business (Kafka: ALTER, resp. DESCRIBE, on CLUSTER): the
broker wraps these handlers with its checks (``kafka_wire.authz``), which answer
CLUSTER_AUTHORIZATION_FAILED before a handler here runs.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode as E

from kafka_controller.broker.kafka_wire.header import RequestHeader
from kafka_controller.broker.kafka_wire.kio_api import KioApi, response_schema
from kafka_controller.broker.kafka_wire.kio_build import NO_THROTTLE, build, nested
from kafka_controller.domain.errors import KafkaControllerError
from kafka_controller.security.credentials import (
    USERS,
    UserConfigStore,
    alter_user_credentials,
    desanitize,
    sanitize,
    scram_credentials,
)
from kafka_controller.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramFormatter,
    mechanism_of_byte,
)

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


class ScramApis:
    def __init__(self, store: UserConfigStore, is_controller: Callable[[], bool]) -> None:
        self.store = store
        self.is_controller = is_controller

    def apis(self) -> dict[int, KioApi]:
        return {
            SASL_HANDSHAKE: KioApi(SASL_HANDSHAKE, 0, 1, 99, self.sasl_handshake),
            SASL_AUTHENTICATE: KioApi(SASL_AUTHENTICATE, 0, 2, 2, self.sasl_authenticate),
            DESCRIBE_USER_SCRAM_CREDENTIALS: KioApi(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, 0, self.describe),
            ALTER_USER_SCRAM_CREDENTIALS: KioApi(ALTER_USER_SCRAM_CREDENTIALS, 0, 0, 0, self.alter),
        }

    # -- SASL after authentication -----------------------------------------------------------------------
    def sasl_handshake(self, header: RequestHeader, request: Any) -> Any:
        schema = response_schema(SASL_HANDSHAKE, header.api_version)
        return build(schema, error_code=E.illegal_sasl_state, mechanisms=())

    def sasl_authenticate(self, header: RequestHeader, request: Any) -> Any:
        schema = response_schema(SASL_AUTHENTICATE, header.api_version)
        return build(
            schema, error_code=E.illegal_sasl_state, error_message=AFTER_AUTHENTICATION, auth_bytes=b""
        )

    # -- DescribeUserScramCredentials ---------------------------------------------------------------------
    def describe(self, header: RequestHeader, request: Any) -> Any:
        schema = response_schema(DESCRIBE_USER_SCRAM_CREDENTIALS, header.api_version)
        Result, Info = nested(schema, "DescribeUserScramCredentialsResult"), nested(schema, "CredentialInfo")

        def answer(code: E, message: str | None, results: tuple[Any, ...] = ()) -> Any:
            return build(
                schema, throttle_time=NO_THROTTLE, error_code=code, error_message=message, results=results
            )

        asked = [u.name for u in request.users] if request.users else None
        try:
            names = (
                [desanitize(n) for n in self.store.get_entity_names(USERS)]
                if asked is None
                else list(dict.fromkeys(asked))
            )
            configs = {user: self.store.get_entity_config(USERS, sanitize(user)) for user in names}
        except KafkaControllerError as e:
            return answer(E.unknown_server_error, f"cannot read the users' credentials: {e}")
        counts = Counter(asked or ())
        results = []
        for user in sorted(names) if asked is None else names:
            credentials = scram_credentials(configs[user], f"user {user}")
            infos = tuple(
                Info(mechanism=MECHANISMS[m][1], iterations=c.iterations)
                for m, c in sorted(credentials.items())
            )
            code: E = E.none
            message: str | None = None
            if counts[user] > 1:
                code, infos = E.duplicate_resource, ()
                message = (
                    f"Cannot describe SCRAM credentials for the same user twice in a single request: {user}"
                )
            elif not infos:
                if asked is None:
                    continue  # the all-users answer lists only users with credentials
                code = E.resource_not_found
                message = f"Attempt to describe a user credential that does not exist: {user}"
            results.append(Result(user=user, error_code=code, error_message=message, credential_infos=infos))
        return answer(E.none, None, tuple(results))

    # -- AlterUserScramCredentials ------------------------------------------------------------------------
    def alter(self, header: RequestHeader, request: Any) -> Any:
        schema = response_schema(ALTER_USER_SCRAM_CREDENTIALS, header.api_version)
        Result = nested(schema, "AlterUserScramCredentialsResult")
        users = list(
            dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
        )

        def answer(outcomes: dict[str, tuple[E, str | None]]) -> Any:
            results = tuple(Result(user=u, error_code=c, error_message=m) for u, (c, m) in outcomes.items())
            return build(schema, throttle_time=NO_THROTTLE, results=results)

        if not self.is_controller():
            return answer({u: (E.not_controller, None) for u in users})
        outcomes: dict[str, tuple[E, str | None]] = {}
        for user in users:
            outcomes[user] = self._alter_one(user, request)
        return answer(outcomes)

    def _alter_one(self, user: str, request: Any) -> tuple[E, str | None]:
        deletions = [d for d in request.deletions if d.name == user]
        upsertions = [u for u in request.upsertions if u.name == user]
        if not user:
            return E.unacceptable_credential, "Username must not be empty"
        for item in (*deletions, *upsertions):
            if mechanism_of_byte(int(item.mechanism)) is None:
                return E.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"
        for u in upsertions:
            if u.iterations < MIN_ITERATIONS:
                return E.unacceptable_credential, "Too few iterations"
            if u.iterations > MAX_ITERATIONS:
                return E.unacceptable_credential, "Too many iterations"
        mechanisms = [int(i.mechanism) for i in (*deletions, *upsertions)]
        if len(mechanisms) != len(set(mechanisms)):
            return E.duplicate_resource, "A user credential cannot be altered twice in the same request"
        try:
            existing = scram_credentials(self.store.get_entity_config(USERS, sanitize(user)), f"user {user}")
            for d in deletions:
                if mechanism_of_byte(int(d.mechanism)) not in existing:
                    return E.resource_not_found, "Attempt to delete a user credential that does not exist"
            upsert = {}
            for u in upsertions:
                name = mechanism_of_byte(int(u.mechanism))
                assert name is not None
                upsert[name] = ScramFormatter(name).credential_from_salted(
                    bytes(u.salt), bytes(u.salted_password), int(u.iterations)
                )
            delete = [m for d in deletions if (m := mechanism_of_byte(int(d.mechanism))) is not None]
            alter_user_credentials(self.store, user, upsert, delete)
        except KafkaControllerError as e:
            log.warning("Could not alter the SCRAM credentials of user %s: %s", user, e)
            return E.unknown_server_error, f"cannot write the credentials: {e}"
        log.info(
            "SCRAM credentials of user %s: set %s, deleted %s",
            user,
            ",".join(sorted(upsert)) or "none",
            ",".join(sorted(delete)) or "none",
        )
        return E.none, None
