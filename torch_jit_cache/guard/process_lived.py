"""Which objects live as long as the process: the one rule the guards consult before holding an
object strongly.

A cache entry's guard tree must not keep alive what a user created, so it holds by identity only
weakly (csrc/guards/weak_identity.h) and holds strongly only immutable builtins, static types and
the objects this module vouches for:
  - torch's own singletons (torch.dtype, torch.layout, torch.memory_format), the descriptors
    written in C of static types (`torch.Tensor.add_`, `torch.Tensor.shape`, `str.upper`: a static
    type is never freed), numpy's functions and ufuncs: made once per process and kept in their
    library's tables; none can be weakly referenced;
  - library singletons: an object that the standard library or an installed package (a module
    file under site-packages) defines at module level, found again under its own module and
    qualified name (typing.Union, typing.Literal, collections.abc.Sequence, a module-level
    function). A module stays in sys.modules for the process, and so does what it names.

`holdable_key(value)` is the rule for dict keys and set items (DICT_KEYS, SET_ITEMS and item()
accessors hold them): a library singleton whose class hashes and compares by identity (object's or
type's __hash__ and __eq__), or a C function that its library module names (its hash and == are
the identity of what it is bound to and of its C function), so that a guard comparing
keys runs no code and means the very object. It registers the
object with the C++ registry (`_C.vouch_process_lived`, csrc/guards/process_lived.h), which is
how the guard tree learns that it may hold it. huggingface_hub's strict dataclasses look their
validators up in such a dict ({typing.Union: ..., collections.abc.Sequence: ..., list: ...}).

Nothing here runs a user's code: a value whose class is not defined in the standard library or an
installed package is refused before any of its attributes is read. Imports without torch.
"""
from __future__ import annotations

import os
import sys
import sysconfig
import types

from .. import _C

# torch's own singletons, by (module, name) of their type so that this module imports without torch.
_TORCH_SINGLETON_TYPES = {("torch", "dtype"), ("torch", "layout"), ("torch", "memory_format")}
_IDENTITY_HASHES = (object.__hash__, type.__hash__)

# The builtin scalar types whose values a guard may hold, as dict keys, set items or EQUALS_MATCH
# values (csrc/guards/value_rules.h kImmutableScalarTypes, the one table; a build of _C older than
# it holds these five).
IMMUTABLE_SCALAR_TYPES = frozenset(getattr(_C, "IMMUTABLE_SCALAR_TYPES", (int, bool, float, str, bytes)))
_IDENTITY_EQUALS = (object.__eq__, type.__eq__)


def lives_for_the_process(value) -> bool:
    """Whether `value` lives as long as the process (module docstring), so that a guard may hold it."""
    return _library_native(value) or _library_singleton(value)


def holdable_key(value) -> bool:
    """Whether a guard may hold `value` as a dict key, compared by identity: a library singleton
    whose hash and == are identity's. Registers it with the C++ guard tree when so."""
    cls = type(value)
    if cls is types.BuiltinFunctionType:
        if not _library_builtin(value):
            return False
    elif cls.__hash__ not in _IDENTITY_HASHES or cls.__eq__ not in _IDENTITY_EQUALS:
        return False
    elif not _library_singleton(value):
        return False
    _C.vouch_process_lived(value)
    return True


def _library_builtin(value) -> bool:
    # A C function of a library module (`operator.add`, `torch.sin`, `len`, a pybind11 function
    # such as `torch._C._set_autograd_fallback_mode`, bound to its own function record): it hashes
    # and compares by the identity of what it is bound to and of its C function (CPython's
    # meth_hash / meth_richcompare), so no code runs, and it is found again under its module's name
    # for it, which keeps it and what it is bound to for the process. A method bound to an object
    # that no module names as that very function (`[].append`) is refused.
    module, name = getattr(value, "__module__", None), value.__name__
    if not is_library_module(module):
        return False
    found = sys.modules.get(module)
    return found is not None and vars(found).get(name) is value


_HEAPTYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE: a class made by a class statement or type()
_C_DESCRIPTORS = (types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType,
                  types.MemberDescriptorType, types.ClassMethodDescriptorType)


def _library_native(value) -> bool:
    # torch's and numpy's objects that cannot be weakly referenced (ID_MATCH holds them strongly).
    cls = type(value)
    torch = sys.modules.get("torch")
    if cls in _C_DESCRIPTORS:
        # A descriptor written in C of a static type (`torch.Tensor.add_`, `torch.Tensor.shape`,
        # `str.upper`), found under its name in that type's dict: static types are never freed.
        owner = value.__objclass__
        return isinstance(owner, type) and not owner.__flags__ & _HEAPTYPE and \
            vars(owner).get(value.__name__) is value
    numpy = sys.modules.get("numpy")
    # A numpy function or ufunc: numpy is never unloaded. Only numpy's own objects are looked up in
    # it (numpy.str of the builtin str warns of a future meaning).
    if numpy is not None and (isinstance(value, numpy.ufunc) or
                              (getattr(value, "__module__", None) or "").startswith("numpy")):
        name = getattr(value, "__name__", None)
        return bool(name) and getattr(numpy, name, None) is value
    return (getattr(cls, "__module__", None), cls.__name__) in _TORCH_SINGLETON_TYPES and \
        getattr(torch, cls.__name__, None) is cls


def _library_singleton(value) -> bool:
    # Defined at module level by the standard library or an installed package, and found again
    # there under its own name. Its class is checked first: only then are its attributes read
    # (a _SpecialForm answers __qualname__ through typing's own __getattr__).
    if isinstance(value, types.ModuleType):
        return sys.modules.get(value.__name__) is value and is_library_module(value.__name__)
    if not is_library_module(_defining_module(type(value))):
        return False
    try:
        module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    except Exception:  # noqa: BLE001 - no name to find it by
        return False
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return False
    if not is_library_module(module):
        return False
    found = sys.modules.get(module)
    for part in qualname.split("."):
        found = vars(found).get(part) if isinstance(found, (types.ModuleType, type)) else None
    return found is value


def _defining_module(cls: type):
    # A heap type's __module__ is a str in its own __dict__; a static type's comes from its C name
    # (`type`'s own __dict__ holds the getset descriptor that computes it).
    module = vars(cls).get("__module__")
    return module if isinstance(module, str) else _TYPE_MODULE.__get__(cls)


_TYPE_MODULE = vars(type)["__module__"]


def is_library_module(name) -> bool:
    """Whether the module `name` belongs to the standard library or an installed package (its
    file under an installation's site-packages); never __main__ or a user's own files."""
    if not isinstance(name, str):
        return False
    top = name.partition(".")[0]
    if top == "__main__":   # listed among the standard library's names, but the user's script
        return False
    if top in sys.stdlib_module_names or top == "builtins":
        return True
    path = getattr(sys.modules.get(name), "__file__", None)
    if not isinstance(path, str):
        return False
    path = os.path.realpath(path)
    return any(path.startswith(root + os.sep) for root in _installed_roots())


def _installed_roots() -> tuple:
    roots = {sysconfig.get_paths()[key] for key in ("purelib", "platlib")}
    return tuple(os.path.realpath(r) for r in roots if r)
