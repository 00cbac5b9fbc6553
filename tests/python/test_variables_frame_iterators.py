"""tracer/variables/collections/frame_iterators.py: a builtin iterator over a range, str, bytes or tuple,
read from the frame.

The contract: the trace reads where the iterator is (its `__reduce__()`, guarded), yields the
remaining items as constants, and after the graph the very iterator has taken the steps eager's
took (items and the final StopIteration), so the caller sees eager's iterator; a call where it is
elsewhere recompiles. Held at a graph break it stays the frame's object.
"""
import contextlib
import io

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402


def _run_both(fn, make_iter, *args, calls=2, rest=list):
    """fn(x, it) eagerly and compiled, each on its own iterator from make_iter(), `calls` times:
    equal results, and the two iterators left with the same items (`rest(it)`: all of them, or
    a few of an endless one). Returns (compile count, breaks)."""
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    eager_it, compiled_it = make_iter(), make_iter()
    before = tjc.stats()["graph_breaks"]
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(calls):
            expected = fn(*args, eager_it)
            got = compiled(*args, compiled_it)
            torch.testing.assert_close(got, expected)
    assert rest(compiled_it) == rest(eager_it)
    return cnt.frame_count, tjc.stats()["graph_breaks"] - before


def _add_next(x, it):
    return x + next(it)


@pytest.mark.parametrize("make_iter", [lambda: iter(range(1, 5)), lambda: iter((2.0, 3.0, 4.0)),
                                       lambda: iter(range(10, 0, -3))], ids=["range", "tuple", "range-step"])
def test_next_on_a_frame_iterator_advances_the_callers_iterator(make_iter):
    frames, breaks = _run_both(_add_next, make_iter, torch.zeros(2))
    assert breaks == 0
    assert frames == 2, "the second call finds the iterator one step on: it recompiles"


def test_a_string_iterator():
    def first_is_a(x, it):
        return x + 1 if next(it) == "a" else x

    frames, breaks = _run_both(first_is_a, lambda: iter("ab"), torch.zeros(2))
    assert breaks == 0


def test_exhausting_a_frame_iterator_leaves_it_exhausted():
    def drain(x, it):
        for v in it:
            x = x + v
        return x + next(it, 100)

    frames, breaks = _run_both(drain, lambda: iter(range(3)), torch.zeros(2), calls=3)
    assert breaks == 0 and frames == 2   # full, then exhausted (the third call hits that entry)


def test_a_frame_iterator_across_a_graph_break():
    def around_print(x, it):
        a = next(it)
        print(a)
        return x + a + next(it)

    frames, breaks = _run_both(around_print, lambda: iter(range(6)), torch.zeros(2))
    assert breaks >= 1


def test_one_iterator_passed_twice_advances_once_per_step():
    def two_names(x, it, same):
        return x + next(it) * 10 + next(same)

    def run(fn, it):
        return fn(torch.zeros(1), it, it)

    compiled = tjc.compile(two_names, backend=CompileCounter())
    eager_it, compiled_it = iter(range(8)), iter(range(8))
    for _ in range(2):
        torch.testing.assert_close(run(compiled, compiled_it), run(two_names, eager_it))
    assert list(compiled_it) == list(eager_it)
    # Distinct iterators after aliased ones: the aliasing guard recompiles, results stay eager's.
    a1, a2, b1, b2 = iter(range(5)), iter(range(5)), iter(range(5)), iter(range(5))
    torch.testing.assert_close(compiled(torch.zeros(1), a1, b1), two_names(torch.zeros(1), a2, b2))
    assert (list(a1), list(b1)) == (list(a2), list(b2))


def test_an_iterator_a_constant_computation_makes_yields_its_items():
    def first(x):
        s = "ab"
        it = s.__iter__()
        return (x + 1 if next(it) == "a" else x), next(it)

    cnt = CompileCounter()
    compiled = tjc.compile(first, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    for _ in range(2):
        got, want = compiled(torch.zeros(2)), first(torch.zeros(2))
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)


def test_such_an_iterator_leaving_the_trace_matches_eager():
    def leaves(x):
        it = "abc".__iter__()
        next(it)
        return x + 1, it

    got, want = tjc.compile(leaves)(torch.zeros(1)), leaves(torch.zeros(1))
    assert list(got[1]) == list(want[1])


def _first_five(it):
    return [next(it) for _ in range(5)]


@pytest.mark.parametrize("make", [lambda: __import__("itertools").count(),
                                  lambda: __import__("itertools").count(2.5, 0.25),
                                  lambda: __import__("itertools").count(10, -3)], ids=["int", "float", "step"])
def test_an_itertools_count_from_the_frame_advances_as_eager(make):
    def scaled(x, counter):
        return x * (next(counter) + 1) + next(counter)

    frames, breaks = _run_both(scaled, make, torch.ones(2), calls=3, rest=_first_five)
    assert breaks == 0 and frames == 3   # each call finds the count further on


def test_an_itertools_count_of_other_numbers_still_matches_eager():
    import fractions
    import itertools

    def scaled(x, counter):
        return x * float(next(counter))

    _run_both(scaled, lambda: itertools.count(fractions.Fraction(1, 3)), torch.ones(2), rest=_first_five)


def test_a_huge_range_iterator_breaks_instead_of_making_its_items():
    compiled = tjc.compile(_add_next, backend=CompileCounter())
    eager_it, compiled_it = iter(range(10 ** 12)), iter(range(10 ** 12))
    before = tjc.stats()["graph_breaks"]
    for _ in range(2):
        torch.testing.assert_close(compiled(torch.zeros(2), compiled_it), _add_next(torch.zeros(2), eager_it))
    assert next(compiled_it) == next(eager_it) == 2
    assert tjc.stats()["graph_breaks"] - before >= 1


# -- a tuple iterator over tensors and other objects -----------------------------------------------

_TENSORS = (torch.ones(2), torch.full((2,), 2.0), torch.full((2,), 3.0))


def test_a_tuple_iterator_over_tensors_yields_them_as_graph_inputs():
    def fn(x, it):
        first = next(it)
        return x * first + sum(tuple(it))   # the rest drained: the caller's iterator ends exhausted

    frames, breaks = _run_both(fn, lambda: iter(_TENSORS), torch.ones(2), calls=1,
                               rest=lambda it: [t.tolist() for t in it])
    assert (frames, breaks) == (1, 0)


def test_a_tuple_iterator_over_tensors_follows_its_position_and_items():
    # The items still to come are read through the iterator each call (new tensors: the same
    # graph), its position is guarded (another position recompiles), and a non-tensor item in a
    # tensor's place fails the item's guard.
    def fn(x, it):
        return x + next(it) * 2, it

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    for make, skip in [(lambda: iter(_TENSORS), 0), (lambda: iter(tuple(t + 1 for t in _TENSORS)), 0),
                       (lambda: iter(_TENSORS), 1), (lambda: iter((_TENSORS[0], 5)), 0), (lambda: iter((5, 6)), 0)]:
        eager_it, compiled_it = make(), make()
        for _ in range(skip):
            next(eager_it), next(compiled_it)
        want, got = fn(torch.ones(2), eager_it), compiled(torch.ones(2), compiled_it)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] is compiled_it
        assert [str(v) for v in compiled_it] == [str(v) for v in eager_it]
    assert cnt.frame_count == 4   # the new tensors share the first graph; the other three recompile


def test_the_entry_keeps_no_item_of_a_tuple_iterator_alive():
    import weakref

    def fn(x, it):
        return x + next(it)

    compiled = tjc.compile(fn)
    item = torch.ones(2)
    it = iter((item, torch.zeros(2)))
    compiled(torch.ones(2), it)
    ref = weakref.ref(item)
    del item, it
    assert ref() is None
