"""UserObjectVariable: an instance of a plain user class (not a module) read from the frame.

Its attributes are read through the object's source (`L['self'].k`), so each value read is
guarded where it lives (EQUALS_MATCH on constants, TENSOR_MATCH on tensors); the object itself is
guarded only by type, so another instance holding the same values hits the same entry. Methods
defined in Python are inlined with the object as `self`. Objects whose attribute lookup is
customised (__getattr__, __getattribute__, descriptors other than functions) are refused.
"""
from __future__ import annotations

import inspect
import types

from ...sources import AttrSource
from ...trace_result import GuardKind
from .base import VariableTracker, unsupported
from .functions import UserFunctionVariable, UserMethodVariable

_MISSING = object()


def is_plain_user_object(value) -> bool:
    cls = type(value)
    if cls.__module__ in ("builtins",) or not hasattr(value, "__dict__"):
        return False
    if cls.__getattribute__ is not object.__getattribute__:
        return False
    return inspect.getattr_static(cls, "__getattr__", _MISSING) is _MISSING


class UserObjectVariable(VariableTracker):
    def __init__(self, value, source):
        super().__init__(source)
        self.value = value

    def python_type(self):
        return type(self.value)

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if self.source is None:
            unsupported(f"attribute {name!r} of an object with no source")
        cls = type(self.value)
        class_attr = inspect.getattr_static(cls, name, _MISSING)
        instance_dict = vars(self.value)
        # A data descriptor on the class wins over the instance dict; functions do not.
        is_data_descriptor = class_attr is not _MISSING and hasattr(type(class_attr), "__set__")
        if name in instance_dict and not is_data_descriptor:
            return tx.wrap(instance_dict[name], AttrSource(self.source, name))
        if isinstance(class_attr, types.FunctionType):
            fsrc = AttrSource(AttrSource(self.source, name), "__func__")
            # `obj.name.__func__ is class_attr`: fails once the instance gets an attribute of that
            # name (a plain function or value has no __func__) or the class's method is replaced.
            tx.output.add_guard(fsrc, GuardKind.ID_MATCH, class_attr)
            return UserMethodVariable(UserFunctionVariable(class_attr, fsrc), self)
        if isinstance(class_attr, staticmethod):
            return tx.wrap(class_attr.__func__, AttrSource(self.source, name))
        if class_attr is not _MISSING and not hasattr(class_attr, "__get__"):
            return tx.wrap(class_attr, AttrSource(self.source, name))  # a plain class attribute
        if class_attr is _MISSING:
            unsupported(f"AttributeError: {cls.__name__!r} object has no attribute {name!r}")
        unsupported(f"attribute {name!r} of {cls.__name__} is a {type(class_attr).__name__}")

    def truthy(self, tx) -> bool:
        cls = type(self.value)
        if any(inspect.getattr_static(cls, m, _MISSING) is not _MISSING for m in ("__bool__", "__len__")):
            unsupported(f"truth value of a {cls.__name__} (it defines __bool__ or __len__)")
        return True

    def __repr__(self):
        return f"UserObjectVariable({type(self.value).__name__} from {self.source})"
