"""OrderedDict and defaultdict built in the trace: dicts of constant keys whose class is made again
after the graph (containers.py holds the dict tracker they extend)."""
from __future__ import annotations

import collections

from ...trace_result import CallOutput, ConstantOutput, DictOutput, built_dict
from .base import unsupported
from .constant import ConstantVariable
from .containers import DictVariable, _index, dict_items


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

    def __init__(self, cls, items: dict, default_factory=None):
        super().__init__(items)
        self.cls, self.default_factory = cls, default_factory

    def python_type(self):
        return self.cls

    def as_python_constant(self):
        unsupported(f"a {self.cls.__name__} as a constant")

    def reconstruct(self, outputs):
        names, values = ("cls", "items"), (ConstantOutput(self.cls),
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

    def call_method(self, tx, name, args, kwargs):
        ordered = self.cls is collections.OrderedDict
        if name not in self._DICT_METHODS and not (ordered and name in self._ORDERED_METHODS):
            unsupported(f"{self.cls.__name__}.{name}")
        if name == "copy" and not args and not kwargs:
            return BuiltDictSubclassVariable(self.cls, self.items, self.default_factory)
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


def build_ordered_dict(tx, args, kwargs):
    return BuiltDictSubclassVariable(collections.OrderedDict, dict_items(tx, args, kwargs))


def build_defaultdict(tx, args, kwargs):
    factory = args[0] if args else ConstantVariable(None)
    if isinstance(factory, ConstantVariable) and factory.value is None:
        factory = None
    return BuiltDictSubclassVariable(collections.defaultdict, dict_items(tx, args[1:], kwargs), factory)
