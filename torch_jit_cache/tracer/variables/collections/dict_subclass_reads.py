"""dict's own read methods on an instance of a dict subclass read from the frame
(user_object.DictSubclassVariable): `d.keys()`, `d.values()`, `d.items()`, `len(d)`, `bool(d)`
and `k in d` where the class keeps dict's own method for it.

They read the dict part of the object: its keys, pinned by DICT_KEYS on the object's source (keys
that are constants, as for a plain dict: containers.is_key_constant), and for values and items
each value through `d[k]` (ItemSource), or through `dict.__getitem__(d, k)` (DictItemSource) where
the class writes its own __getitem__, which a guard must not run. An OrderedDict subclass's keys
are its own order (`move_to_end` changes no dict order), pinned by `tuple(d)`, and its own
keys/values/items are read as dict's are. A view is a dicts.DictViewVariable over a read-only
picture of the dict that carries the object's source: after the graph it is made again as the
method called on the very object (`obj.keys()`), a live view as eager's is. Anything that writes
the object stays a graph break (user_object.py).
"""
from __future__ import annotations

import collections

from ....guard.attribute_lookup import type_lookup
from ....guard.sources import ApplySource, DictItemSource, ItemSource
from ....guard.trace_result import GuardKind
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable
from .containers import is_key_constant
from .dicts import DictVariable, DictViewVariable

VIEWS = ("keys", "values", "items")


def keeps_dicts(cls: type, name: str) -> bool:
    """Whether `cls` finds dict's own `name` (it does not override it)."""
    return type_lookup(cls, name) is vars(dict)[name]


def guarded_keys(tx, obj) -> tuple:
    """The keys of the object's dict part, in order, pinned by DICT_KEYS on its source; for an
    OrderedDict subclass, in the OrderedDict's own order, pinned by `tuple(obj)` (ApplySource,
    EQUALS_MATCH), which keeps OrderedDict's iteration (no hook of the class runs)."""
    value = obj.value
    if isinstance(value, collections.OrderedDict):
        if not all(type_lookup(type(value), name) is type_lookup(collections.OrderedDict, name) for name in _ODICT_ORDER):
            unsupported(f"the keys of {obj}, whose class iterates in its own way")
        keys, source, kind = tuple(value), ApplySource(obj.source, tuple), GuardKind.EQUALS_MATCH
    else:
        keys, source, kind = tuple(dict.keys(value)), obj.source, GuardKind.DICT_KEYS
    if not all(is_key_constant(k) for k in keys):
        unsupported(f"the keys of {obj}, which are not all constants")
    tx.output.add_guard(source, kind, keys)
    return keys


# What `tuple(od)` runs on an OrderedDict: its iteration, and the length it is sized by.
_ODICT_ORDER = ("__iter__", "__len__", "__length_hint__")


def picture(tx, obj, with_values: bool) -> DictVariable:
    """The object's dict part as a DictVariable carrying its source (never changed by the trace:
    only views reach it). Values are read only where asked, and only through dict's __getitem__."""
    keys = guarded_keys(tx, obj)
    if not with_values:
        return DictVariable(dict.fromkeys(keys, ConstantVariable(None)), obj.source)
    # Read as dict's own item where the class writes __getitem__, which a guard must not run.
    item = ItemSource if keeps_dicts(type(obj.value), "__getitem__") else DictItemSource
    return DictVariable({k: tx.wrap(dict.__getitem__(obj.value, k), item(obj.source, k)) for k in keys}, obj.source)


class DictViewMethodVariable(VariableTracker):
    """dict.keys / values / items bound to a DictSubclassVariable."""

    def __init__(self, obj, name: str):
        super().__init__(None)
        self.obj, self.name = obj, name

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported(f"dict.{self.name}() called with arguments")
        return DictViewVariable(picture(tx, self.obj, self.name != "keys"), self.name)

    def __repr__(self):
        return f"DictViewMethodVariable({self.obj!r}.{self.name})"


class DictLenVariable(VariableTracker):
    """dict.__len__ of a DictSubclassVariable, as len() and bool() call it (`type_method`)."""

    def __init__(self, obj):
        super().__init__(None)
        self.obj = obj

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or args[0] is not self.obj or kwargs:
            unsupported("dict.__len__ called with other arguments")
        return ConstantVariable(len(guarded_keys(tx, self.obj)))

    def __repr__(self):
        return f"DictLenVariable({self.obj!r})"
