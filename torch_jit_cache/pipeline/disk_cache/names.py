"""Objects named instead of held: a guard's or a graph's reference to a module, function, class or
C method is stored as the name that reaches it, and re-bound by that name on load (only where the
name reaches the very object, with the same code for a function)."""
from __future__ import annotations

import importlib
import sys
import types

from .keys import code_digest_hex

_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes)
# The steps a name may take to reach a function that no name reaches itself (these attributes, or
# a closure cell's contents), from these types only, and how many.
_STEPS = ("__wrapped__", "fget", "__func__")
_STEPPED = (types.FunctionType, types.MethodType, property, classmethod, staticmethod)
_MAX_STEPS = 3
# The tags of name_of's records.
NAME_TAGS = ("module", "named", "attr", "via")


class NotStored(Exception):
    """Why an entry is not stored (logged under the `disk_cache` topic)."""


class Mismatch(Exception):
    """A stored guard cannot hold for this frame (a re-bound name is gone, a tensor differs)."""


def is_constant(value) -> bool:
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset):
        return all(is_constant(v) for v in value)
    return type(value) in _CONSTANT_TYPES


def lookup_name(module: str, qualname: str):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def name_of(value, files: set):
    """("module", name), ("named", module, qualname, code digest or None), ("attr", the class's
    record, name) for a C method, or ("via", ...) for a decorated function or a property's getter
    (_reached_via), reaching `value` itself;
    NotStored otherwise. The digest (a function's code, nested codes and constants included) is
    compared on load with the code of what the name reaches then: a function reassigned under the
    name (a monkeypatch, an impostor given the same qualname) is another function.
    The user source files the name depends on are added to `files`."""
    import torch
    if isinstance(value, types.ModuleType):
        name = value.__name__
        if sys.modules.get(name) is not value:
            raise NotStored(f"module {name!r} is not the one imported under that name")
        add_module_file(name, files)
        return ("module", name)
    if isinstance(value, torch.dtype):
        return ("named", "torch", str(value).removeprefix("torch."), None)
    if isinstance(value, type) and value.__module__ == "builtins":
        # function, method, ...: named only in the types module (types.FunctionType)
        for name, obj in vars(types).items():
            if obj is value:
                return ("named", "types", name, None)
    owner, attr = getattr(value, "__objclass__", None), getattr(value, "__name__", None)
    if isinstance(owner, type) and isinstance(attr, str) and owner.__dict__.get(attr) is value:
        # A C method (torch.Tensor.add_, a method_descriptor): the attribute of its named class.
        return ("attr", name_of(owner, files), attr)
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    # torch.sin's qualname is '_VariableFunctionsClass.sin': builtins are tried by __name__ too, and
    # so are functions a factory made and named (F.max_pool2d is 'boolean_dispatch.<locals>.fn').
    tried = [n for n in dict.fromkeys((qualname, getattr(value, "__name__", None)))
             if isinstance(n, str) and "<locals>" not in n]
    if not isinstance(module, str) or not tried:
        raise NotStored(f"a {type(value).__name__} object has no importable name (identity of a live object)")
    for name in tried:
        try:
            found = lookup_name(module, name)
        except Exception:  # noqa: BLE001 - any failure means: not reachable by that name
            continue
        if found is value:
            qualname = name
            break
    else:
        via = _reached_via(value, module, tried[0], files)
        if via is not None:
            return via
        raise NotStored(f"{module}.{qualname} does not name the guarded object")
    for cls in (value.__mro__ if isinstance(value, type) else (value,)):
        add_module_file(getattr(cls, "__module__", None), files)
    return ("named", module, qualname, function_digest(value))


def _reached_via(value, module: str, qualname: str, files: set):
    """("via", module, qualname, steps, digest) where the object `module.qualname` reaches leads to
    the function `value` itself through `steps` (_steps: a decorated function under its wrapper or
    in a decorator's closure, a property's getter, a classmethod's function); None otherwise. The
    digest is `value`'s own code's: what the name reaches says nothing of it."""
    digest = function_digest(value)
    try:
        todo = [(lookup_name(module, qualname), ())]
    except Exception:  # noqa: BLE001 - not reachable by that name
        return None
    while todo and digest is not None:
        found, steps = todo.pop(0)
        if found is value and steps:
            add_module_file(module, files)
            return ("via", module, qualname, steps, digest)
        if len(steps) < _MAX_STEPS:
            todo += [(child, (*steps, step)) for step, child in _steps(found)]
    return None


def _steps(obj) -> list:
    """[(step, what it reaches)] from a function-like `obj`: its attributes in _STEPS and, for a
    function, the contents of each closure cell (the step is the cell's index). Nothing for other
    objects, whose attribute reads could run their code."""
    if not isinstance(obj, _STEPPED):
        return []
    found = [(step, getattr(obj, step)) for step in _STEPS if getattr(obj, step, None) is not None]
    for i, cell in enumerate(getattr(obj, "__closure__", None) or ()):
        try:
            found.append((i, cell.cell_contents))
        except ValueError:   # an empty cell
            pass
    return found


def _take(obj, step):
    return obj.__closure__[step].cell_contents if type(step) is int else getattr(obj, step)


def function_digest(value):
    code = getattr(value, "__code__", None)
    return code_digest_hex(code) if isinstance(code, types.CodeType) else None


def add_module_file(module, files: set) -> None:
    # torch's and the standard library's files are covered by the versions in the key.
    if not isinstance(module, str):
        return
    top = module.split(".")[0]
    if top in ("torch", "builtins") or top in sys.stdlib_module_names:
        return
    path = getattr(sys.modules.get(module), "__file__", None)
    if path:
        files.add(path)


def rebind(encoded):
    """The object `encoded` (a name_of record) names in this process: one that names itself the
    same way, with the same code for a function; Mismatch otherwise."""
    try:
        if encoded[0] == "module":
            found = sys.modules[encoded[1]]
        elif encoded[0] == "attr":
            found = rebind(encoded[1]).__dict__[encoded[2]]
        elif encoded[0] == "via":
            found = lookup_name(encoded[1], encoded[2])
            for step in encoded[3]:
                found = _take(found, step)
        else:
            found = lookup_name(encoded[1], encoded[2])
        same = name_of(found, set()) == tuple(encoded)
    except Exception:  # noqa: BLE001 - not found, or no longer nameable: not the stored object
        raise Mismatch(f"{encoded[1]}.{encoded[2]} is not found") from None
    if not same:
        raise Mismatch(f"{encoded[1]}.{encoded[2]} is another object (reassigned, or its code changed)")
    return found


