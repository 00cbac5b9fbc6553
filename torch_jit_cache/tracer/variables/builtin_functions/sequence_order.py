"""Order comparisons (`<`, `<=`, `>`, `>=`) of two lists or two tuples whose items are no constants,
as CPython's list_richcompare and tuplerichcompare run them, and the TypeError of an order
comparison that every candidate method refuses.

Sequences: the first index where the items differ is found with `==` (identity first, as
PyObject_RichCompareBool), the lengths read again at each step (an item's `__eq__` may shrink a
list); where one runs out, the lengths are compared; else the two items at that index are compared
with the operator itself. Item comparisons are compare_op's (a user class's Python dunders, traced).

Refusal: `a < b` where a user object's class and the other operand's builtin type both answer
NotImplemented (or define nothing) raises Python's TypeError, "'<' not supported between instances
of 'A' and 'B'", in the trace. Only where the other operand's type is known to refuse an object of
a user class (lists, tuples, dicts, sets, and constants of the builtin scalar types); anything
else (a tensor, whose comparisons take anything) is left to the caller's break.
"""
from __future__ import annotations

from ..base import VariableTracker
from ..constant import COMPARE_OPERATORS, ConstantVariable
from ..collections.containers import BaseListVariable
from ..collections.dicts import DictVariable
from ..collections.sets import SetVariable
from ..python_objects.exceptions import constant_exception, traced_raise

# Builtin types whose comparisons answer NotImplemented for an object of a class of their own user.
_REFUSING_CONSTANTS = (int, float, str, bytes, bool, type(None), tuple)


def sequence_order(tx, symbol: str, a, b, compare, item_equal) -> VariableTracker | None:
    """`a symbol b` for two lists or two tuples (exactly those classes), or None where they are not."""
    kind = a.python_type() if isinstance(a, BaseListVariable) else None
    if kind not in (list, tuple) or not isinstance(b, BaseListVariable) or b.python_type() is not kind:
        return None
    i = first_difference(tx, a, b, item_equal)
    if i >= len(a.items) or i >= len(b.items):
        return ConstantVariable(COMPARE_OPERATORS[symbol](len(a.items), len(b.items)))
    return compare(tx, symbol, a.items[i], b.items[i])


def first_difference(tx, a, b, item_equal) -> int:
    """The first index where two sequences' items differ by `item_equal`, or where one ran out; the
    lengths are read again at each step (an item's `__eq__` may shrink a list), and the caller reads
    them again after (CPython compares the lengths where either ran out by then)."""
    i = 0
    while i < len(a.items) and i < len(b.items):
        if not item_equal(tx, a.items[i], b.items[i]):
            break
        i += 1
    return i


def refuses_user_objects(v) -> bool:
    """Whether v's type answers NotImplemented when compared with an object of a user class."""
    if isinstance(v, (BaseListVariable, DictVariable, SetVariable)):
        return v.python_type() in (list, tuple, dict, set, frozenset)
    return isinstance(v, ConstantVariable) and type(v.value) in _REFUSING_CONSTANTS


def raise_order_refused(tx, symbol: str, a, b):
    """Python's TypeError for `a symbol b` that no candidate method answers."""
    message = (f"'{symbol}' not supported between instances of '{a.python_type().__name__}' and "
               f"'{b.python_type().__name__}'")
    raise traced_raise(constant_exception(tx, TypeError(message)))
