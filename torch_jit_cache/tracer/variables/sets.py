"""SetVariable: a set the trace built (a set literal, a set comprehension, set(...), a set
operation's result), of Python constants.

Only sets built while tracing are tracked: they are private to the trace, so mutating one needs no
replay, and rebuilt after the graph (`reconstruct`) they become a fresh set per call (codegen's
build_constant), one set however often the frame reaches it. Iterating one unrolls in the set's
own order, which for the same constants added by the same code is the order Python's set has at
call time. A set read from the frame stays
opaque (its iteration order depends on its history, which no guard describes). A frozenset of
constants read from the frame (`x in self.NAMES`, a module-level constant) is a constant guarded
by identity (EQUALS_MATCH holds scalars and tuples only; identity also fixes its iteration order),
an empty one by type and length; a frozenset built here is a constant.

Identity costs sharing: instances of one class that each hold their own equal frozenset compile
once each (a class attribute or a global is one object, shared).
"""
from __future__ import annotations

import operator

from ...trace_result import ConstantOutput, GuardKind
from .base import MethodVariable, VariableTracker, unsupported
from .constant import ConstantVariable, is_constant_value


def constants_of(items, what: str) -> list:
    if not all(i.is_python_constant() for i in items):
        unsupported(f"{what} of values that are not Python constants")
    values = [i.as_python_constant() for i in items]
    if not all(is_constant_value(v) for v in values):
        unsupported(f"{what} of values that are not hashable constants")
    return values


def _operand(v, what: str):
    """The other side of a set operation: a set the trace built, or any constant (an iterable of
    unhashable items makes the operation raise, which is refused where it is called)."""
    if isinstance(v, SetVariable):
        return set(v.items)
    if not v.is_python_constant():
        unsupported(f"{what} with {v}")
    return v.as_python_constant()


# In-place operators and methods that change the set, by the out-of-place operation they apply.
_INPLACE = {"|=": operator.or_, "&=": operator.and_, "-=": operator.sub, "^=": operator.xor}
_UPDATES = {"update": set.update, "intersection_update": set.intersection_update,
            "difference_update": set.difference_update,
            "symmetric_difference_update": set.symmetric_difference_update}
_PURE = ("union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset",
         "isdisjoint", "copy", "__contains__", "__len__")


class SetVariable(VariableTracker):
    def __init__(self, items=()):
        super().__init__(None)
        self.items = set(items)

    def python_type(self):
        return set

    def as_python_constant(self):
        return set(self.items)   # a copy: folding an operation never changes this set

    def reconstruct(self, outputs):
        # Reached twice (a local and a method's self), it is one set: one spec, built once.
        return outputs.once(self, lambda: ConstantOutput(set(self.items)))

    def unpack(self, tx):
        return [ConstantVariable(v) for v in self.items]

    def truthy(self, tx):
        return bool(self.items)

    def var_getattr(self, tx, name):
        return MethodVariable(self, name)

    def inplace(self, tx, symbol, other):
        """`s |= t` and friends change s itself (every name bound to it sees the change)."""
        value = _operand(other, f"set {symbol}")
        try:
            self.items = set(_INPLACE[symbol](self.items, value))
        except TypeError as e:
            unsupported(f"set {symbol} raised {e!r}")
        return self

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            unsupported(f"set.{name} with keyword arguments")
        values = constants_of(args, f"set.{name}") if name in ("add", "discard", "remove") \
            else [_operand(a, f"set.{name}") for a in args]
        try:
            if name in ("add", "discard", "remove") and len(values) == 1:
                if name == "remove" and values[0] not in self.items:
                    unsupported(f"KeyError {values[0]!r}")
                getattr(self.items, name)(values[0])
                return ConstantVariable(None)
            if name == "clear" and not values:
                self.items.clear()
                return ConstantVariable(None)
            if name in _UPDATES:
                _UPDATES[name](self.items, *values)
                return ConstantVariable(None)
            if name in _PURE:
                return tx.wrap_constant(getattr(self.items, name)(*values))
        except TypeError as e:
            unsupported(f"set.{name} raised {e!r}")
        unsupported(f"set.{name}")   # pop() (an arbitrary item), and anything else

    def __repr__(self):
        return f"SetVariable({self.items!r})"


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def wrap_frozenset(tx, value, source, g):
    """A frozenset of constants, else None (left to the rules after this one)."""
    if not is_constant_value(value):
        return None
    g(GuardKind.TYPE_MATCH, frozenset)
    if value:
        g(GuardKind.ID_MATCH, value)
    else:
        g(GuardKind.LENGTH, 0)
    return ConstantVariable(value, source)
