"""Iterators over traced containers: iter(), reversed(), enumerate(), zip(), and the for loop's.

An iterator over a list is live (ListIteratorVariable: Python's list iterator reads the list as it
is at each step), and so are reversed, enumerate and zip built on it (they compute each item when
asked); other iterators (over a dict, a tuple, a module's children) hold the items read when they
were made and refuse to go on, or to be rebuilt at a graph break, after the container changed
(Python's would see the change, or raise); containers.py bumps `version` on every such change.
Every iterator knows the type of Python's (`kind`), for isinstance, and yields its items one at a
time (`next_item`, `yields_lazily`): list.extend consumes one item by item, as Python does.
"""
from __future__ import annotations

import collections

from ....guard.trace_result import (CallOutput, ConstantOutput, DictOutput, IterOutput, ListOutput, TupleOutput, Unsupported,
                                    call_with, reversed_at)
from ..base import TracedRaise, VariableTracker, is_static_type, unsupported
from ..constant import ConstantVariable, is_constant_value, raise_of_message
from .containers import ListVariable, TupleVariable, key_tracker
from .dicts import DictVariable, DictViewVariable
from .ranges import RangeVariable
from .sets import SetVariable

# Containers whose iteration reads nothing but their items: an iterator over one is made again
# after the graph as Python's own iterator over the rebuilt container, advanced as far as the
# trace advanced it (its type, and what it yields next, are eager's).
_PLAIN_ITERABLES = (ListVariable, TupleVariable, DictVariable, DictViewVariable, RangeVariable)


class IteratorVariable(VariableTracker):
    """An iterator over known items (enumerate's, zip's, reversed's, a dict's); FOR_ITER advances
    `index`. `origin`: the tracker iterated, if known (a graph break rebuilds the iterator from
    it). `watch`: what these items were read from (origin by default): lists, dicts, dict views
    and other iterators, down to their lists and dicts. A change of one of those while the
    iteration goes on would show in Python's iterator but not in these items, so going on is
    refused, and so is rebuilding the iterator at a graph break (`changed`)."""

    yields_lazily = True

    def __init__(self, items: list, origin=None, watch=None, kind: type | None = None):
        super().__init__(None)
        self.items = items
        self.index = 0
        self.origin = origin
        self.kind = kind   # the type of Python's iterator (enumerate, list_iterator, ...), if known
        watch = (origin,) if watch is None else watch
        self._watch = [(c, c.version) for c in iterated_containers(watch)]
        self._sized = _size_checked(kind, watch)
        self._done = False

    def python_type(self):
        if self.kind is None:
            unsupported("type of an iterator whose Python type is not known")
        return self.kind

    @property
    def watched(self) -> list:
        """The lists and dicts whose items these are."""
        return [container for container, _ in self._watch]

    @property
    def changed(self) -> bool:
        """Whether a list or dict these items were read from changed since."""
        return any(container.version != version for container, version in self._watch)

    def _check_unchanged(self):
        if self.changed:
            if self._sized is not None and not self._done:
                container, size, message = self._sized
                if len(container.items) != size:   # Python's check, made before any other
                    self._sized = (container, -1, message)   # and Python's iterator raises ever after
                    raise raise_of_message(TracedRaise, RuntimeError, message)
            unsupported("a list, dict or set changed while a loop iterates over it")

    def rest(self) -> list:
        """The items still to come, the iterator left where it is."""
        return self.items[self.index:]

    def has_attribute(self, tx, name: str) -> bool:
        """hasattr(it, name): what its type has. Python's iterator types are static types whose
        instances have no __dict__, so the type alone answers."""
        if self.kind is None or not is_static_type(self.kind) or self.kind.__dictoffset__:
            unsupported(f"hasattr on an iterator whose type is not a known builtin ({name!r})")
        return hasattr(self.kind, name)

    def next_item(self):
        if self._done and self._sized is not None:
            return None   # an exhausted dict or set iterator no longer reads its container
        self._check_unchanged()
        if self.index >= len(self.items):
            self._done = True   # Python's dict and set iterators drop their container here
            return None
        self.index += 1
        return self.items[self.index - 1]

    def unpack(self, tx):
        if self._done and self._sized is not None:
            return []
        self._check_unchanged()
        rest = self.items[self.index:]
        self.index = len(self.items)
        self._done = True
        return rest

    def reconstruct(self, outputs):
        """Python's iterator over the rebuilt container it iterates (the very object, reloaded from
        its source or made once), advanced past the items the trace took; or, over anything else,
        a tuple iterator over the items still to come where that is the type eager's has."""
        if self.changed:   # Python's iterator saw the change (or raises RuntimeError for a dict's)
            unsupported("an iterator over a list or dict that changed since it was made")
        if isinstance(self.origin, _PLAIN_ITERABLES) and self.kind is iterator_type(self.origin):
            return outputs.once(self, lambda: IterOutput(outputs.rebuild(self.origin), self.index))
        if self.kind not in (None, _TUPLE_ITERATOR):
            unsupported(f"a {self.kind.__name__} object over a {self.origin} (it would be made again as a "
                        "tuple iterator)")
        if any(c.source is None for c in self.watched):
            unsupported("an iterator over the items of a list or dict the trace built, read when it was made")
        return outputs.once(self, lambda: IterOutput(None, 0, tuple(outputs.rebuild(i) for i in self.rest())))


_TUPLE_ITERATOR = type(iter(()))

# Python's iterators over a dict (its views, reversed) and over a set compare, at each step, the
# container's size with its size when the iterator was made: a difference raises RuntimeError with
# this message, whatever else changed, and keeps raising it. A change that keeps the size is
# followed through the hash table's layout, which the trace does not model: refused.
_SIZE_MESSAGES = {
    **{type(it): "dictionary changed size during iteration"
       for d in ({},) for it in (iter(d), iter(d.keys()), iter(d.values()), iter(d.items()), reversed(d),
                                 reversed(d.keys()), reversed(d.values()), reversed(d.items()))},
    type(iter(set())): "Set changed size during iteration"}


def _size_checked(kind, watch):
    """(container, its size now, the message) where Python's iterator of type `kind` over the one
    container in `watch` checks that container's size at each step; else None."""
    message = _SIZE_MESSAGES.get(kind)
    if message is None or len(watch) != 1:
        return None
    container = watch[0].mapping if isinstance(watch[0], DictViewVariable) else watch[0]
    if not (isinstance(container, DictVariable) and container.python_type() is dict
            or isinstance(container, SetVariable) and container.python_type() in (set, frozenset)):
        return None
    return container, len(container.items), message


class DictIteratorVariable(IteratorVariable):
    """Python's iterator over a plain dict or one of its views (`iter(d)`, `iter(d.values())`,
    `reversed(d.items())`, a for loop's). Each step yields the next key, and for values and items
    the value that key holds at that moment, as Python's reads it (a value replaced while the loop
    runs shows). A change of the dict's keys while it runs: where the dict's layout is followed
    (DictVariable.table), a real iterator over that table, made with this one and stepped with it,
    says what Python's does: the next key, the end, or RuntimeError ("dictionary changed size
    during iteration", "dictionary keys changed during iteration"); elsewhere a change of size
    raises (IteratorVariable) and one that keeps it is refused."""

    def __init__(self, tx, origin, mapping: DictVariable, view: str, reverse: bool, kind: type):
        keys = list(reversed(mapping.items) if reverse else mapping.items)
        self._keys = {k: key_tracker(tx, k) for k in keys}
        super().__init__(list(self._keys), origin=origin, watch=(mapping,), kind=kind)
        self.mapping, self.view = mapping, view
        self._table = mapping.table
        real = None
        if self._table is not None:
            real = getattr(self._table, view)() if view != "keys" else self._table
            real = reversed(real) if reverse else iter(real)
        self._real = real

    def _item(self, k):
        if self.view == "keys":
            return self._key(k)
        if k not in self.mapping.items:
            unsupported("a dict iterator at a key the dict no longer holds (tracer bug)")
        if self.view == "values":
            return self.mapping.items[k]
        return TupleVariable([self._key(k), self.mapping.items[k]])

    def _key(self, k):
        if k not in self._keys:
            if not is_constant_value(k):
                unsupported(f"a dict iterator reaching a new key {type(k).__name__}")
            self._keys[k] = ConstantVariable(k)
        return self._keys[k]

    def _real_next(self):
        """The real iterator's next key (_END at its end), its RuntimeError raised in the trace."""
        try:
            found = next(self._real)
        except StopIteration:
            return _END
        except RuntimeError as e:
            raise raise_of_message(TracedRaise, RuntimeError, str(e)) from None
        return found[0] if self.view == "items" else found

    def _followed(self) -> bool:
        """Whether the real iterator still steps over the dict's own layout: its table is the one
        the dict keeps, holding the dict's keys in the dict's order."""
        return self._real is not None and self.mapping.table is self._table and \
            list(self._table) == list(self.mapping.items)

    def next_item(self):
        if not self.changed:   # the keys read when it was made, the real iterator in step
            k = _END
            if self.index < len(self.items):
                k = self.items[self.index]
                self.index += 1
            self._done = k is _END
            if self._real is not None:
                real = self._real_next()
                if real is not k and (real is _END or k is _END or real != k):
                    self._real = None   # out of step (tracer bug): the layout is not followed
            return None if k is _END else self._item(k)
        if not self._followed():
            if self._done:
                return None   # an exhausted dict iterator no longer reads its dict
            self._check_unchanged()   # a change of size raises; any other is refused
        k = self._real_next()
        self._done = k is _END
        return None if k is _END else self._item(k)

    def unpack(self, tx):
        items = []
        while (item := self.next_item()) is not None:
            items.append(item)
        return items

    def rest(self) -> list:
        if self.changed:
            unsupported("the rest of a dict iterator whose dict changed")
        return [self._item(k) for k in self.items[self.index:]]


_END = object()   # a dict iterator's end (a key may be None)


def dict_iterator(tx, obj, reverse: bool = False):
    """Python's iterator over a plain dict tracker or a view of one (DictIteratorVariable), else
    None."""
    view = obj.kind if isinstance(obj, DictViewVariable) else "keys"
    mapping = obj.mapping if isinstance(obj, DictViewVariable) else obj
    if type(mapping) is not DictVariable or mapping.python_type() is not dict:
        return None
    if reverse and isinstance(obj, DictViewVariable):
        kind = _REVERSED_VIEW_TYPES[view]
    else:
        kind = iterator_type(obj, REVERSED_TYPES if reverse else None)
    if kind is None:
        return None
    return DictIteratorVariable(tx, obj, mapping, view, reverse, kind)


# A live iteration over a list yields at most this many items in one trace (`for v in l:
# l.append(v)` never ends in Python either; the frame then runs as written).
_MAX_LIVE_ITEMS = 100_000


class ListIteratorVariable(IteratorVariable):
    """`iter(l)` (GET_ITER, a for loop) over a list tracker: live, as Python's list iterator is. Each
    step reads `l.items[index]` as the list is at that moment, so items appended while the loop
    runs (or after the iterator was made and before it is consumed) are yielded, as in eager;
    once exhausted it stays exhausted, whatever is appended later."""

    def __init__(self, lst: ListVariable):
        super().__init__([], origin=lst, watch=(), kind=type(iter([])))
        self.exhausted = False

    @property
    def watched(self) -> list:
        return [self.origin]

    @property
    def changed(self) -> bool:
        return False

    def rest(self) -> list:
        return [] if self.exhausted else self.origin.items[self.index:]

    def next_item(self):
        items = self.origin.items
        if self.exhausted or self.index >= len(items):
            self.exhausted = True
            return None
        if self.index >= _MAX_LIVE_ITEMS:
            unsupported(f"a loop over a list that grew past {_MAX_LIVE_ITEMS} items while it ran")
        self.index += 1
        return items[self.index - 1]

    def unpack(self, tx):
        rest = self.rest()
        self.index += len(rest)
        self.exhausted = True
        return rest

    def reconstruct(self, outputs):
        """Python's list iterator over the rebuilt list (the very list, wherever else it is
        reached), at the trace's index; once exhausted, an exhausted list iterator."""
        if self.exhausted:
            return outputs.once(self, lambda: IterOutput(ListOutput(()), 0))
        if self.index > len(self.origin.items):   # the list shrank under it: a later append shows
            unsupported("a list iterator past the end of its list, which shrank")
        return outputs.once(self, lambda: IterOutput(outputs.rebuild(self.origin), self.index))


class _ComputedIterator(IteratorVariable):
    """An iterator whose items are computed when asked for, from live parts (reversed, enumerate
    and zip below): the order of reads is Python's, and a list changed before or while it is
    consumed shows through, as in eager. At a graph break the items still to come (`rest`) are
    what a loop's rebuilt iterator yields (tracer/rebuild.py)."""

    def __init__(self, kind: type):
        super().__init__([], watch=(), kind=kind)

    def unpack(self, tx):
        items = []
        while (item := self.next_item()) is not None:
            items.append(item)
            tx.output.spend()   # an endless one (zip over endless children) ends at the budget
        return items


class ReversedListVariable(_ComputedIterator):
    """`reversed(l)` over a list tracker, as Python's list_reverseiterator: it starts at the last
    index the list had when it was made and reads the list as it is at each step."""

    def __init__(self, lst: ListVariable):
        super().__init__(type(reversed([])))
        self.list = lst
        self.position = len(lst.items) - 1

    @property
    def watched(self) -> list:
        return [self.list]

    @property
    def changed(self) -> bool:
        return False

    def rest(self) -> list:
        items = self.list.items
        return items[self.position::-1] if 0 <= self.position < len(items) else []

    def next_item(self):
        items = self.list.items
        if not 0 <= self.position < len(items):
            self.position = -1   # exhausted for good
            return None
        self.position -= 1
        return items[self.position + 1]

    def reconstruct(self, outputs):
        """reversed() over the rebuilt list, set to the trace's position (-1: exhausted)."""
        if self.position >= len(self.list.items):   # Python's ends at its next step; a rebuilt one would not
            unsupported("a reversed() iterator past the end of its list, which shrank")
        return outputs.once(self, lambda: CallOutput(ConstantOutput(reversed_at), ("seq", "position"),
                                                     (outputs.rebuild(self.list), ConstantOutput(self.position))))


class EnumerateVariable(_ComputedIterator):
    """`enumerate(it, start)`: each item is the next of `child` (an iterator tracker), counted."""

    def __init__(self, child: IteratorVariable, start: int):
        super().__init__(enumerate)
        self.child, self.count = child, start

    @property
    def watched(self) -> list:
        return self.child.watched

    @property
    def changed(self) -> bool:
        return self.child.changed

    def rest(self) -> list:
        return [TupleVariable([ConstantVariable(self.count + j), item]) for j, item in enumerate(self.child.rest())]

    def next_item(self):
        item = self.child.next_item()
        if item is None:
            return None
        self.count += 1
        return TupleVariable([ConstantVariable(self.count - 1), item])

    def reconstruct(self, outputs):
        """enumerate() over its rebuilt iterator, counting on from the trace's count."""
        return outputs.once(self, lambda: CallOutput(ConstantOutput(call_with), ("fn", "args", "kwargs"), (
            ConstantOutput(enumerate), TupleOutput((outputs.rebuild(self.child), ConstantOutput(self.count))),
            DictOutput(()))))


class ZipVariable(_ComputedIterator):
    """`zip(*its)`: one item from each child in turn, stopping at the first exhausted one (the
    children before it have given one item more, as in Python)."""

    def __init__(self, children: list):
        super().__init__(zip)
        self.children = children

    @property
    def watched(self) -> list:
        return [c for child in self.children for c in child.watched]

    @property
    def changed(self) -> bool:
        return any(child.changed for child in self.children)

    def rest(self) -> list:
        return [TupleVariable(list(t)) for t in zip(*(child.rest() for child in self.children))]

    def next_item(self):
        if not self.children:   # zip() yields nothing
            return None
        items = []
        for child in self.children:
            item = child.next_item()
            if item is None:
                return None
            items.append(item)
        return TupleVariable(items)

    def reconstruct(self, outputs):
        """zip() over its rebuilt iterators."""
        return outputs.once(self, lambda: CallOutput(ConstantOutput(call_with), ("fn", "args", "kwargs"), (
            ConstantOutput(zip), TupleOutput(tuple(outputs.rebuild(c) for c in self.children)), DictOutput(()))))


def iterated_containers(values):
    """The lists, dicts and sets that iterating over each of `values` reads, as it goes."""
    for v in values:
        if isinstance(v, DictViewVariable):
            yield v.mapping
        elif isinstance(v, (ListVariable, DictVariable, SetVariable)) or getattr(v, "watched_while_iterated", False):
            yield v
        elif isinstance(v, IteratorVariable):
            yield from v.watched


# The type of Python's iterator over each type of iterable the trace knows (what `iter(x)` and
# `reversed(x)` return): isinstance(it, type(iter([]))) and friends answer as eager.
_ITERATOR_TYPES = {tuple: type(iter(())), list: type(iter([])), dict: type(iter({})), range: type(iter(range(0))),
                   set: type(iter(set())), frozenset: type(iter(frozenset())),
                   collections.deque: type(iter(collections.deque())),
                   **{view: type(iter(view_of)) for view_of in ({}.keys(), {}.values(), {}.items())
                      for view in (type(view_of),)}}
REVERSED_TYPES = {tuple: type(reversed(())), list: type(reversed([])), range: type(reversed(range(0))),
                   dict: type(reversed({}))}
# reversed() over a plain dict's view (DictIteratorVariable only: an OrderedDict's views reverse
# into OrderedDict's own iterator type).
_REVERSED_VIEW_TYPES = {kind: type(reversed(getattr({}, kind)())) for kind in ("keys", "values", "items")}


def iterator_type(obj, table=None) -> type | None:
    """The type of Python's `iter(obj)` (or, with REVERSED_TYPES, `reversed(obj)`), if known. Asks
    for no constant value: that could guard a function by identity (functions.py)."""
    if isinstance(obj, ConstantVariable):   # a string, bytes: the type depends on the value
        try:
            return type(reversed(obj.value) if table is REVERSED_TYPES else iter(obj.value))
        except TypeError:
            return None
    try:
        cls = obj.python_type()
    except Unsupported:
        return None
    table = table or _ITERATOR_TYPES
    return next((table[base] for base in cls.__mro__ if base in table), None)


def iterate(tx, obj) -> IteratorVariable:
    """GET_ITER over a tracker with known items: Python's list iterator for a list, else the items
    read now, watched (IteratorVariable)."""
    if isinstance(obj, ListVariable):
        return ListIteratorVariable(obj)
    if isinstance(obj, ConstantVariable) and type(obj.value) in _NOT_ITERABLE:   # `for k in 7`
        raise raise_of_message(TracedRaise, TypeError, f"'{type(obj.value).__name__}' object is not iterable")
    return dict_iterator(tx, obj) or IteratorVariable(obj.unpack(tx), origin=obj, kind=iterator_type(obj))


# Constants whose type has neither __iter__ nor __getitem__: iter() of one raises TypeError.
_NOT_ITERABLE = (int, float, bool, complex, type(None))
