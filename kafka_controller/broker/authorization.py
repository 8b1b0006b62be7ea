"""A broker's authorizer, put together: Kafka's ``AclAuthorizer`` as ``BrokerServer`` wires it.

``BrokerAuthorization`` reads ``authorizer.class.name``, ``super.users`` and
``allow.everyone.if.no.acl.found``; with no authorizer configured (Kafka's default) every check
passes and the ACL APIs answer SECURITY_DISABLED, so an unsecured cluster behaves as before. With
one, ``start`` loads every ACL from ZooKeeper and follows the change notices (before the listener
serves, so no request is judged on an empty cache), ``kafka_apis`` adds CreateAcls, DescribeAcls
and DeleteAcls and puts Kafka's checks in front of the other Kafka-protocol APIs
(``kafka_wire.authz``), and ``private`` guards the private protocol (``private_authz``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafka_controller.broker.kafka_wire.acl_apis import AclApis
from kafka_controller.broker.kafka_wire.authz import RequestAuthorization
from kafka_controller.broker.kafka_wire.kio_api import KioApi
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.broker.private_authz import PrivateHandler, guard_private
from kafka_controller.ports import Clock, MetadataStore
from kafka_controller.security.authorizer import AclCache, authorizer_from
from kafka_controller.zk.store_acls import AclChangeListener, ZkAclStore


class BrokerAuthorization:
    def __init__(
        self,
        props: Mapping[str, str],
        store: MetadataStore,
        cache: MetadataCache,
        is_controller: Callable[[], bool],
        *,
        private_listeners: frozenset[str],
        listener_count: int,
        clock: Clock | None = None,
    ) -> None:
        self.authorizer = authorizer_from(props, AclCache())
        backend = getattr(store, "_backend", None)  # the ZooKeeper session under the store
        self.acl_store = ZkAclStore(backend) if backend is not None else None
        self.requests = RequestAuthorization(self.authorizer, cache, is_controller)
        self._store = store
        self._backend = backend
        self._clock = clock
        self._private_listeners = private_listeners
        self._listener_count = listener_count
        self._listener: AclChangeListener | None = None

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def start(self, submit: Callable[[Callable[[], None]], None]) -> None:
        """Load the ACLs and follow their change notices (nothing without an authorizer)."""
        if self.authorizer is None or self.acl_store is None or self._backend is None:
            return
        self._listener = AclChangeListener(
            self._store,
            self.acl_store,
            self._backend,
            self.authorizer.cache,
            submit,
            self._clock,
        )
        self._listener.start()

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()

    def kafka_apis(self, apis: Mapping[int, KioApi]) -> dict[int, KioApi]:
        acls = AclApis(self.authorizer, self.acl_store if self.authorizer else None, self.requests.allowed)
        return self.requests.wrap({**apis, **acls.apis()})

    def private(self, handler: Callable[[str, Any], Any]) -> PrivateHandler:
        return guard_private(
            handler,
            self.authorizer,
            private_listeners=self._private_listeners,
            listener_count=self._listener_count,
        )
