"""Containers: tuples and lists, holding variable trackers, and what dicts (dicts.py) share with
them (iterators over them: iterators.py; ranges: ranges.py; closure cells: cells.py; OrderedDict
and defaultdict built in the trace: dict_subclasses.py; named tuples: namedtuples.py).

A list or dict read from the frame carries a source; mutating one (append, setitem, ...) updates
its tracker, so later reads in the trace see the change, and is recorded for replay on the real
object after the graph (tracer/side_effects.py, `mutating`); returned or held at a break, it is
loaded again by its source, the caller's very object (`reloaded`). Containers built while tracing
(source None) are mutated freely and rebuilt from their items, once however often they are
reached (`outputs.once`: returned twice, or held by another container, they are one object after
the graph). Every mutation that changes what an iteration would yield bumps `version`, which
the iterators over the container (iterators.py) check. list.extend consumes an iterator or a
generator item by item (`yields_lazily`), as Python does.
"""
from __future__ import annotations

from ....guard.attribute_lookup import MISSING, type_lookup
from ....guard.process_lived import IMMUTABLE_SCALAR_TYPES, holdable_key
from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import EffectKind, GuardKind, ListOutput, SourceOutput, TupleOutput
from ..base import (MethodVariable, TracedIndexError, TracedRaise, VariableTracker, is_static_type,
                    unsupported)
from ..constant import ConstantVariable, is_constant_value, raise_of_message
from .object_keys import ObjectKey
from .sequence_checks import (CHECKED_ON_STAND_IN, arity_error, check_comparing_call, is_iterable, items_equal,
                              raise_not_found, raise_stand_in_error)


def _index_error(message: str) -> TracedRaise:
    return raise_of_message(TracedIndexError, IndexError, message)


def constant_index(key: VariableTracker):
    if not key.is_python_constant():
        unsupported(f"index by a non-constant {key}")
    return key.as_python_constant()


def is_key_constant(value, depth: int = 0) -> bool:
    """A dict key or set item the guards may hold (the C++ rule, guards/value_rules.h
    is_key_constant): int, float, complex, bool, str, bytes, None, a static type (dict, list, ...),
    an object that lives as long as the process and hashes and compares by identity
    (process_lived.holdable_key: typing.Union, collections.abc.Sequence, a library's functions such
    as `operator.add`; vouched for to the guard tree there), and tuples of them nested less deep
    than the C++ rule's bound. Hashing or comparing one runs no user code, and its hash, so its
    place in a set, is the same for the whole process."""
    if value is None or type(value) in IMMUTABLE_SCALAR_TYPES or is_static_type(value):
        return True
    if type(value) is tuple:
        return depth < 16 and all(is_key_constant(v, depth + 1) for v in value)
    return holdable_key(value)


def key_tracker(tx, key):
    """The tracker of a dict's key (its iteration, keys(), items(), popitem()): an object of the
    trace's own (object_keys.ObjectKey) is its tracker."""
    if type(key) is ObjectKey:
        return key.tracker
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


def reloaded(container):
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
        # One spec per tracker (guard/trace_result.py): reached twice, it is one object after the graph.
        return outputs.once(self, lambda: self._spec(tuple(outputs.rebuild(item) for item in self.items)))

    def _spec(self, items: tuple):
        if self.kind is list:
            return ListOutput(items)
        return TupleOutput(items, self.cls if self.cls is not tuple else None)

    def as_python_constant(self):
        items = self.kind(i.as_python_constant() for i in self.items)
        if self.cls not in (None, tuple) and self.fields is None and is_static_type(self.cls):
            # a tuple subclass written in C and made from its items (torch.Size, which a tensor's
            # symbolic shape is): its own value, as str() and == see it, not a plain tuple
            return self.cls(items)
        return items

    def as_fx_arg(self):
        return self.kind(i.as_fx_arg() for i in self.items)

    def as_example(self):
        return self.kind(i.as_example() for i in self.items)

    def unpack(self, tx):
        return list(self.items)

    def made_by_base(self, items):
        """What the base type's own code makes of these items (a slice, `+`, `*`): a sequence of
        this tracker's kind (list_subclasses.py: a plain list from a subclass's object)."""
        return type(self)(items)

    def truthy(self, tx):
        return bool(self.items)

    @property
    def truth_is_length(self) -> bool:
        """Whether bool() of it is its length (a list or tuple itself; a subclass may say otherwise)."""
        return self.python_type() in (list, tuple)

    def getitem(self, tx, key):
        k = constant_index(key)
        if isinstance(k, slice) and k.step != 0:
            return self.made_by_base(self.items[k])
        if isinstance(k, int) and -len(self.items) <= k < len(self.items):
            return self.items[k]
        if isinstance(k, int) and self.kind in (list, tuple):   # the items are exact (guarded lengths)
            raise _index_error(f"{self.kind.__name__} index out of range")
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
            start, stop = [constant_index(a) for a in args[1:]] + [None] * (3 - len(args))
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
            return outputs.once(self, lambda: reloaded(self))
        return super().reconstruct(outputs)

    def __repr__(self):
        return f"TupleVariable({self.items!r})"


class ListVariable(BaseListVariable):
    kind = list
    guarded_by_type = True

    # How many positional arguments each method traced here takes (none takes a keyword but sort).
    _ARG_COUNTS = {"append": (1,), "extend": (1,), "insert": (2,), "pop": (0, 1), "clear": (0,),
                   "reverse": (0,), "copy": (0,), "remove": (1,), "__iadd__": (1,)}

    version = 0

    def reconstruct(self, outputs):
        return reloaded(self) if self.source is not None else super().reconstruct(outputs)

    def mutating(self, tx):
        """Called before each mutation (side_effects.py records it where the list has a source)."""
        tx.output.side_effects.mutate_container(self, EffectKind.SET_LIST)
        self.version += 1

    def setitem(self, tx, key, value):
        k = constant_index(key)
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
        k = constant_index(key)
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
        if name in ("insert", "pop") and args and type(constant_index(args[0])) is not int:
            raise_stand_in_error(tx, list, len(self.items), name, args, kwargs, f"list.{name} at {args[0]}")
        if name in ("append", "extend", "insert", "pop", "clear", "reverse"):
            if name == "pop" and not self.items:
                raise _index_error("pop from empty list")
            if name == "pop" and args and type(constant_index(args[0])) is int \
                    and not -len(self.items) <= constant_index(args[0]) < len(self.items):
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
                self.items.insert(constant_index(args[0]), args[1])
            elif name == "pop":
                return self.items.pop(constant_index(args[0]) if args else -1)
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
        if name == "__iadd__":
            # `xs += it` called by its name: extends in place (an iterator item by item) and
            # returns the list itself; a constant that is no iterable raises list's TypeError.
            if args[0].is_python_constant() and not is_iterable(args[0].as_python_constant()):
                raise_stand_in_error(tx, list, len(self.items), name, args, kwargs, "list.__iadd__")
            self.call_method(tx, "extend", args, {})
            return self
        if name == "__imul__" and len(args) == 1 and not kwargs and args[0].is_python_constant() \
                and type(args[0].as_python_constant()) in (int, bool):
            # `xs *= n` by its name: repeats in place (a count below 1 empties it), returns the list.
            self.mutating(tx)
            self.items[:] = self.items * args[0].as_python_constant()
            return self
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


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def wrap_sequence(tx, value, source, g):
    """A list, tuple, torch.Size or named tuple: its length guarded, each item wrapped.

    A list that holds itself, directly or through others (`root[:] = [root, None]`), is reached
    again while its items are wrapped: that item is the very tracker being made, pinned as the
    same object (ALIAS_OF its source), so a list whose item later is another recompiles. A tuple
    reached again so (through a list it holds) breaks."""
    pending = tx.output.sequences_in_wrap   # id(sequence) -> its tracker (None: a tuple's), while wrapped
    if id(value) in pending:
        outer = pending[id(value)]
        if outer is None or outer.source is None or source is None:
            unsupported(f"a {type(value).__name__} that holds itself, read without a source for each place")
        g(GuardKind.ALIAS_OF, outer.source)
        return outer
    g(GuardKind.TYPE_MATCH, type(value))
    g(GuardKind.LENGTH, len(value))
    made = ListVariable([], source) if isinstance(value, list) else None
    pending[id(value)] = made
    try:
        items = [tx.wrap(v, ItemSource(source, i) if source is not None else None, g.enabled)
                 for i, v in enumerate(value)]
    finally:
        del pending[id(value)]
    if made is not None:
        made.items = items
        return made
    return TupleVariable(items, source, fields=list(getattr(type(value), "_fields", ())) or None,
                         cls=type(value))
