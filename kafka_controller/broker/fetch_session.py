"""Fetch sessions (Kafka's KIP-227, adapted to a simulated log): a fetch costs per broker, not per
partition, once every partition in it is in sync.

Kafka's incremental fetch sessions let a follower leave out of its Fetch every partition whose
position did not change, and a leader leave out of the answer every partition with nothing new. A
simulated log grows at a constant rate, so here *nothing* has to travel for a partition in the
steady state: a follower in the ISR takes the whole log end it is told, so at each fetch its
position is the leader's log end at its previous fetch. Both sides keep that as one clock per
session instead of numbers per partition:

* ``FetchSession`` (leader side, one per follower broker): the times of the follower's last two
  fetches. A follower's ``FollowerState`` that is *steady* in the session derives its log end and
  caught-up time from them when read (``FollowerState.refresh``), exactly as Kafka's
  ``updateFetchState`` would have recorded them fetch by fetch. A partition is processed one by one
  only while it is in the session's ``explicit`` set: its follower is out of the ISR (it may join),
  or the partition changed (leadership, ISR, stopped) and must be answered with its error.
* ``FetcherClock`` (follower side, one per fetcher): the leader's clock at its last answer. A
  follower replica attached to it computes its log end from the leader's log (base offset, base
  time, rate: sent once, in a full answer) at that time, and its high watermark from the session's
  high-watermark time (the oldest previous fetch among the leader's live sessions: never above
  Kafka's high watermark, at most one fetch interval below it in a healthy cluster).

A follower sends a full Fetch (every partition, ``session_id`` 0) to start a session and after
any failed round trip; the leader then starts a new session. When its set of partitions or their
leader epochs change, the next incremental Fetch names only what changed, as Kafka's
``FetchSessionHandler`` builds it: each partition added or followed at a new epoch (the leader
answers it as a full fetch would, and adds it to the session) and each it no longer follows there
(``forgotten``: the leader drops it from the session). After a failover a follower's fetch thus
carries the partitions that moved, not every partition it follows from that leader.
"""

from __future__ import annotations

from kafka_controller.domain.values import TopicPartition

#: Kafka's error names for a session the leader does not know, or a fetch out of sequence.
FETCH_SESSION_ID_NOT_FOUND = "FETCH_SESSION_ID_NOT_FOUND"
INVALID_FETCH_SESSION_EPOCH = "INVALID_FETCH_SESSION_EPOCH"
#: A high-watermark time that says "not known yet": the follower keeps the last one it was told.
NO_TIME = -1


class FetchSession:
    """A leader's record of one follower broker's fetches; guarded by the replica manager's lock."""

    __slots__ = (
        "epoch",
        "explicit",
        "fetches",
        "last_ms",
        "partitions",
        "prev_ms",
        "replica_id",
        "session_id",
    )

    def __init__(self, replica_id: int, session_id: int, now_ms: int) -> None:
        self.replica_id = replica_id
        self.session_id = session_id
        self.epoch = 0  # the follower's next fetch carries epoch + 1
        self.fetches = 0
        self.prev_ms = now_ms
        self.last_ms = now_ms
        #: every partition the follower fetches here, with the leader epoch it fetches at (a full
        #: fetch keys it by plain ``(topic, partition)`` tuples: equal to, and hashed as, the
        #: ``TopicPartition`` keys, without building one object per partition)
        self.partitions: dict[TopicPartition, int] = {}
        #: partitions answered one by one at the next fetch (see the module docstring)
        self.explicit: set[TopicPartition] = set()

    def record_fetch(self, now_ms: int) -> None:
        self.prev_ms, self.last_ms = self.last_ms, now_ms
        self.fetches += 1
        self.epoch += 1


class FetcherClock:
    """A follower's view of one leader's session: the leader's time at its last answer."""

    __slots__ = ("hw_ms", "leader_now_ms")

    def __init__(self) -> None:
        self.leader_now_ms = 0
        self.hw_ms = NO_TIME
