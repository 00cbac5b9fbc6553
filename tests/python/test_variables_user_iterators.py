"""tracer/variables/python_objects/user_iterators.py: Python's iteration protocol over objects of user classes.

The contract: `iter(obj)`, a for loop and `list(obj)` over an object whose class writes `__iter__`
(returning an object with `__next__`), or only `__getitem__` (Python's sequence iterator), and
`iter(fn, sentinel)`, are traced as Python runs them: each `__next__` / `__getitem__` / `fn()` call
inlined when the consumer asks for the item, StopIteration (or IndexError for a sequence) ending
the iteration. Python's TypeErrors for what is not iterable are raised in the trace, where a `try`
catches them with eager's message. Each compares results, and the objects' state after the call,
with eager; counts graphs, breaks and fallbacks; a changed object recompiles."""
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, assert_same, compiled_like_eager  # noqa: E402


class Countdown:
    """An iterator: its own __iter__, a __next__ that stops by raising StopIteration."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return self

    def __next__(self):
        if self.n <= 0:
            raise StopIteration
        self.n -= 1
        return self.n


class Steps:
    """An iterable whose __iter__ makes a new iterator each time."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return Countdown(self.n)


class Indexed:
    """Only __getitem__: iterated by Python's sequence iterator, ended by IndexError."""

    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i * 10


class StopsByStopIteration:
    def __getitem__(self, i):
        if i == 3:
            raise StopIteration
        return i


def drain_by_next(it):
    out = []
    while True:
        try:
            out.append(next(it))
        except StopIteration:
            return out


def loop_over_iterable(x):
    total = x
    for v in Steps(4):
        total = total + v
    return total, [v * 2 for v in Steps(3)], list(Steps(2))


def next_over_iter_result(x):
    it = iter(Steps(3))
    return x + len(drain_by_next(it)), iter(it) is it, drain_by_next(it)


def sequence_iteration(x):
    seq = Indexed(3)
    it = iter(seq)
    first = next(it)
    rest = list(it)
    return x * first, rest, list(it), list(StopsByStopIteration()), [v for v in seq], sum(Indexed(4))


def callable_iteration(x):
    state = [0]

    def counter():
        state[0] += 1
        return state[0]

    def stopper():
        state[0] += 1
        if state[0] > 8:
            raise StopIteration
        return state[0]

    b = iter(counter, 4)
    first, again = list(b), list(b)
    return x + first[-1], first, again, list(iter(stopper, 100)), state[0], next(iter(counter, 0), "none")


@pytest.mark.parametrize("fn", [loop_over_iterable, next_over_iter_result, sequence_iteration, callable_iteration])
def test_user_iteration_is_traced(fn):
    compiled_like_eager(fn, torch.ones(2))


def test_iterator_kinds_are_python_types():
    def kinds(x):
        return x + 1, type(iter(Indexed(1))).__name__, type(iter(lambda: 1, 2)).__name__, type(iter(Steps(1))).__name__
    compiled_like_eager(kinds, torch.ones(2))


class NotIterable:
    pass


class IterIsNone:
    __iter__ = None

    def __getitem__(self, i):
        return i


class IterReturnsList:
    def __iter__(self):
        return [1, 2]


class IterReturnsObject:
    def __iter__(self):
        return NotIterable()


class IterRaises:
    def __iter__(self):
        raise ZeroDivisionError("no")


def _error(fn, *args):
    try:
        fn(*args)
    except Exception as e:   # noqa: BLE001
        return type(e).__name__, str(e)
    return None


def python_errors(x):
    return (x + 1, _error(iter, NotIterable()), _error(iter, IterIsNone()), _error(iter, IterReturnsList()),
            _error(iter, IterReturnsObject()), _error(iter, IterRaises()), _error(next, NotIterable()),
            _error(iter, [1], 2), _error(list, NotIterable()))


def test_python_errors_are_raised_in_the_trace():
    compiled_like_eager(python_errors, torch.ones(2))


def exception_from_next_propagates(x):
    state = [0]

    def spam():
        state[0] += 1
        if state[0] == 4:
            raise RuntimeError("stop")
        return state[0]

    seen = []
    try:
        for v in iter(spam, 100):
            seen.append(v)
    except RuntimeError as e:
        return x + len(seen), seen, str(e)
    return x, seen, "no error"


def test_exception_from_the_iteration_reaches_the_try():
    compiled_like_eager(exception_from_next_propagates, torch.ones(2))


# -- an iterator the frame receives: consumed in the trace, left where eager leaves it ------------

def take_three(x, it):
    out = x
    for i, v in enumerate(it):
        out = out + v
        if i == 2:
            break
    return out, next(it, "end")


def test_frame_iterator_state_after_the_call_is_eager_s():
    expected_it = Countdown(6)
    expected = take_three(torch.ones(2), expected_it)
    calls = CompiledCalls(take_three)
    for _ in range(2):
        it = Countdown(6)
        got = calls(torch.ones(2), it)
        assert_same(got, expected)
        assert it.n == expected_it.n
    calls.check(graphs=1, recompiles=0)


def test_changed_iterator_recompiles():
    calls = CompiledCalls(take_three)
    for n in (6, 2, 6, 1):
        eager_it, it = Countdown(n), Countdown(n)
        assert_same(calls(torch.ones(2), it), take_three(torch.ones(2), eager_it))
        assert it.n == eager_it.n


def test_frame_iterator_is_not_kept_alive():
    calls = CompiledCalls(take_three)
    it = Countdown(5)
    calls(torch.ones(2), it)
    ref = weakref.ref(it)
    del it
    assert ref() is None


# -- a graph break inside the loop, and iterators that leave the trace ----------------------------

def break_in_loop(x):
    out = x
    for v in Steps(3):
        out = out + v
        print("at", v)
    return out


def test_graph_break_inside_a_user_iterator_loop():
    compiled_like_eager(break_in_loop, torch.ones(2), graphs=3, breaks=3)


def returns_unstarted_iterators(x):
    return x + 1, iter(Indexed(2)), iter(lambda: 1, 1)


def test_unstarted_iterators_leave_the_trace():
    expected = returns_unstarted_iterators(torch.ones(2))
    calls = CompiledCalls(returns_unstarted_iterators)
    got = calls(torch.ones(2))
    assert type(got[1]) is type(expected[1]) and list(got[1]) == list(expected[1])
    assert type(got[2]) is type(expected[2]) and list(got[2]) == list(expected[2])
    calls.check(graphs=1)


def returns_started_iterator(x):
    it = iter(Indexed(3))
    next(it)
    return x + 1, it


def test_started_iterator_leaving_the_trace_runs_as_written():
    got = tjc.compile(returns_started_iterator, backend="eager")(torch.ones(2))
    assert list(got[1]) == [10, 20]


def early_stopping_consumers(x, it):
    found = any(it)
    pairs = list(zip([1, 2], it))
    return x + 1, found, pairs, all(v > 9 for v in it), next(it, "end")


def test_consumers_that_stop_early_take_only_the_items_they_use():
    expected_it = Countdown(9)
    expected = early_stopping_consumers(torch.ones(2), expected_it)
    calls = CompiledCalls(early_stopping_consumers)
    it = Countdown(9)
    assert_same(calls(torch.ones(2), it), expected)
    assert it.n == expected_it.n
    calls.check(graphs=1)


class SizedSteps(Steps):
    """An iterable with a __len__ that counts its calls: list() asks it for a length hint."""

    asked = 0

    def __len__(self):
        SizedSteps.asked += 1
        return self.n


def read_whole_with_len(x):
    return x + 1, list(SizedSteps(3)), [v for v in SizedSteps(2)]


def test_reading_whole_an_object_with_len_runs_as_eager():
    # list(obj) asks type(obj).__len__ for a length hint first, which the trace does not run:
    # refused there, so __len__ runs as many times as in eager.
    SizedSteps.asked = 0
    expected = read_whole_with_len(torch.ones(2))
    eager_asked, SizedSteps.asked = SizedSteps.asked, 0
    got = tjc.compile(read_whole_with_len, backend="eager")(torch.ones(2))
    assert got[1:] == expected[1:] and SizedSteps.asked == eager_asked == 1
