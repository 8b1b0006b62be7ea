"""``FastMulti`` against kazoo's own ``Transaction``: the same bytes on the wire for every op kind,
and the bulk reply parse of an all-setData multi equal to the general parse, failures included."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from kazoo.protocol.serialization import CheckVersion, Create, Delete, SetData, Transaction
from kazoo.security import ACL, Id

from kafka_controller.zk.backend import CHECK, CREATE, DELETE, PERSISTENT, SET_DATA, Op
from kafka_controller.zk.multiread import FastMulti, MultiError, serialize_acls

_ACLS = [(31, "world", "anyone"), (1, "sasl", "kafka")]
_KAZOO_ACLS = [ACL(p, Id(s, i)) for p, s, i in _ACLS]
_header = struct.Struct("!iBi")
_stat = struct.Struct("!qqqqiiiqiiq")


def _kazoo_bytes(ops: list[Op], chroot: str) -> bytes:
    kops: list[Any] = []
    for kind, path, data, arg in ops:
        full = chroot + path
        if kind == SET_DATA:
            kops.append(SetData(full, data, arg))
        elif kind == CREATE:
            kops.append(Create(full, data, _KAZOO_ACLS, arg))
        elif kind == DELETE:
            kops.append(Delete(full, arg))
        else:
            kops.append(CheckVersion(full, arg))
    return bytes(Transaction(kops).serialize())


def _multi(ops: list[Op], chroot: str = "") -> FastMulti:
    return FastMulti(ops, chroot, lambda _path: serialize_acls(_ACLS))


def _state(i: int) -> str:
    return f"/brokers/topics/t-{i // 7}/partitions/{i % 7}/state"


MIXES: list[list[Op]] = [
    [(CHECK, "/controller_epoch", None, 4)]
    + [(SET_DATA, _state(i), b'{"leader":%d}' % i, i % 5 - 1) for i in range(40)],
    [(SET_DATA, _state(i), b"x" * i, i) for i in range(10)],
    [(SET_DATA, "/a", None, -1), (SET_DATA, "/b", b"", 0)],
    [(SET_DATA, "/\u00e9t\u00e9/\u4e2d", "d\u00e9j\u00e0".encode(), 3)],
    [
        (CHECK, "/controller_epoch", None, 0),
        (CREATE, "/brokers/topics/t/partitions", None, PERSISTENT),
        (CREATE, _state(1), b'{"x":1}', PERSISTENT),
        (SET_DATA, _state(2), b"{}", 7),
        (DELETE, "/admin/delete_topics/t", None, -1),
        (CHECK, "/x", None, 2),
    ],
    [(CHECK, "/controller_epoch", None, 1)],
    [(CHECK, "/controller_epoch", None, 1), (CHECK, "/y", None, 1), (SET_DATA, "/z", b"1", 1)],
]


@pytest.mark.parametrize("chroot", ["", "/bench"])
@pytest.mark.parametrize("ops", MIXES)
def test_serialize_is_kazoos_bytes(ops: list[Op], chroot: str) -> None:
    assert _multi(ops, chroot).serialize() == _kazoo_bytes(ops, chroot)


def _reply(results: list[tuple[int, int]]) -> bytes:
    """``(type, value)`` per op: a setData result carries a stat whose version is ``value``; a
    failure (type -1) carries the error ``value``; a check's result is a bare header."""
    parts = [b"junk"]  # kazoo hands deserialize an offset into a bigger buffer
    for typ, value in results:
        parts.append(_header.pack(typ, 0, 0 if typ != -1 else value))
        if typ == SET_DATA:
            parts.append(_stat.pack(11, 12, 13, 14, value, 15, 16, 17, 18, 19, 20))
        elif typ == -1:
            parts.append(struct.pack("!i", value))
    parts.append(_header.pack(-1, 1, -1))
    return b"".join(parts)


def _general(ops: list[Op], buf: bytes) -> list[Any]:
    multi = _multi(ops)  # never serialized: the general parse
    return multi.deserialize(buf, 4)


def _both(ops: list[Op], buf: bytes) -> list[Any]:
    multi = _multi(ops)
    multi.serialize()
    fast = multi.deserialize(buf, 4)
    slow = _general(ops, buf)
    assert [(type(r), getattr(r, "code", r)) for r in fast] == [
        (type(r), getattr(r, "code", r)) for r in slow
    ]
    return fast


FENCED = [(CHECK, "/controller_epoch", None, 4)] + [(SET_DATA, _state(i), b"{}", i) for i in range(6)]


def test_all_sets_succeeded_reads_versions() -> None:
    buf = _reply([(CHECK, 0)] + [(SET_DATA, 100 + i) for i in range(6)])
    assert _both(FENCED, buf) == [None, 100, 101, 102, 103, 104, 105]
    unfenced = FENCED[1:]
    assert _both(unfenced, _reply([(SET_DATA, 7 + i) for i in range(6)])) == [7, 8, 9, 10, 11, 12]


@pytest.mark.parametrize("failed", range(7))
def test_a_failed_multi_takes_the_general_parse(failed: int) -> None:
    # ZooKeeper answers a failed multi with an error per op: 0 before, the code, -2 after.
    codes = [0] * failed + [-103] + [-2] * (6 - failed)
    out = _both(FENCED, _reply([(-1, c) for c in codes]))
    assert [r.code for r in out] == codes and all(type(r) is MultiError for r in out)


def test_a_reply_shaped_otherwise_is_parsed_in_full() -> None:
    # A setData answered as a check (never from a real server) is caught, not misread.
    assert _both(FENCED, _reply([(CHECK, 0)] * 2 + [(SET_DATA, 1)] * 5)) == [None, None] + [1] * 5
    # A check where a setData was expected, and a result missing (the bulk read would overrun).
    assert _both(FENCED[1:], _reply([(CHECK, 0)] + [(SET_DATA, 2)] * 5)) == [None] + [2] * 5
    assert _both(FENCED, _reply([(CHECK, 0)] + [(SET_DATA, 3)] * 5)) == [None] + [3] * 5


@pytest.mark.parametrize("failed", [0, 3, 5])
def test_a_failure_is_caught_by_its_type_not_only_by_the_length(failed: int) -> None:
    # Bytes after the reply (a bigger buffer) leave room for the bulk read: the types tell. No
    # check op leads, so no check's header gives the failure away first.
    codes = [0] * failed + [-101] + [-2] * (5 - failed)
    out = _both(FENCED[1:], _reply([(-1, c) for c in codes]) + bytes(range(256)) * 3)
    assert [r.code for r in out] == codes
