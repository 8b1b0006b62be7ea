"""Finding a Java runtime and the ZooKeeper jars for the embedded server.

Kept apart from the process lifecycle in ``embedded.py`` because it is pure lookup (paths, file
names, one cached ``java -version``), so that each failure gets its own one-line, actionable message:
a missing Java and missing jars are set-up problems the user fixes, not server crashes.

The jars come, in this order, from an explicit ``jars_dir``, from ``$ZOOKEEPER_HOME`` (its ``lib/``
and root jars, as ZooKeeper's own ``zkEnv.sh`` builds the classpath), or from the ``jars/`` folder of
the installed ``pyspark`` package, which ships ZooKeeper with everything the server needs. From a
flat folder of jars (pyspark holds ~250) only the minimal server classpath is taken.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
from pathlib import Path

from kafka_controller.domain.errors import KafkaControllerError

#: Java major version the project supports (pyspark 4 needs it too).
REQUIRED_JAVA_MAJOR = 17
#: Multi-read (opcode 22), which the zk adapter relies on, arrived in ZooKeeper 3.6.
MIN_ZOOKEEPER_VERSION = (3, 6)

#: Jars that make up the minimal standalone-server classpath, taken from a flat folder by artifact
#: name. The first three are required; without the others the server fails at start-up (metrics,
#: snappy are referenced unconditionally by ZooKeeper 3.9) or logs nothing.
REQUIRED_ARTIFACTS = ("zookeeper", "zookeeper-jute", "slf4j-api")
OPTIONAL_ARTIFACTS = (
    "metrics-core",
    "snappy-java",
    "commons-io",
    "log4j-slf4j2-impl",
    "log4j-api",
    "log4j-core",
    # Netty: the TLS client port (NettyServerCnxnFactory); loaded only when it is configured.
    "netty-buffer",
    "netty-codec",
    "netty-codec-base",
    "netty-common",
    "netty-handler",
    "netty-resolver",
    "netty-transport",
    "netty-transport-native-unix-common",
    "netty-transport-classes-epoll",
)
#: Used only when the log4j2 binding is absent (ZooKeeper's own distribution logs with logback).
LOGBACK_ARTIFACTS = ("logback-classic", "logback-core")

_JAR_NAME = re.compile(r"^(?P<artifact>[A-Za-z][\w.\-]*?)-(?P<version>\d[\w.\-]*)\.jar$")
_JAVA_VERSION = re.compile(r'version "(?P<v>[^"]+)"')

_PYSPARK_HINT = "install pyspark (pip install 'kafka-controller-ops[embedded]') or set ZOOKEEPER_HOME"
_HOME_HINT = "point ZOOKEEPER_HOME at a ZooKeeper 3.6+ installation, or unset it to use pyspark's jars"
_INSTALL_JAVA_HINT = (
    "install a Java 17 runtime (e.g. 'apt-get install openjdk-17-jre-headless') "
    "and put it on PATH, set JAVA_HOME, or pass --java"
)


class EmbeddedZooKeeperError(KafkaControllerError):
    """The embedded ZooKeeper server could not be set up, started or stopped."""


class JavaNotFoundError(EmbeddedZooKeeperError):
    """No usable Java runtime (missing, not executable, or older than Java 17)."""


class ZooKeeperJarsNotFoundError(EmbeddedZooKeeperError):
    """No ZooKeeper 3.6+ jars in the places looked at (jars_dir, ZOOKEEPER_HOME, pyspark)."""


def find_java(java: str | os.PathLike[str] | None = None) -> str:
    """Return the path of a Java 17+ ``java`` binary: ``java`` if given, else JAVA_HOME, else PATH."""
    if java is not None:
        where = f"--java {os.fspath(java)}"
        found = shutil.which(os.fspath(java))
    elif os.environ.get("JAVA_HOME"):
        where = f"JAVA_HOME={os.environ['JAVA_HOME']}"
        found = shutil.which(str(Path(os.environ["JAVA_HOME"]) / "bin" / "java"))
    else:
        where = "PATH"
        found = shutil.which("java")
    if found is None:
        raise JavaNotFoundError(
            f"Java {REQUIRED_JAVA_MAJOR} is needed for the embedded ZooKeeper but no java was found "
            f"({where}); {_INSTALL_JAVA_HINT}"
        )
    major = java_major_version(found)
    if major < REQUIRED_JAVA_MAJOR:
        raise JavaNotFoundError(
            f"Java {REQUIRED_JAVA_MAJOR} is needed for the embedded ZooKeeper but {found} is Java "
            f"{major}; {_INSTALL_JAVA_HINT}"
        )
    return found


@functools.lru_cache(maxsize=8)
def java_major_version(java: str) -> int:
    """Major version of a ``java`` binary (``1.8.0_x`` -> 8); cached, it costs a JVM start."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        raise JavaNotFoundError(
            f"Java {REQUIRED_JAVA_MAJOR} is needed for the embedded ZooKeeper but {java} does not run "
            f"({e}); {_INSTALL_JAVA_HINT}"
        ) from None
    return parse_java_major(out, java)


def parse_java_major(version_output: str, java: str = "java") -> int:
    """Parse ``java -version`` output: ``"17.0.15"`` -> 17, ``"1.8.0_392"`` -> 8."""
    m = _JAVA_VERSION.search(version_output)
    if m is None:
        raise JavaNotFoundError(
            f"Java {REQUIRED_JAVA_MAJOR} is needed for the embedded ZooKeeper but {java} -version "
            f"printed no version; {_INSTALL_JAVA_HINT}"
        )
    parts = re.split(r"[._+\-]", m.group("v"))
    major = int(parts[0]) if parts[0].isdigit() else 0
    if major == 1 and len(parts) > 1 and parts[1].isdigit():
        major = int(parts[1])
    return major


def find_zookeeper_classpath(jars_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The server classpath: minimal jars from ``jars_dir`` or pyspark, or all of ZOOKEEPER_HOME's."""
    if jars_dir is not None:
        folder = Path(jars_dir)
        return _checked(select_server_jars(_jars_in(folder)), f"jars dir {folder}", _PYSPARK_HINT)
    home = os.environ.get("ZOOKEEPER_HOME")
    if home:
        jars = _jars_in(Path(home)) + _jars_in(Path(home) / "lib")
        return _checked(jars, f"ZOOKEEPER_HOME={home} (its root and lib/)", _HOME_HINT)
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise ZooKeeperJarsNotFoundError(f"no ZooKeeper jars found: {_PYSPARK_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations))) / "jars"
    return _checked(select_server_jars(_jars_in(folder)), f"pyspark's jars ({folder})", _PYSPARK_HINT)


def select_server_jars(jars: list[Path]) -> list[Path]:
    """Pick the minimal server classpath from a flat folder: newest version of each artifact."""
    newest: dict[str, tuple[tuple[int, ...], Path]] = {}
    for jar in jars:
        m = _JAR_NAME.match(jar.name)
        if m is None:
            continue
        key = _version_key(m.group("version"))
        artifact = m.group("artifact")
        if artifact not in newest or key > newest[artifact][0]:
            newest[artifact] = (key, jar)
    wanted = [*REQUIRED_ARTIFACTS, *OPTIONAL_ARTIFACTS]
    if "log4j-slf4j2-impl" not in newest:
        wanted += LOGBACK_ARTIFACTS
    return [newest[a][1] for a in wanted if a in newest]


def zookeeper_version(classpath: list[Path]) -> tuple[int, ...] | None:
    """ZooKeeper's version from its jar name (``zookeeper-3.9.5.jar`` -> (3, 9, 5)), if present."""
    for jar in classpath:
        m = _JAR_NAME.match(jar.name)
        if m is not None and m.group("artifact") == "zookeeper":
            return _version_key(m.group("version"))
    return None


def _artifact(jar: Path) -> str | None:
    m = _JAR_NAME.match(jar.name)
    return None if m is None else m.group("artifact")


def _checked(classpath: list[Path], where: str, hint: str) -> list[Path]:
    version = zookeeper_version(classpath)
    if version is None:
        raise ZooKeeperJarsNotFoundError(f"no ZooKeeper jars (zookeeper-<version>.jar) in {where}; {hint}")
    names = {_artifact(j) for j in classpath}
    missing = [a for a in REQUIRED_ARTIFACTS if a not in names]
    if missing:
        raise ZooKeeperJarsNotFoundError(f"ZooKeeper jars in {where} lack {', '.join(missing)}; {hint}")
    if version[:2] < MIN_ZOOKEEPER_VERSION:
        found = ".".join(map(str, version))
        raise ZooKeeperJarsNotFoundError(
            f"ZooKeeper {found} in {where} is too old: 3.6+ is needed (multi-read); {hint}"
        )
    return classpath


def _jars_in(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.suffix == ".jar" and p.is_file())
    except OSError:
        return []


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:4])
