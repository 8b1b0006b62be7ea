"""The project's own error hierarchy (adapters translate into these:
docs/rules.md, errors are translated at the adapter edge).

Two kinds matter most to the controller: ``ControllerMovedError`` (fenced: resign) and
``MetadataStoreError`` (unavailable or a per-znode failure: report it per partition and go on).
"""

from __future__ import annotations

#: Longest rendering of an offending value in an error message: input is often hostile or huge (a
#: million-element list, a 5,000-digit number), and a one-line message must stay one short line.
BRIEF_LIMIT = 80


def brief(value: object, limit: int = BRIEF_LIMIT) -> str:
    """``repr(value)`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    try:
        text = repr(value)
    except ValueError:  # an int too long for repr (Python's 4,300-digit limit)
        text = f"<int of {value.bit_length()} bits>" if isinstance(value, int) else "<unprintable>"
    return cut(text.replace("\n", " "), limit)


def cut(text: str, limit: int = BRIEF_LIMIT) -> str:
    """``text`` cut to ``limit`` characters, marked with an ellipsis when cut."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class KafkaControllerError(Exception):
    """Root of every error the project raises on purpose."""


class ControllerMovedError(KafkaControllerError):
    """Another controller bumped ``/controller_epoch``: this one is a zombie and must resign."""


class StateChangeFailedError(KafkaControllerError):
    """A per-partition or per-replica state change could not be made (Kafka's StateChangeFailedException)."""


class IllegalControllerStateError(KafkaControllerError):
    """An invariant of the controller's own bookkeeping was broken (Kafka's IllegalStateException)."""


class InvalidArgumentError(KafkaControllerError, ValueError):
    """Bad input from a caller: the message names what is wrong."""


class ClusterAuthorizationError(KafkaControllerError):
    """The caller's principal may not make this request (Kafka's ClusterAuthorizationException):
    a server answers it with CLUSTER_AUTHORIZATION_FAILED."""


class UnansweredRequestError(KafkaControllerError):
    """A server cannot decide a request yet, and closes the connection instead of answering.

    The sender is a controller, which resends a control request until it is answered (Kafka's
    ``RequestSendThread.doWork``): no answer means "again in a moment", where an error answer would
    be final. A broker whose ZooKeeper session is suspended raises it for a control request whose
    controller epoch it cannot check (``broker/epoch_guard.py``)."""


class StaleBrokerEpochError(KafkaControllerError):
    """A request carried a broker epoch older than the controller's cached one (KIP-380)."""


class BrokerNotAvailableError(KafkaControllerError):
    """The broker named by a request is not registered."""


class MetadataStoreError(KafkaControllerError):
    """A metadata-store operation failed. ``code`` is ZooKeeper's error name where one applies."""

    def __init__(self, message: str, *, code: str = "SYSTEMERROR", path: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.path = path


class NoNodeError(MetadataStoreError):
    def __init__(self, path: str) -> None:
        super().__init__(f"KeeperErrorCode = NoNode for {path}", code="NONODE", path=path)


class NodeExistsError(MetadataStoreError):
    def __init__(self, path: str) -> None:
        super().__init__(f"KeeperErrorCode = NodeExists for {path}", code="NODEEXISTS", path=path)


class BadVersionError(MetadataStoreError):
    def __init__(self, path: str) -> None:
        super().__init__(f"KeeperErrorCode = BadVersion for {path}", code="BADVERSION", path=path)


class StoreUnavailableError(MetadataStoreError):
    """The store cannot be reached right now (disconnected, session lost): writes fail fast."""

    def __init__(self, message: str = "metadata store unavailable", *, path: str | None = None) -> None:
        super().__init__(message, code="CONNECTIONLOSS", path=path)


class ZNodeDecodeError(MetadataStoreError):
    """A znode held data that does not decode as its format says; the message names the path."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"cannot decode {path}: {reason}", code="DECODE", path=path)
