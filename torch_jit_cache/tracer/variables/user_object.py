"""UserObjectVariable: an instance of a plain user class (not a module) read from the frame.

Its attributes are read through the object's source (`L['self'].k`), so each value read is
guarded where it lives (EQUALS_MATCH on constants, TENSOR_MATCH on tensors); the object itself is
guarded only by type, so another instance holding the same values hits the same entry. Methods
defined in Python are inlined with the object as `self`; attributes resolve in Python's order
(attribute.py). Objects whose attribute lookup is customised (__getattr__, __getattribute__) are
refused. Implicit special-method calls (`len(obj)`) find the method on the type (`type_method`).
Where it leaves the trace it is the very object, loaded again from its source, after the stores
the trace made to it were replayed (side_effects.py).
"""
from __future__ import annotations

import inspect
import types

from ...attribute_lookup import has_generic_getattribute, type_lookup
from ...sources import AttrSource
from ...trace_result import SourceOutput
from .attribute import delete_attribute, has_attribute, read_attribute, store_attribute
from .base import VariableTracker, unsupported

_MISSING = object()


def is_plain_user_object(value) -> bool:
    cls = type(value)
    if cls.__module__ in ("builtins",) or not hasattr(value, "__dict__"):
        return False
    if not has_generic_getattribute(cls):
        return False
    return inspect.getattr_static(cls, "__getattr__", _MISSING) is _MISSING


class UserObjectVariable(VariableTracker):
    def __init__(self, value, source):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        return read_attribute(tx, self, self.value, name)

    def has_attribute(self, tx, name: str) -> bool:
        return has_attribute(tx, self, self.value, name)

    def var_setattr(self, tx, name: str, value) -> None:
        store_attribute(tx, self, self.value, name, value)

    def var_delattr(self, tx, name: str) -> None:
        delete_attribute(tx, self, self.value, name)

    def truthy(self, tx) -> bool:
        cls = type(self.value)
        if any(inspect.getattr_static(cls, m, _MISSING) is not _MISSING for m in ("__bool__", "__len__")):
            unsupported(f"truth value of a {cls.__name__} (it defines __bool__ or __len__)")
        return True

    def type_method(self, tx, name: str):
        """The function `name` on the object's class, as an implicit special-method call (`len(o)`)
        finds it, read as `type(o).name` and guarded there by identity."""
        fn = type_lookup(type(self.value), name)
        if not isinstance(fn, types.FunctionType):
            unsupported(f"{type(self.value).__name__}.{name} is not a Python function")
        return tx.wrap(fn, AttrSource(AttrSource(self.source, "__class__"), name))

    def reconstruct(self, outputs):
        # The very object, loaded again: attribute stores the trace made are replayed on it first
        # (side_effects.py), so it is the object eager code returns, in the state it leaves it in.
        return SourceOutput(self.source)

    def __repr__(self):
        return f"UserObjectVariable({type(self.value).__name__} from {self.source})"
