"""Transport errors, all in the project's hierarchy (sockets' errors stop here:
docs/rules.md, errors are translated at the adapter edge).

``TransportError`` means "could not talk to the peer now" (refused, reset, timed out): the channel
manager retries it. ``ProtocolError`` means bytes that do not follow the protocol: retrying the
same bytes cannot help. ``RemoteError`` means the peer understood the frame and answered with an
error envelope (for example INVALID_REQUEST, or UNKNOWN_SERVER_ERROR when its handler raised).
"""

from __future__ import annotations

from kafka_controller.domain.errors import KafkaControllerError


class ProtocolError(KafkaControllerError):
    """A frame, envelope or body that does not follow the wire protocol; the message says which.

    ``cid`` is the request's correlation id when it could be read (else -1), for the error reply.
    """

    def __init__(self, message: str, *, cid: int = -1) -> None:
        super().__init__(message)
        self.cid = cid


class TransportError(KafkaControllerError):
    """The peer could not be reached or the connection broke; safe to retry after a back-off."""


class TransportTimeoutError(TransportError):
    """Connecting, or waiting for the response, took longer than the client's ``timeout_s``."""


class TransportConnectionError(TransportError):
    """Connection refused, reset or closed by the peer."""


class RemoteError(KafkaControllerError):
    """The peer answered with an error envelope; ``code`` is a Kafka error name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.remote_message = message
