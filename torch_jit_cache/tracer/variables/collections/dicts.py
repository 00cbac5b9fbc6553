"""Dicts and their views, holding variable trackers (lists and tuples: containers.py, whose module
docstring says how a container read from the frame is mutated, replayed and reloaded; OrderedDict
and defaultdict built in the trace: dict_subclasses.py; a dict subclass read from the frame:
dict_subclass_reads.py)."""
from __future__ import annotations

import collections

from ....guard.sources import ItemSource
from ....guard.trace_result import AttrOutput, CallOutput, DictOutput, EffectKind, GuardKind
from ..base import MethodVariable, TracedKeyError, VariableTracker, traced, unsupported
from ..constant import ConstantVariable
from .containers import (BaseListVariable, TupleVariable, class_of, constant_index, is_key_constant, key_tracker,
                         reloaded)
from .object_keys import ABSENT, ObjectKey, lookup, needs_lookup
from .sequence_checks import arity_error, raise_stand_in_error

class DictVariable(VariableTracker):
    """A dict with constant keys; `items` maps each Python key to a tracker, in order."""

    guarded_by_type = True

    version = 0

    # A real dict, key -> key, that went through the same insertions and deletions as the dict
    # this tracks since it was made empty (`{}`, `dict()`), so its hash table's entries lay out as
    # eager's do (where a key is stored, when the table is compacted); None where that history is
    # not known (a dict of the frame, one built with items, any other change of its keys). Python's
    # dict iterators step through that layout (iterators.DictIteratorVariable).
    table = None

    def __init__(self, items: dict, source=None):
        super().__init__(source)
        self.items = dict(items)

    def mutating(self, tx, keys_change: bool = True, table_op=None):
        """Called before each mutation (side_effects.py records it where the dict has a source).
        `table_op(table)` makes on `table` the change about to be made to the keys; a change of
        the keys without one leaves their layout unknown."""
        tx.output.side_effects.mutate_container(self, EffectKind.SET_DICT)
        if keys_change:   # a new value for an existing key leaves an iteration over the dict alone
            self.version += 1
            if self.table is not None and table_op is not None:
                table_op(self.table)
            else:
                self.table = None

    def python_type(self):
        return dict

    # Where this dict became an object's __dict__ (object_hooks.replace_instance_dict): a function
    # of `outputs` giving the rebuild of that object's __dict__ while the dict still is it, else None.
    instance_dict_of = None

    def reconstruct(self, outputs):
        self.refuse_object_keys("rebuilt after the graph")
        if self.source is not None:
            return reloaded(self)
        if self.instance_dict_of is not None and (made := self.instance_dict_of(outputs)) is not None:
            return made
        return outputs.once(self, lambda: DictOutput(tuple((k, outputs.rebuild(v))
                                                           for k, v in self.items.items())))

    def as_python_constant(self):
        self.refuse_object_keys("read as a constant")
        return {k: v.as_python_constant() for k, v in self.items.items()}

    def as_fx_arg(self):
        self.refuse_object_keys("an argument of a graph node")
        return {k: v.as_fx_arg() for k, v in self.items.items()}

    def as_example(self):
        self.refuse_object_keys("an argument of a graph node")
        return {k: v.as_example() for k, v in self.items.items()}

    def refuse_object_keys(self, what: str) -> None:
        if self.object_keyed:
            unsupported(f"a dict with objects of the trace as keys {what}")

    def unpack(self, tx):
        return [key_tracker(tx, k) for k in self.items]

    def truthy(self, tx):
        return bool(self.items)

    @property
    def truth_is_length(self) -> bool:
        """Whether bool() of it is its length (a dict itself; dict_subclasses.py says for its own)."""
        return self.python_type() is dict

    def mapping_items(self, tx) -> dict:
        """What reading it as a mapping gives (`dict(d)`, `x.update(d)`, `{**d}`, `f(**d)`): its
        items (an OrderedDict subclass whose class reads them its own way says otherwise)."""
        self.refuse_object_keys("merged into another")
        return dict(self.items)

    @property
    def object_keyed(self) -> bool:
        """Whether it holds an object of the trace as a key (object_keys.py): its keys are then no
        constants, and whatever reads them as such refuses it."""
        return bool(ObjectKey.made) and any(type(k) is ObjectKey for k in self.items)

    def find(self, tx, key):
        """(the key of `items` that `key` finds or ABSENT, the key it is stored under), where
        object_keys.needs_lookup says the lookup is CPython's, made with the keys' own __hash__ and
        __eq__; None where the key is a constant looked up among constants."""
        if not needs_lookup(self, key):
            return None
        if type(self) is not DictVariable or self.source is not None:
            unsupported(f"a lookup by {key} in {self} (only a plain dict the trace made holds objects of "
                        "the trace as keys)")
        return lookup(tx, self, key)

    def _insert(self, tx, found, store, value):
        """items[key] = value, for `find`'s answer."""
        if found is ABSENT:
            self.mutating(tx, table_op=lambda t: t.__setitem__(store, store))
            self.items[store] = value
        else:
            self.mutating(tx, keys_change=False)
            self.items[found] = value

    def _remove(self, tx, found):
        self.mutating(tx, table_op=lambda t: t.__delitem__(found))
        return self.items.pop(found)

    def getitem(self, tx, key):
        if (entry := self.find(tx, key)) is not None:
            if entry[0] is ABSENT:
                raise traced(TracedKeyError, "KeyError", KeyError, [key])
            return self.items[entry[0]]
        k = key.dict_key(tx)
        if k not in self.items:
            raise traced(TracedKeyError, f"KeyError {k!r}", KeyError, [key])
        return self.items[k]

    def setitem(self, tx, key, value):
        if (entry := self.find(tx, key)) is not None:
            return self._insert(tx, *entry, value)
        k = constant_index(key)
        self.mutating(tx, keys_change=k not in self.items, table_op=lambda t: t.__setitem__(k, k))
        self.items[k] = value
        return None

    def delitem(self, tx, key):
        if (entry := self.find(tx, key)) is not None:
            if entry[0] is ABSENT:
                raise traced(TracedKeyError, "KeyError", KeyError, [key])
            self._remove(tx, entry[0])
            return
        k = constant_index(key)
        if k not in self.items:
            raise traced(TracedKeyError, f"KeyError {k!r}", KeyError, [key])
        self.mutating(tx, table_op=lambda t: t.__delitem__(k))
        del self.items[k]

    def contains_key(self, tx, key) -> bool:
        """`key in d`."""
        if (entry := self.find(tx, key)) is not None:
            return entry[0] is not ABSENT
        return key.dict_key(tx) in self.items

    def var_getattr(self, tx, name):
        if name == "__class__":
            return class_of(tx, self)
        return MethodVariable(self, name)

    # How many positional arguments each method traced here takes, where it takes no keyword
    # (update takes keywords; popitem checks its own).
    _ARG_COUNTS = {"get": (1, 2), "__getitem__": (1,), "__contains__": (1,), "copy": (0,), "pop": (1, 2),
                   "setdefault": (1, 2), "clear": (0,), "__setitem__": (2,), "__delitem__": (1,)}

    def call_method(self, tx, name, args, kwargs):
        if name in self._ARG_COUNTS and (kwargs or len(args) not in self._ARG_COUNTS[name]):
            arity_error(dict, name, args, kwargs)
        if name in DictViewVariable.KINDS and not args and not kwargs:
            return DictViewVariable(self, name)
        if name in ("get", "pop", "setdefault") and (entry := self.find(tx, args[0])) is not None:
            found, store = entry
            default = args[1] if len(args) > 1 else None
            if found is not ABSENT:
                return self.items[found] if name != "pop" else self._remove(tx, found)
            if name == "pop" and default is None:
                raise traced(TracedKeyError, "KeyError", KeyError, [args[0]])
            default = ConstantVariable(None) if default is None else default
            if name == "setdefault":
                self._insert(tx, found, store, default)
            return default
        if name == "get":
            k = args[0].dict_key(tx)
            if k in self.items:
                return self.items[k]
            return args[1] if len(args) > 1 else ConstantVariable(None)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__contains__":
            return ConstantVariable(self.contains_key(tx, args[0]))
        if name == "copy":
            return DictVariable(self.items)
        if name == "update":
            other = args[0] if args else None
            if len(args) > 1 or other is not None and not isinstance(other, (DictVariable, BaseListVariable)):
                raise_stand_in_error(tx, dict, tuple(self.items), name, args, kwargs, "dict.update from a non-dict")
            # From a dict, or from a list or tuple of (key, value) pairs (dict_items: each pair
            # unpacked as dict.update does; a pair of another length breaks).
            new = other.mapping_items(tx) if isinstance(other, DictVariable) else dict_items(tx, [other], {}) \
                if other is not None else {}
            new.update(kwargs)
            if new and self.object_keyed:
                unsupported("dict.update of a dict with objects of the trace as keys")
            self.mutating(tx, keys_change=not new.keys() <= self.items.keys())
            self.items.update(new)
            return ConstantVariable(None)
        if name == "pop":
            k = constant_index(args[0])
            if k in self.items:
                self.mutating(tx, table_op=lambda t: t.__delitem__(k))
                return self.items.pop(k)
            if len(args) > 1:
                return args[1]
            raise traced(TracedKeyError, f"KeyError {k!r}", KeyError, [args[0]])
        if name == "setdefault":
            k = constant_index(args[0])
            if k in self.items:
                return self.items[k]
            self.mutating(tx, table_op=lambda t: t.__setitem__(k, k))
            return self.items.setdefault(k, args[1] if len(args) > 1 else ConstantVariable(None))
        if name == "popitem" and not args and not kwargs:
            return self.popitem(tx, last=True)
        if name in ("__or__", "__ior__") and len(args) == 1 and not kwargs:
            return self.merge(tx, args[0], in_place=name == "__ior__")
        if name == "clear" and not args:
            self.mutating(tx, table_op=dict.clear)
            self.items.clear()
            return ConstantVariable(None)
        if name == "__setitem__":
            self.setitem(tx, args[0], args[1])
            return ConstantVariable(None)
        if name == "__delitem__":
            self.delitem(tx, args[0])
            return ConstantVariable(None)
        if self.python_type() is dict and hasattr(dict, name):   # Python's error on these arguments
            raise_stand_in_error(tx, dict, tuple(self.items), name, args, kwargs, f"dict.{name}")
        unsupported(f"dict.{name}")

    def merge(self, tx, other, in_place: bool):
        """dict.__or__ / dict.__ior__ (`d | other`, `d |= other`, by name too). `|` takes a dict
        (any, PyDict_Check) and makes a new plain dict; of anything else it answers NotImplemented.
        `|=` takes whatever update does and returns the dict itself; a constant update refuses
        raises its error in the trace (read from the same update on a stand-in)."""
        if not in_place:
            if isinstance(other, DictVariable):
                return DictVariable({**self.items, **other.mapping_items(tx)})
            if other.is_python_constant() or isinstance(other, BaseListVariable):
                return ConstantVariable(NotImplemented)
            unsupported(f"dict.__or__ of {other}")
        if other.is_python_constant() and not isinstance(other, (DictVariable, BaseListVariable)):
            new = {}
            try:
                new.update(other.as_python_constant())
            except Exception:  # noqa: BLE001 - Python's own error on this operand: eager's too
                raise_stand_in_error(tx, dict, tuple(self.items), "update", [other], {}, "dict.__ior__")
            if not all(is_key_constant(k) for k in new):
                unsupported("dict.__ior__ with keys other than constants")
            self.call_method(tx, "update", [DictVariable({k: tx.wrap_constant(v) for k, v in new.items()})], {})
            return self
        self.call_method(tx, "update", [other], {})
        return self

    def popitem(self, tx, last: bool):
        """dict.popitem (the last item) or OrderedDict.popitem(last=): the (key, value) pair, removed."""
        if not self.items and not issubclass(self.python_type(), collections.OrderedDict):
            # dict's own popitem (a subclass's, a defaultdict's, a Counter's): dict's KeyError
            raise_stand_in_error(tx, dict, (), "popitem", [], {}, "popitem() of an empty dict")
        if not self.items:
            unsupported(f"KeyError: popitem() of an empty {self.python_type().__name__}")
        self.mutating(tx, table_op=dict.popitem if last else None)
        k = next(reversed(self.items)) if last else next(iter(self.items))
        return TupleVariable([key_tracker(tx, k), self.items.pop(k)])

    def require_guardable(self, what, name):
        for item in self.items.values():
            item.require_guardable(what, name)


def dict_equal(a: DictVariable, b: DictVariable):
    """`a == b` for two dict trackers, or None where the trace cannot tell: computed on real dicts
    of the trackers' classes (so two OrderedDicts compare their order too, as OrderedDict.__eq__
    does, and an OrderedDict and a dict do not), which needs every value to be a constant."""
    dicts = []
    for d in (a, b):
        if d.object_keyed or not all(v.is_python_constant() for v in d.items.values()):
            return None
        items = {k: v.as_python_constant() for k, v in d.items.items()}
        dicts.append(collections.OrderedDict(items) if issubclass(d.python_type(), collections.OrderedDict) else items)
    return dicts[0] == dicts[1]


def dict_items(tx, args, kwargs) -> dict:
    """The items `dict(*args, **kwargs)` starts with: a dict's, or an iterable's pairs, then the keywords."""
    items = {}
    if args:
        if isinstance(args[0], DictVariable):
            items.update(args[0].mapping_items(tx))
        else:
            for pair in args[0].unpack(tx):
                kv = pair.unpack(tx)
                if len(kv) != 2 or not kv[0].is_python_constant():
                    unsupported(f"dict items from {pair}: not a pair with a constant key")
                items[kv[0].as_python_constant()] = kv[1]
    items.update(kwargs)
    return items


class DictViewVariable(VariableTracker):
    """`d.keys()`, `d.values()` or `d.items()`: a live view of the dict tracker `mapping`, as in
    Python. Every read (len, `in`, iteration, set operations, truth) asks the dict as it is at that
    moment, so a view taken before `d[k] = v` sees the new key. An iteration over it watches the
    dict (IteratorVariable): a change of its keys while the loop runs is refused, and the frame
    runs as written (Python raises RuntimeError there). After the graph it is made again as the
    same method called on the dict rebuilt (the caller's own dict, or the one the trace built), so
    a returned view stays live too."""

    KINDS = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}

    def __init__(self, mapping: DictVariable, kind: str):
        super().__init__(None)
        self.mapping, self.kind = mapping, kind

    def python_type(self):
        return self.KINDS[self.kind]

    def unpack(self, tx):
        d = self.mapping.items
        if self.kind == "keys":
            return [key_tracker(tx, k) for k in d]
        if self.kind == "values":
            return list(d.values())
        return [TupleVariable([key_tracker(tx, k), v]) for k, v in d.items()]

    def length(self, tx) -> int:
        return len(self.mapping.items)

    def truthy(self, tx):
        return bool(self.mapping.items)

    def as_python_constant(self):
        # A real view of a dict of constants: `d.keys() & {...}` and `d.keys() == {...}` fold.
        self.mapping.refuse_object_keys("read as a constant")
        if self.kind == "keys":
            return dict.fromkeys(self.mapping.items).keys()
        return getattr(self.mapping.as_python_constant(), self.kind)()

    def contains(self, tx, item) -> bool:
        if self.kind == "keys":
            return self.mapping.contains_key(tx, item)
        if not item.is_python_constant() or not self.is_python_constant():
            unsupported(f"membership test of {item} in dict.{self.kind}() of non-constant values")
        return item.as_python_constant() in self.as_python_constant()

    def var_getattr(self, tx, name):
        return MethodVariable(self, name)

    def call_method(self, tx, name, args, kwargs):
        if name == "__len__" and not args:
            return ConstantVariable(self.length(tx))
        if name == "__contains__" and len(args) == 1:
            return ConstantVariable(self.contains(tx, args[0]))
        if name == "isdisjoint" and len(args) == 1 and self.is_python_constant() and args[0].is_python_constant():
            return ConstantVariable(self.as_python_constant().isdisjoint(args[0].as_python_constant()))
        unsupported(f"dict_{self.kind}.{name}")

    def reconstruct(self, outputs):
        # A view of the caller's dict is a view of that very dict (what the trace changed in it is
        # replayed on it: side_effects.py), as the dict itself is (`reloaded`).
        mapping = outputs.rebuild(self.mapping)
        return outputs.once(self, lambda: CallOutput(AttrOutput(mapping, self.kind), (), ()))

    def __repr__(self):
        return f"DictViewVariable({self.kind} of {self.mapping!r})"


# -- what builder.py wraps a dict read from the frame with (its WRAP_RULES) ------------------------
def wrap_dict(tx, value, source, g):
    if not all(is_key_constant(k) for k in value):
        unsupported("a dict with keys other than constants, static types and objects that live as long "
                    "as the process")
    g(GuardKind.TYPE_MATCH, dict)
    g(GuardKind.DICT_KEYS, tuple(value))
    return DictVariable({k: tx.wrap(v, ItemSource(source, k) if source is not None else None, g.enabled)
                         for k, v in value.items()}, source)
