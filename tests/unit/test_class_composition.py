"""A class of ``kafka_controller`` is split by collaboration, never by inheritance: a concern that
outgrows its class becomes an object the class builds, or is given, in its constructor, receiving
exactly what it uses (docs/architecture.md, "How a state machine is put together"). So no class has
two or more of the project's own classes as bases (mixins), and none inherits from a project class
that itself inherits from one (a tower): the reader of a class would otherwise have to assemble it
from several files to know what ``self`` holds.

Two hierarchies are what inheritance is for and are left out: errors (anything deriving from
``BaseException``, the project's ``KafkaControllerError`` among them), which ``except`` clauses
select by class, and the controller's events (``ControllerEvent`` of ``controller/event_manager.py``
and its kinds in ``controller/events.py``), which Kafka models the same way (a sealed trait).

The test reads the source only: each base is resolved through its module's own classes and its
``from ... import`` lines, so a class is found by the name its module uses for it.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "kafka_controller"

#: The project's roots of the hierarchies left out (see the module docstring).
EXEMPT_ROOTS = frozenset(
    {
        "kafka_controller.domain.errors.KafkaControllerError",
        "kafka_controller.controller.event_manager.ControllerEvent",
    }
)


@dataclass(frozen=True)
class ClassInfo:
    """A class of the scanned sources: its qualified name, where it is, and its bases, each as the
    qualified name of a project class, ``builtins.<name>``, or the dotted text of something else."""

    name: str
    where: str
    bases: tuple[str, ...]


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_names(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Local name -> the qualified name it was imported as (``from X import Y as Z``; relative
    imports resolved against ``module``)."""
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                keep = len(base) - node.level + (1 if is_package else 0)
                prefix = ".".join(base[:keep])
                source = f"{prefix}.{node.module}" if node.module else prefix
            else:
                source = node.module or ""
            for alias in node.names:
                names[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                head = alias.name.split(".")[0]
                names[alias.asname or head] = alias.name if alias.asname else head
    return names


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    if isinstance(node, ast.Subscript):  # Generic[T], Protocol[T]
        return _dotted(node.value)
    return None


def scan(root: Path) -> dict[str, ClassInfo]:
    """Every class defined at any depth in the ``.py`` files under ``root`` (a package directory),
    by qualified name (``package.module.Class``); a base imported from a module that imported it in
    turn (a package's ``__init__``) is followed to where it is defined."""
    found: list[tuple[str, str, ast.ClassDef, dict[str, str], set[str]]] = []
    imports: dict[str, dict[str, str]] = {}
    for path in sorted(root.rglob("*.py")):
        module = _module_name(root, path)
        tree = ast.parse(path.read_text(), str(path))
        imports[module] = _imported_names(tree, module, path.name == "__init__.py")
        defined = [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
        local = {node.name for node in defined}
        where = str(path.relative_to(root.parent))
        found += [(module, where, node, imports[module], local) for node in defined]
    qualified = {f"{module}.{node.name}" for module, _, node, _, _ in found}

    def defining(name: str, hops: int = 0) -> str:
        module, _, attr = name.rpartition(".")
        if name in qualified or hops > 10 or attr not in imports.get(module, {}):
            return name
        return defining(imports[module][attr], hops + 1)

    classes: dict[str, ClassInfo] = {}
    for module, where, node, imported, local in found:
        bases = []
        for base in node.bases:
            text = _dotted(base)
            if text is None:
                continue
            head, _, rest = text.partition(".")
            if head in local and not rest:
                bases.append(f"{module}.{head}")
            elif head in imported:
                bases.append(defining(imported[head] + (f".{rest}" if rest else "")))
            elif not rest and hasattr(builtins, head):
                bases.append(f"builtins.{head}")
            else:
                bases.append(text)
        name = f"{module}.{node.name}"
        classes[name] = ClassInfo(name, f"{where}:{node.lineno}", tuple(bases))
    return classes


def _exempt(name: str, classes: dict[str, ClassInfo], seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``name`` is, or derives from, an exception or one of ``EXEMPT_ROOTS``."""
    if name in EXEMPT_ROOTS:
        return True
    if name.startswith("builtins."):
        value = getattr(builtins, name.removeprefix("builtins."), None)
        return isinstance(value, type) and issubclass(value, BaseException)
    info = classes.get(name)
    if info is None or name in seen:
        return False
    return any(_exempt(base, classes, seen | {name}) for base in info.bases)


def inheritance_findings(classes: dict[str, ClassInfo]) -> list[str]:
    """One line per class with two or more project bases, or a project base with a project base."""
    found = []
    for info in classes.values():
        if _exempt(info.name, classes):
            continue
        project_bases = [b for b in info.bases if b in classes]
        if len(project_bases) >= 2:
            found.append(f"{info.where} {info.name}: project bases {', '.join(project_bases)}")
            continue
        for base in project_bases:
            grand = [g for g in classes[base].bases if g in classes]
            if grand:
                found.append(f"{info.where} {info.name}: base {base} inherits from {', '.join(grand)}")
    return sorted(found)


def test_no_class_is_assembled_from_project_base_classes() -> None:
    classes = scan(PACKAGE)
    assert "kafka_controller.cluster.local.LocalCluster" in classes  # the scan sees the package
    found = inheritance_findings(classes)
    assert found == [], (
        "split the class by collaboration (objects given what they use in the constructor), "
        "not by inheritance:\n" + "\n".join(found)
    )


def test_the_rule_catches_a_mixin_tower(tmp_path: Path) -> None:
    package = tmp_path / "kafka_controller"
    (package / "domain").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "domain" / "__init__.py").write_text("")
    (package / "domain" / "errors.py").write_text(
        "class KafkaControllerError(Exception): ...\n"
        "class StoreError(KafkaControllerError): ...\n"
        "class BadVersionError(StoreError): ...\n"  # an error tower: left out
    )
    (package / "mixins.py").write_text(
        "from typing import Protocol\n"
        "class Addresses: ...\n"
        "class Waits: ...\n"
        "class MoreWaits(Waits): ...\n"
        "class Port(Protocol): ...\n"
    )
    (package / "cluster.py").write_text(
        "from kafka_controller.mixins import Addresses, MoreWaits, Port, Waits\n"
        "from .domain.errors import BadVersionError\n"
        "class Mixed(Addresses, Waits): ...\n"  # two project bases
        "class Tower(MoreWaits): ...\n"  # a base with a base of its own
        "class Single(Waits, Port): ...\n"  # two project bases, one a protocol
        "class Composed:\n"
        "    def __init__(self, waits: Waits) -> None:\n"
        "        self.waits = waits\n"
        "class Refused(BadVersionError): ...\n"
    )
    classes = scan(package)
    assert classes["kafka_controller.cluster.Refused"].bases == (
        "kafka_controller.domain.errors.BadVersionError",
    )
    assert inheritance_findings(classes) == [
        "kafka_controller/cluster.py:3 kafka_controller.cluster.Mixed: project bases "
        "kafka_controller.mixins.Addresses, kafka_controller.mixins.Waits",
        "kafka_controller/cluster.py:4 kafka_controller.cluster.Tower: "
        "base kafka_controller.mixins.MoreWaits inherits from kafka_controller.mixins.Waits",
        "kafka_controller/cluster.py:5 kafka_controller.cluster.Single: project bases "
        "kafka_controller.mixins.Waits, kafka_controller.mixins.Port",
    ]
