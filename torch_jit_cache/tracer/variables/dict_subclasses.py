"""OrderedDict, defaultdict and plain subclasses of dict and OrderedDict built in the trace: dicts
of constant keys whose class is made again after the graph (containers.py holds the dict tracker
they extend)."""
from __future__ import annotations

import collections
import types

from ...attribute_lookup import type_lookup
from ...trace_result import CallOutput, ConstantOutput, DictOutput, SourceOutput, built_dict
from .base import unsupported
from .constant import ConstantVariable
from .containers import DictVariable, _index, dict_items
from .functions import UserMethodVariable

# What a class statement puts in every class's __dict__ (sets.py's list, and __init_subclass__'s
# absence): none of it changes what an instance does.
_BOOKKEEPING = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                          "__firstlineno__", "__static_attributes__"})
_HEAPTYPE = 1 << 9


def plain_dict_subclass(cls) -> bool:
    """Whether `cls` is a class-statement subclass of dict or of OrderedDict whose classes define
    nothing but Python functions of names neither base has (methods of its own, traced as Python
    with the object as self): its instances answer every dict operation as the base does, and
    calling the class runs the base's __init__. The class is pinned by identity where it is read;
    a class changed in place later is not seen, as for other objects."""
    if type(cls) is not type or not issubclass(cls, dict) or not cls.__flags__ & _HEAPTYPE:
        return False
    builtin = next(klass for klass in cls.__mro__ if not klass.__flags__ & _HEAPTYPE)
    if builtin not in (dict, collections.OrderedDict):
        return False
    for klass in cls.__mro__[:cls.__mro__.index(builtin)]:
        if not klass.__flags__ & _HEAPTYPE or "__slots__" in vars(klass):
            return False
        for name, value in vars(klass).items():
            if name in _BOOKKEEPING:
                continue
            if not isinstance(value, types.FunctionType) or name.startswith("__") or hasattr(builtin, name):
                return False
    return True


def _keyword_only(method: str, args: list, kwargs: dict, name: str, default):
    """The constant value of `method`'s one optional argument `name`, passed by position or keyword."""
    if len(args) + len(kwargs) > 1 or set(kwargs) - {name}:
        unsupported(f"{method} with arguments other than {name}=")
    value = (args or list(kwargs.values()) or [ConstantVariable(default)])[0]
    if not value.is_python_constant():
        unsupported(f"{method}({name}=) with a value that is not a constant")
    return value.as_python_constant()


class BuiltDictSubclassVariable(DictVariable):
    """An OrderedDict or a defaultdict built in the trace (source None): a dict of constant keys
    whose class is made again after the graph (trace_result.built_dict), in the order of `items`.
    The methods whose meaning is dict's are traced, and OrderedDict's own that move keys
    (move_to_end, popitem(last=)), each a reorder of `items`; `copy` keeps the class (and the
    default factory). == is dict_equal's. Any other method of the class breaks."""

    _DICT_METHODS = frozenset({"keys", "values", "items", "get", "__getitem__", "__contains__", "update",
                               "pop", "setdefault", "clear", "__setitem__", "__delitem__", "popitem", "copy"})
    _ORDERED_METHODS = frozenset({"move_to_end"})

    def __init__(self, cls, items: dict, default_factory=None, cls_var=None):
        super().__init__(items)
        self.cls, self.default_factory = cls, default_factory
        self.cls_var = cls_var   # a plain_dict_subclass's class tracker (read through its source)

    def python_type(self):
        return self.cls

    def as_python_constant(self):
        unsupported(f"a {self.cls.__name__} as a constant")

    def reconstruct(self, outputs):
        # A user's class is loaded again from where it was read: a constant in the transformed code
        # would hold it strongly from the cache entry.
        cls = SourceOutput(self.cls_var.source) if self.cls_var is not None else ConstantOutput(self.cls)
        names, values = ("cls", "items"), (cls,
                                           DictOutput(tuple((k, outputs.rebuild(v)) for k, v in self.items.items())))
        if self.default_factory is not None:
            names, values = names + ("default_factory",), values + (outputs.rebuild(self.default_factory),)
        return outputs.once(self, lambda: CallOutput(ConstantOutput(built_dict), names, values))

    def getitem(self, tx, key):
        k = _index(key)
        if k not in self.items and self.default_factory is not None:
            # defaultdict.__missing__: the factory's value, stored under the key, then returned.
            value = tx.call(self.default_factory, [], {})
            self.setitem(tx, key, value)
            return value
        return super().getitem(tx, key)

    def var_getattr(self, tx, name):
        if self.cls_var is not None and isinstance(type_lookup(self.cls, name), types.FunctionType):
            return UserMethodVariable(self.cls_var.class_member(tx, name), self)
        return super().var_getattr(tx, name)

    def call_method(self, tx, name, args, kwargs):
        ordered = issubclass(self.cls, collections.OrderedDict)
        if name not in self._DICT_METHODS and not (ordered and name in self._ORDERED_METHODS):
            unsupported(f"{self.cls.__name__}.{name}")
        if name == "copy" and not args and not kwargs:
            if not ordered and self.cls_var is not None:   # dict.copy makes a dict, whatever the class
                return DictVariable(dict(self.items))
            # OrderedDict.copy and defaultdict.copy make one of the object's class.
            return BuiltDictSubclassVariable(self.cls, dict(self.items), self.default_factory, self.cls_var)
        if name in ("move_to_end", "popitem") and ordered:
            last = _keyword_only(name, args[1:] if name == "move_to_end" else args, kwargs, "last", True)
            if name == "popitem":
                return self.popitem(tx, last)
            k = _index(args[0]) if args else unsupported("OrderedDict.move_to_end without a key")
            if k not in self.items:
                unsupported(f"KeyError {k!r} (OrderedDict.move_to_end)")
            self.mutating(tx)
            value = self.items.pop(k)
            self.items = {k: value, **self.items} if not last else {**self.items, k: value}
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"BuiltDictSubclassVariable({self.cls.__name__}, {self.items!r})"


def construct(tx, cls_var, args, kwargs):
    """`cls(...)` for a plain_dict_subclass: its base's __init__ on a new object of the class."""
    return BuiltDictSubclassVariable(cls_var.value, dict_items(tx, args, kwargs), cls_var=cls_var)


def build_ordered_dict(tx, args, kwargs):
    return BuiltDictSubclassVariable(collections.OrderedDict, dict_items(tx, args, kwargs))


def build_defaultdict(tx, args, kwargs):
    factory = args[0] if args else ConstantVariable(None)
    if isinstance(factory, ConstantVariable) and factory.value is None:
        factory = None
    return BuiltDictSubclassVariable(collections.defaultdict, dict_items(tx, args[1:], kwargs), factory)
