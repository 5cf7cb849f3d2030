"""A class sets its own state: no project class inherits from a "partial class" base.

A *partial class* is a class that has no ``__init__`` of its own yet declares bare
class-level annotations (``_lock: threading.Lock``) — attributes that only a subclass
sets — or inherits such declarations from a partial base of its own. Inheriting from one
spreads a class's state over several files, and the base can be neither built nor tested
alone. The house rule: a class lives in one file and sets all its state in its own
``__init__``; a big class is split by composing collaborators, and inheritance is for
real variants.

The check is an AST walk over every ``.py`` under ``src/`` and ``fakes/``: for each class
whose base resolves (through the module's own definitions and its ``from … import``
lines, re-exports included) to a project class, it fails when that base is partial.
Not partial, whatever they declare: dataclasses, Protocols, NamedTuples, TypedDicts,
Enums, exceptions and pydantic models (their annotations are fields or a contract, not
state a subclass must set), and any class deriving from one of those.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = (ROOT / "src", ROOT / "fakes")

# Bases (by their simple name) whose subclasses declare fields or a contract, not state.
EXEMPT_BASES = frozenset(
    {
        "Protocol",
        "NamedTuple",
        "TypedDict",
        "Enum",
        "IntEnum",
        "StrEnum",
        "Flag",
        "IntFlag",
        "BaseException",
        "Exception",
        "BaseModel",
        "BaseSettings",
        "RootModel",
    }
)
EXEMPT_DECORATORS = frozenset({"dataclass", "define", "frozen", "attrs", "dataclass_transform"})


@dataclass
class ClassInfo:
    """What the check needs to know about one class definition."""

    module: str
    name: str
    bases: list[str]  # simple names as written (``Name`` or the ``attr`` of ``mod.Name``)
    has_init: bool
    bare_annotations: list[str]
    exempt_by_decorator: bool

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.name}"


@dataclass
class Module:
    classes: dict[str, ClassInfo]
    imports: dict[str, tuple[str, str]]  # local name -> (module, name there)


def _simple(node: ast.expr) -> str | None:
    if isinstance(node, ast.Subscript):  # Generic[T], Protocol[T]
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):  # @dataclass(frozen=True)
        return _simple(node.func)
    return None


def _resolve_from(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def parse_module(module: str, source: str, *, is_package: bool = False) -> Module:
    """The classes and the ``from … import`` names of one module's source."""
    tree = ast.parse(source)
    classes: dict[str, ClassInfo] = {}
    imports: dict[str, tuple[str, str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = _resolve_from(module, node, is_package)
            for alias in node.names:
                imports[alias.asname or alias.name] = (origin, alias.name)
        elif isinstance(node, ast.ClassDef):
            body = node.body
            classes[node.name] = ClassInfo(
                module=module,
                name=node.name,
                bases=[b for b in map(_simple, node.bases) if b is not None],
                has_init=any(
                    isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef) and s.name == "__init__"
                    for s in body
                ),
                bare_annotations=[
                    s.target.id
                    for s in body
                    if isinstance(s, ast.AnnAssign)
                    and s.value is None
                    and isinstance(s.target, ast.Name)
                ],
                exempt_by_decorator=any(
                    _simple(d) in EXEMPT_DECORATORS for d in node.decorator_list
                ),
            )
    return Module(classes, imports)


class Project:
    """Every module of the project, with base-class resolution across them."""

    def __init__(self, modules: dict[str, Module]) -> None:
        self.modules = modules

    def resolve(self, module: str, name: str, depth: int = 0) -> ClassInfo | None:
        """The project class ``name`` means in ``module`` (following re-exports), or None."""
        found = self.modules.get(module)
        if found is None or depth > 10:
            return None
        if name in found.classes:
            return found.classes[name]
        if name in found.imports:
            origin, original = found.imports[name]
            return self.resolve(origin, original, depth + 1)
        return None

    def exempt(self, cls: ClassInfo, depth: int = 0) -> bool:
        """A dataclass, Protocol, enum, exception, model … or a class deriving from one."""
        if cls.exempt_by_decorator or EXEMPT_BASES & set(cls.bases):
            return True
        if depth > 10:
            return False
        for base in cls.bases:
            parent = self.resolve(cls.module, base)
            if parent is not None and self.exempt(parent, depth + 1):
                return True
        return False

    def is_partial(self, cls: ClassInfo, depth: int = 0) -> bool:
        """No ``__init__`` of its own, and attributes declared here or by a partial base."""
        if cls.has_init or self.exempt(cls) or depth > 10:
            return False
        if cls.bare_annotations:
            return True
        parents = (self.resolve(cls.module, base) for base in cls.bases)
        return any(p is not None and self.is_partial(p, depth + 1) for p in parents)

    def offenders(self) -> list[str]:
        """``module.Class -> module.Base`` for each project class with a partial base."""
        found: list[str] = []
        for module in self.modules.values():
            for cls in module.classes.values():
                for base in cls.bases:
                    parent = self.resolve(cls.module, base)
                    if parent is not None and self.is_partial(parent):
                        found.append(f"{cls.qualname} -> {parent.qualname}")
        return sorted(found)


def project_from_sources(sources: dict[str, str]) -> Project:
    """A project from ``{module name: source}`` (a name ending ``.__init__`` is a package)."""
    modules: dict[str, Module] = {}
    for name, source in sources.items():
        is_package = name.endswith(".__init__")
        module = name.removesuffix(".__init__")
        modules[module] = parse_module(module, source, is_package=is_package)
    return Project(modules)


def project_sources() -> dict[str, str]:
    """Every ``.py`` under ``src/`` and ``fakes/``, keyed by dotted module name."""
    sources: dict[str, str] = {}
    for root in SOURCE_DIRS:
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            sources[".".join(parts)] = path.read_text(encoding="utf-8")
    return sources


def test_no_class_inherits_from_a_partial_class():
    """Every project class with a project base inherits from a whole class (or an allowed one)."""
    offenders = sorted(project_from_sources(project_sources()).offenders())
    assert offenders == [], (
        "these classes inherit from a base that has no __init__ but declares attributes a "
        "subclass sets; compose a collaborator that owns that state instead: "
        + ", ".join(offenders)
    )


def test_the_source_walk_sees_the_project():
    """The walk reads both trees (a check that reads nothing would always pass)."""
    project = project_from_sources(project_sources())
    assert "robot_mcp_kit.store._sqlite" in project.modules
    assert "fake_rvc._recorder" in project.modules
    assert project.resolve("robot_mcp_kit.store", "SqliteStore") is not None  # a re-export


PARTIAL_BASE = """
import threading

class Waits:
    _lock: threading.Lock
    _listeners: list

    def notify(self) -> None:
        with self._lock:
            pass
"""


class TestTheCheck:
    def test_a_partial_base_in_another_module_is_found(self):
        """A subclass of a base without __init__ that declares attributes fails the check."""
        project = project_from_sources(
            {
                "pkg.__init__": "from pkg._waits import Waits\n",
                "pkg._waits": PARTIAL_BASE,
                "pkg._recorder": (
                    "from pkg import Waits\n\n"
                    "class Recorder(Waits):\n"
                    "    def __init__(self):\n"
                    "        self._lock = None\n"
                ),
            }
        )
        assert project.offenders() == ["pkg._recorder.Recorder -> pkg._waits.Waits"]

    def test_a_chain_through_a_base_without_annotations_is_found(self):
        """A middle class that adds no annotations is still partial through its own base."""
        project = project_from_sources(
            {"m": PARTIAL_BASE + "\n\nclass Middle(Waits):\n    pass\n\nclass Leaf(Middle): ...\n"}
        )
        assert project.offenders() == ["m.Leaf -> m.Middle", "m.Middle -> m.Waits"]

    def test_a_relative_import_resolves(self):
        project = project_from_sources(
            {
                "pkg._waits": PARTIAL_BASE,
                "pkg._recorder": "from ._waits import Waits\n\nclass Recorder(Waits): ...\n",
            }
        )
        assert project.offenders() == ["pkg._recorder.Recorder -> pkg._waits.Waits"]

    def test_a_base_with_its_own_init_passes(self):
        """The proper variant: the base sets its state itself, so inheriting is fine."""
        whole = PARTIAL_BASE.replace(
            "    def notify", "    def __init__(self):\n        self._lock = None\n\n    def notify"
        )
        project = project_from_sources(
            {"m": whole + "\n\nclass Loud(Waits):\n    pass\n"},
        )
        assert project.offenders() == []

    def test_composition_passes(self):
        project = project_from_sources(
            {
                "m": PARTIAL_BASE
                + "\n\nclass Recorder:\n    def __init__(self):\n        self._w = Waits()\n",
            }
        )
        assert project.offenders() == []

    @pytest.mark.parametrize(
        "base",
        [
            "from dataclasses import dataclass\n\n@dataclass(frozen=True)\nclass B:\n    x: int\n",
            "from typing import Protocol\n\nclass B(Protocol):\n    x: int\n",
            "from typing import NamedTuple\n\nclass B(NamedTuple):\n    x: int\n",
            "from typing import TypedDict\n\nclass B(TypedDict):\n    x: int\n",
            "import enum\n\nclass B(enum.Enum):\n    x: int\n",
            "class E(Exception):\n    pass\n\nclass B(E):\n    x: int\n",
            "from pydantic import BaseModel\n\nclass B(BaseModel):\n    x: int\n",
        ],
        ids=["dataclass", "protocol", "namedtuple", "typeddict", "enum", "exception", "pydantic"],
    )
    def test_field_declaring_kinds_are_not_partial(self, base):
        project = project_from_sources({"m": base + "\n\nclass C(B):\n    y: int\n"})
        assert project.offenders() == []
