"""The package's modules import one way: top layer to bottom, and no import cycle.

LAYERS below is the package's layer order as data, top to bottom: each subpackage or root module
sits in one layer, and a module may import from its own layer or any layer below it, never above.
Inside a layer, imports form no cycle. Read from the source (the AST), never by importing: torch is
not needed, so the torch-free stage runs it too. Every `import` and `from ... import` counts, at any
depth (a function-level import is a dependency that only shows later); importing a package depends
on its `__init__`, and `from pkg import name` on the submodule `pkg.name` where that is a module,
else on `pkg` itself: a name read from the package face (`from .. import __version__`) is an edge
to the face, though Python runs the face first anyway. The C++ modules (EXTENSIONS) are modules.

On failure the message names each upward import with its file and line, and one shortest cycle per
strongly connected component, each edge with the line of the import that makes it.
"""
from __future__ import annotations

import ast
import collections
import tempfile
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "torch_jit_cache"
EXTENSIONS = ("_C", "_C_torch")   # the C++ modules setup.py builds into the package root

# The layers, top to bottom (docs/architecture.md draws them). An entry names a subpackage (with
# everything under it) or a root module; "torch_jit_cache" is the package face, its __init__ only.
LAYERS = (
    ("tools", ("torch_jit_cache.demo", "torch_jit_cache.report", "torch_jit_cache.testing")),
    ("face", ("torch_jit_cache", "torch_jit_cache.api")),
    ("pipeline", ("torch_jit_cache.pipeline",)),
    ("graph_break", ("torch_jit_cache.graph_break",)),
    ("tracer", ("torch_jit_cache.tracer",)),
    ("backends", ("torch_jit_cache.backends",)),
    ("bytecode", ("torch_jit_cache.bytecode",)),
    ("frontend", ("torch_jit_cache.frontend",)),
    ("guard", ("torch_jit_cache.guard",)),
    ("runtime", ("torch_jit_cache.runtime", "torch_jit_cache.config", "torch_jit_cache.torch_compat",
                 "torch_jit_cache.version", "torch_jit_cache._C", "torch_jit_cache._C_torch")),
)


def module_files(root: Path) -> dict:
    """Dotted module name -> file, for every .py file under the package `root`, and its C++ modules
    (EXTENSIONS: no file to read, None)."""
    out = {f"{root.name}.{name}": None for name in EXTENSIONS}
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
        if path is None:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for dep in _imported(module, path, node, files):
                if dep != module:
                    edges.setdefault(dep, node.lineno)
    return graph


def layer_of(module: str, layers=LAYERS) -> int:
    """The index of `module`'s layer (0 the top); the longest entry naming it or a package above it
    decides, and the package face's entry names the face only. KeyError where none does."""
    face = module.split(".")[0]
    best = None
    for index, (_, entries) in enumerate(layers):
        for entry in entries:
            if module == entry or (entry != face and module.startswith(entry + ".")):
                if best is None or len(entry) > len(best[1]):
                    best = (index, entry)
    if best is None:
        raise KeyError(module)
    return best[0]


def upward_imports(graph: dict, layers=LAYERS) -> list:
    """Each import of a module in a higher layer: (module, line, imported module)."""
    out = []
    for a, deps in graph.items():
        for b, line in deps.items():
            if layer_of(b, layers) < layer_of(a, layers):
                out.append((a, line, b))
    return sorted(out)


def describe_upward(upward: list, layers=LAYERS) -> str:
    return "\n".join(f"  {a} (line {line}, layer {layers[layer_of(a, layers)][0]}) imports {b} "
                     f"(layer {layers[layer_of(b, layers)][0]}, above it)" for a, line, b in upward)


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
    assert graph["pkg.sub.high"] == {"pkg.low": 1, "pkg.sub": 2}   # its own package, named, is one
    components = strongly_connected(graph)
    assert components == [["pkg.low", "pkg.sub.high"]]
    assert "pkg.low -> pkg.sub.high  (line 2)" in describe(graph, components)


def test_the_helper_finds_an_upward_import():
    with tempfile.TemporaryDirectory() as folder:
        pkg = Path(folder) / "pkg"
        (pkg / "low").mkdir(parents=True)
        (pkg / "__init__.py").write_text("from . import top\n")
        (pkg / "top.py").write_text("from .low import base\n")
        (pkg / "low" / "__init__.py").write_text("")
        (pkg / "low" / "base.py").write_text("def f():\n    from .. import top\n")
        layers = (("face", ("pkg",)), ("top", ("pkg.top",)), ("low", ("pkg.low",)))
        graph = import_graph(pkg)
        assert [layer_of(m, layers) for m in ("pkg", "pkg.top", "pkg.low", "pkg.low.base")] == [0, 1, 2, 2]
        upward = upward_imports(graph, layers)
        assert upward == [("pkg.low.base", 2, "pkg.top")]
        assert "pkg.low.base (line 2, layer low) imports pkg.top (layer top, above it)" in \
            describe_upward(upward, layers)


def test_a_name_read_from_the_package_face_is_an_edge():
    with tempfile.TemporaryDirectory() as folder:
        pkg = Path(folder) / "pkg"
        (pkg / "sub").mkdir(parents=True)
        (pkg / "__init__.py").write_text("__version__ = '1'\nfrom .sub import low\n")
        (pkg / "sub" / "__init__.py").write_text("")
        (pkg / "sub" / "low.py").write_text("from .. import __version__\nfrom .. import _C\n")
        graph = import_graph(pkg)
        assert graph["pkg.sub.low"] == {"pkg": 1, "pkg._C": 2}   # _C is an extension, not the face
        assert strongly_connected(graph) == [["pkg", "pkg.sub.low"]]


def test_every_module_has_one_layer():
    entries = [e for _, layer in LAYERS for e in layer]
    assert len(entries) == len(set(entries)), "an entry in two layers"
    unplaced = []
    for module in import_graph():
        try:
            layer_of(module)
        except KeyError:
            unplaced.append(module)
    assert not unplaced, f"modules in no layer (add them to LAYERS): {unplaced}"


def test_imports_run_from_top_layer_to_bottom():
    graph = import_graph()
    assert len(graph) > 50   # the package was found
    upward = upward_imports(graph)
    assert not upward, "imports from a lower layer to a higher one:\n" + describe_upward(upward)


def test_no_import_cycle_in_the_package():
    graph = import_graph()
    assert len(graph) > 50   # the package was found
    components = strongly_connected(graph)
    assert not components, "import cycles in torch_jit_cache:\n" + describe(graph, components)
