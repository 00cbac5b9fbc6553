"""collections.deque in the trace: DequeVariable, its items as trackers, as CPython's deque runs.

Read from the frame (an exact deque), it is guarded by its type, its length and its `maxlen`
(`L['q'].maxlen`), each item through `L['q'][i]`; what the trace changes in it (append, pop,
rotate, ...) updates the tracker, so later reads see it, and is replayed on the very deque after
the graph (EffectKind.SET_LIST: its final items, cleared and extended), which is then the object
the caller gets back. Built in the trace (`collections.deque(iterable, maxlen)`), it is made again
after the graph from its items and maxlen. A full deque drops items from the other end as
CPython's does; `insert` into one raises its IndexError, and pop of an empty one, an index out of
range, `index`/`remove` of a missing item raise theirs in the trace.

Refused (a graph break): slices (a deque takes none: TypeError), item assignment, `count`,
`index`, `remove` and `in` over items that are not constants (an item's own __eq__ may say
anything), deque subclasses, and keeping an iterator over it across a graph break.
"""
from __future__ import annotations

import collections

from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import CallOutput, ConstantOutput, EffectKind, GuardKind, ListOutput, SourceOutput
from ..base import MethodVariable, TracedIndexError, TracedRaise, VariableTracker, unsupported
from ..constant import ConstantVariable, raise_of_message

_DEQUE_ITERATOR = type(iter(collections.deque()))


class DequeVariable(VariableTracker):
    guarded_by_type = True
    watched_while_iterated = True   # iterators.py: a change while a loop runs over it is refused

    def __init__(self, items, maxlen=None, source=None):
        super().__init__(source)
        self.items = list(items)
        self.maxlen = maxlen
        self.version = 0

    def python_type(self):
        return collections.deque

    def __repr__(self):
        return f"DequeVariable({self.items!r}, maxlen={self.maxlen})"

    # -- reads ------------------------------------------------------------------------------
    def unpack(self, tx):
        return list(self.items)

    def length(self, tx) -> int:
        return len(self.items)

    def truthy(self, tx) -> bool:
        return bool(self.items)

    def iterator_kind(self):
        return _DEQUE_ITERATOR

    def getitem(self, tx, key):
        index = key.as_python_constant() if key.is_python_constant() else None
        if type(index) is not int:
            unsupported(f"deque index {key}")
        if not -len(self.items) <= index < len(self.items):
            raise raise_of_message(TracedIndexError, IndexError, "deque index out of range")
        return self.items[index]

    def _constant_items(self, what: str) -> list:
        if not all(i.is_python_constant() for i in self.items):
            unsupported(f"deque.{what} over items that are not constants")
        return [i.as_python_constant() for i in self.items]

    def contains(self, tx, item) -> bool:
        if not item.is_python_constant():
            unsupported(f"membership of {item} in a deque")
        return item.as_python_constant() in self._constant_items("__contains__")

    def var_getattr(self, tx, name):
        if name == "maxlen":
            return ConstantVariable(self.maxlen)
        return MethodVariable(self, name)

    # -- changes ----------------------------------------------------------------------------
    def mutating(self, tx):
        """Before each change: recorded for replay where the deque came from the frame."""
        tx.output.side_effects.mutate_container(self, EffectKind.SET_LIST)
        self.version += 1

    def _add(self, tx, item, left: bool):
        self.mutating(tx)
        if self.maxlen == 0:
            return
        if left:
            self.items.insert(0, item)
        else:
            self.items.append(item)
        if self.maxlen is not None and len(self.items) > self.maxlen:
            del self.items[-1 if left else 0]

    def call_method(self, tx, name, args, kwargs):
        if kwargs:
            unsupported(f"deque.{name} with keywords")
        handler = _METHODS.get((name, len(args)))
        if handler is None:
            unsupported(f"deque.{name} with {len(args)} arguments")
        result = handler(self, tx, *args)
        return ConstantVariable(None) if result is None else result

    def _pop(self, tx, left: bool):
        if not self.items:
            raise raise_of_message(TracedIndexError, IndexError, "pop from an empty deque")
        self.mutating(tx)
        return self.items.pop(0 if left else -1)

    def _extend(self, tx, iterable, left: bool):
        for item in iterable.unpack(tx):   # read whole first: `d.extend(d)` doubles it once
            self._add(tx, item, left)

    def _rotate(self, tx, steps=None):
        n = 1 if steps is None else steps.as_python_constant() if steps.is_python_constant() else None
        if type(n) is not int:
            unsupported(f"deque.rotate({steps})")
        self.mutating(tx)
        if self.items:
            n %= len(self.items)
            self.items[:] = self.items[-n:] + self.items[:-n] if n else self.items

    def _clear(self, tx):
        self.mutating(tx)
        self.items.clear()

    def _reverse(self, tx):
        self.mutating(tx)
        self.items.reverse()

    def _insert(self, tx, index, item):
        i = index.as_python_constant() if index.is_python_constant() else None
        if type(i) is not int:
            unsupported(f"deque.insert at {index}")
        if self.maxlen is not None and len(self.items) >= self.maxlen:
            raise raise_of_message(TracedIndexError, IndexError, "deque already at its maximum size")
        self.mutating(tx)
        self.items.insert(i, item)

    def _find(self, tx, value, what: str, start=None, stop=None):
        if not value.is_python_constant():
            unsupported(f"deque.{what} of {value}")
        target = value.as_python_constant()
        items = self._constant_items(what)
        lo, hi = _index_bounds(len(items), start, stop)
        for i in range(lo, hi):
            if items[i] is target or items[i] == target:
                return i
        message = f"{target!r} is not in deque"
        raise raise_of_message(TracedRaise, ValueError, message)

    def _remove(self, tx, value):
        i = self._find(tx, value, "remove")
        self.mutating(tx)
        del self.items[i]

    def _count(self, tx, value):
        if not value.is_python_constant():
            unsupported(f"deque.count of {value}")
        target = value.as_python_constant()
        return ConstantVariable(sum(1 for v in self._constant_items("count") if v is target or v == target))

    # -- after the graph --------------------------------------------------------------------
    def reconstruct(self, outputs):
        if self.source is not None:   # its changes were replayed on it: the caller's very deque
            return outputs.once(self, lambda: SourceOutput(self.source))
        return outputs.once(self, lambda: CallOutput(ConstantOutput(collections.deque), ("iterable", "maxlen"), (
            ListOutput(tuple(outputs.rebuild(i) for i in self.items)), ConstantOutput(self.maxlen))))


_METHODS = {
    ("append", 1): lambda d, tx, x: d._add(tx, x, False),
    ("appendleft", 1): lambda d, tx, x: d._add(tx, x, True),
    ("pop", 0): lambda d, tx: d._pop(tx, False),
    ("popleft", 0): lambda d, tx: d._pop(tx, True),
    ("extend", 1): lambda d, tx, it: d._extend(tx, it, False),
    ("extendleft", 1): lambda d, tx, it: d._extend(tx, it, True),
    ("rotate", 0): DequeVariable._rotate, ("rotate", 1): DequeVariable._rotate,
    ("clear", 0): DequeVariable._clear,
    ("reverse", 0): DequeVariable._reverse,
    ("insert", 2): DequeVariable._insert,
    ("remove", 1): DequeVariable._remove,
    ("count", 1): DequeVariable._count,
    ("index", 1): lambda d, tx, v: ConstantVariable(d._find(tx, v, "index")),
    ("index", 2): lambda d, tx, v, lo: ConstantVariable(d._find(tx, v, "index", lo)),
    ("index", 3): lambda d, tx, v, lo, hi: ConstantVariable(d._find(tx, v, "index", lo, hi)),
    ("copy", 0): lambda d, tx: DequeVariable(d.items, d.maxlen),
    ("__copy__", 0): lambda d, tx: DequeVariable(d.items, d.maxlen),
    ("__len__", 0): lambda d, tx: ConstantVariable(len(d.items)),
    ("__getitem__", 1): lambda d, tx, k: d.getitem(tx, k),
    ("__contains__", 1): lambda d, tx, v: ConstantVariable(d.contains(tx, v)),
}


def _index_bounds(n: int, start, stop) -> tuple:
    """deque.index's search range, clipped as CPython's deque_index clips it: a negative bound
    counts from the end and stops at 0, the stop at most the length, the start at most the stop.
    Bounds that are not ints (eager raises TypeError, or takes `__index__`) are a graph break."""
    bounds = []
    for bound, default in ((start, 0), (stop, n)):
        value = default if bound is None else bound.as_python_constant() if bound.is_python_constant() else None
        if type(value) not in (int, bool):
            unsupported(f"deque.index with the bound {bound}")
        if value < 0:
            value = max(value + n, 0)
        bounds.append(value)
    lo, hi = bounds[0], min(bounds[1], n)
    return min(lo, hi), hi


def build_deque(tx, args, kwargs):
    """collections.deque(iterable=(), maxlen=None) called in the trace."""
    names = ("iterable", "maxlen")
    if len(args) > 2 or set(kwargs) - set(names) or any(n in kwargs for n in names[:len(args)]):
        unsupported("collections.deque with these arguments")
    given = dict(zip(names, args), **kwargs)
    maxlen = given.get("maxlen", ConstantVariable(None))
    maxlen = maxlen.as_python_constant() if maxlen.is_python_constant() else NotImplemented
    if not (maxlen is None or type(maxlen) is int and maxlen >= 0):
        unsupported(f"collections.deque(maxlen={maxlen!r})")
    made = DequeVariable([], maxlen)
    if "iterable" in given:
        made._extend(tx, given["iterable"], False)
    return made


def wrap_deque(tx, value, source, g):
    """An exact deque read from the frame: TYPE_MATCH, LENGTH, its maxlen by value, each item
    through its index."""
    g(GuardKind.TYPE_MATCH, collections.deque)
    g(GuardKind.LENGTH, len(value))
    if source is not None and g.enabled:
        tx.output.add_guard(AttrSource(source, "maxlen"), GuardKind.EQUALS_MATCH, value.maxlen)
    items = [tx.wrap(v, ItemSource(source, i) if source is not None else None, g.enabled)
             for i, v in enumerate(value)]
    return DequeVariable(items, value.maxlen, source)
