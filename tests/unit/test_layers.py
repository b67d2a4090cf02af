"""The layering of docs/architecture.md, checked on the source: pure planning, adapters, side effects, CLI.

Every ``import`` in kops is read from the source (module level and inside functions alike; only
``if TYPE_CHECKING:`` blocks are skipped, as they never run), so a function-level import cannot
hide a layering break or a cycle.
"""

from __future__ import annotations

import ast
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


def _imports(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            # `from kops.ops import journal` imports the module kops.ops.journal (the package's
            # __init__ has run before, but that is not an edge between modules); other names are
            # the package's own
            submodules = {f"{target}.{alias.name}" for alias in node.names} & set(FILES)
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(target)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


FILES = {_module_name(p): p for p in ROOT.rglob("*.py")}
GRAPH = {
    module: {name for name in _imports(path, module) if name in FILES and name != module}
    for module, path in FILES.items()
}


def _layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_sees_the_packages():
    assert "kops.ops.reassign" in GRAPH and "kops.cli.main" in GRAPH
    assert "kops.model" in GRAPH["kops.placement.balancer"]


@pytest.mark.parametrize("layer", ["ops", "pipeline", "cluster", "placement", "playbook", "inputs", "sandbox"])
def test_lower_layers_never_import_the_cli(layer):
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if _layer(module) == layer
        for target in targets
        if _layer(target) == "cli"
    )
    assert offenders == []


def test_placement_and_model_are_pure():
    allowed = {"placement", "model", "errors", "inputs"}
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if _layer(module) in {"placement", "model"}
        for target in targets
        if _layer(target) not in allowed
    )
    assert offenders == []
    for module in (m for m in GRAPH if _layer(m) == "placement"):
        source = FILES[module].read_text(encoding="utf-8")
        for library in ("confluent_kafka", "kafka", "kazoo", "typer", "rich", "pyspark"):
            assert f"import {library}" not in source and f"from {library}" not in source, (module, library)


def test_cluster_adapters_never_import_side_effects():
    offenders = sorted(
        f"{module} -> {target}"
        for module, targets in GRAPH.items()
        if _layer(module) == "cluster"
        for target in targets
        if _layer(target) in {"ops", "playbook", "sandbox", "pipeline"}
    )
    assert offenders == []


def _cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
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
        for target in GRAPH[node]:
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

    for node in sorted(GRAPH):
        if node not in index:
            strongconnect(node)
    return sorted(components)


def _without_package_inits(component: list[str]) -> list[str]:
    # a package's __init__ re-exporting its modules is not a cycle between modules
    return [m for m in component if FILES[m].name != "__init__.py"]


def test_no_import_cycles():
    cycles = [c for c in (_without_package_inits(c) for c in _cycles()) if len(c) > 1]
    assert cycles == []


#: modules known to be longer than a newcomer reads in one go; they may shrink, never grow, and
#: no module joins them
KNOWN_BIG: dict[str, int] = {}
MAX_LINES = 800


def test_big_modules_stay_readable():
    sizes = {module: len(path.read_text(encoding="utf-8").splitlines()) for module, path in FILES.items()}
    too_big = sorted(f"{module}: {lines} lines" for module, lines in sizes.items()
                     if lines > KNOWN_BIG.get(module, MAX_LINES))
    assert too_big == []


def test_the_split_engines_stay_split():
    """ops.reassign and the sandbox were single files of 1,600 and 1,060 lines; each part has one job."""
    parts = [m for m in FILES if m.startswith("kops.ops.reassign")]
    parts += [f"kops.sandbox.{m}" for m in ("nodes", "state", "hosts", "modes", "kraft", "readiness", "cluster", "opening")]
    assert len(parts) >= 14
    for module in parts:
        lines = len(FILES[module].read_text(encoding="utf-8").splitlines())
        assert lines <= 600, (module, lines)
