"""Where `obj.name` is found, in Python's own order: the one home of that rule.

object.__getattribute__ looks, in this order:
1. a data descriptor on the type's MRO (its type defines __set__ or __delete__: property,
   __slots__ members, getset descriptors such as __class__) wins over everything;
2. the instance __dict__;
3. anything else on the MRO: a non-data descriptor (a function, which binds into a method;
   staticmethod; classmethod) or a plain class attribute;
4. only when all of that fails, the type's __getattr__ (nn.Module's reads _parameters, _buffers
   and _modules, in that order).

So a method defined on a module's class wins over a submodule or parameter of the same name (those
live in _modules/_parameters, reached only through __getattr__), and an instance attribute wins
over a method. The tracer (tracer/variables/python_objects/attribute.py) and the rewriting of module attribute
paths into dict lookups (guard/fast_sources.py) both decide with `lookup`, so they cannot disagree.

A type whose __getattribute__ is written in Python may do anything, so `lookup` says CUSTOM (the
tracer then traces the hook itself, tracer/variables/python_objects/object_protocol.py, down to object's order,
`generic_lookup`) unless the function is in TRUSTED_GETATTRIBUTE: a table, keyed by the function's module
and qualified name (strings, never the classes), of __getattribute__ overrides known to be pure
renamings in front of object's order. HuggingFace's PreTrainedConfig maps a model's own names
(`n_embd`) to the standard ones (`hidden_size`) through its class's `attribute_map`, then calls
object.__getattribute__; TorchDynamo trusts it the same way. For those, `lookup` follows Python's
order for the renamed name (Found.name); the value is still read from the object by getattr (the
guard's accessor), so it runs the real __getattribute__ at every call.

dict's own __getattribute__ is a slot wrapper for the same generic lookup as object's
(PyObject_GenericGetAttr), so a dict subclass follows object's order (GENERIC_GETATTRIBUTE).

Only the type's MRO is searched, never its metaclass (inspect.getattr_static(cls, name) would find
`type.mro` for an instance). No torch here: guard/fast_sources.py runs without it.
"""
from __future__ import annotations

import array
import collections
import ctypes
import dataclasses
import enum
import types
from typing import Any

MISSING = object()

# object.__getattribute__ under other names: dict sets its tp_getattro to PyObject_GenericGetAttr
# itself, which gives it a wrapper of its own that every dict subclass (OrderedDict, HuggingFace's
# ModelOutput) finds first on its MRO. Same lookup, so not "custom".
# C types that set their tp_getattro to PyObject_GenericGetAttr themselves do the same (a wrapper of
# their own, the same lookup); types.UnionType's union_getattro is the generic lookup but for the
# names in _GENERIC_BUT_FOR, which it reads from the type instead (CPython 3.11-3.13,
# Objects/unionobject.c: cls_attrs).
_GENERIC_C_TYPES = (tuple, collections.deque, array.array, slice, types.CodeType, types.SimpleNamespace, types.UnionType,
                    property, types.MemberDescriptorType, types.GetSetDescriptorType, types.WrapperDescriptorType,
                    types.MethodDescriptorType, types.MethodWrapperType, types.BuiltinFunctionType)
# (On 3.13 most of them inherit object's slot instead and have no wrapper of their own.)
GENERIC_GETATTRIBUTE = (object.__getattribute__, vars(dict)["__getattribute__"],
                        *(vars(t)["__getattribute__"] for t in _GENERIC_C_TYPES if "__getattribute__" in vars(t)))
_GENERIC_BUT_FOR = {types.UnionType: frozenset({"__module__"})}


def has_generic_getattribute(cls: type) -> bool:
    found = type_lookup(cls, "__getattribute__")
    return any(found is generic for generic in GENERIC_GETATTRIBUTE) and \
        not any(k in _GENERIC_BUT_FOR for k in cls.__mro__)


class Where(enum.Enum):
    CUSTOM = "custom"                    # the type overrides __getattribute__: nothing is known
    DATA_DESCRIPTOR = "data_descriptor"  # value: the descriptor (property, member, getset)
    INSTANCE_DICT = "instance_dict"      # value: the object in obj.__dict__
    CLASS = "class"                      # value: the raw class attribute (function, staticmethod, ...)
    GETATTR = "getattr"                  # not found normally; value: the type's __getattr__
    MISSING = "missing"                  # AttributeError


@dataclasses.dataclass(frozen=True)
class Found:
    where: Where
    value: Any = None
    name: str | None = None   # the name looked up on the type and instance dict (after renaming)


def type_lookup(cls: type, name: str) -> Any:
    """The attribute `name` in the __dict__ of the first class of cls.__mro__ that has it."""
    for klass in cls.__mro__:
        namespace = vars(klass)
        if name in namespace:
            return namespace[name]
    return MISSING


def is_data_descriptor(attr) -> bool:
    kind = type(attr)
    return type_lookup(kind, "__set__") is not MISSING or type_lookup(kind, "__delete__") is not MISSING


def is_descriptor(attr) -> bool:
    return type_lookup(type(attr), "__get__") is not MISSING


def instance_dict(obj) -> dict | None:
    """The instance __dict__ as object's lookup sees it, never created by the read: an object whose
    dict sits at a fixed offset (a C type's: functools.partial, a function, an exception) and was
    never made reads as an empty dict. Reading `__dict__` would make it, and CPython reads its
    absence (a partial with no __dict__ is flattened into one nesting it)."""
    offset = type(obj).__dictoffset__
    if offset > 0 and ctypes.c_void_p.from_address(id(obj) + offset).value is None:
        return {}
    try:
        d = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None
    return d if isinstance(d, dict) else None


def _attribute_map_name(obj, name: str):
    """PreTrainedConfig.__getattribute__: `attribute_map` (read with object's lookup) renames."""
    if name == "attribute_map":
        return name
    try:
        mapping = object.__getattribute__(obj, "attribute_map")
    except AttributeError:
        return None
    if type(mapping) is not dict:
        return None
    new = mapping.get(name, name)
    return new if type(new) is str else None


def _homogeneous_config_name(obj, name: str):
    """HeterogeneousConfigMixin.__getattribute__ only checks (raises or warns) when the config has
    a `_heterogeneity_spec`; without one it passes the name on. Every value read is guarded by an
    accessor that calls getattr, so a spec set later reaches the real check at the next call: the
    guard raises (counts as failed) and the retrace finds this lookup CUSTOM."""
    d = instance_dict(obj)
    return name if d is not None and d.get("_heterogeneity_spec") is None else None


# (module, qualname) of a pure __getattribute__ -> renaming(obj, name): the name it hands on to
# the next __getattribute__ in the MRO (each must be listed here, down to object's), or None where
# the renaming cannot be decided (then the lookup is CUSTOM).
TRUSTED_GETATTRIBUTE = {
    ("transformers.configuration_utils", "PreTrainedConfig.__getattribute__"): _attribute_map_name,
    ("transformers.configuration_utils", "PretrainedConfig.__getattribute__"): _attribute_map_name,
    ("transformers.integrations.heterogeneity.configuration_utils",
     "HeterogeneousConfigMixin.__getattribute__"): _homogeneous_config_name,
}


def has_own_getattribute(cls: type) -> bool:
    """Whether a guard's getattr on an instance of `cls` runs a __getattribute__ that is neither
    object's nor a trusted renaming (TRUSTED_GETATTRIBUTE)."""
    for klass in cls.__mro__:
        hook = vars(klass).get("__getattribute__")
        if hook is None:
            continue
        if any(hook is generic for generic in GENERIC_GETATTRIBUTE):
            return False
        if (getattr(hook, "__module__", None), getattr(hook, "__qualname__", None)) not in TRUSTED_GETATTRIBUTE:
            return True
    return False


def resolved_name(obj, name: str) -> str | None:
    """The name object's lookup order is followed for: `name` itself when the type keeps
    object.__getattribute__, the renamed one through trusted overrides, None when not followed."""
    for klass in type(obj).__mro__:
        hook = vars(klass).get("__getattribute__")
        if hook is None:
            continue
        if any(hook is generic for generic in GENERIC_GETATTRIBUTE):
            return None if name in _GENERIC_BUT_FOR.get(klass, ()) else name
        rename = TRUSTED_GETATTRIBUTE.get((getattr(hook, "__module__", None),
                                           getattr(hook, "__qualname__", None)))
        if rename is None:
            return None
        name = rename(obj, name)
        if name is None:
            return None
    return None


def lookup(obj, name: str) -> Found:
    """Where Python's `getattr(obj, name)` finds its answer (without running any descriptor)."""
    name = resolved_name(obj, name)
    if name is None:
        return Found(Where.CUSTOM)
    return generic_lookup(obj, name)


def generic_lookup(obj, name: str) -> Found:
    """Where object.__getattribute__(obj, name) finds its answer, then the type's __getattr__ (what
    Python's slot asks when that raises): the order above, whatever the type's own
    __getattribute__ is (a class's Python hook that calls object's reaches exactly this)."""
    cls = type(obj)
    attr = type_lookup(cls, name)
    # A data descriptor wins over the instance __dict__ only where it can be read (it has __get__);
    # one with only __set__/__delete__ is, for a read, a plain class attribute: the instance's
    # value if it has one, else the descriptor itself (CPython's generic getattr).
    if attr is not MISSING and is_data_descriptor(attr) and is_descriptor(attr):
        return Found(Where.DATA_DESCRIPTOR, attr, name)
    d = instance_dict(obj)
    if d is not None and name in d:
        return Found(Where.INSTANCE_DICT, d[name], name)
    if attr is not MISSING:
        return Found(Where.CLASS, attr, name)
    hook = type_lookup(cls, "__getattr__")
    if hook is not MISSING:
        return Found(Where.GETATTR, hook, name)
    return Found(Where.MISSING, None, name)
