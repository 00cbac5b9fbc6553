"""The one table of what runs while tracing on constant arguments: C functions and methods whose
result is a function of their arguments alone.

    is_pure(fn)                   # -> bool, never calls fn
    fold(tx, fn, args, kwargs)    # fn(*constants) as a tracker, or Python's own error, raised in the trace

A call of such a function on arguments that are all constants (guarded where they were read) runs
while tracing and its result is a constant of the graph; Python's error on those constants
(`math.sqrt(-1)`, `int("x")`, `"abc".index("z")`) is raised in the trace as eager raises it, so
an enclosing `try` catches it there (exceptions.py). On a non-constant argument the call is a
graph break, except where a tracker models the call (operator.add on tensors: operators.py).

What is pure, and why each row is:
- PURE_MODULES: every function of math, cmath, operator (`_operator`: its functions are the
  operators, on constants immutable values), unicodedata; struct's pack/unpack/calcsize; and the
  builtins below. Module functions are looked up by the module that holds them and by identity
  (`getattr(module, name) is fn`), never by `__module__` alone, which any function may claim.
- PURE_BUILTINS: abs, bin, hex, oct, chr, ord, divmod, pow, round, format, ascii. Other builtins
  that are pure on constants have handlers of their own (len, min, max, sum, sorted, all, any, int,
  float, str, repr, bool, ...: builtins.py BUILTIN_HANDLERS), which also take non-constants.
- PURE_TYPES: every method of int, float, complex, bool, str, bytes, tuple, frozenset, range and
  slice (`str.upper`, `int.from_bytes`, `"a,b".split`, `frozenset(...).__contains__`, which is
  what `keyword.iskeyword` is): these types are immutable, so their methods read only their
  arguments; NOT_PURE_METHODS (`__new__`, `__init__`, `__getattribute__`, ...) make, change or
  read other objects and are left out, except `T.__new__(T, ...)` of a pure type T itself
  (`int.__new__(int, 42)`, `bool.__new__(bool)`: T(...) by another name). Mutable builtin types (list, dict, set, bytearray) have trackers of their own.
Not pure, so never here: id() and hash() of a str or bytes (differ per process: a graph stored
on disk would carry another process's value; builtins.py folds hash() only where it does not),
anything reading a clock, a random generator, the environment, a file or interpreter state
(time, random, os, sys), and callables that make mutable objects (their results are not constants).
"""
from __future__ import annotations

import sys
import types

from ..base import unsupported
from ..python_objects.exceptions import constant_exception, traced_raise

PURE_MODULES: dict = {
    "math": None,            # None: every callable of the module
    "cmath": None,
    "_operator": None,
    "operator": None,
    "unicodedata": None,
    "_struct": frozenset({"pack", "unpack", "calcsize"}),
    "builtins": frozenset({"abs", "bin", "hex", "oct", "chr", "ord", "divmod", "pow", "round", "format",
                           "ascii"}),
}
PURE_TYPES = (int, float, complex, bool, str, bytes, tuple, frozenset, range, slice)
# Builtin types whose methods `Type.name` a trace reads through the type (str.upper).
_C_CALLABLES = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                types.ClassMethodDescriptorType, types.MethodWrapperType)


# Methods of the pure types that are not functions of their arguments' values: they make or change
# objects of a class they are given (tuple.__new__(SomeNamedTuple, ...)), or read attributes.
NOT_PURE_METHODS = frozenset({"__new__", "__init__", "__init_subclass__", "__subclasshook__", "__class_getitem__",
                              "__getattribute__", "__setattr__", "__delattr__", "__reduce__", "__reduce_ex__",
                              "__getstate__", "__dir__", "__sizeof__"})


def is_pure(fn) -> bool:
    """Whether `fn` is in the table: a C function of a pure module, or a method of a pure type
    (unbound, bound to the type, or bound to an instance of it). Never calls `fn`."""
    if not isinstance(fn, _C_CALLABLES):
        return False
    owner = getattr(fn, "__self__", None)
    if getattr(fn, "__name__", None) == "__new__" and owner in PURE_TYPES and getattr(owner, "__new__", None) == fn:
        return True   # int.__new__(int, 42): fold() checks that the class given is that very type
    if not isinstance(owner, types.ModuleType) and getattr(fn, "__name__", None) in NOT_PURE_METHODS:
        return False
    if owner is None or isinstance(owner, types.ModuleType):
        objclass = getattr(fn, "__objclass__", None)
        if objclass is not None:   # str.upper, int.__add__
            return objclass in PURE_TYPES
        module = owner if owner is not None else sys.modules.get(getattr(fn, "__module__", None) or "")
        return _in_pure_module(fn, module)
    if isinstance(owner, type):   # int.from_bytes, str.maketrans: bound to the class
        return owner in PURE_TYPES
    return type(owner) in PURE_TYPES   # "abc".upper, frozenset(...).__contains__


def _in_pure_module(fn, module) -> bool:
    name = getattr(module, "__name__", None)
    if name not in PURE_MODULES:
        return False
    names = PURE_MODULES[name]
    return (names is None or fn.__name__ in names) and getattr(module, fn.__name__, None) is fn


def fold(tx, fn, args, kwargs):
    """`fn(*args, **kwargs)` on constant trackers while tracing: the result as a constant tracker,
    or the error Python raises on them, raised in the trace (as a graph break where it is not a
    modelled exception)."""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    if not all(a.is_python_constant() for a in [*args, *kwargs.values()]):
        unsupported(f"{name}() on values that are not Python constants")
    if getattr(fn, "__name__", None) == "__new__" and not (args and args[0].as_python_constant() is fn.__self__):
        # T.__new__(T, ...) makes a T from constants, as T(...) does; of another class (a
        # subclass of T) it makes an object of that class: not a constant.
        unsupported(f"{name}() of a class other than {fn.__self__.__name__}")
    try:
        result = fn(*[a.as_python_constant() for a in args], **{k: v.as_python_constant() for k, v in kwargs.items()})
    except Exception as e:  # noqa: BLE001 - Python's own error on these constants: what eager raises
        made = constant_exception(tx, e)
        if made is None:
            unsupported(f"{name}() raised {e!r}")
        raise traced_raise(made) from None
    return tx.wrap_constant(result)


def hash_is_per_process(value) -> bool:
    """Whether hash(value) may differ between processes (PYTHONHASHSEED salts str and bytes, and
    tuples and frozensets holding them): such a hash is never a constant of a graph, which a disk
    cache may load in another process. Numbers, None, bools and tuples of them hash the same
    everywhere."""
    if isinstance(value, tuple) and type(value) is tuple:
        return any(hash_is_per_process(v) for v in value)
    return type(value) not in (int, bool, float, complex, type(None))
