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

from ...trace_result import Unsupported
from .base import VariableTracker, unsupported
from .constant import ConstantVariable
from .containers import DictVariable, DictViewVariable, ListVariable, TupleVariable


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
            unsupported("a list or dict changed while a loop iterates over it")

    def rest(self) -> list:
        """The items still to come, the iterator left where it is."""
        return self.items[self.index:]

    def next_item(self):
        self._check_unchanged()
        if self.index >= len(self.items):
            return None
        self.index += 1
        return self.items[self.index - 1]

    def unpack(self, tx):
        self._check_unchanged()
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest


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
        items = []
        for child in self.children:
            item = child.next_item()
            if item is None:
                return None
            items.append(item)
        return TupleVariable(items)


def iterated_containers(values):
    """The lists and dicts that iterating over each of `values` reads, as it goes."""
    for v in values:
        if isinstance(v, DictViewVariable):
            yield v.mapping
        elif isinstance(v, (ListVariable, DictVariable)):
            yield v
        elif isinstance(v, IteratorVariable):
            yield from v.watched


# The type of Python's iterator over each type of iterable the trace knows (what `iter(x)` and
# `reversed(x)` return): isinstance(it, type(iter([]))) and friends answer as eager.
_ITERATOR_TYPES = {tuple: type(iter(())), list: type(iter([])), dict: type(iter({})), range: type(iter(range(0))),
                   set: type(iter(set())), frozenset: type(iter(frozenset())),
                   **{view: type(iter(view_of)) for view_of in ({}.keys(), {}.values(), {}.items())
                      for view in (type(view_of),)}}
REVERSED_TYPES = {tuple: type(reversed(())), list: type(reversed([])), range: type(reversed(range(0))),
                   dict: type(reversed({}))}


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
    return IteratorVariable(obj.unpack(tx), origin=obj, kind=iterator_type(obj))
