"""Hosts in Linux network namespaces, for tests of partitions and slow links.

What breaks controllers in production is the network: a controller that reaches its brokers but
not ZooKeeper, a broker cut off, a slow link. One loopback address cannot show any of it, so a
:class:`NetnsLab` makes hosts: one network namespace each, its ``eth0`` a veth whose peer sits on
a bridge, and the bridge in a namespace of its own, so nothing in the caller's namespace changes
(no address, link, route or rule). Needs root and iproute2 (``ip``, ``tc``).

* ``partition(a, b)`` adds ``blackhole`` routes, per host, to the other side's addresses: a host
  cannot send to the other side. Both directions by default; one direction (``both=False``) lets
  datagrams from ``b`` reach ``a`` but not the reverse (for TCP both directions then fail, as
  the handshake needs both). Routes rather than iptables/nft: neither is needed, nor always there.
* ``isolate(host)`` sets its bridge port down: nothing in or out.
* ``degrade(host, delay_ms, loss_pct)`` is ``tc netem`` on the host's ``eth0``; a kernel without
  netem raises :class:`NetemUnavailableError` quoting ``tc``.
* ``throttle(host, rate_kbit, queue_bytes)`` caps the host's link both ways with ``tc tbf`` (a
  token bucket, in every kernel that has traffic control): what exceeds the rate waits in a queue
  of ``queue_bytes`` — delay — and what overflows it is dropped — loss, which TCP then pays for
  in retransmission timeouts. The slow link of kernels without netem (this machine's).
* ``heal()`` undoes all four. ``close()`` deletes every namespace of the lab; it runs on leaving
  the ``with`` block (exceptions and KeyboardInterrupt included) and at interpreter exit. Names
  carry the creator's pid (``kcnet<pid>x<random>-``), so :func:`cleanup_stale` can delete what a
  killed run left behind without touching a live run's namespaces.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ipaddress
import os
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from kafka_controller.cluster.process import process_alive
from kafka_controller.domain.errors import InvalidArgumentError, KafkaControllerError

__all__ = [
    "PREFIX_ROOT",
    "Host",
    "NetemUnavailableError",
    "NetnsError",
    "NetnsLab",
    "cleanup_stale",
    "namespaces",
]

PREFIX_ROOT = "kcnet"
_STALE = re.compile(rf"^{PREFIX_ROOT}(\d+)x[0-9a-f]+-")
_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_SUBNET_BASE = ipaddress.ip_network("10.231.0.0/16")


class NetnsError(KafkaControllerError):
    """An ``ip``/``tc`` command failed; the message quotes it and its error output."""


class NetemUnavailableError(NetnsError):
    """The kernel has no ``netem`` queueing discipline (``tc`` says so); delay/loss cannot be added."""


@dataclass(frozen=True, slots=True)
class Host:
    """One namespace: ``name`` in the lab, ``netns`` its namespace, ``address`` its IPv4 address."""

    name: str
    netns: str
    address: str
    port_name: str  # its veth peer on the bridge


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run(["ip", *args], check=check)


def _run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise NetnsError(f"{' '.join(argv)}: {e}") from None
    if check and done.returncode != 0:
        raise NetnsError(f"{' '.join(argv)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return done


def namespaces() -> list[str]:
    """The names of every network namespace ``ip netns`` knows."""
    return [line.split()[0] for line in _ip("netns", "list").stdout.splitlines() if line.strip()]


def cleanup_stale(prefix_root: str = PREFIX_ROOT) -> list[str]:
    """Delete the namespaces of labs whose creating process is gone; returns their names."""
    removed = []
    for ns in namespaces():
        m = _STALE.match(ns)
        if ns.startswith(prefix_root) and m and not process_alive(int(m.group(1))):
            _ip("netns", "delete", ns, check=False)
            removed.append(ns)
    return removed


def _subnets_in_use() -> set[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """/24s of 10.231.0.0/16 that an address or route of the caller's namespace touches."""
    used = set()
    text = _ip("-o", "-4", "addr", "show").stdout + _ip("-4", "route", "show", "table", "all").stdout
    for token in re.findall(r"\b10\.231\.\d+\.\d+(?:/\d+)?", text):
        net = ipaddress.ip_network(token, strict=False)
        used |= {s for s in _SUBNET_BASE.subnets(new_prefix=24) if s.overlaps(net)}
    return used


class NetnsLab:
    """A bridge namespace plus one namespace per host; see the module docstring."""

    def __init__(self, subnet: str | None = None) -> None:
        if not sys.platform.startswith("linux"):
            raise NetnsError("network namespaces need Linux")
        self.prefix = f"{PREFIX_ROOT}{os.getpid()}x{secrets.token_hex(3)}-"
        free = [s for s in _SUBNET_BASE.subnets(new_prefix=24) if s not in _subnets_in_use()]
        chosen = ipaddress.ip_network(subnet) if subnet else free[secrets.randbelow(len(free))]
        if chosen not in free:
            raise InvalidArgumentError(f"subnet {subnet} is in use or outside {_SUBNET_BASE}")
        self.subnet = chosen
        self.bridge_ns = f"{self.prefix}br"
        self.hosts: dict[str, Host] = {}
        self._blackholes: set[tuple[str, str]] = set()  # (netns, address) routes added
        self._isolated: set[str] = set()
        self._degraded: set[str] = set()
        self._throttled: set[str] = set()
        self._lock = threading.RLock()
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> NetnsLab:
        with self._lock:
            if self._started:
                return self
            cleanup_stale()
            _labs.add(self)
            self._started = True
            try:
                _ip("netns", "add", self.bridge_ns)
                _ip("-n", self.bridge_ns, "link", "set", "lo", "up")
                _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
                _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
            except BaseException:
                self.close()
                raise
            return self

    def add_host(self, name: str) -> Host:
        """A new host on the bridge with the next free address of the lab's /24."""
        if not _NAME.match(name):
            raise InvalidArgumentError(f"host name {name!r} must be 1-12 lower-case letters or digits")
        with self._lock:
            if name in self.hosts:
                raise InvalidArgumentError(f"host {name!r} exists already")
            self.start()
            index = len(self.hosts) + 1
            if index > 250:
                raise InvalidArgumentError("a lab holds at most 250 hosts")
            host = Host(name, f"{self.prefix}{name}", str(self.subnet[index]), f"v{index}")
            _ip("netns", "add", host.netns)
            self.hosts[name] = host
            _ip("-n", host.netns, "link", "set", "lo", "up")
            _ip("-n", self.bridge_ns, "link", "add", host.port_name, "type", "veth",
                "peer", "name", "eth0", "netns", host.netns)  # fmt: skip
            _ip("-n", self.bridge_ns, "link", "set", host.port_name, "master", "br0", "up")
            _ip("-n", host.netns, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", "eth0")
            _ip("-n", host.netns, "link", "set", "eth0", "up")
            return host

    def close(self) -> None:
        """Delete every namespace of this lab (idempotent); links and routes go with them."""
        with self._lock:
            for ns in [h.netns for h in self.hosts.values()] + [self.bridge_ns]:
                if ns.startswith(self.prefix):
                    _ip("netns", "delete", ns, check=False)
            self.hosts.clear()
            self._blackholes.clear()
            self._isolated.clear()
            self._degraded.clear()
            self._throttled.clear()
            _labs.discard(self)
            self._started = False

    def __enter__(self) -> NetnsLab:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- processes ---------------------------------------------------------------------------------
    def command(self, host: Host | str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``host``'s namespace."""
        return ["ip", "netns", "exec", self._host(host).netns, *argv]

    def popen(self, host: Host | str, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        return subprocess.Popen(self.command(host, argv), **kwargs)

    def run(self, host: Host | str, argv: Sequence[str], **kwargs: Any) -> subprocess.CompletedProcess[Any]:
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        kwargs.setdefault("timeout", 60)
        return subprocess.run(self.command(host, argv), check=False, **kwargs)

    @contextlib.contextmanager
    def entered(self, host: Host | str) -> Iterator[Host]:
        """Move the calling thread into ``host``'s namespace for the block (``setns``).

        Sockets it opens and threads and processes it starts meanwhile live on ``host``, so a test
        can talk to every host (and keep its own links out of the partitions it makes)."""
        h = self._host(host)
        if _libc is None:
            raise NetnsError("setns is not available")
        back = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
        try:
            target = os.open(f"/run/netns/{h.netns}", os.O_RDONLY)
            try:
                _setns(target)
            finally:
                os.close(target)
            try:
                yield h
            finally:
                _setns(back)
        finally:
            os.close(back)

    # -- faults ------------------------------------------------------------------------------------
    def partition(
        self, side_a: Iterable[Host | str], side_b: Iterable[Host | str], *, both: bool = True
    ) -> None:
        """Hosts of ``side_a`` can no longer send to ``side_b`` (and, if ``both``, the reverse)."""
        a = [self._host(h) for h in side_a]
        b = [self._host(h) for h in side_b]
        if set(h.name for h in a) & set(h.name for h in b):
            raise InvalidArgumentError("a host cannot be on both sides of a partition")
        pairs = [(x, y) for x in a for y in b] + ([(y, x) for x in a for y in b] if both else [])
        with self._lock:
            for src, dst in pairs:
                if (src.netns, dst.address) not in self._blackholes:
                    _ip("-n", src.netns, "route", "add", "blackhole", f"{dst.address}/32")
                    self._blackholes.add((src.netns, dst.address))

    def isolate(self, host: Host | str) -> None:
        """Take ``host``'s bridge port down: no traffic in or out."""
        h = self._host(host)
        with self._lock:
            _ip("-n", self.bridge_ns, "link", "set", h.port_name, "down")
            self._isolated.add(h.name)

    def degrade(self, host: Host | str, delay_ms: float = 0.0, loss_pct: float = 0.0) -> None:
        """Delay (ms) and loss (%) on everything ``host`` sends, with ``tc netem``."""
        if not (0 <= delay_ms <= 60_000 and 0 <= loss_pct <= 100):
            raise InvalidArgumentError(f"delay {delay_ms} ms or loss {loss_pct}% out of range")
        h = self._host(host)
        argv = ["tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", f"{delay_ms}ms"]
        argv += ["loss", f"{loss_pct}%"] if loss_pct else []
        done = self.run(h, argv)
        if done.returncode != 0:
            message = done.stderr.strip() or f"exit {done.returncode}"
            if "unknown" in message.lower() or "no such file" in message.lower():
                raise NetemUnavailableError(f"tc netem is not available in this kernel: {message}")
            raise NetnsError(f"{' '.join(argv)} in {h.netns}: {message}")
        with self._lock:
            self._degraded.add(h.name)

    def throttle(self, host: Host | str, rate_kbit: int, queue_bytes: int = 4096) -> None:
        """Cap ``host``'s link at ``rate_kbit`` kbit/s in both directions, queueing up to
        ``queue_bytes`` per direction and dropping the rest (``tc tbf`` on each end of its veth)."""
        if not (8 <= rate_kbit <= 10_000_000 and 1_600 <= queue_bytes <= 64 * 1024 * 1024):
            raise InvalidArgumentError(f"rate {rate_kbit} kbit/s or queue {queue_bytes} bytes out of range")
        h = self._host(host)
        # burst: one full-size frame (the bucket must hold a packet to ever send it)
        tbf = ["tc", "qdisc", "replace", "dev", "{dev}", "root", "tbf", "rate", f"{rate_kbit}kbit",
               "burst", "1600", "limit", str(queue_bytes)]  # fmt: skip
        with self._lock:
            self._throttled.add(h.name)
            for netns, dev in ((h.netns, "eth0"), (self.bridge_ns, h.port_name)):
                _run(["ip", "netns", "exec", netns, *(a.format(dev=dev) for a in tbf)])

    def netem_available(self) -> str | None:
        """None when ``tc netem`` works here, else ``tc``'s error message (probed on the bridge's lo)."""
        self.start()
        done = _run(["ip", "netns", "exec", self.bridge_ns, "tc", "qdisc", "add", "dev", "lo", "root",
                     "netem", "delay", "1ms"], check=False)  # fmt: skip
        if done.returncode == 0:
            _run(
                ["ip", "netns", "exec", self.bridge_ns, "tc", "qdisc", "del", "dev", "lo", "root"],
                check=False,
            )
            return None
        return done.stderr.strip() or f"exit {done.returncode}"

    def heal(self) -> None:
        """Undo every partition, isolation, degradation and throttle."""
        with self._lock:
            for netns, address in sorted(self._blackholes):
                _ip("-n", netns, "route", "del", "blackhole", f"{address}/32", check=False)
            self._blackholes.clear()
            for name in sorted(self._isolated):
                _ip("-n", self.bridge_ns, "link", "set", self.hosts[name].port_name, "up", check=False)
            self._isolated.clear()
            for name in sorted(self._degraded):
                self.run(name, ["tc", "qdisc", "del", "dev", "eth0", "root"])
            self._degraded.clear()
            for name in sorted(self._throttled):
                h = self.hosts[name]
                for netns, dev in ((h.netns, "eth0"), (self.bridge_ns, h.port_name)):
                    _run(
                        ["ip", "netns", "exec", netns, "tc", "qdisc", "del", "dev", dev, "root"], check=False
                    )
            self._throttled.clear()

    def _host(self, host: Host | str) -> Host:
        name = host.name if isinstance(host, Host) else host
        try:
            return self.hosts[name]
        except KeyError:
            raise InvalidArgumentError(f"no host {name!r} in this lab {sorted(self.hosts)}") from None

    def __repr__(self) -> str:
        return f"NetnsLab({self.prefix}, {self.subnet}, hosts {sorted(self.hosts)})"


_CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def _setns(fd: int) -> None:
    assert _libc is not None
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        raise NetnsError(f"setns: {os.strerror(ctypes.get_errno())}")


#: Labs started and not closed: closed at interpreter exit even if their owner forgot.
_labs: set[NetnsLab] = set()


@atexit.register
def _close_all() -> None:
    for lab in list(_labs):
        with contextlib.suppress(Exception):
            lab.close()
