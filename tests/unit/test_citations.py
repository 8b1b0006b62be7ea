"""Every citation in the code, tests and docs resolves inside the repository.

A maintainer who clones the repository has only what is in it. So comments and docstrings cite
Kafka's own files and methods, or the repository's ``docs/`` (``docs/controller-behaviour.md §8.5``,
``docs/rules.md, callbacks only enqueue``), never a document that lives elsewhere. Two checks:

* no file cites an outside document: a spec section, a numbered house rule, the architecture or
  contract pages that are not in the repository, or a bare section sign with no ``docs/`` file on
  its line to say which document it means;
* every ``docs/<file>.md §N`` names an existing file and a heading numbered N in it, and every
  ``docs/rules.md, <name>`` names one of that file's rules.

Files not yet rewritten are listed in ``ALLOWED`` with the reason. The list only shrinks: an entry
whose file no longer cites an outside document fails the test, so it must be removed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCANNED_DIRS = ("kafka_controller", "tests", "bench", "dags", "plugins", "docs", ".ci")
SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ini", ".yaml", ".yml", ".sh", ".sql", ".txt", ""}
THIS_FILE = Path(__file__).resolve()

# Built from pieces so that this file does not cite what it forbids.
_SECTION = "\u00a7"
FORBIDDEN = re.compile(r"\bspec:? *" + _SECTION + r"|\bhouse rules?\b", re.IGNORECASE)
# Upper case only: the repository's own docs/architecture.md and docs/external-contract.md are fine.
FORBIDDEN_PAGES = re.compile(
    r"(?<![\w/-])("
    + "ARCHITECTURE"
    + r"\.md|"
    + "CONTRACT"
    + r"\.md|"
    + "CONTRACT"
    + " *"
    + _SECTION
    + ")"
    # The shared notes (performance, protocol, security) are not in the repository either.
    + r"|(?<![\w/-])"
    + "notes"
    + r"/[\w-]+\.md"
)
DOC_CITATION = re.compile(r"docs/([A-Za-z0-9_.-]+\.md) " + _SECTION + r"(\d+(?:\.\d+)*)")
BARE_SECTION = re.compile(_SECTION + r" ?(\d+(?:\.\d+)*)")
DOC_FILE_ON_LINE = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)")
RULE_CITATION = re.compile(r"docs/rules\.md, ([A-Za-z' -]+[A-Za-z])")
NUMBERED_HEADING = re.compile(r"^#+ +(\d+(?:\.\d+)*)\.? ")

#: Files that still cite outside documents, each with why it was left. Shrink it; never grow it.
ALLOWED: dict[str, str] = {}


def _scanned_files() -> list[Path]:
    files: list[Path] = []
    for top in SCANNED_DIRS:
        base = ROOT / top
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            if not path.is_file() or "__pycache__" in path.parts or ".venv" in path.parts:
                continue
            if path.suffix not in SUFFIXES or path.resolve() == THIS_FILE:
                continue
            files.append(path)
    return sorted(files)


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return ""


def _outside_citations(text: str, *, own_sections: bool = False) -> list[str]:
    """Lines of ``text`` that cite a document outside the repository.

    With ``own_sections`` (a page of ``docs/``), a bare section sign means the page's own section.
    """
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if FORBIDDEN.search(line) or FORBIDDEN_PAGES.search(line):
            found.append(f"{number}: {line.strip()}")
        elif own_sections:
            continue
        elif BARE_SECTION.search(line) and not DOC_FILE_ON_LINE.search(line):
            found.append(f"{number}: {line.strip()}  (a section sign with no docs/ file)")
    return found


def _is_doc_page(path: Path) -> bool:
    return path.parent == ROOT / "docs" and path.suffix == ".md"


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_no_citation_points_outside_the_repository() -> None:
    offenders = {}
    for path in _scanned_files():
        rel = _relative(path)
        if rel in ALLOWED:
            continue
        lines = _outside_citations(_text(path), own_sections=_is_doc_page(path))
        if lines:
            offenders[rel] = lines
    assert not offenders, (
        "cite docs/controller-behaviour.md §N, docs/rules.md, docs/external-contract.md §N or "
        f"Kafka's own file and method instead: {offenders}"
    )


def test_allow_list_only_shrinks() -> None:
    """One test, not one per entry, so that an empty allow-list still runs (and passes)."""
    stale = []
    for rel, reason in sorted(ALLOWED.items()):
        path = ROOT / rel
        if not reason.strip():
            stale.append(f"{rel}: an allow-list entry needs its reason")
        elif not (path.is_file() and _outside_citations(_text(path), own_sections=_is_doc_page(path))):
            stale.append(f"{rel} no longer cites an outside document (or is gone): remove it")
    assert not stale, stale


def _numbered_sections(doc: Path) -> set[str]:
    sections = set()
    for line in _text(doc).splitlines():
        match = NUMBERED_HEADING.match(line)
        if match:
            sections.add(match.group(1))
    return sections


def _rule_names() -> set[str]:
    rules = ROOT / "docs" / "rules.md"
    return {line.lstrip("#").strip().lower() for line in _text(rules).splitlines() if line.startswith("## ")}


def test_docs_citations_name_an_existing_file_and_section() -> None:
    broken = []
    sections: dict[str, set[str]] = {}
    rule_names = _rule_names()
    for path in _scanned_files():
        for number, line in enumerate(_text(path).splitlines(), 1):
            where = f"{_relative(path)}:{number}"
            for match in DOC_FILE_ON_LINE.finditer(line):
                if not (ROOT / "docs" / match.group(1)).is_file():
                    broken.append(f"{where}: no docs/{match.group(1)}")
            # A section sign refers to the last docs/ file named before it on the line.
            for match in BARE_SECTION.finditer(line):
                before = DOC_FILE_ON_LINE.findall(line[: match.start()])
                if not before and _is_doc_page(path):
                    before = [path.name]  # a docs page's bare section sign is its own section
                if not before:
                    continue
                doc = ROOT / "docs" / before[-1]
                if not doc.is_file():
                    continue
                known = sections.setdefault(before[-1], _numbered_sections(doc))
                if match.group(1) not in known:
                    broken.append(f"{where}: docs/{before[-1]} has no section {match.group(1)}")
            for match in RULE_CITATION.finditer(line):
                if match.group(1).strip().lower() not in rule_names:
                    broken.append(f"{where}: docs/rules.md has no rule {match.group(1)!r}")
    assert not broken, broken


def test_the_checks_see_what_they_are_meant_to_catch() -> None:
    """The patterns are built from pieces; make sure the pieces still match real citations."""
    outside = [
        "see spec " + _SECTION + "7.3",
        "(house rule 5)",
        "Targets (" + "notes" + "/performance.md)",
        "CONTRACT " + _SECTION + "2.2",
        "ARCHITECTURE" + ".md",
        "the leader (" + _SECTION + "8.6)",
    ]
    for sample in outside:
        assert _outside_citations(sample), sample
    inside = [
        "docs/controller-behaviour.md " + _SECTION + "8.5, " + _SECTION + "8.6",
        "docs/rules.md, callbacks only enqueue",
        "Kafka's KafkaController.onBrokerFailure",
    ]
    for sample in inside:
        assert not _outside_citations(sample), sample
    assert "callbacks only enqueue" in _rule_names()
    assert {"7.3", "8.5", "10"} <= _numbered_sections(ROOT / "docs" / "controller-behaviour.md")
    assert {"1", "2.2"} <= _numbered_sections(ROOT / "docs" / "external-contract.md")
