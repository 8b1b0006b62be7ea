"""SCRAM credentials in ZooKeeper, as Kafka keeps them, and every broker's cache of them.

A user's credentials live in ``/config/users/<sanitized name>`` (``{"version":1,"config":{...}}``;
Kafka's ``Sanitizer``: URL-encoded UTF-8 with ``*`` as ``%2A`` and a space as ``%20``), one key per
mechanism (``SCRAM-SHA-512`` -> ``salt=...,stored_key=...,server_key=...,iterations=...``); the
same znode may hold a user's quota settings, so a writer merges. Each write is followed by the
``/config/changes/config_change_<seq>`` notification ``{"version":2,"entity_path":"users/<name>"}``.

``ScramCredentialCache`` is Kafka's ``CredentialCache`` fed by ``CredentialProvider``: loaded whole
when the broker starts following ``/config/changes``, then one user at a time as notifications
name them (``kafka_controller.broker.config_changes``), so a new user is accepted by every broker
without a restart. Authentication reads only the cache: a stranger's guesses never reach ZooKeeper.
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Protocol

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security.scram import MECHANISMS, ScramCredential

log = logging.getLogger(__name__)

USERS = "users"


class UserConfigStore(Protocol):
    """What credentials need of the metadata store (``ZkMetadataStore`` has it)."""

    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]: ...

    def get_entity_names(self, entity_type: str) -> list[str]: ...

    def set_or_create_entity_config(self, entity_type: str, name: str, config: Mapping[str, str]) -> None: ...

    def create_config_change_notification(self, entity_path: str) -> str: ...


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: Java's ``URLEncoder`` (which keeps ``.-*_`` and letters and
    digits), then ``*`` -> ``%2A`` and ``+`` (a space) -> ``%20``."""
    return urllib.parse.quote(name, safe="").replace("~", "%7E").replace("*", "%2A")


def desanitize(name: str) -> str:
    return urllib.parse.unquote(name)


def scram_credentials(config: Mapping[str, str], where: str = "") -> dict[str, ScramCredential]:
    """The SCRAM entries of a user's config (other keys, quotas, are not ours); a corrupt entry is
    logged and left out (that mechanism then refuses the user)."""
    out: dict[str, ScramCredential] = {}
    for mechanism in MECHANISMS:
        text = config.get(mechanism)
        if text is None:
            continue
        try:
            out[mechanism] = ScramCredential.from_config(text)
        except InvalidArgumentError as e:
            log.warning("Ignoring the %s credential of %s: %s", mechanism, where or "a user", e)
    return out


class ScramCredentialCache:
    """Thread-safe: handler threads look up, the broker's task thread updates."""

    def __init__(self, store: UserConfigStore | None = None) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, ScramCredential]] = {}

    def get(self, mechanism: str, username: str) -> ScramCredential | None:
        with self._lock:
            return self._users.get(username, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        with self._lock:
            return {user: dict(creds) for user, creds in self._users.items()}

    def update(self, sanitized_name: str, config: Mapping[str, str]) -> None:
        """A user's config as read (``{}`` once deleted): its SCRAM entries replace the old ones."""
        user = desanitize(sanitized_name)
        credentials = scram_credentials(config, f"user {user}")
        with self._lock:
            if credentials:
                self._users[user] = credentials
            else:
                self._users.pop(user, None)

    def load(self) -> None:
        """Read every user's config (Kafka's start-up pass over ``/config/users``)."""
        store = self.store
        if store is None:
            return
        names = store.get_entity_names(USERS)
        loaded = {name: store.get_entity_config(USERS, name) for name in names}
        for name, config in loaded.items():
            self.update(name, config)
        with self._lock:
            for user in [u for u in self._users if sanitize(u) not in loaded]:
                del self._users[user]


def alter_user_credentials(
    store: UserConfigStore,
    user: str,
    upsert: Mapping[str, ScramCredential],
    delete: Iterable[str] = (),
) -> None:
    """Kafka's ``AdminZkClient.changeConfigs`` for one user: merge into ``/config/users/<user>``
    (other keys kept), then notify every broker."""
    if not user:
        raise InvalidArgumentError("Username must not be empty")
    name = sanitize(user)
    config = dict(store.get_entity_config(USERS, name))
    for mechanism in delete:
        config.pop(mechanism, None)
    for mechanism, credential in upsert.items():
        config[mechanism] = credential.to_config()
    store.set_or_create_entity_config(USERS, name, config)
    store.create_config_change_notification(f"{USERS}/{name}")


__all__ = [
    "USERS",
    "ScramCredentialCache",
    "UserConfigStore",
    "alter_user_credentials",
    "desanitize",
    "sanitize",
    "scram_credentials",
]
