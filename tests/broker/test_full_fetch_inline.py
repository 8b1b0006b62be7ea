"""A full fetch's in-sync partitions are answered inline (``DataPlane._fetch_full``), the others
through ``_fetch_one``: the answers and the state left behind are those of ``_fetch_one`` for
every partition, as before the inline path.

Two in-process broker pairs as in ``test_data_plane`` on the same manual clock; in the reference
pair the leader answers every partition of a full fetch with ``_fetch_one``."""

from __future__ import annotations

from typing import Any

from kafka_controller.broker import apis as A
from kafka_controller.broker.data_plane import DataPlane
from kafka_controller.domain.values import TopicPartition
from tests.broker.test_data_plane import T0, T1, TwoBrokers

T2, T3 = TopicPartition("u", 7), TopicPartition("u", 8)


def _row_by_row(plane: DataPlane) -> None:
    """The reference: ``_fetch_one`` for every partition of a full fetch."""

    def fetch_full(
        session: Any, keys: Any, epochs: Any, offsets: Any, now: int, proposals: Any
    ) -> tuple[tuple[Any, ...], ...]:
        columns = zip(keys, epochs, offsets, strict=True)
        rows = [plane._fetch_one(session, k, e, o, now, proposals) for k, e, o in columns]
        return tuple(map(tuple, zip(*rows, strict=True))) if rows else ((),) * 5

    plane._fetch_full = fetch_full  # type: ignore[method-assign]


def _answers(c: TwoBrokers) -> list[A.FetchResponse]:
    """Keep every answer of the leader (broker 1)."""
    plane = c.plane[1]
    inner = plane.handle_fetch
    kept: list[A.FetchResponse] = []

    def handle_fetch(request: A.FetchRequest) -> A.FetchResponse:
        kept.append(inner(request))
        return kept[-1]

    plane.handle_fetch = handle_fetch  # type: ignore[method-assign]
    return kept


def _state(c: TwoBrokers) -> list[Any]:
    now = c.clock.time_ms()
    out: list[Any] = []
    for tp in (T0, T1, T2, T3):
        leader, follower = c.part(1, tp), c.part(2, tp)
        f = leader.followers.get(2)
        if f is not None:
            f.refresh(leader)
            out.append(
                (
                    f.log_end_offset,
                    f.last_caught_up_ms,
                    f.last_fetch_leader_leo,
                    f.last_fetch_hw,
                    f.last_fetch_ms,
                    f.session is not None,
                )
            )
        out.append((leader.isr, leader.pending_isr, leader.high_watermark(now)))
        out.append((follower.log_end_offset(now), follower.high_watermark(now)))
    return out


def test_full_fetches_answer_and_record_as_fetching_each_partition_one_by_one() -> None:
    inline, reference = TwoBrokers(), TwoBrokers()
    _row_by_row(reference.plane[1])
    kept = {id(c): _answers(c) for c in (inline, reference)}

    def both(step: Any) -> None:
        for c in (inline, reference):
            step(c)

    # In the ISR (T0, T1), out of it (T2: proposed for it once caught up), not led here (T3).
    both(lambda c: c.assign(1, 0, (1, 2), T0, T1))
    both(lambda c: c.assign(1, 0, (1,), T2))
    both(lambda c: c.assign(2, 0, (2, 1), T3))
    for epoch, step_s in enumerate((0.2, 0.35, 0.2, 1.5, 0.05, 0.2), start=1):
        both(lambda c, s=step_s: c.clock.advance(s))
        both(lambda c: c.fetch())
        both(lambda c: c.isr[1].send_pending())  # T2 joins the ISR through AlterIsr
        both(lambda c: c.clock.advance(0.2))
        both(lambda c: c.fetch())
        # A new leader epoch (a failover's ISR shrink, say): the next fetch is a full one again.
        both(lambda c, e=epoch: c.assign(1, e, c.part(1, T0).isr, T0, T1))
        both(lambda c, e=epoch: c.assign(1, e, c.part(1, T2).isr, T2))
        assert _state(inline) == _state(reference)
    answers, expected = kept[id(inline)], kept[id(reference)]
    assert answers == expected
    assert any(len(a.errors) == 3 for a in answers)  # full fetches (T3 is fetched from broker 2)
    assert inline.isr[1].sent_requests == reference.isr[1].sent_requests > 0


def test_in_sync_partitions_of_a_full_fetch_are_not_answered_one_by_one() -> None:
    c = TwoBrokers()
    c.assign(1, 0, (1, 2), T0, T1)
    c.assign(1, 0, (1,), T2)
    plane = c.plane[1]
    inner = plane._fetch_one
    one_by_one: list[TopicPartition] = []

    def fetch_one(session: Any, tp: TopicPartition, *rest: Any) -> Any:
        one_by_one.append(tp)
        return inner(session, tp, *rest)

    plane._fetch_one = fetch_one  # type: ignore[method-assign]
    c.clock.advance(0.2)
    assert c.fetch() == 3
    assert one_by_one == [T2]  # the follower out of the ISR, which may join it
    assert c.part(1, T0).followers[2].session is plane.sessions[2]  # steady in the new session
    assert c.part(1, T2).followers[2].session is None
