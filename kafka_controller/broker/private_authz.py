"""Who may use the private protocol when the authorizer is on.

Kafka serves the controller's requests (LeaderAndIsr, UpdateMetadata, StopReplica) and the
brokers' (ControlledShutdown, AlterIsr) only to a principal allowed CLUSTER_ACTION on CLUSTER
(``KafkaApis``: ``authHelper.authorizeClusterOperation(request, CLUSTER_ACTION)``). This project's
own private APIs (Fetch between brokers, DescribeReplicas, Metadata, DescribeControllerContext and
the private ElectLeaders / reassignment APIs its CLI uses) expose or change the same state, so the
same rule holds for all of them; with more than one listener they are also served only on the
inter-broker listener (and the control-plane one, when set), where the brokers connect.

ShutdownBroker stops the process, so it needs more: an authenticated super user (never
``User:ANONYMOUS``, even if an operator listed it). Stopping a broker is otherwise a signal from
its supervisor (``cluster stop-broker``, the lifecycle backend, ``--pid``).

Without an authorizer nothing is checked, as today. A refusal is logged with the peer and its
principal and answered CLUSTER_AUTHORIZATION_FAILED; the handler is never called, so nothing
changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kafka_controller.broker import apis as A
from kafka_controller.domain.errors import ClusterAuthorizationError
from kafka_controller.security.authorizer import CLUSTER_NAME, AclOperation, Authorizer, ResourceType
from kafka_controller.transport.connection import ANONYMOUS
from kafka_controller.transport.server import current_connection

log = logging.getLogger(__name__)

PrivateHandler = Callable[[str, Any], Any]


def guard_private(
    handler: PrivateHandler,
    authorizer: Authorizer | None,
    *,
    private_listeners: frozenset[str],
    listener_count: int,
) -> PrivateHandler:
    """``handler`` behind the checks above (``handler`` itself when there is no authorizer)."""
    if authorizer is None:
        return handler

    def refuse(api: str, why: str) -> None:
        conn = current_connection()
        who = f"{conn.principal} from {conn.peer} on {conn.listener or 'the listener'}" if conn else "?"
        log.warning("Refused private %s from %s: %s", api, who, why)
        raise ClusterAuthorizationError(f"{api} refused: {why}")

    def guarded(api: str, request: Any) -> Any:
        conn = current_connection()
        if conn is None:  # called in-process (a controller to its own broker): not a peer
            return handler(api, request)
        principal = conn.principal
        if api == A.SHUTDOWN_BROKER:
            if principal == ANONYMOUS or principal not in authorizer.super_users:
                refuse(api, f"{principal} is not an authenticated super user")
            log.info("ShutdownBroker requested by %s from %s", principal, conn.peer)
            return handler(api, request)
        if listener_count > 1 and conn.listener not in private_listeners:
            refuse(api, f"served only on the inter-broker listener {', '.join(sorted(private_listeners))}")
        if not authorizer.authorize(
            principal, conn.ip, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
        ):
            refuse(api, f"{principal} is not allowed ClusterAction on the cluster")
        return handler(api, request)

    return guarded
