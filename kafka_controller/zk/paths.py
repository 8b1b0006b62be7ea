"""Kafka 2.8's znode paths (docs/controller-behaviour.md §7.1, Kafka's ``ZkData``), as constants
and small pure functions.

Paths are part of the external contract (docs/external-contract.md §1): Kafka's own tools read what
we write, so the
names here are Kafka's, character for character. This module imports nothing heavy.
"""

from __future__ import annotations

from kafka_controller.domain.errors import InvalidArgumentError, brief, cut
from kafka_controller.domain.values import TopicPartition

CONTROLLER_PATH = "/controller"
CONTROLLER_EPOCH_PATH = "/controller_epoch"
BROKERS_PATH = "/brokers"
BROKER_IDS_PATH = "/brokers/ids"
BROKER_TOPICS_PATH = "/brokers/topics"
BROKER_SEQUENCE_ID_PATH = "/brokers/seqid"
ADMIN_PATH = "/admin"
DELETE_TOPICS_PATH = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH = "/admin/preferred_replica_election"
ISR_CHANGE_NOTIFICATION_PATH = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION_PATH = "/log_dir_event_notification"
CONFIG_PATH = "/config"
CONFIG_CHANGES_PATH = "/config/changes"
CLUSTER_ID_PATH = "/cluster/id"
FEATURE_PATH = "/feature"
CONSUMERS_PATH = "/consumers"
LATEST_PRODUCER_ID_BLOCK_PATH = "/latest_producer_id_block"
DELEGATION_TOKENS_PATH = "/delegation_token"

ISR_CHANGE_NOTIFICATION_PREFIX = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PREFIX = "log_dir_event_"
CONFIG_CHANGE_PREFIX = "config_change_"

CONFIG_TYPE_TOPIC = "topics"
CONFIG_TYPE_CLIENT = "clients"
CONFIG_TYPE_USER = "users"
CONFIG_TYPE_BROKER = "brokers"
CONFIG_TYPES = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER)

#: Kafka's ``createTopLevelPaths`` list (2.8), parents before children.
TOP_LEVEL_PATHS: tuple[str, ...] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    BROKER_TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LATEST_PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{t}" for t in CONFIG_TYPES),
)

#: Kafka's ``SensitiveRootPaths``: with ACLs on, these get no world-readable ACL.
SENSITIVE_ROOT_PATHS: tuple[str, ...] = (
    f"{CONFIG_PATH}/{CONFIG_TYPE_USER}",
    f"{CONFIG_PATH}/{CONFIG_TYPE_BROKER}",
    DELEGATION_TOKENS_PATH,
)


def broker_id_path(broker_id: int) -> str:
    return f"{BROKER_IDS_PATH}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS_PATH}/{topic}"


def topic_partitions_path(topic: str) -> str:
    return f"{BROKER_TOPICS_PATH}/{topic}/partitions"


def topic_partition_path(tp: TopicPartition) -> str:
    return f"{BROKER_TOPICS_PATH}/{tp[0]}/partitions/{tp[1]}"


def topic_partition_state_path(tp: TopicPartition) -> str:
    return f"{BROKER_TOPICS_PATH}/{tp[0]}/partitions/{tp[1]}/state"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS_PATH}/{topic}"


def config_entity_type_path(entity_type: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}"


def config_entity_path(entity_type: str, name: str) -> str:
    return f"{CONFIG_PATH}/{entity_type}/{name}"


def topic_config_path(topic: str) -> str:
    return config_entity_path(CONFIG_TYPE_TOPIC, topic)


def isr_change_notification_path(sequence_number: str) -> str:
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_NOTIFICATION_PREFIX}{sequence_number}"


def log_dir_event_notification_path(sequence_number: str) -> str:
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{LOG_DIR_EVENT_NOTIFICATION_PREFIX}{sequence_number}"


def sequence_number(child: str, prefix: str) -> str:
    """The 10-digit suffix of a sequential child name (``isr_change_0000000003`` -> ``0000000003``)."""
    return child[len(prefix) :] if child.startswith(prefix) else child


def parent_path(path: str) -> str:
    cut = path.rfind("/")
    return "/" if cut <= 0 else path[:cut]


def ancestors(path: str) -> list[str]:
    """Every proper ancestor of ``path`` except ``/``, root first (``/a/b/c`` -> ``/a``, ``/a/b``)."""
    parts = path.strip("/").split("/")
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


_LEGAL_TOPIC_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
MAX_TOPIC_NAME_LENGTH = 249


def validate_topic_name(topic: str) -> None:
    """Kafka's ``Topic.validate``: 1-249 legal characters, not ``.`` or ``..``."""
    if not isinstance(topic, str) or not topic:
        raise InvalidArgumentError("topic name is empty")
    if topic in (".", ".."):
        raise InvalidArgumentError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidArgumentError(
            f"topic name {topic[:20]!r}... is longer than {MAX_TOPIC_NAME_LENGTH} characters"
        )
    bad = sorted(set(topic) - _LEGAL_TOPIC_CHARS)
    if bad:
        raise InvalidArgumentError(f"topic name {topic!r} has illegal characters {''.join(bad)!r}")


def split_chroot(connect_string: str) -> tuple[str, str]:
    """Split ``host:port,host2:port/some/chroot`` into the host list and the chroot ('' if none)."""
    if not connect_string or not connect_string.strip():
        raise InvalidArgumentError("ZooKeeper connect string is empty")
    cut = connect_string.find("/")
    if cut < 0:
        return connect_string, ""
    hosts, chroot = connect_string[:cut], connect_string[cut:].rstrip("/")
    if not hosts:
        raise InvalidArgumentError(f"ZooKeeper connect string {connect_string!r} has no host")
    if "//" in chroot or any(part in (".", "..") for part in chroot.split("/")[1:]):
        raise InvalidArgumentError(f"ZooKeeper connect string {connect_string!r} has an invalid chroot")
    return hosts, chroot


#: ZooKeeper's default client port: a host without ``:port`` gets it (ZooKeeper's ConnectStringParser).
DEFAULT_ZOOKEEPER_PORT = 2181
_HOST_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
_IPV6_CHARS = frozenset("0123456789abcdefABCDEF:.")


def _illegal_path_char(ch: str) -> bool:
    """ZooKeeper's ``PathUtils.validatePath``: control characters and reserved ranges are illegal."""
    c = ord(ch)
    return c <= 0x1F or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or c >= 0xFFF0


def parse_connect_string(connect_string: str) -> tuple[tuple[tuple[str, int], ...], str]:
    """``host:port[,host:port...][/chroot]`` -> ((host, port), ...) and the chroot ('' if none).

    Stricter than kazoo (which raises bare ``ValueError`` on a bad port and quietly accepts a stray
    space as part of a port): every mistake is an ``InvalidArgumentError`` whose message says what
    is wrong, e.g. ``port 21810000 is out of range 1-65535``. A host without a port gets 2181, as
    in ZooKeeper; IPv6 addresses are written in brackets (``[::1]:2181``)."""
    if not connect_string:
        raise InvalidArgumentError("ZooKeeper connect string is empty")
    try:
        return _parse_connect_string(connect_string)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"bad ZooKeeper connect string {brief(connect_string)}: {e}") from None


def _parse_connect_string(connect_string: str) -> tuple[tuple[tuple[str, int], ...], str]:
    space = next((i for i, ch in enumerate(connect_string) if ch.isspace()), None)
    if space is not None:
        where = "at its end" if not connect_string[space:].strip() else f"at character {space + 1}"
        raise InvalidArgumentError(f"whitespace {where}" if space else "whitespace at its start")
    slash = connect_string.find("/")
    hosts_part, chroot = (
        (connect_string, "") if slash < 0 else (connect_string[:slash], connect_string[slash:])
    )
    if not hosts_part:
        raise InvalidArgumentError("no host before the chroot")
    hosts = tuple(
        _parse_host(entry, i, hosts_part.count(",") + 1) for i, entry in enumerate(hosts_part.split(","))
    )
    chroot = chroot.rstrip("/")
    if chroot:
        if "//" in chroot:
            raise InvalidArgumentError(f"chroot {brief(chroot)} has an empty path element")
        if any(part in (".", "..") for part in chroot.split("/")[1:]):
            raise InvalidArgumentError(f"chroot {brief(chroot)} has a '.' or '..' path element")
        bad = sorted({ch for ch in chroot if _illegal_path_char(ch)})
        if bad:
            raise InvalidArgumentError(f"chroot {brief(chroot)} has an illegal character {brief(bad[0])}")
    return hosts, chroot


def _parse_host(entry: str, index: int, count: int) -> tuple[str, int]:
    of = f" of host {index + 1}" if count > 1 else ""
    where = f"host {index + 1} {brief(entry)}" if count > 1 else f"host {brief(entry)}"
    if not entry:
        raise InvalidArgumentError(f"host {index + 1} of {count} is empty (a stray ',')")
    if entry.startswith("["):
        end = entry.find("]")
        if end < 0:
            raise InvalidArgumentError(f"{where} has '[' without ']'")
        host, rest = entry[1:end], entry[end + 1 :]
        address, _, zone = host.partition("%")
        if set(address) - _IPV6_CHARS or ":" not in address or set(zone) - _HOST_NAME_CHARS:
            raise InvalidArgumentError(f"{where} is not an IPv6 address in brackets")
        if rest and not rest.startswith(":"):
            raise InvalidArgumentError(f"{where} has text after ']' that is not ':PORT'")
        port_text: str | None = rest[1:] if rest else None
    else:
        if entry.count(":") > 1:
            raise InvalidArgumentError(
                f"{where} has more than one ':' (write IPv6 addresses as [ADDRESS]:PORT)"
            )
        host, sep, port_text_ = entry.partition(":")
        port_text = port_text_ if sep else None
        if not host:
            raise InvalidArgumentError(f"{where} has no host name before ':'")
        bad = sorted(set(host) - _HOST_NAME_CHARS)
        if bad:
            raise InvalidArgumentError(f"host name {brief(host)} has an illegal character {brief(bad[0])}")
    if port_text is None:
        return host, DEFAULT_ZOOKEEPER_PORT
    if not port_text:
        raise InvalidArgumentError(f"{where} has an empty port after ':'")
    if not (port_text.isascii() and port_text.isdigit()):
        raise InvalidArgumentError(f"port {brief(port_text)}{of} is not a number")
    if len(port_text) > 5 or not 1 <= int(port_text) <= 65535:
        raise InvalidArgumentError(f"port {cut(port_text, 20)}{of} is out of range 1-65535")
    return host, int(port_text)
