"""Containers: tuples, lists and dicts, holding variable trackers (iterators over them:
iterators.py; ranges: ranges.py; closure cells: cells.py; OrderedDict and defaultdict built in the
trace: dict_subclasses.py; named tuples: namedtuples.py).

A list or dict read from the frame carries a source; mutating one (append, setitem, ...) updates
its tracker, so later reads in the trace see the change, and is recorded for replay on the real
object after the graph (tracer/side_effects.py, `mutating`); returned or held at a break, it is
loaded again by its source, the caller's very object (`_reloaded`). Containers built while tracing
(source None) are mutated freely and rebuilt from their items, once however often they are
reached (`outputs.once`: returned twice, or held by another container, they are one object after
the graph). Every mutation that changes what an iteration would yield bumps `version`, which
the iterators over the container (iterators.py) check. list.extend consumes an iterator or a
generator item by item (`yields_lazily`), as Python does.
"""
from __future__ import annotations

import collections

from ...attribute_lookup import MISSING, type_lookup
from ...process_lived import holdable_key
from ...sources import AttrSource, ItemSource
from ...trace_result import (AttrOutput, CallOutput, DictOutput, EffectKind, GuardKind, ListOutput, SourceOutput,
                             TupleOutput)
from .base import (MethodVariable, TracedIndexError, TracedKeyError, TracedRaise, VariableTracker, is_static_type,
                   traced, unsupported)
from .constant import ConstantVariable, is_constant_value
from .sequence_checks import (CHECKED_ON_STAND_IN, arity_error, check_comparing_call, is_iterable, items_equal,
                              raise_not_found, raise_stand_in_error)


def _index_error(message: str) -> TracedRaise:
    return traced(TracedIndexError, f"IndexError: {message}", IndexError, [ConstantVariable(message)])


def _index(key: VariableTracker):
    if not key.is_python_constant():
        unsupported(f"index by a non-constant {key}")
    return key.as_python_constant()


def is_key_constant(value) -> bool:
    """A dict key the guards may hold (the C++ rule, guards/value_rules.h): int, float, bool, str,
    bytes, None, a static type (dict, list, ...), an object that lives as long as the process and
    compares by identity (process_lived.holdable_key: typing.Union, collections.abc.Sequence, ...;
    vouched for to the guard tree there), and tuples of them. Hashing or comparing one runs no
    user code."""
    if value is None or type(value) in (int, float, bool, str, bytes) or is_static_type(value):
        return True
    if type(value) is tuple:
        return all(is_key_constant(v) for v in value)
    return holdable_key(value)


def key_tracker(tx, key):
    """The tracker of a dict's key (its iteration, keys(), items(), popitem())."""
    return ConstantVariable(key) if is_constant_value(key) else tx.wrap(key, None)


def class_of(tx, container):
    """`x.__class__` of a list, tuple or dict tracker: its exact type (pinned by TYPE_MATCH where it
    was read from the frame, the very class it was built of otherwise), as `type(x)` answers it;
    none of these classes overrides `__class__`. A namedtuple's class calls as the class does."""
    cls = container.python_type()
    if type_lookup(cls, "__class__") is not vars(object)["__class__"]:
        unsupported(f"{cls.__name__}.__class__, which its class overrides")
    # A class of the frame's value is read through it (a namedtuple class is built from its
    # source); a builtin type is the builtin itself.
    source = AttrSource(container.source, "__class__") if container.source is not None else None
    return tx.wrap(cls, None if is_static_type(cls) else source)


def _reloaded(container):
    """The spec of a list or dict the trace read from the frame: its source, loaded again after
    the graph, so the caller gets its very object back, as eager does (a copy rebuilt from its
    items has equal contents, but a mutation through one does not show through the other). It
    is the object the trace saw: every change the trace made to it was recorded (`mutating`)
    and, with a side effect recorded, the return is rebuilt by `Rebuilder`, which replays the
    change on it before loading it (tracer/rebuild.py). Loading
    a source needs no guard that reading it did not (its type and length, keys, items are
    guarded where it was wrapped, builder.py; how two sources alias is not: each loads whatever
    the caller passed). A tuple is left to `BaseListVariable.reconstruct`: it cannot change, and
    its mutable items are themselves reloaded by their sources."""
    return SourceOutput(container.source)


class BaseListVariable(VariableTracker):
    kind = tuple

    def __init__(self, items, source=None, fields=None, cls=None):
        super().__init__(source)
        self.items = list(items)
        self.fields = fields  # field names of a namedtuple result (torch.return_types.max, ...)
        self.cls = cls        # the tuple subclass the value was (None: tuple or list itself)

    def python_type(self):
        # The tuple subclass read from the frame (torch.Size, a namedtuple), as isinstance sees it.
        return self.cls if self.cls is not None else self.kind

    def reconstruct(self, outputs):
        # One spec per tracker (trace_result.py): reached twice, it is one object after the graph.
        return outputs.once(self, lambda: self._spec(tuple(outputs.rebuild(item) for item in self.items)))

    def _spec(self, items: tuple):
        if self.kind is list:
            return ListOutput(items)
        return TupleOutput(items, self.cls if self.cls is not tuple else None)

    def as_python_constant(self):
        return self.kind(i.as_python_constant() for i in self.items)

    def as_fx_arg(self):
        return self.kind(i.as_fx_arg() for i in self.items)

    def as_example(self):
        return self.kind(i.as_example() for i in self.items)

    def unpack(self, tx):
        return list(self.items)

    def truthy(self, tx):
        return bool(self.items)

    def getitem(self, tx, key):
        k = _index(key)
        if isinstance(k, slice) and k.step != 0:
            return type(self)(self.items[k])
        if isinstance(k, int) and -len(self.items) <= k < len(self.items):
            return self.items[k]
        if isinstance(k, int) and self.kind in (list, tuple):   # the items are exact (guarded lengths)
            message = f"{self.kind.__name__} index out of range"
            raise traced(TracedIndexError, f"IndexError: {message}", IndexError, [ConstantVariable(message)])
        reason = f"index {k!r} into a {self.kind.__name__} of length {len(self.items)}"
        if self.kind not in (list, tuple):
            unsupported(reason)
        raise_stand_in_error(tx, self.kind, len(self.items), "__getitem__", [key], {}, reason)

    def var_getattr(self, tx, name):
        if self.fields and name in self.fields:
            return self.items[self.fields.index(name)]
        effects = tx.output.side_effects
        if effects.has_attr_effect(self, self, name) and not effects.attr_deleted(self, name):
            return effects.attr(self, self, name)   # stored earlier in the trace (var_setattr)
        if name == "_fields" and self.fields and type(getattr(self.cls, "_fields", None)) is tuple:
            return tx.wrap_constant(self.cls._fields)   # the names namedtuple() gave the class
        if name == "__class__":
            return class_of(tx, self)
        return MethodVariable(self, name)

    def var_setattr(self, tx, name, value):
        """`t.name = value` on an instance of a tuple subclass with a __dict__ (a namedtuple's
        subclass), for a name its class does not define: a store to the instance __dict__,
        replayed after the graph on the very tuple (the frame's, or the one rebuilt), and read
        back in the trace. Anything else is refused (a field or class attribute raises in eager)."""
        cls = self.python_type()
        if self.kind is not tuple or not cls.__dictoffset__ or type_lookup(cls, name) is not MISSING:
            unsupported(f"STORE_ATTR {name} on {self} (a side effect that cannot be replayed)")
        tx.output.side_effects.store_attr(self, self, name, value, by_identity=True)

    def has_attribute(self, tx, name: str) -> bool:
        """hasattr(t, name): one of its fields, or what its class has (the class is pinned by
        TYPE_MATCH where the tuple was read, or is the one the trace built it of). Instances of a
        class with a __dict__ may carry attributes of their own: refused, but for those the trace
        stored."""
        cls = self.python_type()
        effects = tx.output.side_effects
        if effects.has_attr_effect(self, self, name):
            return not effects.attr_deleted(self, name)
        if self.fields and name in self.fields or hasattr(cls, name):
            return True
        if cls.__dictoffset__:
            unsupported(f"hasattr on a {cls.__name__}, whose instances have a __dict__")
        return False

    def call_method(self, tx, name, args, kwargs):
        if name in ("index", "count") and self.kind in (list, tuple):
            check_comparing_call(tx, self.kind, name, args, kwargs)   # Python's errors on the arguments
        if name in ("index", "count") and 1 <= len(args) <= (1 if name == "count" else 3) and not kwargs:
            # Each item is compared as Python does, `item == value` after identity (a NaN counts
            # itself), the items from start to stop for index (clamped as a slice's bounds are).
            start, stop = [_index(a) for a in args[1:]] + [None] * (3 - len(args))
            start, stop, _ = slice(start, stop).indices(len(self.items))
            count, i = 0, start
            while i < min(stop, len(self.items)):   # as CPython: an item's __eq__ may shrink the list
                if items_equal(tx, self.items[i], args[0], f"{self.kind.__name__}.{name}"):
                    count += 1
                    if name == "index":
                        return ConstantVariable(i)
                i += 1
            if name == "index":
                raise_not_found(tx, self.kind, "index", args[0])
            return ConstantVariable(count)
        if name == "__getitem__" and len(args) == 1 and not kwargs:
            return self.getitem(tx, args[0])
        if name == "_replace" and self.fields and self.cls is not None and not args:
            # namedtuple._replace(**changes): a new tuple of the same class; an unknown name
            # raises ValueError in eager (a graph break here).
            if set(kwargs) - set(self.fields):
                unsupported(f"{self.cls.__name__}._replace() with unknown fields "
                            f"{sorted(set(kwargs) - set(self.fields))}")
            items = [kwargs.get(f, item) for f, item in zip(self.fields, self.items)]
            return type(self)(items, fields=self.fields, cls=self.cls)
        if name in CHECKED_ON_STAND_IN and self.kind in (list, tuple) and hasattr(self.kind, name):
            raise_stand_in_error(tx, self.kind, len(self.items), name, args, kwargs, f"{self.kind.__name__}.{name}")
        unsupported(f"{self.kind.__name__}.{name}")

    def require_guardable(self, what, name):
        for item in self.items:
            item.require_guardable(what, name)


class TupleVariable(BaseListVariable):
    kind = tuple

    def reconstruct(self, outputs):
        # A tuple read from the frame cannot have changed: the caller's very object (`is`, id()).
        if self.source is not None:
            return outputs.once(self, lambda: _reloaded(self))
        return super().reconstruct(outputs)

    def __repr__(self):
        return f"TupleVariable({self.items!r})"


class ListVariable(BaseListVariable):
    kind = list
    guarded_by_type = True

    # How many positional arguments each method traced here takes (none takes a keyword but sort).
    _ARG_COUNTS = {"append": (1,), "extend": (1,), "insert": (2,), "pop": (0, 1), "clear": (0,),
                   "reverse": (0,), "copy": (0,), "remove": (1,)}

    version = 0

    def reconstruct(self, outputs):
        return _reloaded(self) if self.source is not None else super().reconstruct(outputs)

    def mutating(self, tx):
        """Called before each mutation (side_effects.py records it where the list has a source)."""
        tx.output.side_effects.mutate_container(self, EffectKind.SET_LIST)
        self.version += 1

    def setitem(self, tx, key, value):
        k = _index(key)
        if isinstance(k, slice):
            # The new items are taken whole before the list changes (`a[1:] = a`), as list does.
            # A size that does not fit an extended slice, a step of 0 or a value that is no
            # iterable raises Python's own error in the trace (sequence_checks.py).
            if value.is_python_constant() and not is_iterable(value.as_python_constant()) or k.step == 0:
                raise_stand_in_error(tx, list, len(self.items), "__setitem__", [key, value], {},
                                     f"list slice assignment of {value}")
            items = list(self.items)
            try:
                items[k] = value.unpack(tx)
            except (TypeError, ValueError) as e:
                raise_stand_in_error(tx, list, len(self.items), "__setitem__", [key, value], {},
                                     f"list slice assignment raised {e!r}")
            self.mutating(tx)
            self.items = items
            return
        if not isinstance(k, int):
            raise_stand_in_error(tx, list, len(self.items), "__setitem__", [key, value], {}, f"list index {k!r}")
        if not -len(self.items) <= k < len(self.items):
            raise _index_error("list assignment index out of range")
        self.mutating(tx)
        self.items[k] = value

    def delitem(self, tx, key):
        k = _index(key)
        if not isinstance(k, (slice, int)) or isinstance(k, slice) and k.step == 0:
            raise_stand_in_error(tx, list, len(self.items), "__delitem__", [key], {}, f"del of list index {k!r}")
        if isinstance(k, int) and not -len(self.items) <= k < len(self.items):
            raise _index_error("list assignment index out of range")
        self.mutating(tx)
        del self.items[k]

    def call_method(self, tx, name, args, kwargs):
        if name in self._ARG_COUNTS and (kwargs or len(args) not in self._ARG_COUNTS[name]):
            arity_error(list, name, args, kwargs)
        if name in ("__setitem__", "__delitem__") and len(args) == (2 if name == "__setitem__" else 1) \
                and not kwargs:
            (self.setitem if name == "__setitem__" else self.delitem)(tx, *args)
            return ConstantVariable(None)
        if name in ("insert", "pop") and args and type(_index(args[0])) is not int:
            raise_stand_in_error(tx, list, len(self.items), name, args, kwargs, f"list.{name} at {args[0]}")
        if name in ("append", "extend", "insert", "pop", "clear", "reverse"):
            if name == "pop" and not self.items:
                raise _index_error("pop from empty list")
            if name == "pop" and args and type(_index(args[0])) is int \
                    and not -len(self.items) <= _index(args[0]) < len(self.items):
                raise _index_error("pop index out of range")
            if name == "extend" and args[0].yields_lazily:
                # An iterator is consumed item by item, each appended before the next is asked
                # for (list.extend's loop): a map or generator over the list itself sees them.
                while (item := args[0].next_item()) is not None:
                    self.mutating(tx)
                    self.items.append(item)
                return ConstantVariable(None)
            if name == "extend":
                new_items = args[0].unpack(tx)   # before the list changes (xs.extend(xs))
            self.mutating(tx)
            if name == "append":
                self.items.append(args[0])
            elif name == "extend":
                self.items.extend(new_items)
            elif name == "insert":
                self.items.insert(_index(args[0]), args[1])
            elif name == "pop":
                return self.items.pop(_index(args[0]) if args else -1)
            elif name == "clear":
                self.items.clear()
            else:
                self.items.reverse()
            return ConstantVariable(None)
        if name == "sort":
            if args or set(kwargs) - {"key", "reverse"}:
                unsupported("list.sort() with other than key= and reverse=")
            # CPython empties the list while the keys are computed: a key function sees [] and
            # one that changes the list makes sort raise ValueError (refused here).
            items, self.items = self.items, []
            version = self.version
            try:
                order = sort_order(tx, items, kwargs.get("key"), kwargs.get("reverse"), "list.sort()")
            finally:
                changed = self.items or self.version != version
                self.items = items
            if changed:
                unsupported("list.sort() with a key function that changes the list")
            self.mutating(tx)
            self.items = [items[j] for j in order]
            return ConstantVariable(None)
        if name == "copy":
            return ListVariable(self.items)
        if name == "remove":
            # The first item equal to the value goes; items compared as list.index compares them.
            i = 0
            while i < len(self.items) and not items_equal(tx, self.items[i], args[0], "list.remove"):
                i += 1
            if i >= len(self.items):
                raise_not_found(tx, list, "remove", args[0])
            self.mutating(tx)
            del self.items[i]
            return ConstantVariable(None)
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"ListVariable({self.items!r})"


def sort_order(tx, items: list, key, reverse, what: str) -> list:
    """The order sorted(items, key=key, reverse=reverse) puts the items in, as indices: the key
    traced per item (as sorting calls it, once each, in order); the keys must be constants."""
    if key is not None and key.is_python_constant() and key.as_python_constant() is None:
        key = None
    keys = [tx.call(key, [i], {}) if key is not None else i for i in items]
    if not all(k.is_python_constant() for k in keys):
        unsupported(f"{what} by keys that are not Python constants")
    reverse = reverse.as_python_constant() if reverse is not None else False
    values = [k.as_python_constant() for k in keys]
    try:
        return sorted(range(len(items)), key=values.__getitem__, reverse=bool(reverse))
    except TypeError as e:
        unsupported(f"{what} raised {e!r}")


class DictVariable(VariableTracker):
    """A dict with constant keys; `items` maps each Python key to a tracker, in order."""

    guarded_by_type = True

    version = 0

    def __init__(self, items: dict, source=None):
        super().__init__(source)
        self.items = dict(items)

    def mutating(self, tx, keys_change: bool = True):
        """Called before each mutation (side_effects.py records it where the dict has a source)."""
        tx.output.side_effects.mutate_container(self, EffectKind.SET_DICT)
        if keys_change:   # a new value for an existing key leaves an iteration over the dict alone
            self.version += 1

    def python_type(self):
        return dict

    def reconstruct(self, outputs):
        if self.source is not None:
            return _reloaded(self)
        return outputs.once(self, lambda: DictOutput(tuple((k, outputs.rebuild(v))
                                                           for k, v in self.items.items())))

    def as_python_constant(self):
        return {k: v.as_python_constant() for k, v in self.items.items()}

    def as_fx_arg(self):
        return {k: v.as_fx_arg() for k, v in self.items.items()}

    def as_example(self):
        return {k: v.as_example() for k, v in self.items.items()}

    def unpack(self, tx):
        return [key_tracker(tx, k) for k in self.items]

    def truthy(self, tx):
        return bool(self.items)

    def getitem(self, tx, key):
        k = key.dict_key(tx)
        if k not in self.items:
            raise traced(TracedKeyError, f"KeyError {k!r}", KeyError, [key])
        return self.items[k]

    def setitem(self, tx, key, value):
        k = _index(key)
        self.mutating(tx, keys_change=k not in self.items)
        self.items[k] = value

    def delitem(self, tx, key):
        k = _index(key)
        if k not in self.items:
            raise traced(TracedKeyError, f"KeyError {k!r}", KeyError, [key])
        self.mutating(tx)
        del self.items[k]

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
        if name == "get":
            k = args[0].dict_key(tx)
            if k in self.items:
                return self.items[k]
            return args[1] if len(args) > 1 else ConstantVariable(None)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__contains__":
            return ConstantVariable(args[0].dict_key(tx) in self.items)
        if name == "copy":
            return DictVariable(self.items)
        if name == "update":
            other = args[0] if args else None
            if len(args) > 1 or other is not None and not isinstance(other, (DictVariable, BaseListVariable)):
                raise_stand_in_error(tx, dict, tuple(self.items), name, args, kwargs, "dict.update from a non-dict")
            # From a dict, or from a list or tuple of (key, value) pairs (dict_items: each pair
            # unpacked as dict.update does; a pair of another length breaks).
            new = dict(other.items) if isinstance(other, DictVariable) else dict_items(tx, [other], {}) \
                if other is not None else {}
            new.update(kwargs)
            self.mutating(tx, keys_change=not new.keys() <= self.items.keys())
            self.items.update(new)
            return ConstantVariable(None)
        if name == "pop":
            k = _index(args[0])
            if k in self.items:
                self.mutating(tx)
                return self.items.pop(k)
            if len(args) > 1:
                return args[1]
            raise traced(TracedKeyError, f"KeyError {k!r}", KeyError, [args[0]])
        if name == "setdefault":
            k = _index(args[0])
            if k in self.items:
                return self.items[k]
            self.mutating(tx)
            return self.items.setdefault(k, args[1] if len(args) > 1 else ConstantVariable(None))
        if name == "popitem" and not args and not kwargs:
            return self.popitem(tx, last=True)
        if name == "clear" and not args:
            self.mutating(tx)
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

    def popitem(self, tx, last: bool):
        """dict.popitem (the last item) or OrderedDict.popitem(last=): the (key, value) pair, removed."""
        if not self.items and self.python_type() is dict:
            raise_stand_in_error(tx, dict, (), "popitem", [], {}, "popitem() of an empty dict")
        if not self.items:
            unsupported(f"KeyError: popitem() of an empty {self.python_type().__name__}")
        self.mutating(tx)
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
        if not all(v.is_python_constant() for v in d.items.values()):
            return None
        items = {k: v.as_python_constant() for k, v in d.items.items()}
        dicts.append(collections.OrderedDict(items) if issubclass(d.python_type(), collections.OrderedDict) else items)
    return dicts[0] == dicts[1]


def dict_items(tx, args, kwargs) -> dict:
    """The items `dict(*args, **kwargs)` starts with: a dict's, or an iterable's pairs, then the keywords."""
    items = {}
    if args:
        if isinstance(args[0], DictVariable):
            items.update(args[0].items)
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
        if self.kind == "keys":
            return dict.fromkeys(self.mapping.items).keys()
        return getattr(self.mapping.as_python_constant(), self.kind)()

    def contains(self, tx, item) -> bool:
        if self.kind == "keys":
            return item.dict_key(tx) in self.mapping.items
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
        # replayed on it: side_effects.py), as the dict itself is (`_reloaded`).
        mapping = outputs.rebuild(self.mapping)
        return outputs.once(self, lambda: CallOutput(AttrOutput(mapping, self.kind), (), ()))

    def __repr__(self):
        return f"DictViewVariable({self.kind} of {self.mapping!r})"


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def wrap_sequence(tx, value, source, g):
    """A list, tuple, torch.Size or named tuple: its length guarded, each item wrapped."""
    g(GuardKind.TYPE_MATCH, type(value))
    g(GuardKind.LENGTH, len(value))
    items = [tx.wrap(v, ItemSource(source, i) if source is not None else None, g.enabled)
             for i, v in enumerate(value)]
    if isinstance(value, list):
        return ListVariable(items, source)
    return TupleVariable(items, source, fields=list(getattr(type(value), "_fields", ())) or None,
                         cls=type(value))


def wrap_dict(tx, value, source, g):
    if not all(is_key_constant(k) for k in value):
        unsupported("a dict with keys other than constants, static types and objects that live as long "
                    "as the process")
    g(GuardKind.TYPE_MATCH, dict)
    g(GuardKind.DICT_KEYS, tuple(value))
    return DictVariable({k: tx.wrap(v, ItemSource(source, k) if source is not None else None, g.enabled)
                         for k, v in value.items()}, source)
