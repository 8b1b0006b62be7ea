"""The CPU a failover's control requests cost outside the controller's event thread, in one process.

``bench/failover.py --rf 3`` kills the controller of 5 brokers; the new one (broker 0 here) sends
the 4 live brokers their LeaderAndIsr and UpdateMetadata requests (10 and 16 of them at 100,000
partitions) and the followers then fetch from their new leaders. This replays that failover without
ZooKeeper or sockets, on the process CPU clock, in three parts:

* ``controller``: what the new controller's channel threads do: encode every request to the 3
  other brokers into its wire bytes (``framing`` + ``codec``) and decode their answers;
* ``brokers``: what the 3 other brokers do with them: decode each frame and apply it (replica
  manager, metadata cache, data plane), encode the answer. Each broker starts as the settled
  cluster left it (every partition led by its first replica, epoch 1), primed over the wire;
* ``data_plane``: the fetching the requests set off: the 5 brokers of the settled cluster fetch
  until their sessions are steady, broker 4 dies, then after each batch of requests every fetcher
  of the 4 live brokers fetches twice (a 200 ms fetch interval, in-process round trips through the
  Fetch codec). ``apply_cpu_s``: the 4 live brokers' handling of the requests themselves there
  (decode, apply, encode; the controller's own broker without the codec), with fetcher clocks
  and fetch sessions to detach from, as in a real failover (``brokers`` has none).

The requests are the ones ``KafkaController`` sends on the in-memory store (``controller_inmemory``'s
``--rf 3 --dead 1`` layout: replicas consecutive from a round-robin start). Prints one JSON line
(medians over ``--reps``) and appends it to ``bench/results/failover_requests.jsonl``.

    .venv/bin/python bench/failover_requests.py [--scale 1] [--reps 3] [--parts controller,brokers,data_plane]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import report
from bench.controller_inmemory import BROKERS, Cluster, drain
from kafka_controller.broker.alter_isr import AlterIsrManager
from kafka_controller.broker.controller_apis import AlterIsrResponse
from kafka_controller.broker.data_plane import DataPlane
from kafka_controller.broker.metadata_cache import MetadataCache
from kafka_controller.broker.replica_manager import ReplicaManager
from kafka_controller.broker.request_handler import BrokerRequestHandler
from kafka_controller.domain.requests import (
    ControlRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from kafka_controller.domain.values import Broker, EndPoint
from kafka_controller.transport import framing
from kafka_controller.transport.codec import API_BY_REQUEST_TYPE, DEFAULT_APIS
from kafka_controller.transport.errors import TransportConnectionError

Layout = dict[str, dict[int, tuple[int, ...]]]
Sent = list[tuple[int, ControlRequest]]
CONTROLLER, DEAD = 0, BROKERS - 1
ADDRESSES = tuple(Broker(b, (EndPoint("localhost", 9092 + b),)) for b in range(BROKERS))


def failover_requests(scale: float, rf: int = 3) -> tuple[Layout, Sent]:
    """The layout, and what the new controller (broker 0) sends after broker 4 died."""
    topics, per_topic = max(1, int(2000 * scale)), 50
    layout = {
        f"topic-{t}": {
            p: tuple((t * per_topic + p + k) % BROKERS for k in range(rf)) for p in range(per_topic)
        }
        for t in range(topics)
    }
    cluster = Cluster()
    cluster.load(layout)
    cluster.stores[DEAD].expire_session()
    controller = cluster.controller(CONTROLLER)
    controller.startup()
    drain(controller)
    sent = [(s.broker_id, s.request) for s in controller.channel_manager.sent]  # type: ignore[attr-defined]
    controller.shutdown()
    cluster.close()
    return layout, sent


def encode(request: ControlRequest) -> bytes:
    api = API_BY_REQUEST_TYPE[type(request)]
    return framing.encode_request(api, 1, DEFAULT_APIS.get(api).encode_request(request))


def serve(handler: BrokerRequestHandler, payload: bytes) -> bytes:
    """A broker's ``TransportServer._answer``: decode, handle, encode the answer."""
    api, cid, body = framing.decode_request(payload)
    response = handler.handle(api, DEFAULT_APIS.decode_request(api, body))
    return framing.encode_response(cid, DEFAULT_APIS.get(api).encode_response(response))


class _InProcessClient:
    """A fetcher's connection to another broker of this process, through the Fetch codec."""

    def __init__(self, handlers: dict[int, BrokerRequestHandler], dead: set[int], port: int) -> None:
        self.handlers, self.dead, self.broker_id = handlers, dead, port - 9092

    def request(self, api: str, body: Any) -> Any:
        if self.broker_id in self.dead:
            raise TransportConnectionError(f"broker {self.broker_id} is dead")
        answer = serve(
            self.handlers[self.broker_id],
            framing.encode_request(api, 1, DEFAULT_APIS.get(api).encode_request(body)),
        )
        _, response, _ = framing.decode_response(answer)
        return DEFAULT_APIS.decode_response(api, response)

    def close(self) -> None:
        pass


def settled_broker(
    broker_id: int, layout: Layout, now_ms: Callable[[], int], client_factory: Any = None
) -> BrokerRequestHandler:
    """A broker as the settled cluster left it: every partition led by its first replica."""
    rm = ReplicaManager(broker_id, now_ms, produce_rate_per_s=100.0)
    isr = AlterIsrManager(rm, lambda: 1, lambda request, fresh: AlterIsrResponse("NONE"))
    plane = DataPlane(
        rm, isr, start_threads=False, **({"client_factory": client_factory} if client_factory else {})
    )
    cache = MetadataCache(broker_id, timer=lambda delay_s, fn: None)  # merged when measured, below
    handler = BrokerRequestHandler(broker_id, lambda: 1, rm, cache, plane)
    hosted = tuple(
        LeaderAndIsrPartitionState(t, p, 1, r[0], 1, r, 0, r, (), (), False)
        for t, parts in layout.items()
        for p, r in parts.items()
        if broker_id in r
    )
    serve(handler, encode(LeaderAndIsrRequest(5, DEAD, 1, 1, hosted, {}, ADDRESSES)))
    every = tuple(
        UpdateMetadataPartitionState(t, p, 1, r[0], 1, r, 0, r, ())
        for t, parts in layout.items()
        for p, r in parts.items()
    )
    serve(handler, encode(UpdateMetadataRequest(7, DEAD, 1, 1, every, ADDRESSES, {})))
    return handler


def cpu(fn: Callable[[], Any]) -> float:
    gc.collect()
    start = time.process_time()
    fn()
    return time.process_time() - start


def controller_part(layout: Layout, sent: Sent) -> dict[str, float]:
    remote = [(b, r) for b, r in sent if b != CONTROLLER]
    answers = []
    for b in sorted({b for b, _ in remote}):
        handler = settled_broker(b, layout, lambda: 0)
        answers += [(API_BY_REQUEST_TYPE[type(r)], serve(handler, encode(r))) for bb, r in remote if bb == b]

    def decode_answers() -> None:
        for api, answer in answers:
            DEFAULT_APIS.decode_response(api, framing.decode_response(answer)[1])

    return {
        "encode_cpu_s": cpu(lambda: [encode(r) for _, r in remote]),
        "decode_answers_cpu_s": cpu(decode_answers),
    }


def brokers_part(layout: Layout, sent: Sent) -> dict[str, float]:
    """The requests' handling, then (``brokers_merge_cpu_s``) the metadata cache's merge of the
    UpdateMetadata it queued, which a broker runs once the requests stop coming."""
    total = merge = 0.0
    for b in sorted({b for b, _ in sent} - {CONTROLLER}):
        payloads = [encode(r) for bb, r in sent if bb == b]
        handler = settled_broker(b, layout, lambda: 0)
        handler.metadata_cache.contains_topic("")  # the settled cluster's requests merged
        total += cpu(lambda: [serve(handler, p) for p in payloads])  # noqa: B023 - called at once
        merge += cpu(lambda: handler.metadata_cache.contains_topic(""))  # noqa: B023
    return {"brokers_cpu_s": total, "brokers_merge_cpu_s": merge}


def _batches(sent: Sent) -> list[Sent]:
    """The controller's sends, cut where it starts over at the first broker (one batch each)."""
    batches: list[Sent] = [[]]
    for b, r in sent:
        if batches[-1] and b == CONTROLLER and batches[-1][-1][0] != CONTROLLER:
            batches.append([])
        batches[-1].append((b, r))
    return batches


def data_plane_part(layout: Layout, sent: Sent) -> dict[str, float]:
    clock = [1_000_000]
    handlers: dict[int, BrokerRequestHandler] = {}
    dead: set[int] = set()
    for b in range(BROKERS):
        factory = lambda host, port, timeout_s: _InProcessClient(handlers, dead, port)  # noqa: E731
        handlers[b] = settled_broker(b, layout, lambda: clock[0], factory)

    def fetch_round() -> None:
        for b, handler in handlers.items():
            if b not in dead:
                for fetcher in list(handler.data_plane.fetchers.values()):
                    with contextlib.suppress(TransportConnectionError):  # the dead leader
                        fetcher.fetch_once()
        clock[0] += 200

    for _ in range(3):
        fetch_round()
    dead.add(DEAD)
    fetch_round()
    total = applied = 0.0
    for batch in _batches(sent):
        for b, r in batch:
            if b == CONTROLLER:  # the controller's own broker: called directly (LocalClient)
                applied += cpu(lambda: handlers[b].handle(API_BY_REQUEST_TYPE[type(r)], r))  # noqa: B023
            else:
                payload = encode(r)
                applied += cpu(lambda: serve(handlers[b], payload))  # noqa: B023
        total += cpu(fetch_round) + cpu(fetch_round)
    return {"fetch_cpu_s": total, "apply_cpu_s": applied}


PARTS = {"controller": controller_part, "brokers": brokers_part, "data_plane": data_plane_part}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of Kafka's layout (default 1)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rf", type=int, default=3, help="replication factor (default 3)")
    parser.add_argument("--parts", default=",".join(PARTS))
    args = parser.parse_args()
    layout, sent = failover_requests(args.scale, args.rf)
    runs: dict[str, list[float]] = {}
    for _ in range(args.reps):
        for part in args.parts.split(","):
            for key, value in PARTS[part](layout, sent).items():
                runs.setdefault(key, []).append(value)
    report(
        "failover_requests",
        {
            "scale": args.scale,
            "rf": args.rf,
            "partitions": sum(map(len, layout.values())),
            "requests": len(sent),
            "partition_states_sent": sum(len(r.partition_states) for _, r in sent),
            "reps": args.reps,
            **{key: round(statistics.median(values), 4) for key, values in runs.items()},
            "runs": {key: [round(v, 4) for v in values] for key, values in runs.items()},
        },
    )


if __name__ == "__main__":
    main()
