"""Modules stay small enough to read: none in kctl/ passes 800 lines (split it before it does); and a
module is not kept small by spreading one class over several modules.

**A class is not spread over modules.** A kctl class may not inherit from a kctl class of another
module that is a piece of it — a base that is used as the base of that one class only, and is not
complete on its own: its methods read attributes of ``self`` that neither it nor its ancestors
define. Defining an attribute is assigning it (``self.x = ...`` in a method, ``x = ...`` in the class
body), a method or property (an abstract one too: a stub raising NotImplementedError), a field of a
dataclass (or NamedTuple, TypedDict, enum), or possibly inheriting it from an ancestor outside kctl
(``Exception``, ``threading.Thread``, ...). Declaring is not defining: a bare annotation
(``_lock: threading.RLock``) or a declaration under ``if TYPE_CHECKING:`` leaves the attribute to
the subclass. Such a base is a mixin: make it a collaborator built with what it needs, and compose
it. A class named ``*Mixin`` is flagged whatever it does.

What stays allowed: interfaces and base classes that hold the state they read (``Registry`` and its
backends, ``AdminBase`` and the admin clients, ``ClientConfig`` and the config tables derived from
it, ``Consumer`` and the group consumers), and a trait shared by several classes (``_Outcome``: the
``ok``/``error`` of the admin result records, which read the records' ``error_code`` field). Only
inheritance across modules is checked; the rule reads the source (AST) and imports nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import kctl

LIMIT = 800
KCTL = Path(kctl.__file__).parent

ALLOWED_MIXINS: frozenset[str] = frozenset()
"""Mixins tolerated for now, by qualified name (module.Class): none since the registry's
composition (issue 23 §1)."""

_NEUTRAL_BASES = frozenset({"object", "ABC", "Generic", "Protocol"})
"""Bases outside kctl that provide no instance state (anything else may provide attributes)."""
_FIELD_BASES = frozenset({"NamedTuple", "TypedDict", "Enum", "IntEnum", "StrEnum", "Flag", "IntFlag"})
"""Bases outside kctl whose bare annotations (or class attributes) are the fields."""


def test_no_kctl_module_passes_the_line_limit() -> None:
    root = KCTL
    sizes = {path.relative_to(root.parent): len(path.read_text().splitlines()) for path in root.rglob("*.py")}
    assert len(sizes) > 100, "kctl's modules were found"
    assert {str(path): n for path, n in sizes.items() if n > LIMIT} == {}


# ----------------------------------------------------------------------------------------- classes


@dataclass
class ClassInfo:
    module: str
    node: ast.ClassDef
    bases: list[str] = field(default_factory=list)
    """The bases as written (dotted names, subscripts stripped)."""

    @property
    def qualname(self) -> str:
        return f"{self.module}.{self.node.name}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(KCTL.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Subscript):  # Generic[T], Protocol[T]
        node = node.value
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _is_type_checking(node: ast.stmt) -> bool:
    return isinstance(node, ast.If) and _dotted(node.test) in {"TYPE_CHECKING", "typing.TYPE_CHECKING"}


def _body(statements: list[ast.stmt]) -> Iterator[ast.stmt]:
    """A class body's statements, into ``if``/``try`` blocks but not ``if TYPE_CHECKING:`` ones."""
    for statement in statements:
        if _is_type_checking(statement):
            continue
        if isinstance(statement, ast.If | ast.Try):
            nested = [*statement.body, *statement.orelse]
            if isinstance(statement, ast.Try):
                nested += [*statement.finalbody, *(s for h in statement.handlers for s in h.body)]
            yield from _body(nested)
        else:
            yield statement


class Index:
    """Every module-level class of kctl, and the names each module imports from kctl."""

    def __init__(self) -> None:
        self.classes: dict[str, ClassInfo] = {}
        self.imports: dict[str, dict[str, str]] = {}
        """module -> local name -> the qualified name it refers to."""
        for path in sorted(KCTL.rglob("*.py")):
            module = _module_name(path)
            tree = ast.parse(path.read_text(), str(path))
            names = self.imports.setdefault(module, {})
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    for alias in node.names:
                        names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        names[alias.asname or alias.name.split(".")[0]] = (
                            alias.name if alias.asname else alias.name.split(".")[0]
                        )
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    info = ClassInfo(module, node, [b for b in map(_dotted, node.bases) if b])
                    self.classes[info.qualname] = info

    def resolve(self, module: str, name: str, depth: int = 0) -> str | None:
        """The kctl class ``name`` means in ``module`` (following re-exports), or None."""
        if depth > 10:
            return None
        head, _, rest = name.partition(".")
        if not rest and f"{module}.{name}" in self.classes:
            return f"{module}.{name}"
        target = self.imports.get(module, {}).get(head)
        if target is None:
            return None
        full = f"{target}.{rest}" if rest else target
        if full in self.classes:
            return full
        owner, _, leaf = full.rpartition(".")
        if owner in self.imports and "." not in leaf:
            return self.resolve(owner, leaf, depth + 1)
        return None

    def kctl_bases(self, info: ClassInfo) -> list[ClassInfo]:
        return [self.classes[q] for b in info.bases if (q := self.resolve(info.module, b)) is not None]

    def external_bases(self, info: ClassInfo) -> list[str]:
        return [b for b in info.bases if self.resolve(info.module, b) is None]


def _is_data_class(index: Index, info: ClassInfo) -> bool:
    decorators = {_dotted(d.func if isinstance(d, ast.Call) else d) for d in info.node.decorator_list}
    if decorators & {"dataclass", "dataclasses.dataclass", "attr.s", "attrs.define"}:
        return True
    return any(b.rpartition(".")[2] in _FIELD_BASES for b in index.external_bases(info))


def _defined(index: Index, info: ClassInfo) -> set[str]:
    """The attributes ``info``'s own code defines (not its ancestors')."""
    names: set[str] = set()
    data = _is_data_class(index, info)
    for statement in _body(info.node.body):
        if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(statement.name)
        elif isinstance(statement, ast.Assign):
            names |= {t.id for t in statement.targets if isinstance(t, ast.Name)}
        elif (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and (statement.value is not None or data)  # a bare annotation only declares
        ):
            names.add(statement.target.id)
    for method in _body(info.node.body):
        if not isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(method):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign | ast.AugAssign):
                targets = [node.target]
            for target in targets:
                for item in ast.walk(target):
                    if isinstance(item, ast.Attribute) and _dotted(item.value) == "self":
                        names.add(item.attr)
    return names


def _reads(info: ClassInfo) -> set[str]:
    """The attributes of ``self`` that ``info``'s methods read."""
    reads: set[str] = set()
    for method in _body(info.node.body):
        if isinstance(method, ast.FunctionDef | ast.AsyncFunctionDef):
            for node in ast.walk(method):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Load)
                    and _dotted(node.value) == "self"
                    and not (node.attr.startswith("__") and node.attr.endswith("__"))
                ):
                    reads.add(node.attr)
    return reads


def left_to_subclass(index: Index, info: ClassInfo) -> set[str] | None:
    """What ``info`` reads from ``self`` that neither it nor its kctl ancestors define; None when an
    ancestor outside kctl may provide anything."""
    defined: set[str] = set()
    seen: set[str] = set()
    todo = [info]
    while todo:
        current = todo.pop()
        if current.qualname in seen:
            continue
        seen.add(current.qualname)
        external = {b.rpartition(".")[2] for b in index.external_bases(current)}
        if external - _NEUTRAL_BASES - _FIELD_BASES:
            return None
        defined |= _defined(index, current)
        todo += index.kctl_bases(current)
    return _reads(info) - defined


def spread_classes(index: Index) -> dict[str, str]:
    """The pieces of classes spread over modules: the piece's qualified name -> why (see the module
    docstring)."""
    subclasses: dict[str, set[str]] = {}
    for info in index.classes.values():
        for base in index.kctl_bases(info):
            subclasses.setdefault(base.qualname, set()).add(info.qualname)
    found: dict[str, str] = {}
    for info in index.classes.values():
        if info.node.name.endswith("Mixin"):
            found[info.qualname] = "a class named *Mixin"
        for base in index.kctl_bases(info):
            if base.module == info.module or base.qualname in found or len(subclasses[base.qualname]) > 1:
                continue
            missing = left_to_subclass(index, base)
            if missing:
                found[base.qualname] = (
                    f"{info.qualname} inherits it from another module, and it reads "
                    f"self.{', self.'.join(sorted(missing))} without defining them"
                )
    return found


def test_no_class_is_spread_over_several_modules() -> None:
    index = Index()
    assert len(index.classes) > 300, "kctl's classes were found"
    found = spread_classes(index)
    assert {name: why for name, why in found.items() if name not in ALLOWED_MIXINS} == {}
    stale = sorted(ALLOWED_MIXINS - found.keys())
    assert not stale, f"no longer a mixin (or gone): remove {stale} from ALLOWED_MIXINS"


def test_the_rule_flags_a_mixin_and_passes_an_interface() -> None:
    """The rule on the shapes it is about, without kctl's own code."""
    index = Index.__new__(Index)
    index.classes, index.imports = {}, {}
    sources = {
        "pkg.parts": '''
from typing import TYPE_CHECKING
class HeartbeatPart:
    _lock: object
    if TYPE_CHECKING:
        def _request_rejoin(self, reason: str) -> None: ...
    def beat(self):
        with self._lock:
            self._request_rejoin("rebalancing")
class StubbedPart:
    def _check_open(self) -> None:
        raise NotImplementedError
    def commit(self):
        self._check_open()
        return self._generation
class Interface:
    def __init__(self) -> None:
        self.name = "x"
    def get(self, key):
        raise NotImplementedError
    def describe(self):
        return f"{self.name}: {self.get('a')}"
class Record:
    offset: int
    def next(self):
        return self.offset + 1
class Fields:
    offset: int = 0
    def next(self):
        return self.offset + 1
class Error(Exception):
    def text(self):
        return self.args[0]
class Trait:
    error_code: int
    def ok(self):
        return self.error_code == 0
class Whole:
    def __init__(self):
        self.records = []
    def append(self, record):
        self.records.append(record)
class NamedMixin:
    pass
''',
        "pkg.whole": '''
from pkg.parts import HeartbeatPart, StubbedPart, Interface, Record, Fields, Error, Trait, Whole
class Membership(HeartbeatPart, StubbedPart):
    pass
class Result(Trait):
    error_code: int = 0
class PartitionResult(Trait):
    error_code: int = 0
class Producer(Whole):
    pass
class Backend(Interface):
    def get(self, key):
        return key
class Subrecord(Record): pass
class Subfields(Fields): pass
class Suberror(Error): pass
''',
    }
    for module, source in sources.items():
        tree = ast.parse(source)
        index.imports[module] = {
            a.name: f"{n.module}.{a.name}"
            for n in tree.body
            if isinstance(n, ast.ImportFrom)
            for a in n.names
        }
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                info = ClassInfo(module, node, [b for b in map(_dotted, node.bases) if b])
                index.classes[info.qualname] = info
    found = spread_classes(index)
    assert set(found) == {
        "pkg.parts.HeartbeatPart",
        "pkg.parts.StubbedPart",
        "pkg.parts.Record",
        "pkg.parts.NamedMixin",
    }
    assert "self._lock, self._request_rejoin" in found["pkg.parts.HeartbeatPart"]
    assert found["pkg.parts.StubbedPart"].endswith("self._generation without defining them")
