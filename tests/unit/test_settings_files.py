"""``security.properties``: the one reader of small settings files (server.properties,
--command-config, --zk-tls-config-file, JAAS files) bounds what it reads and never echoes a line."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_controller.domain.errors import InvalidArgumentError
from kafka_controller.security.properties import (
    MAX_SETTINGS_FILE_BYTES,
    parse_properties,
    read_properties,
    read_settings_text,
)


def test_java_separators_comments_and_the_last_repeat() -> None:
    text = "# c\n! c\n\na = 1\nb: x=y\nc=d:e\na=2\nbare\n"
    assert parse_properties(text, "f") == {"a": "2", "b": "x=y", "c": "d:e", "bare": ""}


def test_strict_refuses_a_line_that_is_no_setting_by_number_only() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^f line 2: expected KEY=VALUE$"):
        parse_properties("ok=1\nsasl.password Secret-9\n", "f", strict=True)
    with pytest.raises(InvalidArgumentError, match=r"^f line 1: expected KEY=VALUE$"):
        parse_properties("=Secret-9\n", "f")


def test_a_file_past_the_bound_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    big = tmp_path / "big.properties"
    big.write_bytes(b"a=" + b"x" * MAX_SETTINGS_FILE_BYTES)
    with pytest.raises(InvalidArgumentError, match=rf"^--config-file {big} is larger than"):
        read_properties(big, "--config-file")
    bad = tmp_path / "latin1.properties"
    bad.write_bytes(b"a=\xe9\n")
    with pytest.raises(InvalidArgumentError, match=r"is not UTF-8 text$"):
        read_settings_text(bad, "the JAAS file")
    with pytest.raises(InvalidArgumentError, match=r"^cannot read the JAAS file .*missing"):
        read_settings_text(tmp_path / "missing", "the JAAS file")
