"""SCRAM credentials in ZooKeeper's layout (Kafka's Sanitizer, ScramCredentialUtils, the
``/config/changes`` notification) and a broker's cache of them, fed by the config change
listener: loaded once at start, then user by user as notifications name them."""

from __future__ import annotations

import json
import threading

from kafka_controller.broker.config_changes import ConfigChangeListener
from kafka_controller.dryrun.memory_store import InMemoryMetadataStore
from kafka_controller.security.credentials import (
    ScramCredentialCache,
    alter_user_credentials,
    desanitize,
    sanitize,
)
from kafka_controller.security.scram import SCRAM_SHA_256, SCRAM_SHA_512, ScramFormatter
from kafka_controller.testing.zk_harness import wait_for


def _credential(password: str, mechanism: str = SCRAM_SHA_512) -> object:
    return ScramFormatter(mechanism).credential(password, 4096)


def test_names_are_sanitized_as_kafkas_sanitizer() -> None:
    assert sanitize("alice") == "alice"
    assert sanitize("user@example.com") == "user%40example.com"
    assert sanitize("a b*c~d/e") == "a%20b%2Ac%7Ed%2Fe"
    assert sanitize("a.b-c_d") == "a.b-c_d"
    for name in ("user@example.com", "a b*c~d/e", "ünï"):
        assert desanitize(sanitize(name)) == name


def test_a_write_is_kafkas_znode_and_notification_and_keeps_other_keys() -> None:
    store = InMemoryMetadataStore()
    store.create_top_level_paths()
    store.set_or_create_entity_config("users", "user%40x", {"producer_byte_rate": "1024"})
    alter_user_credentials(store, "user@x", {SCRAM_SHA_256: _credential("pw", SCRAM_SHA_256)})  # type: ignore[dict-item]
    config = store.get_entity_config("users", "user%40x")
    assert config["producer_byte_rate"] == "1024"  # quotas live in the same znode
    assert config[SCRAM_SHA_256].startswith("salt=") and config[SCRAM_SHA_256].endswith(",iterations=4096")
    (change,) = store.get_config_change_entity_paths(
        [n for n in store.watch_children("/config/changes", lambda e: None)]
    )
    assert change == "users/user%40x"
    raw = store.read_raw(["/config/users/user%40x"])[0][1]
    assert raw is not None and json.loads(raw)["version"] == 1
    alter_user_credentials(store, "user@x", {}, [SCRAM_SHA_256])
    assert store.get_entity_config("users", "user%40x") == {"producer_byte_rate": "1024"}


def test_the_cache_loads_at_start_then_follows_notifications() -> None:
    store = InMemoryMetadataStore()
    store.create_top_level_paths()
    alter_user_credentials(store, "early", {SCRAM_SHA_512: _credential("a")})  # type: ignore[dict-item]
    cache = ScramCredentialCache(store)
    lock = threading.Lock()

    def submit(task: object) -> None:
        with lock:
            task()  # type: ignore[operator]

    listener = ConfigChangeListener(
        store, submit, lambda topic: None, on_user_config=cache.update, load_users=cache.load
    )
    listener.start()
    assert cache.get(SCRAM_SHA_512, "early") is not None  # made before the broker started
    assert cache.get(SCRAM_SHA_256, "early") is None
    alter_user_credentials(store, "late user", {SCRAM_SHA_256: _credential("b", SCRAM_SHA_256)})  # type: ignore[dict-item]
    wait_for(lambda: cache.get(SCRAM_SHA_256, "late user") is not None, timeout=10.0, message="the new user")
    alter_user_credentials(store, "early", {}, [SCRAM_SHA_512])
    wait_for(lambda: cache.get(SCRAM_SHA_512, "early") is None, timeout=10.0, message="the deleted user")
    store.set_or_create_entity_config("users", "broken", {SCRAM_SHA_512: "salt=x"})
    store.create_config_change_notification("users/broken")
    listener.process()
    assert cache.get(SCRAM_SHA_512, "broken") is None  # a corrupt credential refuses that user only
    assert sorted(cache.users()) == ["late user"]
    listener.stop()
