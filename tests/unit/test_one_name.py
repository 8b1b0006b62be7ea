"""One name for one thing: a class name is defined once in ``kafka_controller/``, and no module
exists only to hand out another module's names (a second import path for the same object).

``ports/`` is the one curated facade: the controller's outside world is read there as one list.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kafka_controller"

#: Class names still defined twice, each with why it is still so. The controller's response
#: events exist once as the core's plain values (``core/events.py``, what the pure state machines
#: and the request batch build) and once as the event-thread events (``controller/events.py``);
#: both packages are being restructured, and merging the two is part of that work.
DUPLICATE_CLASSES_ALLOWED = {}

#: Modules that list in ``__all__`` names defined elsewhere, each with why. A module may import
#: what it uses; it should not advertise another module's names as its own.
RE_EXPORTS_ALLOWED = {
    # The broker's request/response catalogue: callers write ``A.ELECT_LEADERS`` and
    # ``A.ElectLeadersRequest`` through one alias (some 350 uses), the codecs live in
    # ``controller_apis``, ``local_apis`` and ``wire``.
    "broker/apis.py",
}


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _is_all(node: ast.stmt) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and any(
        isinstance(t, ast.Name) and t.id == "__all__" for t in targets
    )


def duplicate_class_names(modules: list[tuple[str, ast.Module]]) -> dict[str, list[str]]:
    """Top-level class names defined in more than one module, with where."""
    where: dict[str, list[str]] = defaultdict(list)
    for name, tree in modules:
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(name)
    return {cls: paths for cls, paths in where.items() if len(paths) > 1}


def pure_re_export_modules(modules: list[tuple[str, ast.Module]]) -> list[str]:
    """Modules whose whole body, past the docstring and ``__all__``, imports project names."""
    out = []
    for name, tree in modules:
        if name.startswith("ports/"):
            continue
        body = [n for n in tree.body if not _is_docstring(n) and not _is_all(n)]
        body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
        if body and all(
            isinstance(n, ast.ImportFrom) and (n.module or "").startswith("kafka_controller") for n in body
        ):
            out.append(name)
    return out


def re_exporting_modules(modules: list[tuple[str, ast.Module]]) -> dict[str, list[str]]:
    """Modules whose ``__all__`` lists names they import from another project module."""
    out = {}
    for name, tree in modules:
        if name.startswith("ports/"):
            continue
        imported = {
            a.asname or a.name
            for n in tree.body
            if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("kafka_controller")
            for a in n.names
        }
        listed = [
            c.value
            for n in tree.body
            if _is_all(n)
            for c in ast.walk(n)
            if isinstance(c, ast.Constant) and isinstance(c.value, str)
        ]
        foreign = sorted(set(listed) & imported)
        if foreign:
            out[name] = foreign
    return out


def test_no_class_name_is_defined_twice() -> None:
    duplicates = duplicate_class_names(_modules())
    unexpected = {cls: paths for cls, paths in duplicates.items() if cls not in DUPLICATE_CLASSES_ALLOWED}
    assert unexpected == {}, "one class name, one thing: rename one of each pair"
    stale = sorted(set(DUPLICATE_CLASSES_ALLOWED) - set(duplicates))
    assert stale == [], f"no longer duplicated, drop from DUPLICATE_CLASSES_ALLOWED: {stale}"


def test_no_module_is_a_pure_re_export_shim() -> None:
    assert pure_re_export_modules(_modules()) == [], "import from the defining module instead"


def test_re_exports_only_where_allowed() -> None:
    found = re_exporting_modules(_modules())
    assert sorted(set(found) - RE_EXPORTS_ALLOWED) == [], "import from the defining module instead"
    stale = sorted(RE_EXPORTS_ALLOWED - set(found))
    assert stale == [], f"no longer re-exporting, drop from RE_EXPORTS_ALLOWED: {stale}"


def test_the_checks_see_what_they_look_for() -> None:
    """The detectors, on small made-up modules: a shim, a re-export, a duplicate class."""
    shim = ast.parse('"""doc"""\nfrom kafka_controller.x import A, B\n__all__ = ["A", "B"]\n')
    own = ast.parse("from kafka_controller.x import A\n\nclass C(A):\n    pass\n")
    other = ast.parse("class C:\n    pass\n")
    facade = ast.parse("from kafka_controller.x import A\n")
    modules = [("a/shim.py", shim), ("a/own.py", own), ("b/other.py", other), ("ports/__init__.py", facade)]
    assert pure_re_export_modules(modules) == ["a/shim.py"]
    assert re_exporting_modules(modules) == {"a/shim.py": ["A", "B"]}
    assert duplicate_class_names(modules) == {"C": ["a/own.py", "b/other.py"]}
