"""tracer/variables/collections/deques.py: collections.deque in the trace, as CPython's deque runs.

A deque the frame receives is guarded by type, length, maxlen and items; what the trace changes
in it is replayed on that very deque after the graph, so the caller sees eager's deque (same
object, same items). One built in the trace is made again from its items and maxlen. Each case
compares results and the arguments after the call with eager's, and counts graphs."""
import collections
import copy
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import assert_same  # noqa: E402


def _plain(value):
    """A deque as (its items, its maxlen), inside tuples and lists too, for assert_same."""
    if isinstance(value, collections.deque):
        return (_plain(list(value)), value.maxlen)
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(v) for v in value)
    return value


def _both(fn, *args, graphs=1, breaks=0):
    cnt = CompileCounter()
    eager_args, compiled_args = copy.deepcopy(args), copy.deepcopy(args)
    want = fn(*eager_args)
    got = tjc.compile(fn, backend=cnt)(*compiled_args)
    assert_same(_plain(got), _plain(want))
    assert type(got) is type(want)
    for a, b in zip(compiled_args, eager_args):   # the deques after the call: items and maxlen
        assert type(a) is type(b) and str(a) == str(b)
    assert cnt.frame_count == graphs
    assert tjc.explain(fn)(*copy.deepcopy(args)).graph_break_count == breaks
    return got, compiled_args


def _pops(q):
    a = q.pop()
    b = q.popleft()
    return a * b, len(q)


def _both_ends(q, a, b):
    q.appendleft(a)
    q.append(b)
    q.extendleft([a * 2, a * 3])
    q.rotate(-2)
    return q.popleft() * q.pop(), q[0], q[-1], q.maxlen


def _full(q, x):
    for i in range(4):
        q.append(x + i)       # a full deque drops from the left
    q.appendleft(x - 1)       # ... and from the right
    return sum(q), len(q)


def test_a_frame_deque_is_read_and_changed_as_eager():
    q = collections.deque([torch.ones(2), "mid", torch.full((2,), 3.0)])
    _both(_pops, q)
    _both(_both_ends, collections.deque([1, 2, 3]), torch.ones(2), torch.full((2,), 2.0))
    _both(_full, collections.deque([0], maxlen=3), torch.ones(2))


def test_the_callers_deque_is_returned_itself():
    def fn(q, x):
        q.append(x)
        return q, x + 1

    q = collections.deque([torch.zeros(1)])
    got, _ = tjc.compile(fn)(q, torch.ones(1))
    assert got is q and len(q) == 2


def test_a_deque_built_in_the_trace_is_made_again():
    def fn(x):
        d = collections.deque([x, x + 1], maxlen=3)
        d.append(x * 2)
        d.append(x * 3)
        d.insert(1, x) if len(d) < 3 else d.reverse()
        e = d.copy()
        e.clear()
        return d, e, list(d), collections.deque([5, 1, 5]).count(5), 2 in collections.deque([1, 2])

    got, _ = _both(fn, torch.ones(2))
    assert type(got[0]) is collections.deque and got[0].maxlen == 3


def test_deque_errors_are_raised_in_the_trace():
    def fn(x):
        d = collections.deque(maxlen=1)
        caught = []
        for action in (d.pop, d.popleft, lambda: d[3], lambda: d.index(7), lambda: d.remove(7)):
            try:
                action()
            except (IndexError, ValueError) as e:
                caught.append(str(e))
        d.append(1)
        try:
            d.insert(0, 2)
        except IndexError as e:
            caught.append(str(e))
        return x + len(caught), caught

    _both(fn, torch.ones(2))


def test_length_and_maxlen_are_guarded():
    def fn(q, x):
        q.append(x)
        return sum(q)

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    for q in (collections.deque([1, 2], maxlen=2), collections.deque([1, 2], maxlen=3), collections.deque([1, 2]),
              collections.deque([1, 2, 3], maxlen=3), collections.deque([1, 2], maxlen=2)):
        eager_q = copy.deepcopy(q)
        x = torch.ones(2)
        torch.testing.assert_close(compiled(q, x), fn(eager_q, x))
        assert len(q) == len(eager_q)
    assert cnt.frame_count == 4


def test_a_change_while_iterating_matches_eager():
    def fn(q, x):
        for v in q:
            q.append(v)
        return x

    q = collections.deque([1])
    with pytest.raises(RuntimeError, match="mutated"):
        fn(copy.deepcopy(q), torch.ones(1))
    with pytest.raises(RuntimeError, match="mutated"):
        tjc.compile(fn)(q, torch.ones(1))


def test_the_entry_keeps_no_deque_or_item_alive():
    class Item:
        pass

    def fn(q, x):
        return x * len(q)

    compiled = tjc.compile(fn)
    item = Item()
    q = collections.deque([item])
    compiled(q, torch.ones(1))
    refs = weakref.ref(q), weakref.ref(item)
    del q, item
    assert refs[0]() is None and refs[1]() is None


def test_index_with_start_and_stop_clips_them_as_cpython():
    # deque.index(x, start, stop): negative bounds count from the end and stop at 0, the stop at
    # most the length; a value outside the range raises ValueError in the trace, as in eager.
    def fn(x, q, lo, hi):
        found = q.index(3, lo) + q.index(3, lo, hi) * 10
        try:
            q.index(1, 1, hi)
        except ValueError:
            found += 1000
        return x + found

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    for lo, hi in ((0, 4), (2, 3), (-3, 100), (-100, -1), (1, -2)):
        q = collections.deque([1, 2, 3, 4, 3])
        assert torch.equal(compiled(torch.zeros(1), q, lo, hi), fn(torch.zeros(1), q, lo, hi))
    assert tjc.stats()["graph_breaks"] == before
    q = collections.deque([1, 2, 3])
    with pytest.raises(ValueError):
        fn(torch.zeros(1), q, 3, 3)
    with pytest.raises(ValueError):
        compiled(torch.zeros(1), q, 3, 3)
