"""Python operators on trackers: binary, in-place, comparison, identity, membership, unary.

Constants fold in Python; any tensor operand makes a graph node; sequences concatenate.
"""
from __future__ import annotations

import operator
import types

import torch

from ....guard.attribute_lookup import MISSING, type_lookup
from ..base import VariableTracker, provides, unsupported
from .frame_identity import both_pinned, pinned_relation, process_lived_identity, types_apart
from ..constant import BINARY_OPERATORS, COMPARE_OPERATORS, ConstantVariable
from ..collections.containers import BaseListVariable, ListVariable
from ..collections.dicts import DictVariable, dict_equal
from ..collections.iterators import IteratorVariable
from ..collections.ranges import RangeVariable
from .sequence_order import first_difference, raise_order_refused, refuses_user_objects, sequence_order
from ..torch_objects.numpy_values import NumpyArrayVariable, call_numpy, numpy_number_as_python
from ..torch_objects import numpy_tensors
from ..torch_objects.numpy_tensors import NumpyNdarrayVariable
from ..python_objects.exceptions import constant_exception, traced_raise
from ..collections.sets import OPERATORS as SET_OPERATORS, SetVariable, compare as set_compare, refused_operator
from ..torch_objects.symbolic import SymNodeVariable
from ..torch_objects.tensor import TensorVariable, call_op
from ..torch_objects.value_sizes import Capture, known_value

# Operands a unary operator makes a graph node of: tensors, and symbolic sizes (symbolic.py).
_GRAPH_VALUES = (TensorVariable, SymNodeVariable)

_INPLACE = {"+=", "&=", "//=", "<<=", "@=", "*=", "%=", "|=", "**=", ">>=", "-=", "/=", "^="}


def _const_fold(tx, fn, *vs):
    try:
        return tx.wrap_constant(fn(*[v.as_python_constant() for v in vs]))
    except (ArithmeticError, LookupError, TypeError, ValueError) as e:
        made = constant_exception(tx, e)   # Python's own error on these constants: eager's too
        if made is None:
            unsupported(f"{getattr(fn, '__name__', fn)} raised {e!r} on constants")
    raise traced_raise(made)


def binary_op(tx, symbol: str, a: VariableTracker, b: VariableTracker) -> VariableTracker:
    base = symbol.rstrip("=") if symbol in _INPLACE else symbol
    if isinstance(a, SetVariable) and symbol in ("|=", "&=", "-=", "^="):
        return a.inplace(tx, symbol, b)
    if isinstance(a, NumpyNdarrayVariable) or isinstance(b, NumpyNdarrayVariable):
        return numpy_tensors.binary(tx, symbol, BINARY_OPERATORS[base], a, b)
    if isinstance(a, NumpyArrayVariable) or isinstance(b, NumpyArrayVariable):
        if symbol in _INPLACE and isinstance(a, NumpyArrayVariable):
            unsupported(f"operator {symbol} on a numpy array (it changes the array)")
        return call_numpy(BINARY_OPERATORS[base], f"operator {base}", [a, b], {})
    if symbol in getattr(a, "own_inplace", ()):
        return a.inplace(tx, symbol, b)   # a Counter's own in-place operators change it (counters.py)
    if base == "|" and isinstance(a, DictVariable) and a.python_type() is dict and \
            (symbol == "|=" or isinstance(b, DictVariable) and b.python_type() is dict):
        # dict's own | and |= (a subclass on the right could reflect first: left to the rest)
        return a.merge(tx, b, in_place=symbol == "|=")
    if symbol in _INPLACE and not isinstance(a, (TensorVariable, ListVariable)) and \
            not (_is_user_object(a) and isinstance(type_lookup(a.python_type(), _DUNDERS[symbol]), types.FunctionType)):
        # `a op= b` calls a.__iop__ only where a's type has one; numbers, strings and tuples have
        # none (they are immutable), so Python computes `a op b` and rebinds the name. The
        # out-of-place form is also the only one an fx graph can hold: `0 += t` is no Python.
        symbol = base
    fn = BINARY_OPERATORS[symbol]
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return call_op(tx, fn, [numpy_number_as_python(a), numpy_number_as_python(b)], {})
    if (isinstance(a, SymNodeVariable) or isinstance(b, SymNodeVariable)) and _is_number(a) and _is_number(b):
        return call_op(tx, fn, [a, b], {})
    if symbol in ("+", "*"):
        same = _tuple_kept(a, b, symbol)
        if same is not None:
            return same
    if isinstance(a, BaseListVariable):
        if symbol == "+" and isinstance(b, BaseListVariable) and a.kind is not b.kind:
            _refused_concatenation(tx, a, b)   # `l += t` is list.__iadd__: it takes any iterable
        if base == "+" and isinstance(b, BaseListVariable) and a.kind is b.kind:
            if symbol == "+=":
                a.call_method(tx, "extend", [b], {})
                return a
            return a.made_by_base(a.items + b.items)
        if symbol == "+=":  # list += any iterable extends in place
            a.call_method(tx, "extend", [b], {})
            return a
        if base == "*" and b.is_python_constant() and isinstance(b.as_python_constant(), int):
            if symbol == "*=":  # in place: every other name bound to the list sees it
                a.mutating(tx)
                a.items[:] = a.items * b.as_python_constant()
                return a
            return a.made_by_base(a.items * b.as_python_constant())
    if isinstance(a, SetVariable) or isinstance(b, SetVariable):
        refused_operator(symbol, a, b)   # raises where Python does, for an operand the set refuses
        if symbol in SET_OPERATORS:
            made = a.operate(tx, symbol, b, False) if isinstance(a, SetVariable) else b.operate(tx, symbol, a, True)
            if made is not None:
                return made
    if _is_user_object(a) or _is_user_object(b):
        return _user_binary(tx, symbol, base, a, b)
    if a.is_python_constant() and b.is_python_constant():
        return _const_fold(tx, fn, a, b)
    unsupported(f"operator {symbol} on {a} and {b}")


def _exact_tuple(v) -> bool:
    return isinstance(v, BaseListVariable) and v.kind is tuple and v.python_type() is tuple


def _tuple_kept(a, b, symbol: str):
    """The operand CPython hands back itself, not a copy, for an exact tuple: `t * 1`, `1 * t`,
    `t + ()` and `() + t` (`id(t * 1) == id(t)`); else None."""
    for t, other in ((a, b), (b, a)):
        if not _exact_tuple(t):
            continue
        if symbol == "*" and other.is_python_constant() and type(other.as_python_constant()) is int \
                and other.as_python_constant() == 1:
            return t
        if symbol == "+" and _exact_tuple(other) and not other.items:
            return t
    return None


def _refused_concatenation(tx, a, b) -> None:
    """`a + b` of a tuple and a list (either way round, subclasses of them included): the left
    one's __add__ refuses the other kind and the right one has no __radd__, so Python raises its
    TypeError, naming the right operand's class; raised in the trace. A class with an __add__ or
    __radd__ of its own is left to the rest."""
    kind, other = a.kind, b.python_type()
    if type_lookup(a.python_type(), "__add__") is not vars(kind)["__add__"] or \
            type_lookup(other, "__radd__") is not MISSING:
        return
    message = f'can only concatenate {kind.__name__} (not "{other.__name__}") to {kind.__name__}'
    raise traced_raise(constant_exception(tx, TypeError(message)))


@provides
@provides
def compare_op(tx, symbol: str, a, b) -> VariableTracker:
    fn = COMPARE_OPERATORS[symbol]
    if hasattr(a, "same_object") or hasattr(b, "same_object"):   # id() of a container the trace built
        token, other = (a, b) if hasattr(a, "same_object") else (b, a)
        if symbol not in ("==", "!="):
            unsupported(f"comparison {symbol} of id() of an object built in the trace")
        return ConstantVariable(token.same_object(other) == (symbol == "=="))
    if getattr(a, "caller_exception", False) or getattr(b, "caller_exception", False):
        # exceptions.CallerExceptionVariable: None or an exception, unknown to the trace.
        unsupported(f"comparison {symbol} between {a} and {b}: the exception the caller handles is unknown")
    if isinstance(a, NumpyNdarrayVariable) or isinstance(b, NumpyNdarrayVariable):
        return numpy_tensors.binary(tx, symbol, fn, a, b)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        return call_op(tx, fn, [a, b], {})
    if isinstance(a, SymNodeVariable) or isinstance(b, SymNodeVariable):
        if _is_number(a) and _is_number(b):
            return call_op(tx, fn, [a, b], {})
        if symbol in ("==", "!=") and (_is_none(a) or _is_none(b)):
            return ConstantVariable(symbol == "!=")
    if isinstance(a, SetVariable) or isinstance(b, SetVariable):
        # Two sets (no order needed), or a set against an object of a type it refuses.
        answer = set_compare(symbol, a, b)
        if answer is None:
            answer = refused_operator(symbol, a, b)
        if answer is not None:
            return answer
    if _is_user_object(a) or _is_user_object(b):
        return _user_compare(tx, symbol, a, b)
    if getattr(a, "compares_as_constant", False) or getattr(b, "compares_as_constant", False):
        # a Counter's own comparisons (a missing key counts zero): run on the real values
        if a.is_python_constant() and b.is_python_constant():
            return _const_fold(tx, fn, a, b)
        unsupported(f"comparison {symbol} of a Counter with counts that are not constants")
    if getattr(a, "own_comparison", False) or getattr(b, "own_comparison", False):
        # a dict subclass object whose class writes its own __eq__ (a dataclass's)
        unsupported(f"comparison {symbol} of {a} and {b}: a dict subclass with its own comparison")
    if symbol in ("==", "!=") and isinstance(a, DictVariable) and isinstance(b, DictVariable):
        equal = dict_equal(a, b)
        if equal is not None:
            return ConstantVariable(equal == (symbol == "=="))
    if a.is_python_constant() and b.is_python_constant():
        return _const_fold(tx, fn, a, b)
    order = sequence_order(tx, symbol, a, b, compare_op, _item_equal) if symbol not in ("==", "!=") else None
    if order is not None:
        return order   # two lists or two tuples, item by item (sequence_order.py)
    if symbol in ("==", "!=") and _is_none(a) != _is_none(b):
        return ConstantVariable(symbol == "!=")
    if symbol in ("==", "!=") and (equal := container_equal(tx, a, b)) is not None:
        return ConstantVariable(equal == (symbol == "=="))
    unsupported(f"comparison {symbol} between {a} and {b}")


def container_equal(tx, a, b):
    """`a == b` for two tuples, two lists or two dicts (exactly those classes, whose == compares
    items) holding trackers, as CPython compares them: lengths (keys), then item by item, each
    pair equal where it is one object or where its own `==` is true (a pair the trace cannot
    compare breaks). An item's `==` may change the containers: a list's lengths are read again at
    each step and compared where one ran out (list_richcompare); a dict whose keys change while
    compared breaks. None where `a` and `b` are not such a pair."""
    kinds = {_compared_kind(a), _compared_kind(b)}
    if None in kinds or len(kinds) != 1:
        return None
    if isinstance(a, DictVariable):
        if a.object_keyed or b.object_keyed:   # Python looks each key up in the other (hash, ==)
            unsupported("== of dicts with objects of the trace as keys")
        if a.items.keys() != b.items.keys():
            return False
        versions = (a.version, b.version)
        for k in list(a.items):
            if not _item_equal(tx, a.items[k], b.items[k]):
                return False
            if (a.version, b.version) != versions:
                unsupported("a dict whose keys changed while it was compared with ==")
        return True
    if len(a.items) != len(b.items):
        return False
    i = first_difference(tx, a, b, _item_equal)
    return len(a.items) == len(b.items) if i >= len(a.items) or i >= len(b.items) else False


def _compared_kind(v):
    """tuple, list or dict where `v` is a tracker of exactly that class, or (for list) of a plain
    subclass of it (list_subclasses.py: list's own ==, which compares any two lists), else None."""
    if isinstance(v, DictVariable):
        return dict if v.python_type() is dict else None
    if isinstance(v, BaseListVariable) and v.python_type() in (tuple, list):
        return v.python_type()
    if isinstance(v, BaseListVariable) and v.kind is list and type_lookup(v.python_type(), "__eq__") is vars(list)["__eq__"]:
        return list
    return None


def _item_equal(tx, x, y) -> bool:
    """One pair of container items: `x is y or bool(x == y)` (PyObject_RichCompareBool)."""
    if x is y:
        return True
    if x.is_python_constant() and y.is_python_constant():
        vx, vy = x.as_python_constant(), y.as_python_constant()
        if vx != vx or vy != vy:   # NaN: equal only as one object, which constants do not say
            unsupported(f"comparison of {x} and {y}: a NaN is equal only to itself")
    elif x.identity_family is not None and x.identity_family == y.identity_family and \
            x.identity_object() is y.identity_object():
        return True
    return compare_op(tx, "==", x, y).truthy(tx)


def symbolic_truth(tx, value):
    """bool() of a symbolic scalar, in the graph: a SymBool is itself, a SymInt or SymFloat is
    `value != 0` (Python's truth of a number), so no guard specializes it. A tensor is its
    `.item()` first, where config.capture_scalar_outputs makes that a symbol (else the break that
    names the switch); `.item()` of a tensor of more than one element raises as bool() does.
    None where `value` is neither."""
    if isinstance(value, TensorVariable):
        if not Capture.current().scalars:
            return None
        value = call_op(tx, "item", [value], {}, method=True)
        if not isinstance(value, SymNodeVariable):   # a constant: its truth
            return ConstantVariable(bool(value.as_python_constant()))
    if not isinstance(value, SymNodeVariable):
        return None
    if value.python_type() is bool:
        return value
    return compare_op(tx, "!=", value, ConstantVariable(0))


# -- operators of user objects: their classes' Python dunders, in Python's order ---------------------
_DUNDERS = {"+": "__add__", "-": "__sub__", "*": "__mul__", "/": "__truediv__", "//": "__floordiv__",
            "%": "__mod__", "**": "__pow__", "@": "__matmul__", "&": "__and__", "|": "__or__",
            "^": "__xor__", "<<": "__lshift__", ">>": "__rshift__"}
_DUNDERS.update({s + "=": "__i" + d[2:] for s, d in list(_DUNDERS.items())})
_REFLECTED = {s: "__r" + d[2:] for s, d in _DUNDERS.items() if not s.endswith("=")}
_COMPARE_DUNDERS = {"==": "__eq__", "!=": "__ne__", "<": "__lt__", "<=": "__le__", ">": "__gt__",
                    ">=": "__ge__"}
_SWAPPED = {"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _is_user_object(v) -> bool:
    """An instance of a user class the trace models (read from the frame or built in the trace)."""
    return getattr(v, "user_operators", False)


provides(_is_user_object, "is_user_object")


def _python_dunder(tx, v, name: str):
    """v's class's `name` as an inlinable function, None where the class has none; refused where it
    is something else (a builtin base's slot)."""
    if not _is_user_object(v):
        return None
    found = type_lookup(v.python_type(), name)
    if found is MISSING or found is getattr(object, name, MISSING):
        return None
    if not isinstance(found, types.FunctionType):
        unsupported(f"{v.python_type().__name__}.{name} is a {type(found).__name__}")
    return v.type_method(tx, name)


def _answer(tx, fn, args):
    """fn(*args) inlined, or None where there is no fn or it returned NotImplemented (Python then
    tries the next candidate)."""
    if fn is None:
        return None
    result = tx.call(fn, args, {})
    return None if isinstance(result, ConstantVariable) and result.value is NotImplemented else result


def _user_binary(tx, symbol: str, base: str, a, b):
    """`a op b` (or `a op= b`) where a user object is involved: a.__op__(b), then b.__rop__(a)."""
    ta, tb = _class_of(a), _class_of(b)
    if symbol != base:   # in place: a.__iop__(b), else the binary form
        result = _answer(tx, _python_dunder(tx, a, _DUNDERS[symbol]), [a, b])
        if result is not None:
            return result
    if tb is not ta and tb is not None and ta is not None and issubclass(tb, ta):
        unsupported(f"operator {base} with a subclass's operand on the right ({tb.__name__})")
    result = _answer(tx, _python_dunder(tx, a, _DUNDERS[base]), [a, b])
    if result is None and tb is not ta:
        result = _answer(tx, _python_dunder(tx, b, _REFLECTED[base]), [b, a])
    if result is not None:
        return result
    unsupported(f"TypeError: operator {base} on {a} and {b}")


def _user_compare(tx, symbol: str, a, b):
    """`a op b` for a comparison where a user object is involved: a.__op__(b), then the reflected
    b.__swapped__(a); `==`/`!=` end in identity (and `!=` in not __eq__, object's __ne__)."""
    ta, tb = _class_of(a), _class_of(b)
    reflected = ("__eq__", "__ne__") if symbol in ("==", "!=") else (_COMPARE_DUNDERS[_SWAPPED[symbol]],)
    if tb is not ta and tb is not None and ta is not None and issubclass(tb, ta) and \
            any(_python_dunder(tx, b, name) is not None for name in reflected):
        # Python asks the subclass's reflected method first; where it has only object's (which
        # answers NotImplemented, or identity for ==, as the last step below does) the order is moot.
        unsupported(f"comparison {symbol} with a subclass's operand on the right ({tb.__name__})")
    for x, y, op in ((a, b, symbol), (b, a, _SWAPPED[symbol])):
        fn = _python_dunder(tx, x, _COMPARE_DUNDERS[op])
        if fn is None and op == "!=":
            # object.__ne__: the inverse of the class's __eq__, unless that is NotImplemented.
            equal = _answer(tx, _python_dunder(tx, x, "__eq__"), [x, y])
            if equal is not None:
                return ConstantVariable(not equal.truthy(tx))
            continue
        result = _answer(tx, fn, [x, y])
        if result is not None:
            return result
    if symbol not in ("==", "!="):
        if all(_is_user_object(v) or refuses_user_objects(v) for v in (a, b)):
            raise_order_refused(tx, symbol, a, b)   # every candidate answered NotImplemented
        unsupported(f"TypeError: comparison {symbol} between {a} and {b}")
    if a is b:
        same = True
    elif isinstance(a, ConstantVariable) or isinstance(b, ConstantVariable):
        same = False   # a user object is no None, number or string
    elif not (hasattr(a, "generic_getattr") or hasattr(b, "generic_getattr")):
        same = pinned_relation(tx, a, b)
        if same is None:
            unsupported(f"identity of {a} and {b}, objects read from the frame")
    else:
        same = False   # one was built in the trace: no other tracker stands for it
    return ConstantVariable(same == (symbol == "=="))


is_user_object = _is_user_object


def _class_of(v):
    return v.python_type() if _is_user_object(v) else None


def _is_number(v) -> bool:
    """A symbolic scalar or an int/float/bool constant: what sym arithmetic takes."""
    return isinstance(v, SymNodeVariable) or (
        isinstance(v, ConstantVariable) and type(v.value) in (int, float, bool))


def _is_none(v) -> bool:
    return isinstance(v, ConstantVariable) and v.value is None


def _never_a_constant(a, b) -> bool:
    """`a` holds an immutable value (a constant: a number, a string, an enum member; or a tuple)
    and `b` stands for a mutable list, dict or set, a tensor or a module: never the same object."""
    immutable = isinstance(a, ConstantVariable) or isinstance(a, BaseListVariable) and a.kind is tuple
    return immutable and (isinstance(b, (ListVariable, DictVariable, SetVariable)) or
                          b.identity_family in ("tensor", "module"))


@provides
def is_op(tx, a, b, invert: bool) -> VariableTracker:
    if a is b:
        same = True
    elif getattr(a, "caller_exception", False) or getattr(b, "caller_exception", False):
        caller, other = (a, b) if getattr(a, "caller_exception", False) else (b, a)
        same = caller.is_same(other)   # exceptions.CallerExceptionVariable
        if same is None:
            unsupported(f"identity test between {a} and {b}: the exception the caller handles is unknown")
    elif a.identity_family is not None and a.identity_family == b.identity_family:
        same = a.identity_object() is b.identity_object()   # both known (base.py)
        if not same and a.identity_family == "tensor" and a.source is not None and b.source is not None:
            # Two frame tensors that are distinct objects now: a later call may pass one twice.
            tx.output.side_effects.pin(a, False, b, f"identity test between {a} and {b}")
    elif _is_none(a) or _is_none(b):
        same = False  # a container, module, tensor or function is never None
    elif "exception" in (a.identity_family, b.identity_family):
        same = False  # an exception the trace made is known to it by that tracker alone
    elif types_apart(a, b) or _never_a_constant(a, b) or _never_a_constant(b, a):
        same = False
    elif any(isinstance(a, kind) and isinstance(b, kind) for kind in (SetVariable, ListVariable, DictVariable)) \
            and None in (a.source, b.source):
        same = False   # two set, list or dict trackers, one made in the trace: a new object is no other
    elif both_pinned(tx, a, b):
        same = a.value is b.value
    elif (same := pinned_relation(tx, a, b)) is not None or (same := process_lived_identity(tx, a, b)) is not None:
        pass
    else:
        unsupported(f"identity test between {a} and {b}")
    return ConstantVariable(same != invert)


def contains_op(tx, item, container, invert: bool) -> VariableTracker:
    if isinstance(container, DictVariable):
        found = container.contains_key(tx, item)
    elif hasattr(container, "contains"):
        found = container.contains(tx, item)   # a ModuleDict, a user object (user_object.py)
    elif isinstance(container, IteratorVariable):
        found = _iterator_contains(container, item)
    elif isinstance(container, BaseListVariable) and not (item.is_python_constant() and container.is_python_constant()):
        found = _sequence_contains(item, container)
    elif isinstance(container, (BaseListVariable, RangeVariable)) or container.is_python_constant():
        if not (item.is_python_constant() and container.is_python_constant()):
            unsupported(f"membership test of {item} in {container}")
        found = item.as_python_constant() in container.as_python_constant()
    else:
        unsupported(f"membership test in {container}")
    return ConstantVariable(found != invert)


def _sequence_contains(item, container) -> bool:
    """`item in seq` for a list or tuple tracker, item by item in order as list_contains compares:
    an item that is the very tracker is found (identity comes first), two constants compare by
    value; any other pair would run an `__eq__` (a tensor's is elementwise): a graph break. So an
    empty sequence, whose length its guard pins, holds nothing."""
    for v in container.items:
        if v is item and not item.is_python_constant():   # constants: by their own objects, below
            return True
        if not (v.is_python_constant() and item.is_python_constant()):
            unsupported(f"membership test of {item} in {container}")
        value, target = v.as_python_constant(), item.as_python_constant()
        if value is target or value == target:
            return True
    return False


def _iterator_contains(it, item) -> bool:
    """`item in it` for an iterator: Python takes items until one is `item` or equal to it, and
    leaves the iterator just past it (exhausted when none is). Only over constants, all checked
    before any is taken: another item's __eq__ may say anything."""
    if not item.is_python_constant() or not all(v.is_python_constant() for v in it.rest()):
        unsupported(f"membership test of {item} in an iterator over values that are not all constants")
    target = item.as_python_constant()
    while (v := it.next_item()) is not None:
        value = v.as_python_constant()
        if value is target or value == target:
            return True
    return False


_UNARY = {"UNARY_NEGATIVE": operator.neg, "UNARY_POSITIVE": operator.pos,
          "UNARY_INVERT": operator.invert}


def unary_op(tx, opname: str, a) -> VariableTracker:
    if opname == "UNARY_NOT":
        return ConstantVariable(not a.truthy(tx))
    fn = _UNARY[opname]
    if isinstance(a, NumpyNdarrayVariable):
        return numpy_tensors.unary(tx, fn, a)
    if isinstance(a, _GRAPH_VALUES):
        return call_op(tx, fn, [a], {})
    if a.is_python_constant():
        return _const_fold(tx, fn, a)
    unsupported(f"{opname} on {a}")


def getitem(tx, obj, key) -> VariableTracker:
    if isinstance(obj, TensorVariable):
        if isinstance(key, SymNodeVariable) and isinstance(key.example, torch.SymInt):
            # t[i] is t.select(0, i); torch's Python indexing takes no SymInt (`t[x.item()]`)
            return call_op(tx, torch.select, [obj, ConstantVariable(0), key], {})
        return call_op(tx, operator.getitem, [obj, key], {})
    if isinstance(key, TensorVariable) and _is_sequence(obj):
        key = _known_index(tx, key)
    if hasattr(obj, "getitem"):
        return obj.getitem(tx, key)
    if obj.is_python_constant() and key.is_python_constant():
        return _const_fold(tx, operator.getitem, obj, key)
    unsupported(f"subscript of {obj}")


def _is_sequence(obj) -> bool:
    """A tuple, list, torch.Size, range or str the trace holds (constant or tracker): what its
    subscript does with a tensor index is `operator.index(tensor)`."""
    if isinstance(obj, RangeVariable) or isinstance(obj, BaseListVariable) and obj.python_type() in (list, tuple):
        return True   # a subclass's own __getitem__ would be given the tensor itself
    return obj.is_python_constant() and type(obj.as_python_constant()) in (tuple, list, torch.Size, range, str)


def _known_index(tx, key) -> VariableTracker:
    """A tensor used as a sequence's index, where its value is known to the trace: a tensor made
    from constants alone, whose fake tensor carries that value (value_sizes.known_value), fixed by
    the guards on those constants. Python reads it with `operator.index` (an integer tensor of one
    element); its error on another tensor is raised in the trace. Any other tensor's value is data:
    a break."""
    value = known_value(key.example)
    if value is None:
        unsupported(f"a tensor whose value the trace does not know ({key}) used as a sequence index")
    try:
        return ConstantVariable(operator.index(value))
    except TypeError as e:
        raise traced_raise(constant_exception(tx, TypeError(str(e)))) from None


def setitem(tx, obj, key, value) -> None:
    if isinstance(obj, TensorVariable):
        call_op(tx, operator.setitem, [obj, key, value], {})
        return
    if hasattr(obj, "setitem"):
        obj.setitem(tx, key, value)
        return
    unsupported(f"item assignment on {obj}")


def delitem(tx, obj, key) -> None:
    if hasattr(obj, "delitem"):
        obj.delitem(tx, key)
        return
    unsupported(f"item deletion on {obj}")


def _table() -> dict:
    """operator.f -> how its call runs on trackers: the very operations the opcodes run."""
    table = {}
    for symbol, fn in BINARY_OPERATORS.items():
        table[fn] = lambda tx, a, b, symbol=symbol: binary_op(tx, symbol, a, b)
    for symbol, fn in COMPARE_OPERATORS.items():
        table[fn] = lambda tx, a, b, symbol=symbol: compare_op(tx, symbol, a, b)
    for opname, fn in _UNARY.items():
        table[fn] = lambda tx, a, opname=opname: unary_op(tx, opname, a)
    table.update({
        operator.not_: lambda tx, a: unary_op(tx, "UNARY_NOT", a),
        operator.truth: lambda tx, a: ConstantVariable(a.truthy(tx)),
        operator.is_: lambda tx, a, b: is_op(tx, a, b, invert=False),
        operator.is_not: lambda tx, a, b: is_op(tx, a, b, invert=True),
        operator.contains: lambda tx, container, item: contains_op(tx, item, container, invert=False),
        operator.getitem: getitem,
        operator.setitem: lambda tx, obj, key, value: setitem(tx, obj, key, value) or ConstantVariable(None),
        operator.delitem: lambda tx, obj, key: delitem(tx, obj, key) or ConstantVariable(None),
    })
    return table


# The functions of the operator module whose calls on non-constant arguments run as their
# operator would (`operator.getitem(xs, 1)` is `xs[1]`); constants alone fold in functions.py.
OPERATOR_CALLS = _table()


def call_operator(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """`fn(*args)` for a function of OPERATOR_CALLS."""
    run = OPERATOR_CALLS[fn]
    if kwargs or len(args) != run.__code__.co_argcount - 1 - len(run.__defaults__ or ()):
        unsupported(f"operator.{fn.__name__} called with {len(args)} args and {list(kwargs)}")
    return run(tx, *args)


_MUTABLE_TYPES = (list, dict, set, bytearray)


def immutable_constant(v) -> bool:
    """Whether tracker `v` is a constant no call can change (not a list, dict, set or bytearray)."""
    return v.is_python_constant() and not isinstance(v.as_python_constant(), _MUTABLE_TYPES)


def of_operator_module(fn) -> bool:
    owner = getattr(fn, "__self__", None)
    return isinstance(owner, types.ModuleType) and owner.__name__ in ("operator", "_operator")


def operator_twin(fn):
    """The function of OPERATOR_CALLS that `fn` is, or is the namesake of in another copy of the
    operator module (a fresh import of `_operator`, as CPython's own tests make), or None."""
    if fn in OPERATOR_CALLS:
        return fn
    if of_operator_module(fn):
        twin = getattr(operator, fn.__name__, None)
        return twin if twin in OPERATOR_CALLS else None
    return None
