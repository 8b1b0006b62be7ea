"""A class of ``kafka_controller`` is split by collaboration, never by inheritance: a concern that
outgrows its class becomes an object the class builds, or is given, in its constructor, receiving
exactly what it uses (docs/architecture.md, "How a state machine is put together"). So no class has
two or more of the project's own classes as bases (mixins), and none inherits from a project class
that itself inherits from one (a tower): the reader of a class would otherwise have to assemble it
from several files to know what ``self`` holds. Nor is one class split across two by a single base:
a project base that only one class derives from and whose methods read ``self`` attributes it
never sets (the subclass sets them) is a mixin too, half of one class in another file. A base
several classes derive from (a port, the Airflow operators' ``KafkaOperationOperator``, the
abstract state machines Kafka's tests mock), or one that sets what it reads
(``EmbeddedZooKeeper``, which ``EnsembleMember`` extends), is not.

Two hierarchies are what inheritance is for and are left out: errors (anything deriving from
``BaseException``, the project's ``KafkaControllerError`` among them), which ``except`` clauses
select by class, and the controller's events (``ControllerEvent`` of ``controller/event_manager.py``
and its kinds in ``controller/events.py``), which Kafka models the same way (a sealed trait).

The test reads the source only: each base is resolved through its module's own classes and its
``from ... import`` lines, so a class is found by the name its module uses for it. What a class
sets is what its methods assign to ``self.<name>`` and what its body defines (methods, properties,
class attributes with a value, and a dataclass's fields); an annotation alone declares, it does not
set.
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
    """A class of the scanned sources: its qualified name, where it is, its bases, each as the
    qualified name of a project class, ``builtins.<name>``, or the dotted text of something else,
    and the ``self`` attributes its methods read that it never sets (sorted)."""

    name: str
    where: str
    bases: tuple[str, ...]
    unset_reads: tuple[str, ...] = ()


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if (_dotted(target) or "").rpartition(".")[2] == "dataclass":
            return True
    return False


def _unset_reads(node: ast.ClassDef) -> tuple[str, ...]:
    """The ``self.<name>`` its methods read that neither they assign nor its body defines."""
    defined: set[str] = set()
    read: set[str] = set()
    fields = _is_dataclass(node)
    for item in node.body:
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(item.name)
        elif isinstance(item, ast.Assign):
            defined.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and (item.value or fields):
            defined.add(item.target.id)
        if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) or not item.args.args:
            continue
        if any(_dotted(d) == "staticmethod" for d in item.decorator_list):
            continue
        me = item.args.args[0].arg  # ``self``, whatever a method calls it
        for sub in ast.walk(item):
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == me:
                (read if isinstance(sub.ctx, ast.Load) else defined).add(sub.attr)
    return tuple(sorted(n for n in read - defined if not (n.startswith("__") and n.endswith("__"))))


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
        classes[name] = ClassInfo(name, f"{where}:{node.lineno}", tuple(bases), _unset_reads(node))
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


def mixin_findings(classes: dict[str, ClassInfo]) -> list[str]:
    """One line per class whose one project base only it derives from and reads ``self``
    attributes the base never sets: one class split across two."""
    derived: dict[str, int] = {}
    for info in classes.values():
        for name in set(info.bases):
            derived[name] = derived.get(name, 0) + 1
    found = []
    for info in classes.values():
        project_bases = [b for b in info.bases if b in classes]
        if len(project_bases) != 1 or _exempt(info.name, classes):
            continue
        base = classes[project_bases[0]]
        if derived[base.name] == 1 and base.unset_reads:
            unset = ", ".join(f"self.{n}" for n in base.unset_reads)
            what = f"base {base.name}, derived from by no other class, reads {unset} it never sets"
            found.append(f"{info.where} {info.name}: {what}")
    return sorted(found)


def test_no_class_is_assembled_from_project_base_classes() -> None:
    classes = scan(PACKAGE)
    assert "kafka_controller.cluster.local.LocalCluster" in classes  # the scan sees the package
    found = inheritance_findings(classes) + mixin_findings(classes)
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


def test_the_rule_catches_a_base_that_is_half_of_its_one_subclass(tmp_path: Path) -> None:
    package = tmp_path / "kafka_controller"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "recovery.py").write_text(
        "from dataclasses import dataclass\n"
        "class Recovery:\n"  # a mixin: the writer sets what it reads
        "    spool: list[int]\n"
        "    def recover(self) -> None:\n"
        "        self.replayed = len(self.spool)\n"
        "        self._mark_up()\n"
        "    def _mark_up(this) -> None:\n"
        "        this.up = this.ready\n"
        "    @staticmethod\n"
        "    def parse(line: str) -> list[str]:\n"
        "        return line.split()\n"
        "class Server:\n"  # extended once, but sets all it reads
        "    retries = 3\n"
        "    def __init__(self) -> None:\n"
        "        self.port, self._cleanup = 0, []\n"
        "    def stop(self) -> None:\n"
        "        self._cleanup.clear()\n"
        "        print(self.port, self.retries, self.stop, self.__class__)\n"
        "@dataclass\n"
        "class Settings:\n"  # its fields are set by the dataclass
        "    timeout: float\n"
        "    def twice(self) -> float:\n"
        "        return 2 * self.timeout\n"
        "class Step:\n"  # a template several classes fill in
        "    def run(self) -> None:\n"
        "        self.apply(self.target)\n"
    )
    (package / "users.py").write_text(
        "from kafka_controller.recovery import Recovery, Server, Settings, Step\n"
        "class Writer(Recovery):\n"
        "    def __init__(self) -> None:\n"
        "        self.spool, self.ready = [], True\n"
        "class Member(Server): ...\n"
        "class Tuned(Settings): ...\n"
        "class First(Step): ...\n"
        "class Second(Step): ...\n"
    )
    classes = scan(package)
    assert classes["kafka_controller.recovery.Recovery"].unset_reads == ("ready", "spool")
    assert classes["kafka_controller.recovery.Server"].unset_reads == ()
    assert classes["kafka_controller.recovery.Settings"].unset_reads == ()
    assert classes["kafka_controller.recovery.Step"].unset_reads == ("apply", "target")
    assert mixin_findings(classes) == [
        "kafka_controller/users.py:2 kafka_controller.users.Writer: base kafka_controller.recovery."
        "Recovery, derived from by no other class, reads self.ready, self.spool it never sets"
    ]
