"""The package's modules import one way: no import cycle, function-level imports included.

Read from the source (the AST), never by importing: torch is not needed, so the torch-free stage
runs it too. Every `import` and `from ... import` counts, at any depth (a function-level import is
a dependency that only shows later); importing a package depends on its `__init__`, and
`from pkg import name` on the submodule `pkg.name` where that is a module. A module's implicit
import of the packages above it is not an edge (Python runs them first, whatever the module says).

On failure the message names one shortest cycle per strongly connected component, each edge with
the file and line of the import that makes it, so the import to move is in the message.
"""
from __future__ import annotations

import ast
import collections
import tempfile
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "torch_jit_cache"


def module_files(root: Path) -> dict:
    """Dotted module name -> file, for every .py file under the package `root`."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imported(module: str, path: Path, node, known) -> list:
    """The package modules an import statement in `module` names."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name in known]
    package = module.split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[:len(package) - node.level + 1] if node.level else []
    target = ".".join(base + ([node.module] if node.module else []))
    found = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        name = sub if sub in known else target
        if name in known:
            found.append(name)
    return found


def import_graph(root: Path = PACKAGE) -> dict:
    """module -> {imported module: line of the first import of it}."""
    files = module_files(root)
    graph = {}
    for module, path in files.items():
        edges = graph.setdefault(module, {})
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for dep in _imported(module, path, node, files):
                if dep != module and not module.startswith(dep + "."):
                    edges.setdefault(dep, node.lineno)
    return graph


def strongly_connected(graph: dict) -> list:
    """Tarjan's components with more than one module (iterative: no recursion limit)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(graph[w])))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        component.append(w)
                        if w == v:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def shortest_cycle(graph: dict, component: list) -> list:
    """One shortest cycle through the component's first module, as a list of modules."""
    members = set(component)
    start = component[0]
    parent = {start: None}
    queue = collections.deque([start])
    while queue:
        v = queue.popleft()
        for w in graph[v]:
            if w == start:
                path = [v]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start]   # path: v back to start
            if w in members and w not in parent:
                parent[w] = v
                queue.append(w)
    raise AssertionError("a component without a cycle")


def describe(graph: dict, components: list) -> str:
    lines = []
    for component in components:
        cycle = shortest_cycle(graph, component)
        lines.append(f"{len(component)} modules in one import cycle, for example:")
        for a, b in zip(cycle, cycle[1:]):
            lines.append(f"  {a} -> {b}  (line {graph[a][b]})")
    return "\n".join(lines)


def test_the_helper_finds_a_cycle():
    # A TemporaryDirectory, not pytest's tmp_path: pytest keeps per-test bookkeeping for each
    # tmp_path it makes (30 references a run under scripts/hunt_leaks.py).
    with tempfile.TemporaryDirectory() as folder:
        _check_cycle_found(Path(folder))


def _check_cycle_found(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from .sub import high\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "high.py").write_text("from .. import low\nfrom pkg import sub\n")
    graph = import_graph(pkg)
    assert graph["pkg.low"] == {"pkg.sub.high": 2}
    assert graph["pkg.sub.high"] == {"pkg.low": 1}   # its own package `pkg.sub` is no edge
    components = strongly_connected(graph)
    assert components == [["pkg.low", "pkg.sub.high"]]
    assert "pkg.low -> pkg.sub.high  (line 2)" in describe(graph, components)


# Function-level imports from a tracker's module up to the modules that model what its methods
# hand on (a tensor's numpy view; the exception tracker and the comparison of a list method's
# stand-in check): cycles, owed to the layer split of the package (its next restructure removes them).
# The list only shrinks: an edge listed here that no longer exists fails the test below.
KNOWN_BACK_EDGES = {
    ("torch_jit_cache.tracer.variables.tensor", "torch_jit_cache.tracer.variables.numpy_tensors"),
    ("torch_jit_cache.tracer.variables.sequence_checks", "torch_jit_cache.tracer.variables.exceptions"),
    ("torch_jit_cache.tracer.variables.sequence_checks", "torch_jit_cache.tracer.variables.operators"),
}


def test_no_import_cycle_in_the_package():
    graph = import_graph()
    assert len(graph) > 50   # the package was found
    stale = sorted(edge for edge in KNOWN_BACK_EDGES if edge[1] not in graph[edge[0]])
    assert not stale, f"no longer imported, drop from KNOWN_BACK_EDGES: {stale}"
    for a, b in KNOWN_BACK_EDGES:
        del graph[a][b]
    components = strongly_connected(graph)
    assert not components, "import cycles in torch_jit_cache:\n" + describe(graph, components)
