"""A Kafka client's view of a failover: librdkafka (confluent-kafka) lists one broker's metadata over
and over until every partition is led by a live broker, as a client deciding where to produce would.

Run as a process of its own (its own GIL, like a user's client) by ``ClientWatch``, which
``bench/crash_detection.py`` and ``bench/failover.py`` start before their kill. Each listing is a
fresh ``AdminClient`` bootstrapped to ``--bootstrap`` only, so every answer is that broker's
metadata cache, not a cached one. Prints one JSON line per listing: ``start`` and
``end`` (epoch seconds), ``ok`` (every one of ``--partitions`` partitions listed with a leader that
the same answer lists as a broker, none led by ``--dead``, which is not listed: so no listing from
before ``--dead``'s death is ``ok``), ``error``. Exits after the first ``ok`` listing, or at
``--timeout``.

    .venv/bin/python bench/_client_watch.py --bootstrap 127.0.0.1:9093 --dead 1 --partitions 10000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bench._common import BenchCluster


def listing(bootstrap: str, dead: int, partitions: int, timeout: float) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    start = time.time()
    out: dict[str, Any] = {"start": start, "ok": False, "error": None}
    try:
        md = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=timeout)
    except Exception as e:  # a broker that cannot answer yet: the next listing asks again
        out["error"] = f"{type(e).__name__}: {e}"
    else:
        brokers = set(md.brokers)
        leaders = [p.leader for t in md.topics.values() for p in t.partitions.values()]
        led = sum(1 for leader in leaders if leader in brokers and leader != dead)
        out["listed"], out["led_by_live"] = len(leaders), led
        out["ok"] = dead not in brokers and len(leaders) == partitions == led
    out["end"] = time.time()
    return out


class ClientWatch:
    """``bench/_client_watch.py`` through the lowest surviving broker, its lines read as they come
    (a full pipe would stall it); started once it has listed the cluster, so it is connected and
    polling before the kill."""

    def __init__(self, bench: BenchCluster, dead: int) -> None:
        survivor = min(b for b in bench.cluster.running_broker_ids() if b != dead)
        command = [sys.executable, str(Path(__file__).resolve())]
        command += ["--bootstrap", bench.cluster.listener(survivor), "--dead", str(dead)]
        command += ["--partitions", str(len(bench.partitions))]
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        self.listings: list[dict[str, Any]] = []
        self._listed = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        if not self._listed.wait(60):
            self._process.kill()
            raise SystemExit("the client's watch could not list the cluster within 60 s")

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self.listings.append(json.loads(line))
            if self.listings[-1]["error"] is None:
                self._listed.set()

    def result(self, killed: float, elected: float | None = None) -> dict[str, Any]:
        """The first listing that showed every partition led by a live broker, from ``killed`` (and
        from ``elected``, the new ``/controller``'s ctime, when given)."""
        code = self._process.wait(timeout=150)
        self._reader.join(10)
        if code != 0 or not self.listings or not self.listings[-1]["ok"]:
            raise SystemExit("the client never saw every partition led by a live broker")
        seen = self.listings[-1]
        out = {
            "client_all_led_seconds": round(seen["end"] - killed, 3),
            "client_listing_seconds": round(seen["end"] - seen["start"], 3),
            "client_listings_after_kill": sum(1 for x in self.listings if x["start"] >= killed),
        }
        if elected is not None:
            # The broker answered the last listing before the good one (an answered one: an error
            # tells nothing) after that listing began, so the client's view changed between that
            # start and the good listing's end: both bounds.
            answered = [x["start"] for x in self.listings[:-1] if x["error"] is None]
            before = answered[-1] if answered else seen["start"]
            out["client_after_election_seconds"] = round(seen["end"] - elected, 3)
            out["client_not_yet_after_election_seconds"] = round(before - elected, 3)
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="host:port of one live broker")
    parser.add_argument("--dead", type=int, required=True, help="the broker about to be killed")
    parser.add_argument("--partitions", type=int, required=True, help="partitions the cluster has")
    parser.add_argument("--interval", type=float, default=0.05, help="pause between listings (s)")
    parser.add_argument("--timeout", type=float, default=120.0, help="give up after this long (s)")
    args = parser.parse_args()
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        result = listing(args.bootstrap, args.dead, args.partitions, 10.0)
        print(json.dumps(result), flush=True)
        if result["ok"]:
            return
        time.sleep(args.interval)
    sys.exit(f"no listing through {args.bootstrap} showed every partition led by a live broker")


if __name__ == "__main__":
    main()
