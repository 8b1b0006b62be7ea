"""An import of the project's own modules sits at the top of the module, where readers and
import-linter see the arrow, unless importing it at the top would load an optional dependency
(an extra of ``pyproject.toml``) for callers that never use it.

Such an import is preceded by a comment ``# Imported on use: <why>`` naming the optional
dependency (see ``REASONS``); docs/architecture.md ("Imports") states the rule.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "kafka_controller"
MARK = "# Imported on use:"

#: What may justify an import inside a function: each names an optional extra of pyproject.toml
#: (or, for ``cryptography``, a dependency whose import costs the CLI's start-up a third).
REASONS = ("kazoo", "SQLAlchemy", "Airflow", "PySpark", "pandas", "pyarrow", "cryptography")


def _is_project_import(node: ast.stmt) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level > 0 or (node.module or "").startswith("kafka_controller")
    if isinstance(node, ast.Import):
        return any(alias.name.startswith("kafka_controller") for alias in node.names)
    return False


def _reason_above(lines: list[str], lineno: int) -> str | None:
    """The ``# Imported on use:`` comment heading the block of imports and comments that the import
    on ``lineno`` (1-based) belongs to, if any."""
    index = lineno - 2
    while index >= 0:
        text = lines[index].strip()
        if text.startswith(MARK):
            return text[len(MARK) :].strip()
        if text.startswith("#") or text.startswith(("from ", "import ")) or text in {")", ""}:
            index -= 1
            continue
        if text.endswith(",") or text.endswith("("):  # a parenthesised import's lines
            index -= 1
            continue
        return None
    return None


def function_local_imports(path: Path) -> list[tuple[int, str | None]]:
    """(line, reason or None) of each project import inside a function of ``path``."""
    source = path.read_text()
    lines = source.splitlines()
    found: list[tuple[int, str | None]] = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom) and _is_project_import(inner):
                    found.append((inner.lineno, _reason_above(lines, inner.lineno)))
    return sorted(set(found))


PACKAGES = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())


@pytest.mark.parametrize("package", PACKAGES)
def test_function_local_project_imports_name_an_optional_dependency(package: str) -> None:
    unexplained = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for lineno, reason in function_local_imports(path):
            if reason is None or not any(word in reason for word in REASONS):
                unexplained.append(f"{path.relative_to(PACKAGE.parent)}:{lineno}")
    assert not unexplained, (
        "import at the module's top, or say which optional dependency it avoids loading "
        f"('{MARK} <why>'): " + ", ".join(unexplained)
    )


def test_the_rule_sees_an_unexplained_import(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f():\n"
        "    from kafka_controller.domain.errors import InvalidArgumentError\n"
        "    return InvalidArgumentError\n"
        "def g():\n"
        "    # Imported on use: SQLAlchemy is optional (the 'audit' extra).\n"
        "    from kafka_controller.audit.engine import create_audit_engine\n"
        "    return create_audit_engine\n"
    )
    assert function_local_imports(sample) == [
        (2, None),
        (6, "SQLAlchemy is optional (the 'audit' extra)."),
    ]
