"""What a listener allows: Kafka's socket-server settings, the request memory budget, connection quotas.

Each piece is a plain object used only by the listener's network thread (``processor``), so none
needs a lock of its own; workers never touch them.

* ``SocketSettings``: ``socket.request.max.bytes``, ``sasl.server.max.receive.size``,
  ``queued.max.request.bytes``, ``connections.max.idle.ms``, ``max.connections``,
  ``max.connections.per.ip`` (+ ``.overrides``) and ``num.io.threads``, with Kafka 2.8's defaults.
* ``MemoryPool``: Kafka's ``SimpleMemoryPool`` in its non-strict mode, as ``SocketServer`` builds
  it from ``queued.max.request.bytes``: a frame's announced size is *reserved* when its length
  prefix has been read and released once its request has been handled. A reservation succeeds
  while anything at all is left, so one frame larger than the whole budget still gets through and
  a connection that holds a reservation can always finish its frame (no two half-read frames can
  wait on each other). A reservation is accounting only: the bytes themselves are allocated as
  they arrive (``framing.FrameReader``). A budget <= 0 is Kafka's "no bound".
* ``ConnectionQuotas``: Kafka's ``ConnectionQuotas`` for one listener: a per-address count whose
  excess connection is refused and closed at once, and a broker-wide count at which the
  listener stops accepting until a connection closes (the waiting peers stay in the listen
  backlog, as Kafka's acceptor blocks in ``waitForConnectionSlot``).
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_controller.transport.errors import TransportError

#: Kafka's ``Int.MaxValue``, the default of ``max.connections`` and ``max.connections.per.ip``.
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class SocketSettings:
    """Kafka's names in Python spelling; ``max_connections_per_ip_overrides`` maps a host (name or
    address, resolved when the listener starts) to its own limit."""

    socket_request_max_bytes: int = 100 * 1024 * 1024
    sasl_server_max_receive_size: int = 524288
    queued_max_request_bytes: int = -1
    connections_max_idle_ms: int = 600_000
    #: How long a refused authentication waits before its answer (or close): Kafka's brake on
    #: clients that retry failed logins in a tight loop.
    connection_failed_authentication_delay_ms: int = 100
    max_connections: int = INT_MAX
    max_connections_per_ip: int = INT_MAX
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    num_io_threads: int = 8


class MemoryPool:
    """The budget of request bytes held across every connection of one listener."""

    def __init__(self, size_bytes: int) -> None:
        self.size_bytes = size_bytes
        self.available = size_bytes

    @property
    def bounded(self) -> bool:
        return self.size_bytes > 0

    def try_reserve(self, n: int) -> bool:
        if not self.bounded:
            return True
        if self.available <= 0:
            return False
        self.available -= n
        return True

    def release(self, n: int) -> None:
        if self.bounded:
            self.available += n

    @property
    def out_of_memory(self) -> bool:
        return self.bounded and self.available <= 0


class TooManyConnectionsError(TransportError):
    """The peer's address already holds its maximum number of connections."""

    def __init__(self, ip: str, limit: int) -> None:
        super().__init__(f"address {ip} already has the configured maximum of {limit} connections")
        self.limit = limit


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Host -> limit becomes address -> limit (every address a name resolves to), as Kafka's
    ``InetAddress.getByName`` does once at start; an unknown host fails the start."""
    out: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except (OSError, UnicodeError) as e:
            raise TransportError(
                f"max.connections.per.ip.overrides: cannot resolve host {host!r}: {e}"
            ) from None
        for info in infos:
            out[str(info[4][0])] = limit
    return out


class ConnectionQuotas:
    """Connection counts per address and in total; ``inc`` before serving, ``dec`` on every close."""

    def __init__(self, settings: SocketSettings, overrides: Mapping[str, int]) -> None:
        self.max_connections = settings.max_connections
        self.default_per_ip = settings.max_connections_per_ip
        self.overrides = dict(overrides)
        self.counts: dict[str, int] = {}
        self.total = 0

    def slot_available(self) -> bool:
        return self.total < self.max_connections

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.default_per_ip)

    def inc(self, ip: str) -> None:
        """Count the connection; raises ``TooManyConnectionsError`` (still counted, as Kafka's
        ``inc`` does: the caller closes it, and closing decrements) when over the address's limit."""
        count = self.counts.get(ip, 0)
        self.counts[ip] = count + 1
        self.total += 1
        limit = self.limit_for(ip)
        if count >= limit:
            raise TooManyConnectionsError(ip, limit)

    def dec(self, ip: str) -> None:
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.total = max(0, self.total - 1)

    def get(self, ip: str) -> int:
        return self.counts.get(ip, 0)
