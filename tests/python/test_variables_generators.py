"""tracer/variables/python_objects/generators.py through the public API: generators and generator expressions.

The contract: a generator is run lazily by a suspended child translator, item by item, interleaved
with whoever consumes it, so the order of calls is Python's (any() stops at the first true item);
generators traced into the graph free their inputs; a failure inside one breaks where it was made,
and a graph break while generators are alive goes where the first live one was made in time. Each
compares with eager and counts graphs and breaks."""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import eager_and_compiled, explain_counts, leaves  # noqa: E402


# -- generators -----------------------------------------------------------------------------------

def _genexpr_sum(x):
    return sum(x * i for i in range(3))


def _genexpr_tuple(x):
    return torch.cat(tuple(x + i for i in range(2)))


def _genexpr_any_all(x):
    a = any(i > 1 for i in [1, 2, 3])
    b = all(i > 1 for i in [1, 2, 3])
    return x + int(a) - int(b)


def _gen():
    yield 1
    yield 2


def _gen_of(x, n):
    for i in range(n):
        yield x * i


def _generator_function(x):
    return x + sum(list(_gen())) + torch.stack(list(_gen_of(x, 3))).sum(0)


def _generator_for_loop(x):
    out = x
    for t in _gen_of(x, 3):
        out = out + t
    return out


def _generator_next(x):
    g = _gen_of(x, 3)
    a = next(g)
    b = next(g)
    return a + b + next(g, x)


def _genexpr_join(x):
    return x + len(" ".join(str(i) for i in range(3)))


def _generator_interleaved_with_mutation(x):
    # Lazy as in Python: each item is computed after the body mutated x.
    y = x.clone()
    out = []
    for t in (y * 1 for _ in range(3)):
        y.add_(1)
        out.append(t)
    return torch.stack(out)


@pytest.mark.parametrize("fn", [_genexpr_sum, _genexpr_tuple, _genexpr_any_all, _generator_function,
                                _generator_for_loop, _generator_next, _genexpr_join,
                                _generator_interleaved_with_mutation])
def test_generators_are_traced_in_the_graph(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3, 4)))
    assert (graphs, breaks) == (1, 0)


def test_any_stops_at_the_first_true_item_as_python_does():
    seen = []

    def fn(x, log):
        def items():
            for i in range(4):
                log.append(i)
                yield i
        return x + any(i >= 1 for i in items())

    x = torch.randn(2)
    log_eager, log_compiled = [], []
    expected = fn(x, log_eager)
    torch.testing.assert_close(tjc.compile(fn)(x, log_compiled), expected)
    assert log_compiled == log_eager == [0, 1]
    del seen


def test_a_failure_inside_a_generator_breaks_where_it_was_made():
    def fn(x):
        y = x * 2
        g = (t.item() for t in [y, y])   # .item() is refused in the trace
        return y + sum(g)

    graphs, breaks, fallbacks = explain_counts(fn, torch.randn(()))
    assert fallbacks == [] and breaks >= 1 and graphs >= 1
    x = torch.randn(())
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))


def test_a_break_inside_a_loop_over_a_generator_keeps_what_came_before():
    def fn(x):
        y = x * 2
        for t in _gen_of(y, 2):
            print("", end="")   # a graph break inside the loop
            y = y + t
        return y

    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    graphs, breaks, fallbacks = explain_counts(fn, x)
    assert graphs >= 1 and breaks >= 1


def test_generator_traced_frees_its_inputs(no_gc):
    def fn(x):
        return torch.stack(list(_gen_of(x, 3))).sum(0) + sum(x * i for i in range(2))

    x = torch.randn(3)
    compiled = tjc.compile(fn, backend="eager")
    compiled(x)
    ref = weakref.ref(x)
    del x
    assert ref() is None


def test_a_break_goes_where_the_first_live_generator_was_made_in_time():
    # b is made at a lower instruction index than a but later in time: cutting at b's call would
    # find a alive (it cannot be rebuilt) and run the whole frame uncompiled.
    def fn(x):
        y = x * 2
        a = b = None
        for i in range(2):
            if i == 1:
                b = _gen_of(y, 2)
            else:
                a = _gen_of(y, 2)
        print("", end="")   # a graph break while both are alive
        return y + sum(a) + sum(b)

    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    graphs, breaks, fallbacks = explain_counts(fn, x)
    assert fallbacks == [] and graphs >= 1


def test_a_generator_left_unexhausted_does_not_move_a_later_break():
    # any() stops at the first true item and drops the generator: a later break stays where it is
    # (the graph before it keeps both ops).
    def fn(x):
        y = x * 2
        ok = any(i > 0 for i in [1, 2, 3])
        z = y + 1
        print("", end="")
        return z * ok

    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    rep = tjc.explain(fn)(x)
    assert rep.graph_break_count == 1 and rep.fallbacks == []
    assert len(rep.ops_per_graph[0]) == 2


# -- yield from ------------------------------------------------------------------------------------

def _delegating(x):
    log = []

    def inner():
        log.append("inner starts")
        yield x
        yield x * 2
        return x * 3

    def finished():
        return 5
        yield

    def outer():
        got = yield from inner()           # a generator: its return value is the expression's
        log.append("inner returned")
        yield got
        yield from (x + i for i in range(2))
        yield from [x - 1, x - 2]          # any iterable: None when exhausted
        done = finished()
        for _ in done:
            pass
        again = yield from done            # a generator finished earlier gives None
        log.append(again is None)

    g = outer()
    first = next(g)
    log.append("consumer")
    return (first, *g, x * len(log) + (log[-1] is True))


def _delegating_in_a_loop(x):
    def one():
        yield 1

    def many():
        for _ in range(4):
            yield from one()

    return x + sum(many())


@pytest.mark.parametrize("fn", [_delegating, _delegating_in_a_loop])
def test_yield_from_is_traced_lazily(fn):
    assert eager_and_compiled(fn, leaves((3,))) == (1, 0)


def test_yield_from_passes_an_exception_to_the_delegating_generator():
    # Equal to eager (a generator's exception caught around a yield still breaks, as with a for loop).
    def fn(x):
        def inner():
            yield x
            raise KeyError("k")

        def outer():
            try:
                yield from inner()
            except KeyError:
                yield x * 10

        return tuple(outer())

    eager_and_compiled(fn, leaves((2,)))
