"""dataclasses.fields(obj or cls) in the trace: a tuple of the class's Field objects, read from it.

`fields` returns the values of `cls.__dataclass_fields__` whose `_field_type` is a plain field, in
order. The trace reads that dict through the class's source, guarded by its keys (DICT_KEYS) and
each field's `_field_type` (ID_MATCH), and each Field becomes a FieldVariable whose attributes
(`f.name`, `f.default`, ...) are read through the field's own source and guarded where read. A Field
that leaves the trace is loaded again from the class: it is the very object eager returns.
"""
from __future__ import annotations

import dataclasses

from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import GuardKind, SourceOutput
from ..base import VariableTracker, unsupported
from .classes import ClassVariable
from ..constant import ConstantVariable
from ..collections.containers import TupleVariable
from .new_object import NewObjectVariable
from .user_object import UserObjectVariable

# Field attributes whose values read as constants (guarded by value); others go through tx.wrap.
_CONSTANT_TYPES = (str, bool, int, float, type(None))


def _class_of(v):
    """The class `dataclasses.fields(v)` reads, and its source."""
    if isinstance(v, ClassVariable) and isinstance(v.value, type) and v.source is not None:
        return v.value, v.source
    if isinstance(v, NewObjectVariable) and v.cls_var.source is not None:
        return v.cls, v.cls_var.source
    if isinstance(v, UserObjectVariable) and v.source is not None:
        return type(v.value), AttrSource(v.source, "__class__")
    cls_var = getattr(v, "user_class_var", None)
    if cls_var is not None and cls_var.source is not None:   # a dict subclass object built in the trace
        return v.python_type(), cls_var.source
    unsupported(f"dataclasses.fields() of {v}")


def fields(tx, args, kwargs):
    if kwargs or len(args) != 1:
        unsupported("dataclasses.fields() with other than one argument")
    cls, cls_source = _class_of(args[0])
    d = getattr(cls, "__dataclass_fields__", None)
    if cls_source is None or type(d) is not dict:
        unsupported(f"dataclasses.fields() of {cls.__name__} (not a dataclass read through a source)")
    dsrc = AttrSource(cls_source, "__dataclass_fields__")
    tx.output.add_guard(dsrc, GuardKind.DICT_KEYS, tuple(d))
    out = []
    for name, f in d.items():
        fsrc = ItemSource(dsrc, name)
        tx.output.add_guard(AttrSource(fsrc, "_field_type"), GuardKind.ID_MATCH, f._field_type)
        if f._field_type is dataclasses._FIELD:
            out.append(FieldVariable(f, fsrc))
    return TupleVariable(out)


class FieldVariable(VariableTracker):
    """A dataclasses.Field read through its class (`cls.__dataclass_fields__[name]`)."""

    def __init__(self, field: dataclasses.Field, source):
        super().__init__(source)
        self.field = field

    def python_type(self):
        return dataclasses.Field

    def var_getattr(self, tx, name):
        try:
            value = getattr(self.field, name)
        except AttributeError:
            unsupported(f"attribute {name!r} of a dataclasses.Field")
        src = AttrSource(self.source, name)
        if type(value) in _CONSTANT_TYPES:
            tx.output.add_guard(src, GuardKind.EQUALS_MATCH, value)
            return ConstantVariable(value)
        return tx.wrap(value, src)

    def reconstruct(self, outputs):
        return SourceOutput(self.source)

    def __repr__(self):
        return f"FieldVariable({self.field.name})"
