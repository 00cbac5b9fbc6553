"""repr() and str() of a list, tuple or dict tracker, as CPython's own list_repr, tuple_repr and
dict_repr compute them, item by item.

Which containers: exactly list, tuple or dict (a subclass may write its own __repr__; a namedtuple's
names its fields), whose items are constants, sets, such containers, or user objects whose class
writes __repr__ in Python (run as Python runs it, through the type, so what it raises is raised in the
trace where a try block or assertRaises catches it). A container met again inside itself is
written `[...]`, `(...)` or `{...}`, as Py_ReprEnter makes CPython write it. Anything else (a
tensor, an object with a builtin __repr__) is refused: `None` is returned, and the caller's own
path (a fold of constants, or a break) decides.
"""
from __future__ import annotations

import types

from ....guard.attribute_lookup import type_lookup
from ..base import unsupported
from ..constant import ConstantVariable
from ..collections.containers import BaseListVariable
from ..collections.dicts import DictVariable
from ..collections.object_keys import ObjectKey
from ..collections.sets import SetVariable

_RECURSED = {list: "[...]", tuple: "(...)", dict: "{...}"}


def container_repr(tx, v):
    """repr(v) as a str, for a container tracker of exactly list, tuple or dict; None otherwise."""
    if not _is_container(v):
        return None
    return _repr(tx, v, [])


def _is_container(v) -> bool:
    return isinstance(v, (BaseListVariable, DictVariable)) and v.python_type() in (list, tuple, dict)


def _repr(tx, v, active: list) -> str:
    if _is_container(v):
        kind = v.python_type()
        if any(v is a for a in active):
            return _RECURSED[kind]
        active.append(v)
        try:
            if kind is dict:
                parts = [f"{_repr(tx, _key(k), active)}: {_repr(tx, item, active)}" for k, item in v.items.items()]
                return "{" + ", ".join(parts) + "}"
            parts = [_repr(tx, item, active) for item in v.items]
            if kind is tuple:
                return "(" + parts[0] + ",)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
            return "[" + ", ".join(parts) + "]"
        finally:
            active.pop()
    if isinstance(v, ConstantVariable):
        return repr(v.value)
    if isinstance(v, SetVariable):
        return v.text()   # in its own order (sets.py)
    if getattr(v, "user_operators", False) and isinstance(type_lookup(v.python_type(), "__repr__"),
                                                           types.FunctionType):
        result = tx.call(v.type_method(tx, "__repr__"), [v], {})
        value = result.as_python_constant() if result.is_python_constant() else None
        if type(value) is not str:
            unsupported(f"{v.python_type().__name__}.__repr__ returned {result}, not a str constant")
        return value
    if v.is_python_constant():
        return repr(v.as_python_constant())
    unsupported(f"repr() of {v} inside a container")


def _key(k):
    return k.tracker if type(k) is ObjectKey else ConstantVariable(k)   # an object of the trace: its own repr
