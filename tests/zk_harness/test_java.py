"""Finding Java and the ZooKeeper jars, config rendering and argument checks: no server needed."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.zk.embedded import EmbeddedZooKeeper
from kafka_controller.zk.java import (
    JavaNotFoundError,
    ZooKeeperJarsNotFoundError,
    find_java,
    find_zookeeper_classpath,
    parse_java_major,
    select_server_jars,
    zookeeper_version,
)
from kafka_controller.zk.server_files import log_tail, render_zoo_cfg


def _fake_java(tmp_path: Path, version: str) -> Path:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2024-01-16' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return java


def _touch_jars(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('openjdk version "11.0.2+9"', 11),
    ],
)
def test_parse_java_major(output: str, major: int) -> None:
    assert parse_java_major(output) == major


def test_missing_java_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFoundError) as e:
        find_java(tmp_path / "nowhere" / "java")
    assert "Java 17 is needed" in str(e.value)
    assert "\n" not in str(e.value)


def test_java_home_then_path_are_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    java = _fake_java(tmp_path / "jdk", "17.0.9")
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    assert find_java() == str(java)
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(JavaNotFoundError, match=r"no java was found \(PATH\)"):
        find_java()


def test_old_java_is_refused(tmp_path: Path) -> None:
    java = _fake_java(tmp_path, "1.8.0_392")
    with pytest.raises(JavaNotFoundError, match="is Java 8"):
        find_java(java)


def test_select_server_jars_takes_newest_of_each_needed_artifact(tmp_path: Path) -> None:
    _touch_jars(
        tmp_path,
        "zookeeper-3.8.4.jar",
        "zookeeper-3.9.5.jar",
        "zookeeper-jute-3.9.5.jar",
        "slf4j-api-2.0.17.jar",
        "metrics-core-4.2.37.jar",
        "snappy-java-1.1.10.8.jar",
        "log4j-slf4j2-impl-2.25.4.jar",
        "log4j-api-2.25.4.jar",
        "log4j-core-2.25.4.jar",
        "logback-classic-1.2.13.jar",
        "spark-core_2.13-4.0.0.jar",
        "netty-all-4.2.13.Final.jar",
    )
    chosen = select_server_jars(sorted(tmp_path.iterdir()))
    assert sorted(p.name for p in chosen) == sorted(
        [
            "zookeeper-3.9.5.jar",
            "zookeeper-jute-3.9.5.jar",
            "slf4j-api-2.0.17.jar",
            "metrics-core-4.2.37.jar",
            "snappy-java-1.1.10.8.jar",
            "log4j-slf4j2-impl-2.25.4.jar",
            "log4j-api-2.25.4.jar",
            "log4j-core-2.25.4.jar",
        ]
    )
    assert zookeeper_version(chosen) == (3, 9, 5)


def test_pyspark_jars_are_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ZOOKEEPER_HOME", raising=False)
    classpath = find_zookeeper_classpath()
    version = zookeeper_version(classpath)
    assert version is not None and version >= (3, 6)
    assert all(p.is_file() and "pyspark" in str(p) for p in classpath)


def test_empty_jars_dir_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(ZooKeeperJarsNotFoundError) as e:
        find_zookeeper_classpath(tmp_path)
    assert str(tmp_path) in str(e.value) and "pyspark" in str(e.value)
    assert "\n" not in str(e.value)


def test_zookeeper_home_uses_all_its_jars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _touch_jars(tmp_path / "lib", "zookeeper-3.9.2.jar", "zookeeper-jute-3.9.2.jar")
    _touch_jars(tmp_path / "lib", "slf4j-api-1.7.30.jar", "netty-handler-4.1.105.Final.jar")
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    assert {p.name for p in find_zookeeper_classpath()} == {
        "zookeeper-3.9.2.jar",
        "zookeeper-jute-3.9.2.jar",
        "slf4j-api-1.7.30.jar",
        "netty-handler-4.1.105.Final.jar",
    }


def test_old_or_empty_zookeeper_home_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ZOOKEEPER_HOME", str(tmp_path))
    with pytest.raises(ZooKeeperJarsNotFoundError, match="ZOOKEEPER_HOME="):
        find_zookeeper_classpath()
    _touch_jars(tmp_path / "lib", "zookeeper-3.5.9.jar", "zookeeper-jute-3.5.9.jar", "slf4j-api-1.7.25.jar")
    with pytest.raises(ZooKeeperJarsNotFoundError, match=r"3\.5\.9 .* too old"):
        find_zookeeper_classpath()


def test_render_zoo_cfg(tmp_path: Path) -> None:
    text = render_zoo_cfg(
        data_dir=tmp_path,
        port=12345,
        quorum_port=12346,
        election_port=12347,
        tick_time_ms=200,
        min_session_timeout_ms=400,
        max_session_timeout_ms=90000,
        force_sync=False,
    )
    cfg = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert cfg["server.1"] == "127.0.0.1:12346:12347:participant;127.0.0.1:12345"
    assert cfg["standaloneEnabled"] == "false"
    assert cfg["dataDir"] == str(tmp_path)
    assert (cfg["tickTime"], cfg["minSessionTimeout"], cfg["maxSessionTimeout"]) == ("200", "400", "90000")
    assert cfg["4lw.commands.whitelist"] == "*"
    assert cfg["admin.enableServer"] == "false"
    assert cfg["forceSync"] == "no"
    assert "jute.maxbuffer" not in cfg


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"port": 70000}, "port must be"),
        ({"port": -1}, "port must be"),
        ({"tick_time_ms": 0}, "tick_time_ms must be"),
        ({"min_session_timeout_ms": 5000, "max_session_timeout_ms": 4000}, "max_session_timeout_ms must be"),
        ({"heap_mb": 1}, "heap_mb must be"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        EmbeddedZooKeeper(**kwargs)  # type: ignore[arg-type]


def test_data_dir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(InvalidArgumentError, match="not a directory"):
        EmbeddedZooKeeper(data_dir=tmp_path / "f")


def test_failed_start_writes_nothing(tmp_path: Path) -> None:
    server = EmbeddedZooKeeper(data_dir=tmp_path / "zk", java=tmp_path / "no-java")
    with pytest.raises(JavaNotFoundError):
        server.start()
    assert not (tmp_path / "zk").exists()
    assert not server.is_running() and server.pid is None
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ZooKeeperJarsNotFoundError):
        EmbeddedZooKeeper(data_dir=tmp_path / "zk", jars_dir=empty).start()
    assert not (tmp_path / "zk").exists()
    assert os.listdir(empty) == []


def test_log_tail_keeps_the_exception_and_drops_stack_frames() -> None:
    text = (
        "INFO starting\n\n"
        'Exception in thread "main" java.lang.NoClassDefFoundError: com/codahale/metrics/Reservoir\n'
        "\tat org.apache.zookeeper.server.ServerMetrics.<init>(ServerMetrics.java:81)\n"
        "Caused by: java.lang.ClassNotFoundException: com.codahale.metrics.Reservoir\n"
        "\t... 8 more\n"
    )
    assert log_tail(text, 2) == [
        'Exception in thread "main" java.lang.NoClassDefFoundError: com/codahale/metrics/Reservoir',
        "Caused by: java.lang.ClassNotFoundException: com.codahale.metrics.Reservoir",
    ]
    assert log_tail(text, 10)[0] == "INFO starting"
