"""The layering of docs/architecture.md, and the code rules next to it, checked on the source.

Every ``import`` in kops is read from the source (module level and inside functions alike), so a
function-level import cannot hide a layering break or a cycle. The runtime graph skips
``if TYPE_CHECKING:`` blocks (they never run); the typing graph counts them too, so a type hint
cannot tie two modules together either.

Each rule is a function over parsed source, run on kops here and on a small violating snippet
below (a rule that cannot fail checks nothing).
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "kops"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class Source:
    """One module's parsed source: its name, whether it is a package's ``__init__``, its tree."""

    def __init__(self, module: str, text: str, *, is_package: bool = False):
        self.module = module
        self.is_package = is_package
        self.tree = ast.parse(text, filename=module)

    def resolve(self, node: ast.ImportFrom) -> str:
        """The absolute module a ``from ... import`` reads from."""
        if not node.level:
            return node.module or ""
        package = self.module if self.is_package else self.module.rpartition(".")[0]
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))


def _sources(texts: Mapping[str, str]) -> dict[str, Source]:
    """Synthetic modules for the rules' own tests; a name ending in ``.__init__`` is a package."""
    out = {}
    for name, text in texts.items():
        package = name.endswith(".__init__")
        module = name.removesuffix(".__init__")
        out[module] = Source(module, textwrap.dedent(text), is_package=package)
    return out


FILES = {_module_name(p): p for p in ROOT.rglob("*.py")}
SOURCES = {m: Source(m, p.read_text(encoding="utf-8"), is_package=p.name == "__init__.py") for m, p in FILES.items()}


# ------------------------------------------------------------------------------------------
# The import graph
# ------------------------------------------------------------------------------------------


def imports(src: Source, modules: Iterable[str], *, typing: bool = False) -> set[str]:
    """The modules ``src`` imports; with ``typing``, those under ``if TYPE_CHECKING:`` too."""
    modules = set(modules)
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = src.resolve(node)
            # `from kops.ops import journal` imports the module kops.ops.journal (the package's
            # __init__ has run before, but that is not an edge between modules); other names are
            # the package's own
            submodules = {f"{target}.{alias.name}" for alias in node.names} & modules
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(src.tree)
    return found


def import_graph(sources: Mapping[str, Source], *, typing: bool = False) -> dict[str, set[str]]:
    return {
        module: {name for name in imports(src, sources, typing=typing) if name in sources and name != module}
        for module, src in sources.items()
    }


GRAPH = import_graph(SOURCES)
TYPING_GRAPH = import_graph(SOURCES, typing=True)


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_offenders(graph: Mapping[str, set[str]], layers: set[str], forbidden: set[str]) -> list[str]:
    """Edges from a module of ``layers`` to a module of ``forbidden``."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if _layer(module) in layers
        for target in targets
        if _layer(target) in forbidden
    )


def test_the_graph_sees_the_packages():
    assert "kops.ops.reassign" in GRAPH and "kops.cli.main" in GRAPH
    assert "kops.model" in GRAPH["kops.placement.balancer"]
    assert GRAPH["kops.ops.reassign.runner"] <= TYPING_GRAPH["kops.ops.reassign.runner"]


@pytest.mark.parametrize("layer", ["ops", "pipeline", "cluster", "placement", "playbook", "inputs", "sandbox"])
def test_lower_layers_never_import_the_cli(layer):
    assert layer_offenders(GRAPH, {layer}, {"cli"}) == []


def test_placement_and_model_are_pure():
    allowed = {"placement", "model", "errors", "inputs"}
    forbidden = {_layer(m) for m in GRAPH} - allowed
    assert layer_offenders(GRAPH, {"placement", "model"}, forbidden) == []
    for module in (m for m in GRAPH if _layer(m) == "placement"):
        source = FILES[module].read_text(encoding="utf-8")
        for library in ("confluent_kafka", "kafka", "kazoo", "typer", "rich", "pyspark"):
            assert f"import {library}" not in source and f"from {library}" not in source, (module, library)


def test_cluster_adapters_never_import_side_effects():
    assert layer_offenders(GRAPH, {"cluster"}, {"ops", "playbook", "sandbox", "pipeline"}) == []


def test_inputs_never_import_the_sandbox():
    """Reading user input never needs the test cluster (not even for a type hint)."""
    assert layer_offenders(TYPING_GRAPH, {"inputs"}, {"sandbox"}) == []


def test_layer_rule_finds_an_offender():
    sources = _sources({
        "kops.inputs.files": "def f():\n    from kops.sandbox.config import SandboxConfig\n",
        "kops.inputs.values": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kops.sandbox import nodes\n",
        "kops.sandbox.config": "",
        "kops.sandbox.nodes": "",
    })
    assert layer_offenders(import_graph(sources), {"inputs"}, {"sandbox"}) == [
        "kops.inputs.files -> kops.sandbox.config"]
    assert layer_offenders(import_graph(sources, typing=True), {"inputs"}, {"sandbox"}) == [
        "kops.inputs.files -> kops.sandbox.config", "kops.inputs.values -> kops.sandbox.nodes"]


# ------------------------------------------------------------------------------------------
# No import cycles
# ------------------------------------------------------------------------------------------


def cycles(graph: Mapping[str, set[str]], packages: Iterable[str] = ()) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan); a package's
    ``__init__`` re-exporting its modules is not a cycle between modules (``packages``)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = [0]

    def strongconnect(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                strongconnect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            strongconnect(node)
    packages = set(packages)
    modules_only = ([m for m in c if m not in packages] for c in components)
    return sorted(c for c in modules_only if len(c) > 1)


PACKAGES = {m for m, src in SOURCES.items() if src.is_package}


def test_no_import_cycles():
    assert cycles(GRAPH, PACKAGES) == []


def test_no_import_cycles_through_type_hints():
    """A cycle only under ``if TYPE_CHECKING:`` is a cycle too: the two modules cannot be
    understood (or moved) one without the other. Break it by moving the type, or a Protocol."""
    assert cycles(TYPING_GRAPH, PACKAGES) == []


def test_cycle_rule_finds_a_cycle_behind_type_checking():
    sources = _sources({
        "kops.a": "from kops.b import B\n",
        "kops.b": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from kops.a import A\n",
        "kops.c.__init__": "from kops.c.d import D\n",
        "kops.c.d": "from kops.c import helper\n",
    })
    assert cycles(import_graph(sources), {"kops.c"}) == []
    assert cycles(import_graph(sources, typing=True), {"kops.c"}) == [["kops.a", "kops.b"]]


# ------------------------------------------------------------------------------------------
# No private name of one module used by another
# ------------------------------------------------------------------------------------------


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(src: Source, modules: Iterable[str]) -> list[str]:
    """``from kops.x import _y``, and ``x._y`` where ``x`` names an imported kops module (or a
    dotted path to one): a private name of another kops module used here."""
    modules = set(modules)
    bound: dict[str, str] = {}  # local name -> the kops module it names
    found: list[str] = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "kops":
                    bound[alias.asname or "kops"] = alias.name if alias.asname else "kops"
        elif isinstance(node, ast.ImportFrom):
            target = src.resolve(node)
            if target.split(".")[0] != "kops":
                continue
            for alias in node.names:
                if _private(alias.name) and f"{target}.{alias.name}" != src.module:
                    found.append(f"{src.module}:{node.lineno}: from {target} import {alias.name}")
                if f"{target}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{target}.{alias.name}"
    for node in ast.walk(src.tree):
        if not (isinstance(node, ast.Attribute) and _private(node.attr)):
            continue
        chain: list[str] = []
        value = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            owner = ".".join([bound[value.id], *reversed(chain)])
            if owner in modules and owner != src.module:
                found.append(f"{src.module}:{node.lineno}: {owner}.{node.attr}")
    return sorted(found)


#: ``module: use`` (no line number)
KNOWN_PRIVATE_USES: set[str] = set()


def _without_line(use: str) -> str:
    module, _, rest = use.split(":", 2)
    return f"{module}:{rest}"


def test_no_private_name_crosses_modules():
    found = [use for src in SOURCES.values() for use in private_uses(src, SOURCES)]
    assert [use for use in found if _without_line(use) not in KNOWN_PRIVATE_USES] == []
    assert sorted(KNOWN_PRIVATE_USES - {_without_line(use) for use in found}) == []  # fixed: drop its entry


def test_private_rule_finds_imports_and_attribute_access():
    sources = _sources({
        "kops.p.__init__": "",
        "kops.p.a": "_hidden = 1\ndef _helper(): ...\n",
        "kops.p.b": """
            import kops.p.a
            import kops.p.a as alias
            from kops.p import a
            from kops.p.a import _helper
            from . import a as rel
            from kops.p.a import __doc__

            class Local:
                _own = 1

            def f(obj):
                return (a._hidden, alias._helper(), kops.p.a._hidden, rel._hidden, obj._private,
                        Local._own, a.__name__)
        """,
    })
    assert private_uses(sources["kops.p.b"], sources) == [
        "kops.p.b:13: kops.p.a._helper",
        "kops.p.b:13: kops.p.a._hidden",
        "kops.p.b:13: kops.p.a._hidden",
        "kops.p.b:13: kops.p.a._hidden",
        "kops.p.b:5: from kops.p.a import _helper",
    ]
    assert private_uses(sources["kops.p.a"], sources) == []


# ------------------------------------------------------------------------------------------
# No cryptic aliases
# ------------------------------------------------------------------------------------------


#: PySpark's own documented convention, kept where kops uses PySpark
ALLOWED_ALIASES = {("pyspark.sql", "functions", "F")}


def short_aliases(src: Source) -> list[str]:
    """Imports renamed to one letter, or two uppercase letters (``as R``, ``as RR``): the reader
    of a call ``R.resume(...)`` has to look up what ``R`` is; ``reassign.resume`` says it."""
    found = []
    for node in ast.walk(src.tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            origin = src.resolve(node) if isinstance(node, ast.ImportFrom) else ""
            for alias in node.names:
                short = alias.asname and (len(alias.asname) == 1 or (len(alias.asname) == 2 and alias.asname.isupper()))
                if short and (origin, alias.name, alias.asname) not in ALLOWED_ALIASES:
                    found.append(f"{src.module}:{node.lineno}: {alias.name} as {alias.asname}")
    return found


def test_no_one_letter_aliases():
    assert [a for src in SOURCES.values() for a in short_aliases(src)] == []


def test_alias_rule_finds_short_aliases():
    src = _sources({"kops.x": """
        from kops.ops import reassign as R
        import kops.ops.journal as J
        from confluent_kafka import TopicPartition as TP
        from pyspark.sql import functions as F
        from pyspark.sql import types as T
        from kops.pipeline import logformat as lf
        import numpy as np
    """})["kops.x"]
    assert short_aliases(src) == [
        "kops.x:2: reassign as R", "kops.x:3: kops.ops.journal as J", "kops.x:4: TopicPartition as TP",
        "kops.x:6: types as T",
    ]


# ------------------------------------------------------------------------------------------
# What a class holds
# ------------------------------------------------------------------------------------------

#: A class holding more instance attributes than this keeps the state of more than one role (the
#: planner's old _Planner held 51, the reassign Runner 32 before its trackers moved out; today's
#: largest holds 20).
MAX_ATTRIBUTES = 20
#: A class with more public methods than this (properties not counted: a property reads state, and
#: the state is bounded above) offers more than one service (today's largest: 24, the sandbox's
#: facade, most of them two-to-four-line delegations to its nodes, state and metadata mode).
MAX_PUBLIC_METHODS = 25

#: classes over a bound: each may shrink, never grow, and no class joins them (the sandbox's facade
#: held 32 public methods until its fault verbs moved to ``Sandbox.faults``)
KNOWN_LARGE: dict[str, tuple[int, int]] = {}


def _is_property(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for d in fn.decorator_list:
        if isinstance(d, ast.Name) and d.id in {"property", "cached_property"}:
            return True
        if isinstance(d, ast.Attribute) and d.attr in {"setter", "deleter", "cached_property"}:
            return True
    return False


def _self_attributes(cls: ast.ClassDef) -> set[str]:
    """Names assigned as ``self.x = ...`` (or ``+=``, annotated, unpacked) anywhere in the class,
    nested classes apart."""
    found: set[str] = set()
    todo: list[ast.AST] = list(cls.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.ClassDef):
            continue
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [item.optional_vars for item in node.items if item.optional_vars is not None]
        for target in targets:
            for t in ast.walk(target):
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                    found.add(t.attr)
        todo.extend(ast.iter_child_nodes(node))
    return found


def class_sizes(src: Source) -> dict[str, tuple[int, int]]:
    """``{module.Class: (instance attributes, public methods)}`` for every class in ``src``."""
    out = {}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.ClassDef):
            methods = [f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                       and not f.name.startswith("_") and not _is_property(f)]
            out[f"{src.module}.{node.name}"] = (len(_self_attributes(node)), len(methods))
    return out


def too_large(sizes: Mapping[str, tuple[int, int]], known: Mapping[str, tuple[int, int]]) -> list[str]:
    out = []
    for name, (attributes, methods) in sorted(sizes.items()):
        max_attributes, max_methods = known.get(name, (MAX_ATTRIBUTES, MAX_PUBLIC_METHODS))
        if attributes > max_attributes:
            out.append(f"{name}: {attributes} instance attributes (at most {max_attributes})")
        if methods > max_methods:
            out.append(f"{name}: {methods} public methods (at most {max_methods})")
    return out


def test_classes_hold_one_role():
    sizes = {name: size for src in SOURCES.values() for name, size in class_sizes(src).items()}
    assert too_large(sizes, KNOWN_LARGE) == []
    # gone, renamed, or within the bounds now: drop its entry
    assert sorted(name for name in KNOWN_LARGE if not too_large({name: sizes.get(name, (0, 0))}, {})) == []


def test_class_rule_finds_a_class_holding_too_much():
    attributes = "\n".join(f"        self.a{i} = {i}" for i in range(MAX_ATTRIBUTES - 2))
    methods = "\n".join(f"    def m{i}(self): ..." for i in range(MAX_PUBLIC_METHODS))
    src = _sources({"kops.x": f"""
class Big:
    def __init__(self):
{attributes}
        self.a0 += 1
    def later(self, items):
        self.extra, (self.pair, _) = 1, (2, 3)
        for self.cursor in items: ...
    @property
    def p(self): ...
    def _private(self): ...
{methods}

    class Inner:
        def __init__(self):
            self.not_big = 1
"""})["kops.x"]
    sizes = class_sizes(src)
    assert sizes == {"kops.x.Big": (MAX_ATTRIBUTES + 1, MAX_PUBLIC_METHODS + 1), "kops.x.Inner": (1, 0)}
    assert too_large(sizes, {}) == [
        f"kops.x.Big: {MAX_ATTRIBUTES + 1} instance attributes (at most {MAX_ATTRIBUTES})",
        f"kops.x.Big: {MAX_PUBLIC_METHODS + 1} public methods (at most {MAX_PUBLIC_METHODS})",
    ]
    assert too_large(sizes, {"kops.x.Big": (MAX_ATTRIBUTES + 1, MAX_PUBLIC_METHODS + 1)}) == []
