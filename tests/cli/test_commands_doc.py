"""``docs/commands.md`` is what the parsers say, and the README's command summary names only options
that exist."""

from __future__ import annotations

import re
from pathlib import Path

from kafka_controller.cli.docs import DOC_PATH, README_PATH, TABLE_END, TABLE_START, readme_with_table, render
from tests.cli.parsers import options, walk

ROOT = Path(__file__).resolve().parents[2]


def test_commands_doc_is_up_to_date() -> None:
    assert DOC_PATH == ROOT / "docs" / "commands.md"
    assert DOC_PATH.read_text(encoding="utf-8") == render(), (
        "docs/commands.md is out of date: run `python -m kafka_controller.cli.docs --write`"
    )


def test_readme_command_table_is_generated_and_up_to_date() -> None:
    readme = README_PATH.read_text(encoding="utf-8")
    assert README_PATH == ROOT / "README.md" and TABLE_START in readme and TABLE_END in readme
    assert readme == readme_with_table(readme), (
        "the README's command table is out of date: run `python -m kafka_controller.cli.docs --write`"
    )
    table = readme.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    for path, _ in walk():
        assert f"[`{' '.join(path)}`](docs/commands.md#kafka-controller-{'-'.join(path)})" in table


def test_commands_doc_covers_every_command_and_option() -> None:
    text = render()
    for path, parser in walk():
        assert f"\n## kafka-controller {' '.join(path)}\n" in text
        section = text.split(f"\n## kafka-controller {' '.join(path)}\n", 1)[1].split("\n## ", 1)[0]
        for option in options(parser) - {"-h", "--help"}:
            assert f"`{option}" in section or f", {option}" in section, f"{option} of {path} missing"


def _readme_commands() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    assert "](docs/commands.md)" in section
    return section.split("```", 2)[1]


def test_readme_command_summary_names_real_options() -> None:
    by_command: dict[str, set[str]] = {}
    for path, parser in walk():
        by_command.setdefault(path[0], set()).update(options(parser))
    command = None
    checked = 0
    for line in _readme_commands().splitlines():
        code = line.split("#", 1)[0]
        m = re.match(r"kafka-controller (\S+)", code)
        if m:
            command = m.group(1)
            assert command in by_command, f"README names an unknown command {command!r}"
        for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", code):
            assert command is not None
            assert option in by_command[command], f"README: {command} has no option {option}"
            checked += 1
    assert checked > 30


def test_readme_shows_zookeeper_as_optional() -> None:
    """$KAFKA_CONTROLLER_ZOOKEEPER can supply it, so no usage line shows it as required."""
    block = _readme_commands()
    assert block.count("[--zookeeper CONNECT]") >= 6
    assert block.count("--zookeeper CONNECT") == block.count("[--zookeeper CONNECT]")
