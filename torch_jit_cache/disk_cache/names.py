"""Objects named instead of held: a guard's or a graph's reference to a module, function, class or
C method is stored as the name that reaches it, and re-bound by that name on load (only where the
name reaches the very object, with the same code for a function)."""
from __future__ import annotations

import hashlib
import importlib
import sys
import types

from .keys import code_digest

_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes)


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
    """("module", name), ("named", module, qualname, code digest or None) or ("attr", the class's
    record, name) for a C method, reaching `value` itself;
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
    # A function made by another (a closure) is named only where the key's versions cover what
    # made it: torch's boolean_dispatch functions (F.max_pool2d), reached by __name__ below.
    if not isinstance(module, str) or not isinstance(qualname, str) or \
            "<locals>" in qualname and not versioned_module(module):
        raise NotStored(f"a {type(value).__name__} object has no importable name (identity of a live object)")
    # torch.sin's qualname is '_VariableFunctionsClass.sin': builtins are tried by __name__ too.
    for name in dict.fromkeys((qualname, getattr(value, "__name__", qualname))):
        try:
            found = lookup_name(module, name)
        except Exception:  # noqa: BLE001 - any failure means: not reachable by that name
            continue
        if found is value:
            qualname, path = name, None
            break
        path = _member_path(found, value)
        if path is not None:
            qualname = name
            break
    else:
        raise NotStored(f"{module}.{qualname} does not name the guarded object")
    for cls in (value.__mro__ if isinstance(value, type) else (value,)):
        add_module_file(getattr(cls, "__module__", None), files)
    if path is not None:
        return ("member", module, qualname, path, function_digest(value))
    return ("named", module, qualname, function_digest(value))


# Where the name reaches a wrapper of the object rather than the object: a decorated function
# (functools.wraps' `__wrapped__`: transformers' `can_return_tuple` over `BertModel.forward`; a
# wrapper's closure cell), a property's getter, a classmethod's function. Made at import with
# what the name reaches, so named on the same terms; followed from it by these attributes, at
# most _MEMBER_DEPTH of them.
_MEMBER_DEPTH = 3


def _members(obj):
    if isinstance(obj, property):
        return (("fget", obj.fget), ("fset", obj.fset), ("fdel", obj.fdel))
    if isinstance(obj, (classmethod, staticmethod)):
        return (("__func__", obj.__func__),)
    if isinstance(obj, types.FunctionType):
        cells = tuple((f"__closure__[{i}]", _cell_contents(cell)) for i, cell in enumerate(obj.__closure__ or ()))
        return (("__wrapped__", vars(obj).get("__wrapped__")),) + cells
    return ()


def _cell_contents(cell):
    try:
        return cell.cell_contents
    except ValueError:   # an empty cell
        return None


def _member_path(found, value):
    """The attribute names leading from `found` to `value` through _members, or None."""
    frontier = [(found, ())]
    for _ in range(_MEMBER_DEPTH):
        frontier = [(child, path + (attr,)) for obj, path in frontier for attr, child in _members(obj)
                    if child is not None]
        for child, path in frontier:
            if child is value:
                return path
    return None


def _follow(obj, path):
    for attr in path:
        obj = dict(_members(obj))[attr]
    return obj


def function_digest(value):
    code = getattr(value, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    h = hashlib.sha256()
    code_digest(code, h)
    return h.hexdigest()


def versioned_module(module: str) -> bool:
    """Whether `module` is torch's or the standard library's: covered by the versions in the key."""
    top = module.split(".")[0]
    return top in ("torch", "builtins") or top in sys.stdlib_module_names


def add_module_file(module, files: set) -> None:
    if not isinstance(module, str) or versioned_module(module):
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
        elif encoded[0] == "member":
            found = _follow(lookup_name(encoded[1], encoded[2]), encoded[3])
        else:
            found = lookup_name(encoded[1], encoded[2])
        same = name_of(found, set()) == tuple(encoded)
    except Exception:  # noqa: BLE001 - not found, or no longer nameable: not the stored object
        raise Mismatch(f"{encoded[1]}.{encoded[2]} is not found") from None
    if not same:
        raise Mismatch(f"{encoded[1]}.{encoded[2]} is another object (reassigned, or its code changed)")
    return found


