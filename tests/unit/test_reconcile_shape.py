"""The reconciliation package's shape: no module imports one that imports it back. import-linter's
``acyclic_siblings`` contract guards it in CI as well; this test reads the source alone (no pyspark
needed) and names the cycle it finds. Module sizes: tests/unit/test_module_sizes.py, as for every
package."""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import kafka_controller.reconcile

PACKAGE = "kafka_controller.reconcile"
ROOT = Path(kafka_controller.reconcile.__file__).parent


def _siblings_imported(path: Path) -> set[str]:
    """Modules of the package that ``path`` imports anywhere: top level, in functions, or for typing."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join([PACKAGE, module]) if module else PACKAGE
            names = [f"{module}.{a.name}" for a in node.names] if module == PACKAGE else [module]
        else:
            continue
        found |= {n.split(".")[2] for n in names if n.startswith(PACKAGE + ".")}
    return found - {path.stem}


def test_no_import_cycles_in_reconcile() -> None:
    graph = {p.stem: _siblings_imported(p) for p in ROOT.glob("*.py") if p.stem != "__init__"}
    assert graph["job"], "the import scan found nothing: it is broken, not the package clean"
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        raise AssertionError(f"import cycle in {PACKAGE}: {' -> '.join(e.args[1])}") from None
