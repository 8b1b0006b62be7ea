"""kafka-python's transport chatter, kept at DEBUG.

kafka-python logs every refused connection (``ECONNREFUSED``) and every dropped socket ("socket
disconnected") at ERROR or WARNING, from its network and client modules. While a rolling restart or a
drill stops brokers on purpose those are expected, and in a task log or the demo's output they read
as failures of a run that succeeded; what a request finally got is reported by this project's own
code (``KafkaAdmin`` retries and names Kafka's error). The records are re-levelled to DEBUG, so they
still show when someone turns the ``kafka`` loggers up to DEBUG to look at the wire.
"""

from __future__ import annotations

import logging

#: kafka-python's package logger; its modules log to ``kafka.<module>``.
PACKAGE = "kafka"


class _AtDebug(logging.Filter):
    """Re-levels a record to DEBUG, then lets it through only where DEBUG is enabled."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.DEBUG:
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_AT_DEBUG = _AtDebug()


def keep_kafka_client_logs_at_debug() -> None:
    """Put the filter on kafka-python's loggers (a logger's filters are not inherited by its
    children, so each one gets it: kafka-python is imported first, which creates them all)."""
    import kafka  # noqa: F401  # its modules' loggers exist from here on

    names = [PACKAGE] + [n for n in list(logging.Logger.manager.loggerDict) if n.startswith(PACKAGE + ".")]
    for name in names:
        logger = logging.getLogger(name)
        if _AT_DEBUG not in logger.filters:
            logger.addFilter(_AT_DEBUG)
