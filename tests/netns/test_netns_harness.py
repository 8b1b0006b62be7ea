"""The network-namespace harness itself: hosts reach each other, partitions cut what they say
(both directions or one), isolation and heal, netem delay (or the kernel's refusal, quoted), and
teardown that leaves nothing behind — not even after an exception or in the caller's namespace."""

from __future__ import annotations

import contextlib
import signal
import statistics
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from kafka_controller.testing.netns import (
    PREFIX_ROOT,
    Host,
    NetemUnavailableError,
    NetnsLab,
    cleanup_stale,
    namespaces,
)
from kafka_controller.testing.zk_harness import wait_for

pytestmark = pytest.mark.netns

PORT = 7070
#: Listens on TCP and UDP; prints each datagram it receives, one per line.
SERVER = textwrap.dedent(
    """
    import socket, sys, threading
    addr = (sys.argv[1], int(sys.argv[2]))
    tcp = socket.socket(); tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind(addr); tcp.listen(64)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(addr)
    def accept():
        while True:
            tcp.accept()[0].close()
    threading.Thread(target=accept, daemon=True).start()
    print("ready", flush=True)
    while True:
        print(udp.recv(100).decode(), flush=True)
    """
)
#: Connects N times over TCP; prints each connect time in ms, or "fail <error>".
CONNECT = textwrap.dedent(
    """
    import socket, sys, time
    for _ in range(int(sys.argv[3])):
        t = time.perf_counter()
        try:
            socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1.5).close()
            print((time.perf_counter() - t) * 1000)
        except OSError as e:
            print("fail", e)
    """
)
#: Accepts one TCP connection and prints how many bytes it got before EOF.
SINK = textwrap.dedent(
    """
    import socket, sys
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1)
    print("ready", flush=True)
    c, total = s.accept()[0], 0
    while chunk := c.recv(65536):
        total += len(chunk)
    print(total, flush=True)
    """
)
#: Sends N bytes over TCP; prints the seconds from connect to the peer's close.
SEND_BULK = textwrap.dedent(
    """
    import socket, sys, time
    t = time.perf_counter()
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
    c.sendall(b"x" * int(sys.argv[3])); c.shutdown(socket.SHUT_WR); c.recv(1)
    print(time.perf_counter() - t)
    """
)
SEND_UDP = (
    "import socket, sys; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
    ".sendto(sys.argv[3].encode(), (sys.argv[1], int(sys.argv[2])))"
)


@pytest.fixture
def lab() -> Iterator[NetnsLab]:
    with NetnsLab() as lab:
        yield lab


@pytest.fixture
def servers(lab: NetnsLab) -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def _serve(lab: NetnsLab, host: Host, servers: list[subprocess.Popen[str]]) -> subprocess.Popen[str]:
    p = lab.popen(host, [sys.executable, "-c", SERVER, host.address, str(PORT)],
                  stdout=subprocess.PIPE, text=True)  # fmt: skip
    servers.append(p)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def _connects(lab: NetnsLab, src: Host, dst: Host, n: int = 1) -> list[float | None]:
    out = lab.run(src, [sys.executable, "-c", CONNECT, dst.address, str(PORT), str(n)]).stdout
    return [None if line.startswith("fail") else float(line) for line in out.splitlines()]


def _reachable(lab: NetnsLab, src: Host, dst: Host) -> bool:
    return _connects(lab, src, dst)[0] is not None


def _root_network() -> tuple[str, str, str]:
    ip = ["ip", "-o"]
    return tuple(  # type: ignore[return-value]
        subprocess.run([*ip, *args], capture_output=True, text=True, check=True).stdout
        for args in (["addr"], ["link"], ["route", "show", "table", "all"])
    )


def test_hosts_reach_each_other_and_a_partition_cuts_both_ways_until_healed(
    lab: NetnsLab, servers: list[subprocess.Popen[str]]
) -> None:
    a, b, c = lab.add_host("a"), lab.add_host("b"), lab.add_host("c")
    assert len({a.address, b.address, c.address}) == 3
    for h in (a, b, c):
        _serve(lab, h, servers)
    assert _reachable(lab, a, b) and _reachable(lab, b, a) and _reachable(lab, a, c)
    lab.partition([a], [b, c])
    assert not _reachable(lab, a, b) and not _reachable(lab, b, a) and not _reachable(lab, c, a)
    assert _reachable(lab, b, c), "hosts on the same side still talk"
    lab.heal()
    assert _reachable(lab, a, b) and _reachable(lab, b, a) and _reachable(lab, c, a)


def test_one_way_partition_drops_only_what_the_cut_side_sends(
    lab: NetnsLab, servers: list[subprocess.Popen[str]]
) -> None:
    a, b = lab.add_host("a"), lab.add_host("b")
    from_a, from_b = _serve(lab, a, servers), _serve(lab, b, servers)
    lab.partition([a], [b], both=False)
    lab.run(b, [sys.executable, "-c", SEND_UDP, a.address, str(PORT), "b-to-a"])
    sent = lab.run(a, [sys.executable, "-c", SEND_UDP, b.address, str(PORT), "a-to-b"])
    assert sent.returncode != 0, "sending into a blackhole route fails at once"
    assert from_a.stdout is not None and from_a.stdout.readline().strip() == "b-to-a"
    lab.heal()
    lab.run(a, [sys.executable, "-c", SEND_UDP, b.address, str(PORT), "a-to-b-healed"])
    assert from_b.stdout is not None and from_b.stdout.readline().strip() == "a-to-b-healed"


def test_isolate_takes_a_host_off_the_bridge_until_healed(
    lab: NetnsLab, servers: list[subprocess.Popen[str]]
) -> None:
    a, b = lab.add_host("a"), lab.add_host("b")
    _serve(lab, b, servers)
    lab.isolate(a)
    assert not _reachable(lab, a, b)
    lab.heal()
    assert wait_for(lambda: _reachable(lab, a, b), timeout=10.0, interval=0.2)


def test_netem_adds_delay_or_the_kernel_refusal_is_reported(
    lab: NetnsLab, servers: list[subprocess.Popen[str]]
) -> None:
    a, b = lab.add_host("a"), lab.add_host("b")
    _serve(lab, b, servers)
    before = statistics.median(x for x in _connects(lab, a, b, 5) if x is not None)
    missing = lab.netem_available()
    if missing is not None:  # this kernel: "Error: Specified qdisc kind is unknown."
        with pytest.raises(NetemUnavailableError, match=r"netem is not available.*unknown"):
            lab.degrade(a, delay_ms=100)
        return
    lab.degrade(a, delay_ms=100)
    after = statistics.median(x for x in _connects(lab, a, b, 5) if x is not None)
    assert after > before + 50, f"connect RTT {before:.1f} ms -> {after:.1f} ms"
    lab.heal()


def _tc_stats(lab: NetnsLab, host: Host) -> str:
    return lab.run(host, ["tc", "-s", "qdisc", "show", "dev", "eth0"]).stdout


def test_throttle_caps_the_rate_queues_and_drops_until_healed(lab: NetnsLab) -> None:
    a, b = lab.add_host("a"), lab.add_host("b")
    size, rate_kbit = 128 * 1024, 1024  # 128 KiB at 128 KiB/s: no faster than ~1 s
    lab.throttle(a, rate_kbit, queue_bytes=8 * 1024)
    sink = lab.popen(b, [sys.executable, "-c", SINK, b.address, str(PORT)], stdout=subprocess.PIPE, text=True)
    try:
        assert sink.stdout is not None and sink.stdout.readline().strip() == "ready"
        sent = lab.run(a, [sys.executable, "-c", SEND_BULK, b.address, str(PORT), str(size)])
        assert sent.returncode == 0, sent.stderr
        assert int(sink.stdout.readline()) == size  # TCP delivered everything despite the drops
    finally:
        sink.kill()
        sink.wait()
    # a lower bound set by the cap itself: load on the machine can only make it slower
    print(f"{size} bytes in {float(sent.stdout):.2f} s")
    assert float(sent.stdout) > 0.5, f"{size} bytes at {rate_kbit} kbit/s took {sent.stdout.strip()} s"
    stats = _tc_stats(lab, a)
    assert f"rate {rate_kbit}Kbit" in stats
    dropped = int(stats.split("dropped ")[1].split(",")[0])
    overlimits = int(stats.split("overlimits ")[1].split()[0])
    assert overlimits > 0, stats  # packets waited for tokens: the queue's delay
    assert dropped > 0, stats  # and some overflowed the 8 KiB queue: loss
    bridge_side = ["ip", "netns", "exec", lab.bridge_ns, "tc", "qdisc", "show", "dev", a.port_name]
    assert "tbf" in subprocess.run(bridge_side, capture_output=True, text=True).stdout  # both ways
    lab.heal()
    assert "tbf" not in _tc_stats(lab, a)
    assert "tbf" not in subprocess.run(bridge_side, capture_output=True, text=True).stdout


def test_teardown_removes_every_namespace_even_after_an_error_and_touches_no_root_network() -> None:
    root_before = _root_network()
    with pytest.raises(RuntimeError, match="boom"), NetnsLab() as lab:
        lab.add_host("a")
        lab.add_host("b")
        lab.partition(["a"], ["b"])
        prefix = lab.prefix
        assert sum(ns.startswith(prefix) for ns in namespaces()) == 3
        assert _root_network() == root_before
        raise RuntimeError("boom")
    assert not [ns for ns in namespaces() if ns.startswith(prefix)]
    assert _root_network() == root_before


def test_cleanup_stale_deletes_namespaces_of_dead_runs_only() -> None:
    dead = f"{PREFIX_ROOT}4194303x0abc-br"  # above pid_max's default: no such process
    try:
        with NetnsLab() as live:
            live.add_host("a")
            subprocess.run(["ip", "netns", "add", dead], check=True)
            assert cleanup_stale() == [dead]
            assert dead not in namespaces()
            assert sum(ns.startswith(live.prefix) for ns in namespaces()) == 2
        subprocess.run(["ip", "netns", "add", dead], check=True)
        with NetnsLab():  # a new lab clears what dead runs left
            assert dead not in namespaces()
    finally:
        subprocess.run(["ip", "netns", "delete", dead], capture_output=True, check=False)


def test_ctrl_c_in_the_owner_deletes_its_namespaces() -> None:
    script = textwrap.dedent(
        """
        import faulthandler, signal, threading
        faulthandler.register(signal.SIGUSR1, all_threads=True)
        # An owner at a terminal gets KeyboardInterrupt on Ctrl-C; a test run started in the
        # background (``cmd &``) hands its children SIGINT ignored, so restore Python's default.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from kafka_controller.testing.netns import NetnsLab
        with NetnsLab() as lab:
            lab.add_host("a")
            print(lab.prefix, flush=True)
            threading.Event().wait(120)
        """
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        prefix = proc.stdout.readline().strip()
        assert prefix.startswith(PREFIX_ROOT) and sum(ns.startswith(prefix) for ns in namespaces()) == 2
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # say where it hangs
            proc.send_signal(signal.SIGUSR1)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=2)  # time for faulthandler's dump, on the failure path only
            proc.kill()
            stacks = proc.stderr.read()
            pytest.fail(f"the lab's owner did not exit within 30 s of SIGINT; its stacks:\n{stacks}")
        assert not [ns for ns in namespaces() if ns.startswith(prefix)]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_entered_moves_only_the_calling_thread_and_only_for_the_block(
    lab: NetnsLab, servers: list[subprocess.Popen[str]]
) -> None:
    import socket

    a, obs = lab.add_host("a"), lab.add_host("obs")
    _serve(lab, a, servers)
    root_before = _root_network()
    with lab.entered(obs):
        with socket.create_connection((a.address, PORT), timeout=5.0) as s:
            assert s.getsockname()[0] == obs.address, "the connection starts on the host entered"
        assert obs.address in subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    assert _root_network() == root_before, "the caller's namespace is back and unchanged"
    assert obs.address not in subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
