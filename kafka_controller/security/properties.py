"""Small settings files as Kafka's tools read them: Java properties (``server.properties``,
``--command-config``, ``--zk-tls-config-file``) and JAAS files.

One reader for all of them, so that every such file is bounded the same way (a settings file is a
few kilobytes: a larger one is refused before it is read whole) and every error is one line that
names the file, and a line number where it helps, but never the line's text: these files hold
passwords.
"""

from __future__ import annotations

from pathlib import Path

from kafka_controller.domain.errors import InvalidArgumentError

#: A settings file is a few kilobytes; anything larger is not one.
MAX_SETTINGS_FILE_BYTES = 1 << 20


def read_settings_text(path: str | Path, what: str) -> str:
    """The file's text; ``what`` names the file's role in errors (``--config-file``, ``the JAAS
    file``). Reads at most one byte past the bound, so a huge file costs no more than that."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_SETTINGS_FILE_BYTES + 1)
    except OSError as e:
        raise InvalidArgumentError(f"cannot read {what} {path}: {e.strerror or type(e).__name__}") from None
    if len(raw) > MAX_SETTINGS_FILE_BYTES:
        raise InvalidArgumentError(f"{what} {path} is larger than {MAX_SETTINGS_FILE_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidArgumentError(f"{what} {path} is not UTF-8 text") from None


def parse_properties(text: str, where: str, *, strict: bool = False) -> dict[str, str]:
    """``key=value`` or ``key: value`` lines (the first of the two splits, as in Java's properties
    files); blank lines and ``#``/``!`` comments skipped; the last of repeated keys wins. A line
    with neither separator is a key with an empty value, as Java reads it, unless ``strict``
    (a broker's settings, where it is surely a mistake): then it is an error naming its number."""
    props: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0 and strict:
            raise InvalidArgumentError(f"{where} line {number}: expected KEY=VALUE")
        key, value = (line, "") if cut < 0 else (line[:cut].strip(), line[cut + 1 :].strip())
        if not key:
            raise InvalidArgumentError(f"{where} line {number}: expected KEY=VALUE")
        props[key] = value
    return props


def read_properties(path: str | Path, what: str, *, strict: bool = False) -> dict[str, str]:
    """The properties file at ``path`` (see ``parse_properties``)."""
    return parse_properties(read_settings_text(path, what), f"{what} {path}", strict=strict)
