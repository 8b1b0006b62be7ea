"""Two ZooKeeper requests kazoo lacks or makes slow, as kazoo request objects (``type``,
``serialize()``, ``deserialize(buffer, offset)``), handed to ``KazooClient._call``.

* ``MultiRead`` (opcode 22, ZooKeeper >= 3.6): many getData/getChildren in one request. Body: per
  op a multi header ``(type:int, done:bool, err:int)`` = ``(4 or 8, false, -1)`` then ``path:string,
  watch:bool``; closed by ``(-1, true, -1)``. Reply: per op a header whose type is 4/8 followed by
  ``data:buffer, stat`` / ``children:vector<string>``, or type -1 followed by ``err:int``.
* ``FastMulti`` (opcode 14): kazoo's ``Transaction`` builds a namedtuple per op and a ZnodeStat per
  result; this packs pre-built op tuples with precompiled structs and returns only what the store
  uses (created path, new data version). Failed ops come back as ``MultiError(code)``.

A multi-read cannot arm watches: the server rebuilds each read op without its watch flag
(``Op.getData(path)``), so the flag is always sent false. A watched read of many znodes is a
``WatchedMultiRead`` followed by ``SetWatches``:

* ``SetWatches`` (opcode 101): ``relativeZxid:long`` then three ``vector<string>`` (data, exist,
  child watches); the reply is a bare header. It is the request ZooKeeper's Java client sends on
  every reconnection to re-arm its watches, so Kafka already relies on what it does: for each
  data (child) watch path, atomically with the registration, the server fires ``NodeDeleted`` if
  the znode is gone, ``NodeDataChanged`` (``NodeChildrenChanged``) if its ``mzxid`` (``pzxid``) is
  past ``relativeZxid``, and otherwise arms the watch.

With ``relativeZxid`` the zxid the multi-read was served at, that is a watch armed atomically with
the read: no change after the read is lost (it fires at once, or arms a watch it will fire), and
no change the read saw fires it. The zxid is exact because the server serves a read request whole
while no write is applied (ZooKeeper's ``CommitProcessor``: "no read requests processed in
parallel with write requests"; standalone servers run one request at a time) and stamps its reply
with the last applied zxid, read before the ops run (``FinalRequestProcessor``). A reconnection
to another server in between is safe too: zxids are global and the session only moves to a
server at least as current. The one visible difference from a getData watch: a znode deleted
*and* recreated between the read and ``SetWatches`` fires ``NodeDataChanged`` where the getData
watch would have fired ``NodeDeleted``; both tell the handler to re-read. No kazoo import here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Any

from kafka_controller.domain.errors import MetadataStoreError, brief
from kafka_controller.hotpath import new_tuple
from kafka_controller.zk.backend import CHECK, CREATE, DELETE, OK, RUNTIMEINCONSISTENCY, SET_DATA, Op, Stat

GET_DATA = 4
GET_CHILDREN = 8

_int = struct.Struct("!i")
_long = struct.Struct("!q")
_REPLY_ZXID_BACK = 12  # the reply header ``xid:int, zxid:long, err:int`` ends where the body starts
_header = struct.Struct("!iBi")
_header_int = struct.Struct("!iBii")  # a result's header and the int after it (data length or error)
_stat = struct.Struct("!qqqqiiiqiiq")
_STAT_VERSION_OFFSET = 32  # czxid, mzxid, ctime, mtime (4 longs) precede ``version``
_END = _header.pack(-1, 1, -1)
_STAT_SIZE = _stat.size
_NULL = _int.pack(-1)
_SET_RESULT = struct.Struct("!iBi32xi32x")  # a setData result: header, then of the stat only version


def check_paths(paths: Sequence[str]) -> None:
    """A path that is not valid UTF-8 (a lone surrogate from an undecodable argument or a JSON
    escape) would fail inside kazoo's connection thread and drop the connection for every caller;
    refuse it here instead, as ZooKeeper refuses a bad path (BADARGUMENTS)."""
    try:
        "".join(paths).encode("utf-8")
    except UnicodeEncodeError:
        for path in paths:
            try:
                path.encode("utf-8")
            except UnicodeEncodeError:
                raise MetadataStoreError(
                    f"znode path {brief(path)} is not valid UTF-8", code="BADARGUMENTS", path=path
                ) from None


class MultiError:
    """A failed op inside a multi reply: ``code`` 0 means "rolled back", -2 "not evaluated"."""

    __slots__ = ("code",)

    def __init__(self, code: int) -> None:
        self.code = code

    def __repr__(self) -> str:
        return f"MultiError({self.code})"


def first_failure(results: Sequence[Any]) -> tuple[int, int] | None:
    """``(index, code)`` of the op that failed a multi (the first error that is neither a
    rollback nor RUNTIMEINCONSISTENCY, as the Java client does), or None if all succeeded."""
    fallback = None
    for i, r in enumerate(results):
        if type(r) is MultiError:
            if r.code not in (OK, RUNTIMEINCONSISTENCY):
                return i, r.code
            if fallback is None:
                fallback = (i, r.code or RUNTIMEINCONSISTENCY)
    return fallback


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _int.pack(len(raw)) + raw


class MultiRead:
    """Opcode 22. ``deserialize`` returns, per op, ``(code, data, stat)`` for getData and
    ``(code, children)`` for getChildren."""

    type = 22

    def __init__(self, op_type: int, paths: Sequence[str], chroot: str) -> None:
        self.op_type = op_type
        self.paths = paths
        self.chroot = chroot

    def __repr__(self) -> str:
        return f"MultiRead(type={self.op_type}, n={len(self.paths)})"

    def serialize(self) -> bytes:
        head = _header.pack(self.op_type, 0, -1)
        flag = b"\x00"  # ignored by the server anyway
        chroot = self.chroot
        parts = []
        for path in self.paths:
            parts.append(head)
            parts.append(_string(chroot + path if chroot else path))
            parts.append(flag)
        parts.append(_END)
        return b"".join(parts)

    def deserialize(self, buf: bytes, offset: int) -> list[Any]:
        out: list[Any] = []
        header_from, int_from, stat_from = _header.unpack_from, _int.unpack_from, _stat.unpack_from
        build, stat_type = new_tuple, Stat  # ``Stat(*fields)``: the struct gives its 11 fields
        getting_data = self.op_type == GET_DATA
        while True:
            typ, done, _err = header_from(buf, offset)
            offset += 9
            if done:
                break
            if typ == -1:
                out.append((int_from(buf, offset)[0],) + ((None, None) if getting_data else (None,)))
                offset += 4
            elif typ == GET_DATA:
                n = int_from(buf, offset)[0]
                offset += 4
                data = None
                if n >= 0:
                    data = buf[offset : offset + n]
                    offset += n
                out.append((OK, data, build(stat_type, stat_from(buf, offset))))
                offset += _STAT_SIZE
            elif typ == GET_CHILDREN:
                count = int_from(buf, offset)[0]
                offset += 4
                children = []
                for _ in range(max(count, 0)):
                    n = int_from(buf, offset)[0]
                    offset += 4
                    children.append(buf[offset : offset + n].decode("utf-8"))
                    offset += n
                out.append((OK, children))
            else:
                raise ValueError(f"unexpected multi-read result type {typ}")
        if len(out) != len(self.paths):
            raise ValueError(f"multi-read returned {len(out)} results for {len(self.paths)} paths")
        return out


class DataVersionsMultiRead(MultiRead):
    """A getData ``MultiRead`` whose ``deserialize`` returns columns, ``(codes, data, versions)``
    (``backend.DataVersions``): of each stat only the data version, read in place, and no tuple per
    znode. A failover's 100,000 partition-state reads are parsed on kazoo's connection thread
    with the controller's event thread waiting on them; this parses them in about a third of the
    time."""

    def __init__(self, paths: Sequence[str], chroot: str) -> None:
        super().__init__(GET_DATA, paths, chroot)

    def deserialize(self, buf: bytes, offset: int) -> Any:  # DataVersions
        codes: list[int] = []
        datas: list[bytes | None] = []
        versions: list[int] = []
        # Every result is a header and an int (a data length or an error code): one unpack; the
        # closing header comes after the last, so the wanted count bounds the loop.
        header_int_from, int_from = _header_int.unpack_from, _int.unpack_from
        try:
            return self._columns(buf, offset, header_int_from, int_from, codes, datas, versions)
        except struct.error:  # a truncated reply
            raise ValueError(f"multi-read returned other than {len(self.paths)} results") from None

    def _columns(
        self,
        buf: bytes,
        offset: int,
        header_int_from: Callable[..., tuple[Any, ...]],
        int_from: Callable[..., tuple[Any, ...]],
        codes: list[int],
        datas: list[bytes | None],
        versions: list[int],
    ) -> Any:
        add_code, add_data, add_version = codes.append, datas.append, versions.append
        for _ in range(len(self.paths)):
            typ, done, _err, n = header_int_from(buf, offset)
            offset += 13
            if done:
                break
            if typ == GET_DATA:
                add_code(OK)
                if n >= 0:
                    add_data(buf[offset : offset + n])
                    offset += n
                else:
                    add_data(None)
                add_version(int_from(buf, offset + _STAT_VERSION_OFFSET)[0])
                offset += _STAT_SIZE
            elif typ == -1:
                add_code(n)
                add_data(None)
                add_version(-1)
            else:
                raise ValueError(f"unexpected multi-read result type {typ}")
        else:
            if _header.unpack_from(buf, offset)[1]:  # closed right after the last wanted result
                return codes, datas, versions
        raise ValueError(f"multi-read returned other than {len(self.paths)} results")


class WatchedMultiRead(MultiRead):
    """A ``MultiRead`` that keeps the zxid its reply was served at (``zxid``), for ``SetWatches``.

    kazoo hands ``deserialize`` the whole reply with ``offset`` just past its header."""

    def __init__(self, op_type: int, paths: Sequence[str], chroot: str) -> None:
        super().__init__(op_type, paths, chroot)
        self.zxid = -1

    def deserialize(self, buf: bytes, offset: int) -> list[Any]:
        if offset < _REPLY_ZXID_BACK:
            raise ValueError("multi-read reply without its header")
        self.zxid = _long.unpack_from(buf, offset - _REPLY_ZXID_BACK)[0]
        return super().deserialize(buf, offset)


class SetWatches:
    """Opcode 101 (module docs): arm data or child watches on ``paths`` relative to
    ``relative_zxid``. ``register`` runs on the connection thread as the request is serialized,
    before it reaches the socket, so the client knows the watchers before any event the request
    triggers can arrive."""

    type = 101

    def __init__(
        self,
        relative_zxid: int,
        op_type: int,
        paths: Sequence[str],
        chroot: str,
        register: Callable[[], None],
    ) -> None:
        self.relative_zxid = relative_zxid
        self.op_type = op_type
        self.paths = paths
        self.chroot = chroot
        self.register = register

    def __repr__(self) -> str:
        return f"SetWatches(zxid={self.relative_zxid}, type={self.op_type}, n={len(self.paths)})"

    def serialize(self) -> bytes:
        self.register()
        chroot = self.chroot
        watched = _int.pack(len(self.paths)) + b"".join(
            _string(chroot + path if chroot else path) for path in self.paths
        )
        empty = _int.pack(0)
        data, child = (watched, empty) if self.op_type == GET_DATA else (empty, watched)
        return _long.pack(self.relative_zxid) + data + empty + child

    def deserialize(self, buf: bytes, offset: int) -> None:
        return None


class FastMulti:
    """Opcode 14 over pre-built op tuples (their paths checked at once); ``deserialize`` returns
    per op the created path (create), the new data version (set), None (delete/check) or a
    ``MultiError``."""

    type = 14

    def __init__(self, ops: Sequence[Op], chroot: str, acl_bytes: Callable[[str], bytes]) -> None:
        check_paths([op[1] for op in ops])
        self.ops = ops
        self.chroot = chroot
        self.acl_bytes = acl_bytes
        self._sets_from = -1  # set by ``serialize``

    def __repr__(self) -> str:
        return f"FastMulti(n={len(self.ops)})"

    def serialize(self) -> bytes:
        # A failover's 80,000 ISR writes are serialized on kazoo's connection thread, under the GIL
        # the event thread needs: a setData op goes out as one concatenation, its header and path
        # length in one pack (``tests/zk/test_multiread_bytes.py`` pins the bytes to kazoo's).
        parts: list[bytes] = []
        append = parts.append
        chroot = self.chroot
        int_pack, head_pack = _int.pack, _header_int.pack
        others = 0
        for kind, path, data, arg in self.ops:
            raw = (chroot + path if chroot else path).encode("utf-8")
            if kind == SET_DATA:
                data_part = _NULL if data is None else int_pack(len(data)) + data
                append(head_pack(kind, 0, -1, len(raw)) + raw + data_part + int_pack(arg))
                continue
            others += 1
            append(head_pack(kind, 0, -1, len(raw)))
            append(raw)
            if kind == CREATE:
                append(_NULL if data is None else int_pack(len(data)) + data)
                append(self.acl_bytes(path))
            append(int_pack(arg))
        append(_END)
        # Every op a setData but at most a leading check: ``deserialize`` may read them in bulk.
        self._sets_from = 0 if not others else 1 if others == 1 and self.ops[0][0] == CHECK else -1
        return b"".join(parts)

    def deserialize(self, buf: bytes, offset: int) -> list[Any]:
        if self._sets_from >= 0:
            versions = self._set_versions(buf, offset)
            if versions is not None:
                return versions
        out: list[Any] = []
        header_from, int_from = _header.unpack_from, _int.unpack_from
        while True:
            typ, done, _err = header_from(buf, offset)
            offset += 9
            if done:
                break
            if typ == SET_DATA:
                out.append(int_from(buf, offset + _STAT_VERSION_OFFSET)[0])
                offset += _STAT_SIZE
            elif typ == CREATE:
                n = int_from(buf, offset)[0]
                offset += 4
                out.append(buf[offset : offset + n].decode("utf-8"))
                offset += n
            elif typ in (DELETE, CHECK):
                out.append(None)
            elif typ == -1:
                out.append(MultiError(int_from(buf, offset)[0]))
                offset += 4
            else:
                raise ValueError(f"unexpected multi result type {typ}")
        return out

    def _set_versions(self, buf: bytes, offset: int) -> list[Any] | None:
        """The reply of a multi that all succeeded, read in bulk: a check's result is a
        bare header, a setData's a header and a stat of which only the version is kept. None (so
        the general parse runs) when the reply is laid out otherwise: the first result unlike the
        expected one is a failure (type -1) at a position the bulk read aligns with, so a failed
        multi always takes the general parse."""
        out: list[Any] = []
        if self._sets_from:
            typ, done, _err = _header.unpack_from(buf, offset)
            if typ != CHECK or done:
                return None
            out.append(None)
            offset += 9
        n = len(self.ops) - self._sets_from
        end = offset + _SET_RESULT.size * n
        if n == 0 or len(buf) < end + _header.size:
            return None
        types, _dones, _errs, versions = zip(
            *_SET_RESULT.iter_unpack(memoryview(buf)[offset:end]), strict=True
        )
        if types.count(SET_DATA) != n or not _header.unpack_from(buf, end)[1]:
            return None
        out += versions
        return out


def serialize_acls(acls: Sequence[tuple[int, str, str]]) -> bytes:
    """An ACL vector: ``count:int`` then per ACL ``perms:int, scheme:string, id:string``."""
    return _int.pack(len(acls)) + b"".join(_int.pack(p) + _string(s) + _string(i) for p, s, i in acls)
