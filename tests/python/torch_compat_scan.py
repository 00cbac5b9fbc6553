"""Reads the package's source (the AST) for the private torch names it reaches: the check that
torch_jit_cache/torch_compat.py lists every one (tests/python/test_torch_compat.py).

A name is private when a component after `torch` starts with one underscore, or it lies under
torch.fx.experimental or torch.fx.passes (torch documents neither as stable). Reached means:
  - imported (`import torch._inductor.config as c`, `from torch._guards import Source`), or an
    attribute chain from a name so bound (`c.triton.cudagraphs`, `torch._C._set_grad_enabled`),
    or `getattr(bound, "name")`;
  - a string that is a whole dotted torch name (`sys.modules.get("torch._dynamo")`);
  - an attribute (or a string naming one) starting with one underscore that torch.nn.Module or
    torch.Tensor has: `m._parameters`, `t._version` (needs torch; the others need none).

The scans are cached: the package's source does not change while a test process runs.
"""
from __future__ import annotations

import ast
import functools
import re
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "torch_jit_cache"
_DOTTED = re.compile(r"torch(\.[A-Za-z_][A-Za-z0-9_]*)+")
_UNSTABLE_PREFIXES = ("torch.fx.experimental", "torch.fx.passes")
# Method names of the builtin containers a chain may end with (`REDUCE_OP_TO_STR.values()`): the
# value is torch's, the method is Python's.
_BUILTIN_METHODS = frozenset(n for t in (dict, list, tuple, set, str) for n in dir(t) if not n.startswith("_"))


def is_private(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] != "torch":
        return False
    if dotted.startswith(_UNSTABLE_PREFIXES):
        return True
    return any(p.startswith("_") and not p.startswith("__") for p in parts[1:])


def _chain(node) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def _trim(parts: list[str]) -> list[str]:
    # `X.__instancecheck__` reads X's; `X.values` (a dict's method) reads X.
    while len(parts) > 2 and (parts[-1].startswith("__") or parts[-1] in _BUILTIN_METHODS):
        parts = parts[:-1]
    return parts


def _sources():
    # torch_compat.py itself is the list, and its checks' probes are not the package's reads.
    return [p for p in sorted(PACKAGE.rglob("*.py")) if p.name != "torch_compat.py" or p.parent != PACKAGE]


def _module_of(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def dotted_names() -> dict[str, set[str]]:
    """{private dotted torch name: the package modules that reach it}."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in _sources():
        module = _module_of(path)
        tree = ast.parse(path.read_text(), str(path))
        bound: dict[str, str] = {}  # local name -> the torch name it is bound to (any scope)
        reached: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "torch":
                        bound[alias.asname or "torch"] = alias.name if alias.asname else "torch"
                        reached.append(alias.name)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                    node.module.split(".")[0] == "torch":
                for alias in node.names:
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    reached.append(f"{node.module}.{alias.name}")
        for node in ast.walk(tree):
            chain = None
            if isinstance(node, ast.Attribute):
                chain = _chain(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("getattr", "hasattr") and len(node.args) >= 2 and \
                    isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                base = _chain(node.args[0])
                chain = base + [node.args[1].value] if base else None
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    _DOTTED.fullmatch(node.value):
                reached.append(node.value)
            if chain and chain[0] in bound:
                reached.append(".".join(_trim([*bound[chain[0]].split("."), *chain[1:]])))
        for name in reached:
            if is_private(name):
                found[name].add(module)
    # A chain reaches each of its prefixes too: a prefix whose users all reach something longer is
    # implied by the longer names.
    kept = {}
    for name, users in found.items():
        longer = set().union(*(u for other, u in found.items() if other.startswith(name + ".")))
        if not users <= longer:
            kept[name] = users
    return kept


@functools.cache
def underscore_attributes() -> dict[str, set[str]]:
    """{`_name`: the package modules that read it as an attribute or name it in a string}."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in _sources():
        module = _module_of(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = None
            if isinstance(node, ast.Attribute):
                name = node.attr
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
                name = node.value
            if name and name.startswith("_") and not name.startswith("__"):
                found[name].add(module)
    return found


def torch_object_attributes() -> dict[str, tuple[set[str], tuple[str, ...]]]:
    """{`_x`: (its users, the torch owners that have it)} for the underscore attributes the package
    reads that a module, a tensor or torch.nn.modules.module has (needs torch). A row for any one
    owner covers it (`_version` is a tensor's counter and a module class's state-dict version)."""
    import torch
    import torch.nn.modules.module as module_module

    owners = {"torch.nn.Module": torch.nn.Linear(1, 1), "torch.Tensor": torch.Tensor,
              "torch.nn.modules.module": module_module}
    found = {}
    for name, users in underscore_attributes().items():
        have = tuple(f"{owner}.{name}" for owner, obj in owners.items() if hasattr(obj, name))
        if have:
            found[name] = (users, have)
    return found
