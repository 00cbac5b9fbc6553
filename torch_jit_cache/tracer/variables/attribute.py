"""Reading `obj.name` off an object read from the frame (a user object or an nn.Module).

Where the answer comes from is decided by attribute_lookup.lookup (Python's order); this turns that
place into a tracker. Every value keeps a source through the object (`L['self'].name`, or
`L['self'].name.__func__` for a method), so its guard re-reads the attribute the same way Python
does at each call: when a later assignment changes where the name resolves, the guard fails.
What cannot be followed exactly (a custom __getattribute__, descriptors other than property,
__slots__ members, functions, staticmethod and classmethod) raises Unsupported, never a guess.
"""
from __future__ import annotations

import types

from ...attribute_lookup import Where, is_descriptor, lookup
from ...sources import AttrSource
from .base import unsupported
from .functions import UserFunctionVariable, UserMethodVariable


def read_attribute(tx, var, obj, name: str, on_getattr=None):
    """The tracker for `obj.name`, `var` being obj's tracker (with a source).

    `on_getattr(found_hook)` handles names that normal lookup does not find and the type's
    __getattr__ would answer (nn.Module's); without it such names are unsupported.
    """
    if var.source is None:
        unsupported(f"attribute {name!r} of an object with no source")
    found = lookup(obj, name)
    where, value = found.where, found.value
    cls_name = type(obj).__name__
    source = AttrSource(var.source, name)
    if where is Where.CUSTOM:
        unsupported(f"attribute {name!r} of {cls_name}, whose class overrides __getattribute__")
    if where is Where.DATA_DESCRIPTOR:
        if type(value) is property:
            if not isinstance(value.fget, types.FunctionType):
                unsupported(f"property {cls_name}.{name} has no Python getter")
            # Guarded where Python finds it (type(obj).name.fget): replacing the property on the
            # class fails the guard instead of running the old getter.
            getter = AttrSource(AttrSource(AttrSource(var.source, "__class__"), name), "fget")
            return tx.call(tx.wrap(value.fget, getter), [var], {})
        if isinstance(value, types.MemberDescriptorType) or name == "__class__" and \
                isinstance(value, types.GetSetDescriptorType) and value.__objclass__ is object:
            try:
                return tx.wrap(getattr(obj, name), source)  # a __slots__ member, or __class__
            except AttributeError:  # an empty slot: Python would go on to __getattr__
                unsupported(f"AttributeError: slot {name!r} of {cls_name} is empty")
        unsupported(f"attribute {name!r} of {cls_name} is a {type(value).__name__} (a data descriptor)")
    if where is Where.INSTANCE_DICT:
        return tx.wrap(value, source)
    if where is Where.CLASS:
        if isinstance(value, types.FunctionType):
            return UserMethodVariable(UserFunctionVariable(value, AttrSource(source, "__func__")), var)
        if isinstance(value, staticmethod):
            return tx.wrap(value.__func__, source)
        if isinstance(value, classmethod) and isinstance(value.__func__, types.FunctionType):
            cls = tx.wrap(type(obj), AttrSource(var.source, "__class__"))
            return UserMethodVariable(UserFunctionVariable(value.__func__, AttrSource(source, "__func__")), cls)
        if is_descriptor(value):
            unsupported(f"attribute {name!r} of {cls_name} is a {type(value).__name__} (a descriptor)")
        return tx.wrap(value, source)  # a plain class attribute, read through the instance
    if where is Where.GETATTR and on_getattr is not None:
        return on_getattr(found.value)
    if where is Where.GETATTR:
        unsupported(f"attribute {name!r} of {cls_name} would come from its __getattr__")
    unsupported(f"AttributeError: {cls_name!r} object has no attribute {name!r}")
