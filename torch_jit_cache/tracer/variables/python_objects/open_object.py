"""OpenObjectVariable: an object of any class the tracer has no model for, read from the frame
through a source, whose attribute lookup is CPython's own (a dataclasses.Field held in a
validator's closure, a torch.finfo kept in a global, a `__slots__` class, an object of a C
extension type).

"Open world": such an object is readable through its source as a plain user object is
(user_object.py): it is guarded by type, and each attribute the trace reads is guarded where it
lives (`L['f'].name`: EQUALS_MATCH on a constant), so a later call where it differs recompiles. What
is read follows Python's order (attribute_lookup.lookup), and only where the read cannot run code
the tracer does not see:
- `__slots__` members and values in the instance `__dict__` or on the class: plain reads;
- properties with a Python getter, methods written in Python: inlined with the object as `self`;
- getset descriptors (attributes computed in C) only of the types in PURE_GETSET_TYPES, whose
  getters read the object's own state without side effects (a function's `__name__`, a finfo's
  `max`); another C type's getset may compute anything, so it stays a graph break;
- a method written in C (`dq.count`): loaded as a MethodVariable and refused at the call, so
  the break falls on the CALL, as for an OpaqueVariable (opaque.py); but a compiled regex's search
  methods on constants run while tracing (regex_values.py).
Stores are refused unless they are the plain ones user_object.py records (no such object without a
`__dict__` qualifies). Objects whose class has its own `__getattribute__` or `__getattr__` are not
open: they stay OpaqueVariables (guard/attribute_lookup.py says which are followed).
"""
from __future__ import annotations

import collections
import re
import types

import torch

from ....guard.attribute_lookup import GENERIC_GETATTRIBUTE, MISSING, Where, lookup, type_lookup
from ....guard.sources import AttrSource
from . import c_descriptors, regex_values
from ..base import MethodVariable, unsupported
from .user_object import UserObjectVariable

# Types whose getset descriptors are pure reads of the object's immutable state. `__dict__`,
# `__annotations__` (made on first read) and `__closure__`'s cells are not values to fold.
PURE_GETSET_TYPES = (types.FunctionType, types.CodeType, types.BuiltinFunctionType, types.MethodType,
                     types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType,
                     types.MemberDescriptorType, property, torch.finfo, torch.iinfo)
_NOT_PURE = frozenset({"__dict__", "__annotations__", "__closure__", "__globals__", "__builtins__"})

# A namedtuple's field (`Point.x`): reads the tuple's item at its index, nothing else.
_TUPLE_FIELD = type(vars(collections.namedtuple("_Pair", "a"))["a"])

# Class attributes that are methods written in C: loaded now, refused when called.
_C_METHOD_KINDS = (types.MethodDescriptorType, types.BuiltinFunctionType, types.WrapperDescriptorType,
                   types.ClassMethodDescriptorType)


def is_open_object(value) -> bool:
    # The generic lookup, perhaps but for some names (types.UnionType's `__module__`), which
    # attribute_lookup.lookup then calls CUSTOM: refused.
    cls = type(value)
    hook = type_lookup(cls, "__getattribute__")
    return any(hook is generic for generic in GENERIC_GETATTRIBUTE) and type_lookup(cls, "__getattr__") is MISSING


def pure_getset(descriptor, name: str) -> bool:
    return isinstance(descriptor, types.GetSetDescriptorType) and name not in _NOT_PURE and \
        any(descriptor.__objclass__ is t for t in PURE_GETSET_TYPES)


class OpenObjectVariable(UserObjectVariable):
    def var_getattr(self, tx, name: str):
        found = lookup(self.value, name)
        if found.where is Where.DATA_DESCRIPTOR and (pure_getset(found.value, name) or
                                                     type(found.value) is _TUPLE_FIELD):
            return tx.wrap(getattr(self.value, name), AttrSource(self.source, name))
        if found.where is Where.CLASS and isinstance(found.value, _C_METHOD_KINDS):
            return MethodVariable(self, name)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        found = lookup(self.value, name)
        if type(self.value) is re.Pattern and name in regex_values.PATTERN_METHODS and found.where is Where.CLASS:
            return regex_values.call_pattern_method(tx, self, name, args, kwargs)
        if name == "__get__" and found.where is Where.CLASS and c_descriptors.is_c_descriptor(self.value):
            return c_descriptors.call_get_method(tx, self, args, kwargs)
        if found.where is Where.CLASS and isinstance(found.value, _C_METHOD_KINDS):
            unsupported(f"call of {type(self.value).__name__}.{name} (a method written in C)")
        return super().call_method(tx, name, args, kwargs)

    def call_function(self, tx, args, kwargs):
        if c_descriptors.is_descriptor_get(self.value):
            return c_descriptors.call_descriptor_get(tx, self, args, kwargs)
        return super().call_function(tx, args, kwargs)

    def bound_method_type(self, name: str):
        found = lookup(self.value, name)
        if found.where is Where.CLASS and isinstance(found.value, _C_METHOD_KINDS):
            return type(getattr(self.value, name))
        return None

    def __repr__(self):
        return f"OpenObjectVariable({type(self.value).__name__} from {self.source})"
