"""CPython's own checks of list, tuple and dict methods, run on a stand-in of the same length.

Where the model of a list or tuple method (containers.py) meets arguments it does not take (an
index that is a str, a slice with step 0, an extended slice given the wrong number of items, a
method called with too many or too few arguments), Python raises an error that depends only on
the sequence's length and the arguments, never on the items. So the same call is made on a
stand-in: a real list (or tuple) of that many placeholder items, with the arguments' constant
values, and a list tracker given as an argument stands in as a list of placeholders of its
length. What that call raises is raised in the trace, as eager raises it (an enclosing `try` or
`assertRaises` catches it there); where it raises nothing, the model's gap stays a graph break.

    raise_stand_in_error(tx, kind, length, name, args, kwargs, reason)   # never returns
    check_comparing_call(tx, kind, name, args, kwargs)   # index/count/remove: the argument checks

Methods that compare items (index, count, remove) are checked on an empty stand-in with a
placeholder for the value: their checks of the other arguments run before any comparison, and
the one outcome that needs the items (ValueError: not found) is not taken from the stand-in.
A dict's stand-in has its keys (exact constants) and placeholder values: `d.popitem()` of an
empty dict, `d.pop(k)` of a missing key, `d.popitem(1)` raise there as in eager.
"""
from __future__ import annotations

from ..base import TracedRaise, provided, unsupported
from ..constant import raise_of_message

_MARK = "<stand-in item>"


class _Item:
    """A placeholder item: equal to itself alone, hashable, with a repr no message can mistake."""
    __slots__ = ()

    def __repr__(self):
        return _MARK


_UNKNOWN = object()


def _stand_in_value(tracker):
    """The value an argument tracker stands for in the stand-in call: its constant, a list of
    placeholders for a list or tuple tracker (its items are never read by these checks), or
    _UNKNOWN. A list or tuple tracker is one whose class says `kind` list or tuple
    (containers.BaseListVariable, which imports this module)."""
    if tracker.is_python_constant():
        try:
            return tracker.as_python_constant()
        except Exception:  # noqa: BLE001 - a tracker that cannot be made a value: no check
            return _UNKNOWN
    if getattr(type(tracker), "kind", None) in (list, tuple):
        return tracker.kind(_Item() for _ in tracker.items)
    return _UNKNOWN


def _raise_error(tx, error: Exception, what: str):
    constant_exception, traced_raise = provided("constant_exception"), provided("traced_raise")
    if _MARK in str(error):
        unsupported(f"{what} raised {type(error).__name__} naming an item")
    made = constant_exception(tx, error)
    if made is None:
        unsupported(f"{what} raised {error!r}")
    raise traced_raise(made) from None


def raise_stand_in_error(tx, kind: type, length, name: str, args: list, kwargs: dict, reason: str):
    """`kind.name` on a stand-in of `length` items (a list or tuple; for a dict, `length` is its
    keys, which are exact constants, and the values are placeholders): what it raises, raised in
    the trace; where it raises nothing (or an argument has no stand-in value) a graph break with
    `reason`."""
    values = [_stand_in_value(a) for a in args]
    keywords = {k: _stand_in_value(v) for k, v in kwargs.items()}
    if any(v is _UNKNOWN for v in [*values, *keywords.values()]):
        unsupported(reason)
    if kind is dict:
        stand_in = {k: _Item() for k in length}
    else:
        stand_in = kind(_Item() for _ in range(length))
    try:
        getattr(stand_in, name)(*values, **keywords)
    except Exception as error:  # noqa: BLE001 - Python's own error on these arguments: what eager raises
        _raise_error(tx, error, f"{kind.__name__}.{name}")
    unsupported(reason)


def check_comparing_call(tx, kind: type, name: str, args: list, kwargs: dict):
    """index, count or remove: raise in the trace the error their other arguments cause (a wrong
    number of arguments, a start that is no index); return where they pass."""
    values = [_Item()] + [_stand_in_value(a) for a in args[1:]]
    keywords = {k: _stand_in_value(v) for k, v in kwargs.items()}
    if not args:
        values = []
    if any(v is _UNKNOWN for v in [*values, *keywords.values()]):
        unsupported(f"{kind.__name__}.{name} with arguments that are not constants")
    try:
        getattr(kind(), name)(*values, **keywords)
    except ValueError:
        if not args or kwargs:
            unsupported(f"{kind.__name__}.{name} raised ValueError on its arguments")
        return   # not found in the empty stand-in: the arguments passed every check
    except Exception as error:  # noqa: BLE001 - Python's own error on these arguments
        _raise_error(tx, error, f"{kind.__name__}.{name}")
    if name == "count":
        return
    unsupported(f"{kind.__name__}.{name} on an empty stand-in did not raise")


def raise_not_found(tx, kind: type, name: str, value):
    """index or remove found no item equal to `value`: their ValueError, raised in the trace (its
    message read from the same call on an empty stand-in); list.index of a value that is not a
    constant, whose message shows the value's repr: a graph break."""
    try:
        getattr(kind(), name)(value.as_python_constant() if value.is_python_constant() else _Item())
    except ValueError as error:   # a message that would show the repr of a non-constant: a break
        _raise_error(tx, error, f"{kind.__name__}.{name}")
    unsupported(f"{kind.__name__}.{name} of a value not found")


# Methods whose errors depend on the length and the arguments alone, raised from the stand-in.
CHECKED_ON_STAND_IN = frozenset({"__getitem__", "__setitem__", "__delitem__", "insert", "pop", "__len__",
                                  "__mul__", "__rmul__", "__imul__"})


def is_iterable(value) -> bool:
    try:
        iter(value)
    except TypeError:
        return False
    return True


def items_equal(tx, item, value, what: str) -> bool:
    """`item == value` as list.index, count and remove compare (identity first, then the item's
    `==`, reflected as Python reflects it: a user class's __eq__ is traced, operators.py); the
    answer must be a constant, else a graph break."""
    if item is value:
        return True
    if item.is_python_constant() and value.is_python_constant():
        a, b = item.as_python_constant(), value.as_python_constant()
        return a is b or a == b
    from ..constant import ConstantVariable
    compare_op, is_op, is_user_object = provided("compare_op"), provided("is_op"), provided("is_user_object")

    # A number, string or None is never the very object a user class's instance is.
    if not any(isinstance(a, ConstantVariable) and is_user_object(b) for a, b in ((item, value), (value, item))) \
            and is_op(tx, item, value, False).as_python_constant():
        return True
    answer = compare_op(tx, "==", item, value)
    if not answer.is_python_constant():
        unsupported(f"{what} over an item compared to a value that is not a constant ({answer})")
    return bool(answer.as_python_constant())


def arity_error(base: type, name: str, args: list, kwargs: dict):
    """Raise, as traced code raising it, the TypeError that `base.name` called with these many
    arguments raises: the very message of CPython's own check, which runs before the method reads
    an argument, so placeholders stand for the arguments. Where that call raises anything but a
    TypeError about the arguments (one a placeholder's value caused) the trace breaks instead."""
    try:
        getattr(base(), name)(*[None] * len(args), **dict.fromkeys(kwargs))
    except TypeError as error:
        if "argument" in str(error):
            raise raise_of_message(TracedRaise, TypeError, error) from None
    except Exception:   # noqa: BLE001, S110 - any other outcome is not an arity error
        pass
    unsupported(f"{base.__name__}.{name} called with {len(args)} args and {list(kwargs)}")
