"""FrameIteratorVariable: a builtin iterator over an immutable sequence, read from the frame
(`it = iter(range(3))` made before the call, then `next(it)` inside it).

Its position is state, read exactly: `it.__reduce__()` gives what it iterates and how far it got,
in every supported Python (3.11-3.12: `(iter, (seq,), index)`, `(iter, (seq,))` once exhausted; 3.13
gives a range iterator as `(iter, (rest of the range,), None)`). The trace guards those parts
(MethodCallSource `L['it'].__reduce__()`, under TYPE_MATCH on the iterator: the C++ tree reads it
without running user code), so a call where the iterator is elsewhere recompiles, and yields the
remaining items as constants. Each step the trace takes (an item, or the StopIteration of an
exhausted one) is replayed on the very iterator after the graph, as `next(it, None)` that many
times (side_effects.py, EffectKind.ADVANCE_ITER): over an immutable sequence that leaves it exactly
where eager's is, whatever else the replay does. Held at a graph break or returned, it is the
frame's object (its source).

An itertools.count is read through its `__repr__()` (`count(5, 2)`: the one view of its state no
Python version deprecates, exact for ints and floats) and yields start, start + step, ... without
end (CountVariable).

Only iterators over an immutable sequence are modelled (a range, str, bytes or tuple:
SEQUENCE_GUARDS); a list iterator sees its list change and is left to the general rules. A tuple
of constants is guarded by value; a tuple of other items (tensors, objects) by its type and
length, each item still to come wrapped through `L['it'].__reduce__()[1][0][i]` and guarded
as any value read through a source. Two sources that are one iterator would each advance it: they are pinned distinct (a call
where they alias recompiles), and the same object reached twice is refused.
"""
from __future__ import annotations

import itertools

from ....guard.sources import AttrSource, ItemSource, MethodCallSource
from ....guard.trace_result import GuardKind, SourceOutput
from ..base import unsupported
from ..constant import ConstantVariable, is_constant_value
from .iterators import IteratorVariable


def _range_guards(seq, source):
    return [(AttrSource(source, name), GuardKind.EQUALS_MATCH, getattr(seq, name)) for name in ("start", "stop", "step")]


def _value_guard(seq, source):
    return [(source, GuardKind.EQUALS_MATCH, seq)]


# The builtin iterator types modelled, by the sequence type they iterate: how that sequence is
# guarded (a range by its start, stop and step; the others by value).
SEQUENCE_GUARDS = {range: _range_guards, str: _value_guard, bytes: _value_guard, tuple: _value_guard}
ITERATOR_TYPES = frozenset(type(iter(example)) for example in (range(1), range(2 ** 70, 2 ** 70 + 1), "a", "\u00e9",
                                                                b"a", ()))


# The items still to come are made as constants when the iterator is read: a longer one (a
# `range(10**9)` iterator) breaks at its use instead.
_MAX_ITEMS = 10_000


def is_frame_iterator(value) -> bool:
    return type(value) in ITERATOR_TYPES or type(value) is itertools.count


class FrameIteratorVariable(IteratorVariable):
    def __init__(self, items: list, source, kind: type, real):
        super().__init__(items, watch=(), kind=kind)
        self.source = source
        self.real = real    # the iterator itself, for the aliasing check of later reads
        self.steps = 0      # next() calls to replay after the graph

    def next_item(self):
        self.steps += 1
        return super().next_item()

    def unpack(self, tx):
        self.steps += len(self.items) - self.index + 1   # to the StopIteration, as list(it) goes
        return super().unpack(tx)

    def reconstruct(self, outputs):
        return SourceOutput(self.source)   # the frame's own iterator, advanced by the replay

    def __repr__(self):
        return f"FrameIteratorVariable({self.kind.__name__} from {self.source})"


class CountVariable(FrameIteratorVariable):
    """An itertools.count read from the frame: each step adds `step` to the value, as CPython's does
    (floats accumulate their rounding as there); it never ends."""

    def __init__(self, start, step, source, real):
        super().__init__([], source, itertools.count, real)
        self.value, self.step = start, step

    def next_item(self):
        self.steps += 1
        item, self.value = self.value, self.value + self.step
        return ConstantVariable(item)

    def rest(self) -> list:
        unsupported("the rest of an itertools.count (it never ends)")

    def unpack(self, tx):
        unsupported("the items of an itertools.count (it never ends)")


def _count_state(value):
    """(start, step) of an itertools.count of ints or floats, read from its repr (`count(5)`,
    `count(5, 2)`): the one view of its state that no Python version deprecates, and exact for
    those types (a float's repr reads back as that float). None for anything else."""
    text = repr(value)
    parts = text[len("count("):-1].split(", ")
    out = []
    for part in parts:
        for kind in (int, float):
            try:
                number = kind(part)
            except ValueError:
                continue
            if repr(number) == part:
                out.append(number)
                break
        else:
            return None
    return (out[0], out[1] if len(out) > 1 else 1) if 1 <= len(out) <= 2 else None


def wrap_count(tx, value, source, g):
    state = _count_state(value)
    if state is None or not g.enabled:
        return None
    _pin_apart(tx, value, source)
    g(GuardKind.TYPE_MATCH, itertools.count)
    g(GuardKind.EQUALS_MATCH, repr(value), MethodCallSource(source, "__repr__"))
    vt = CountVariable(state[0], state[1], source, value)
    tx.output.side_effects.advance_iterator(vt)
    return vt


def _pin_apart(tx, value, source):
    for other in list(tx.output.by_source.values()):
        if isinstance(other, FrameIteratorVariable) and other.kind is type(value):
            if other.real is value:
                unsupported(f"{source} is {other.source}, an iterator the trace reads twice")
            tx.output.side_effects.pin(other, False, _Probe(source), f"{source} is an iterator like {other.source}")


def wrap_frame_iterator(tx, value, source, g):
    if type(value) is itertools.count:
        return wrap_count(tx, value, source, g)
    reduced = value.__reduce__()
    seq, index = reduced[1][0], (reduced[2] if len(reduced) > 2 else None)
    guard_seq = SEQUENCE_GUARDS.get(type(seq))
    if guard_seq is None:
        return None
    held = type(seq) is tuple and not all(is_constant_value(v) for v in seq)
    if not g.enabled:
        unsupported(f"a {type(value).__name__} read without guards")
    out = tx.output
    _pin_apart(tx, value, source)
    g(GuardKind.TYPE_MATCH, type(value))
    state = MethodCallSource(source, "__reduce__")
    g(GuardKind.LENGTH, len(reduced), state)
    seq_source = ItemSource(ItemSource(state, 1), 0)
    if held:   # a tuple of other objects: its length, and each item still to come through its index
        g(GuardKind.TYPE_MATCH, tuple, seq_source)
        g(GuardKind.LENGTH, len(seq), seq_source)
    else:
        for s, kind, v in guard_seq(seq, seq_source):
            g(kind, v, s)
    if len(reduced) > 2:
        g(GuardKind.EQUALS_MATCH, index, ItemSource(state, 2))
    rest = seq[index or 0:]   # a range stays a range: nothing is made before the length is known
    if len(rest) > _MAX_ITEMS:
        return None   # read as any other object: a break where it is used
    if held:
        items = [tx.wrap(v, ItemSource(seq_source, i), g.enabled) for i, v in enumerate(rest, start=index or 0)]
    else:
        items = [ConstantVariable(v) for v in rest]
    vt = FrameIteratorVariable(items, source, type(value), value)
    out.side_effects.advance_iterator(vt)
    return vt


class _Probe:
    """A stand-in with a source, for pinning a tracker not made yet."""

    def __init__(self, source):
        self.source = source

