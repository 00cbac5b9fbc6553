"""ConstantVariable: an immutable Python value known while tracing (int, float, str, None, ...)."""
from __future__ import annotations

import enum
import operator
import sys
import types
import typing
import weakref

import torch

from ...guard.sources import AttrSource, LocalSource
from ...guard.trace_result import ConstantOutput, GuardKind, SourceOutput
from .base import MethodVariable, TracedAttributeError, TracedRaise, VariableTracker, traced, unsupported

_IMMUTABLE_TYPE = 1 << 8   # Py_TPFLAGS_IMMUTABLETYPE: a builtin class, which can gain no attribute

_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)
# Methods on constants that are pure and safe to evaluate while tracing.
SAFE_TYPES = (int, float, bool, str, bytes, complex, type(None), slice, type(Ellipsis))

# The methods of a frozenset constant that are functions of its items and their arguments'
# values, folded on the real frozenset (`__init__` is object's, which does nothing to it). Not
# `__hash__`: a frozenset of strings hashes differently per process (pure.hash_is_per_process).
FROZENSET_METHODS = frozenset({
    "union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
    "isdisjoint", "copy", "__contains__", "__len__", "__eq__", "__ne__", "__le__", "__lt__", "__ge__",
    "__gt__", "__or__", "__and__", "__sub__", "__xor__", "__ror__", "__rand__", "__rsub__", "__rxor__",
    "__init__"})


# The stand-in functions and classes class_statements.py makes for a class made in the trace:
# refused by builder.wrap, and by a constant's rebuild (a trace-time class must never reach the caller).
STAND_INS = weakref.WeakSet()


def is_stand_in(value) -> bool:
    """A function or class class_statements.py made at trace time (never a user's value). Only a
    plain function or a class of metaclass `type` is looked up: hashing another value could run
    the user's __hash__."""
    return type(value) in (types.FunctionType, type) and value in STAND_INS


def holds_stand_in(value) -> bool:
    """`value`, or an item of a tuple/frozenset constant, is a trace-time class or function, or an
    instance of a trace-time class (a `class Tag(str)` made in the trace: scalar_subclasses.py)."""
    if isinstance(value, (tuple, frozenset)):
        return any(holds_stand_in(v) for v in value)
    return is_stand_in(value) or is_stand_in(type(value))


# The fields of a type annotation's alias that typing.get_args / get_origin read. The C aliases
# (`int | None`, `list[int]`) are immutable; typing's own set them once, in __init__.
_ALIAS_FIELDS = ("__args__", "__origin__", "__parameters__")
_TYPING_ALIASES = tuple(t for t in (getattr(typing, "_GenericAlias", None), getattr(typing, "_SpecialGenericAlias", None))
                        if isinstance(t, type))


def is_type_alias(value) -> bool:
    return type(value) in (types.UnionType, types.GenericAlias) or isinstance(value, _TYPING_ALIASES)


class ConstantVariable(VariableTracker):
    identity_family = "constant"

    def __init__(self, value, source=None):
        super().__init__(source)
        if type(value) in _SYMBOLIC:   # a symbolic size must stay a node (symbolic.py)
            raise AssertionError(f"ConstantVariable of a symbolic value {value!r} (tracer bug)")
        self._value = value
        self._pending_guard = None

    # A scalar argument of the frame is guarded by its value when the trace first reads it (any
    # use of `value`); one the trace only passes on (to a resume function, or returned) is
    # rebuilt from the frame's own argument and is guarded by its type alone, so a value that
    # differs on each call (random.randint's, at a break) does not recompile the frame each time.
    @property
    def value(self):
        if self._pending_guard is not None:
            install, self._pending_guard = self._pending_guard, None
            install()
        return self._value

    @value.setter
    def value(self, value):
        self._value, self._pending_guard = value, None

    def python_type(self):
        return type(self._value)

    def as_python_constant(self):
        return self.value

    def reconstruct(self, outputs):
        if self._pending_guard is not None:   # never read: the frame's argument itself, unguarded
            return SourceOutput(self.source)
        if holds_stand_in(self.value):
            unsupported(f"{self.value!r} was made in the trace: each call makes its own")
        return ConstantOutput(self.value)

    def as_fx_arg(self):
        if is_numpy_scalar(self.value):
            # torch reads a numpy scalar's dtype in some places (torch.tensor(np.float64(1.0)) is
            # float64) and not in others; only binary operators convert it (numpy_values.py).
            unsupported(f"a numpy {type(self.value).__name__} as an argument of a torch call")
        return self.value

    def truthy(self, tx) -> bool:
        return bool(self.value)

    def var_getattr(self, tx, name):
        if type(self.value) is frozenset and name in FROZENSET_METHODS:
            return MethodVariable(self, name)
        if isinstance(self.value, SAFE_TYPES) or is_immutable_torch_value(self.value):
            try:
                attr = getattr(self.value, name)
            except AttributeError:
                if not type(self.value).__flags__ & _IMMUTABLE_TYPE:   # its class may gain the name
                    unsupported(f"{type(self.value).__name__} has no attribute {name!r}")
                message = f"{type(self.value).__name__!r} object has no attribute {name!r}"
                raise traced(TracedAttributeError, f"AttributeError: {message}", AttributeError,
                             [ConstantVariable(message)]) from None
            if callable(attr):
                return MethodVariable(self, name)
            return ConstantVariable(attr)
        if is_enum_member(self.value) and name in ("name", "value"):
            return tx.wrap_constant(getattr(self.value, name))   # refused unless itself a constant
        if isinstance(self.value, types.CodeType) and name.startswith("co_") and \
                not callable(getattr(self.value, name, None)):
            # A code object is immutable: its co_* fields (co_varnames, co_argcount) are constants.
            return tx.wrap_constant(getattr(self.value, name))
        if is_type_alias(self.value) and name in _ALIAS_FIELDS:
            # `int | None`, `list[int]`, `typing.Optional[int]`: what typing.get_args/get_origin read.
            # Through the alias's source where it has one (its members may be classes); else only
            # a constant result is taken.
            if self.source is not None:
                return tx.wrap(getattr(self.value, name), AttrSource(self.source, name))
            return tx.wrap_constant(getattr(self.value, name))
        unsupported(f"attribute {name!r} of constant {self.value!r}")

    def unpack(self, tx):
        if isinstance(self.value, (str, bytes, tuple, range, frozenset)):
            return [tx.wrap_constant(c) for c in self.value]
        unsupported(f"iteration over constant {self.value!r}")

    def __repr__(self):
        return f"ConstantVariable({self.value!r})"

    def require_guardable(self, what, name):
        pass   # guarded by value

    def call_method(self, tx, name, args, kwargs):
        """`'a,b'.split(',')` and friends: a method of an immutable value, evaluated when every
        argument is a constant."""
        if type(self.value) is frozenset and name in FROZENSET_METHODS:
            return tx.fold(getattr(self.value, name), args, kwargs)
        if not (isinstance(self.value, SAFE_TYPES) or is_immutable_torch_value(self.value)) or \
                not callable(getattr(self.value, name, None)):
            return super().call_method(tx, name, args, kwargs)
        if name == "join" and isinstance(self.value, str) and len(args) == 1 and not kwargs \
                and not args[0].is_python_constant():   # " ".join(a generator or list of strings)
            args = [ConstantVariable(tuple(i.as_python_constant() for i in args[0].unpack(tx)))]
        return tx.fold(getattr(self.value, name), args, kwargs)   # pure.py: why such a method is pure

    def identity_object(self):
        return self.value


def is_immutable_torch_value(value) -> bool:
    import torch
    return isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format,
                              torch.finfo, torch.iinfo, torch.Size))   # immutable torch values


def is_enum_member(value) -> bool:
    """A member of an Enum class whose equality, hash and text are enum's or a builtin's (int for
    an IntEnum, str for a StrEnum): a singleton, compared, hashed and printed while tracing without
    running user code. Its `name` and `value` are fixed when the class is made."""
    cls = type(value)
    if not isinstance(value, enum.Enum) or type(cls) is not enum.EnumType:
        return False
    for hook in ("__eq__", "__hash__", "__str__", "__repr__", "__format__"):
        # enum's own, or a builtin's slot (EnumType copies int's and str's onto an IntEnum or a
        # StrEnum); a function written elsewhere is the user's.
        fn = next(vars(c)[hook] for c in cls.__mro__ if hook in vars(c))
        if isinstance(fn, (types.FunctionType, classmethod, staticmethod, property)) and \
                getattr(fn, "__module__", None) != "enum":
            return False
    return True


def is_constant_value(value) -> bool:
    """Immutable values a ConstantVariable may hold."""
    if isinstance(value, SAFE_TYPES) or is_immutable_torch_value(value) or is_enum_member(value) or \
            is_numpy_scalar(value):
        return True
    if isinstance(value, (tuple, frozenset)):
        return all(is_constant_value(v) for v in value)
    # `int | str`: immutable, its members classes; isinstance and issubclass take it (instance_checks.py).
    # `list[int]`, `typing.Optional[int]`: annotations, read by typing.get_args / get_origin.
    return is_type_alias(value)


def is_numpy_scalar(value) -> bool:
    """A numpy number or np.bool_ (immutable; numpy_values.py says where one may go)."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, (np.number, np.bool_))


BINARY_OPERATORS = {
    "+": operator.add, "&": operator.and_, "//": operator.floordiv, "<<": operator.lshift,
    "@": operator.matmul, "*": operator.mul, "%": operator.mod, "|": operator.or_,
    "**": operator.pow, ">>": operator.rshift, "-": operator.sub, "/": operator.truediv,
    "^": operator.xor,
    "+=": operator.iadd, "&=": operator.iand, "//=": operator.ifloordiv, "<<=": operator.ilshift,
    "@=": operator.imatmul, "*=": operator.imul, "%=": operator.imod, "|=": operator.ior,
    "**=": operator.ipow, ">>=": operator.irshift, "-=": operator.isub,
    "/=": operator.itruediv, "^=": operator.ixor,
}
COMPARE_OPERATORS = {"<": operator.lt, "<=": operator.le, "==": operator.eq,
                     "!=": operator.ne, ">": operator.gt, ">=": operator.ge}


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
# Exactly these types: subclasses (numpy.float64, an IntEnum) are not constants here.
SCALAR_TYPES = (bool, int, float, complex, str, bytes, type(None), type(Ellipsis))
TORCH_SINGLETONS = (torch.dtype, torch.layout, torch.memory_format)


def wrap_not_implemented(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    return ConstantVariable(value, source)


def wrap_scalar(tx, value, source, g):
    g(GuardKind.TYPE_MATCH, type(value))
    if value is Ellipsis:   # the only instance of its type: TYPE_MATCH pins it (EQUALS_MATCH refuses it)
        return ConstantVariable(value, source)
    if type(value) is complex:   # EQUALS_MATCH holds ints, floats, str, ...: a complex by its parts
        g(GuardKind.EQUALS_MATCH, value.real, AttrSource(source, "real"))
        g(GuardKind.EQUALS_MATCH, value.imag, AttrSource(source, "imag"))
        return ConstantVariable(value, source)
    vt = ConstantVariable(value, source)
    if type(source) is LocalSource:   # an argument: no side effect the graph replays rebinds it
        vt._pending_guard = lambda: g(GuardKind.EQUALS_MATCH, value)
    else:
        g(GuardKind.EQUALS_MATCH, value)
    return vt


def is_constant_slice(value) -> bool:
    """A slice whose bounds are ints or None (`a[idx]` with `idx = slice(0, 2)` passed in)."""
    return type(value) is slice and all(part is None or type(part) is int
                                        for part in (value.start, value.stop, value.step))


def wrap_slice(tx, value, source, g):
    # Immutable, but no value EQUALS_MATCH holds: guarded by its type and each bound by value.
    g(GuardKind.TYPE_MATCH, slice)
    for part in ("start", "stop", "step"):
        g(GuardKind.EQUALS_MATCH, getattr(value, part), AttrSource(source, part))
    return ConstantVariable(value, source)


def wrap_type_alias(tx, value, source, g):
    # Neither weakrefable nor a value EQUALS_MATCH holds: guarded by its type and what it is made
    # of (origin and members, classes by identity), all that its equality compares.
    g(GuardKind.TYPE_MATCH, type(value))
    if g.enabled:
        tx.wrap(value.__args__, AttrSource(source, "__args__"))
        if type(value) is not types.UnionType:
            tx.wrap(value.__origin__, AttrSource(source, "__origin__"))
    return ConstantVariable(value, source)


def wrap_torch_singleton(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)   # held strongly: guard/tree.py
    return ConstantVariable(value, source)


def wrap_enum_member(tx, value, source, g):
    # A singleton of its class (`self.mode is Mode.A` compares it as a constant): guarded by
    # identity. A member of an int or str mixin (IntEnum, StrEnum) has no weakref: guarded by its
    # type and its builtin `_value_`, which within one class names one member (aliases are one object).
    try:
        weakref.ref(value)
    except TypeError:
        raw = value._value_
        if type(raw) not in SCALAR_TYPES or value != raw:
            return None
        g(GuardKind.TYPE_MATCH, type(value))
        g(GuardKind.EQUALS_MATCH, raw, AttrSource(source, "_value_"))
    else:
        g(GuardKind.ID_MATCH, value)
    return ConstantVariable(value, source)


def wrap_device(tx, value, source, g):
    # Made anew by every torch.device(...) and x.device: equal devices are different objects,
    # so guarded by value, through the two fields that make it.
    g(GuardKind.TYPE_MATCH, torch.device)
    g(GuardKind.EQUALS_MATCH, value.type, AttrSource(source, "type"))
    g(GuardKind.EQUALS_MATCH, value.index, AttrSource(source, "index"))
    return ConstantVariable(value, source)


def raise_of_message(kind: type, exc_type: type, message) -> TracedRaise:
    """A `kind` raise (base.TRACED_RAISES) of `exc_type(message)`, the message a constant: what
    Python raises on values the trace knows (`raise raise_of_message(...)` where it is made)."""
    message = str(message)
    return traced(kind, f"{exc_type.__name__}: {message}", exc_type, [ConstantVariable(message)])
