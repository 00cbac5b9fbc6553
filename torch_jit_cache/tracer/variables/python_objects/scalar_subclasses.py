"""Instances of a plain subclass of int, float, complex, str or bytes built in the trace.

`class Digits(int): pass` adds nothing to int but its name: `Digits("12")`, called in the trace on
constants, is made while tracing by the class itself (int's own C constructor: pure), and is a
constant of the trace of that class. Everything done with it is done by Python on the very value
(`-d`, `d == e`, `str(d)`, `type(d)`, `isinstance`), so the answers are eager's; Python's error
from the constructor (`Digits("x")`, a string past `sys.get_int_max_str_digits()`) is raised in
the trace. Eager makes a new object on every call: the instance never leaves the trace (where the
frame would return it, or hold it at a graph break, the frame runs as written), and `id()` of it
breaks as for any value without a source.

Plain: a class statement's class (metaclass `type`) whose classes up to the builtin define no
method, attribute or `__slots__`; anything else is an object of a user class (new_object.py).
"""
from __future__ import annotations

import types

from ....guard.attribute_lookup import type_lookup
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable
from .exceptions import constant_exception, traced_raise
from .user_object import python_truth

SCALAR_BASES = (int, float, complex, str, bytes)
_HEAPTYPE = 1 << 9
# What a class statement puts in every class's __dict__.
_PLAIN_NAMES = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__", "__firstlineno__",
                          "__static_attributes__", "__annotations__"})


def plain_scalar_base(cls) -> type | None:
    """The builtin `cls` is a plain subclass of (above), else None."""
    return _scalar_base(cls, _PLAIN_NAMES)


def truth_scalar_base(cls) -> type | None:
    """The builtin `cls` subclasses where its classes up to it add to a plain subclass only
    `__bool__`, a Python function or None (`class Flag(int): def __bool__(self): ...`), else None."""
    if plain_scalar_base(cls) is not None or _scalar_base(cls, _PLAIN_NAMES | {"__bool__"}) is None:
        return None
    if not all(isinstance(vars(k).get("__bool__"), (types.FunctionType, type(None))) for k in cls.__mro__[:-2]):
        return None
    return cls.__mro__[-2]


def _scalar_base(cls, names) -> type | None:
    if type(cls) is not type or not cls.__flags__ & _HEAPTYPE:
        return None
    mro = cls.__mro__
    if len(mro) < 3 or mro[-1] is not object or mro[-2] not in SCALAR_BASES:
        return None
    for klass in mro[:-2]:
        if not klass.__flags__ & _HEAPTYPE or set(vars(klass)) - names or vars(klass).get("__annotations__"):
            return None
    return mro[-2]


class ScalarSubclassVariable(ConstantVariable):
    """A constant of the trace whose value is an instance of a plain scalar subclass made in it."""

    def reconstruct(self, outputs):
        unsupported(f"a {type(self.value).__name__} made in the trace leaves it (each call makes its own)")

    def __repr__(self):
        return f"ScalarSubclassVariable({type(self._value).__name__})"


def construct(tx, cls: type, args, kwargs):
    """cls(*args, **kwargs) on constants, made while tracing; Python's error raised in the trace."""
    if not all(isinstance(a, ConstantVariable) for a in [*args, *kwargs.values()]):
        unsupported(f"{cls.__qualname__}() on values that are not Python constants")
    try:
        value = cls(*[a.value for a in args], **{k: v.value for k, v in kwargs.items()})
    except Exception as e:  # noqa: BLE001 - Python's own error on these constants: what eager raises
        made = constant_exception(tx, e)
        if made is None:
            unsupported(f"{cls.__qualname__}() raised {e!r}")
        raise traced_raise(made) from None
    return ScalarSubclassVariable(value)


class ScalarObjectVariable(VariableTracker):
    """An instance, made in the trace, of a subclass of a scalar builtin whose class adds `__bool__`
    (truth_scalar_base). Made by the builtin's own constructor on constants (`Flag(3)`), as
    `construct` makes a plain one. Its truth (`bool(o)`, `if o`, `not o`) runs the class's
    `__bool__` traced, read through the class's tracker, and its result is checked as Python does
    (a result other than a bool raises TypeError: `return self`, `return 1`). It is no constant of
    the trace: no builtin runs on its value while tracing (that would run the class's `__bool__`
    untraced), so anything else done with it (an operator, an attribute, a call taking it as a
    constant) breaks, and it never leaves the trace (eager makes one per call)."""

    user_operators = True   # bool()/str()/hash() and operators look for the class's Python dunders

    def __init__(self, value, cls_var):
        super().__init__(None)
        self.value, self.cls_var = value, cls_var

    def python_type(self):
        return type(self.value)

    def type_method(self, tx, name: str):
        if not isinstance(type_lookup(type(self.value), name), types.FunctionType):
            unsupported(f"{type(self.value).__name__}.{name} is not a Python function")
        return self.cls_var.class_member(tx, name)

    def truthy(self, tx) -> bool:
        return python_truth(tx, self, type(self.value))

    def reconstruct(self, outputs):
        unsupported(f"a {type(self.value).__name__} made in the trace leaves it (each call makes its own)")

    def __repr__(self):
        return f"ScalarObjectVariable({type(self.value).__name__})"


def construct_with_truth(tx, cls_var, args, kwargs):
    """cls(*args, **kwargs) for a class truth_scalar_base admits, on constants: the builtin's own
    constructor makes it (the class adds no __new__ or __init__), Python's error raised in the trace."""
    made = construct(tx, cls_var.value, args, kwargs)
    return ScalarObjectVariable(made.value, cls_var)
