"""tracer/variables/builtin_functions/combinatorics.py: itertools.combinations, combinations_with_replacement,
permutations and zip_longest traced as their Python versions.

The contract: each gives CPython's items in CPython's order (checked against the real classes on
many small inputs), reads its input when made (a list changed after does not show), raises
Python's own errors for a bad `r` or input in the trace, and one not started yet leaves the trace
as the real class. Compared with eager; one graph, no break."""
import itertools

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, compiled_like_eager  # noqa: E402


def every_shape(x):
    out = []
    for n in (0, 1, 3):
        pool = "abc"[:n]
        for r in (0, max(n - 1, 0), n, n + 1):
            out.append((list(itertools.combinations(pool, r)), list(itertools.permutations(range(n), r)),
                        list(itertools.combinations_with_replacement(pool, r))))
        out.append(list(itertools.permutations(pool)))
    out.append(list(itertools.zip_longest("abcd", [1, 2], (), fillvalue=0)))
    out.append(list(itertools.zip_longest()))
    return x + 1, out


def test_items_and_order_are_cpython_s():
    compiled_like_eager(every_shape, torch.ones(2))


def _error(fn, *args):
    try:
        fn(*args)
    except (TypeError, ValueError) as e:
        return type(e).__name__, str(e)
    return None


def errors(x):
    return x + 1, [_error(cls, *args) for cls in (itertools.combinations, itertools.permutations,
                                                  itertools.combinations_with_replacement)
                   for args in [("ab", -1), ("ab", "r"), (None, -1), (3,)]]


def test_bad_arguments_raise_python_s_error_in_the_trace():
    compiled_like_eager(errors, torch.ones(2))


def reads_its_input_when_made(x, items):
    made = itertools.combinations(items, 2)
    items.append(x)
    longest = itertools.zip_longest(items, "ab")
    return x * len(list(made)), type(made).__name__, len(list(longest))


def test_the_input_is_read_when_made():
    calls = CompiledCalls(reads_its_input_when_made)
    for n in (3, 4, 3):
        got = calls(torch.ones(2), list(range(n)))
        expected = reads_its_input_when_made(torch.ones(2), list(range(n)))
        torch.testing.assert_close(got[0], expected[0])
        assert got[1:] == expected[1:]
    calls.check(graphs=2, recompiles=1)


def returns_unstarted(x):
    return x + 1, itertools.permutations([3, 1, 2], 2), itertools.zip_longest([1], [2, 3])


def test_one_not_started_leaves_the_trace_as_the_real_class():
    got = CompiledCalls(returns_unstarted)(torch.ones(2))
    assert type(got[1]) is itertools.permutations and list(got[1]) == list(itertools.permutations([3, 1, 2], 2))
    assert type(got[2]) is itertools.zip_longest and list(got[2]) == [(1, 2), (None, 3)]


def returns_started(x):
    made = itertools.combinations("abc", 2)
    next(made)
    return x + 1, made


def test_one_started_runs_the_frame_as_written():
    got = tjc.compile(returns_started, backend="eager")(torch.ones(2))
    assert list(got[1]) == [("a", "c"), ("b", "c")]


class _Raises:
    def __iter__(self):
        return self

    def __next__(self):
        raise ZeroDivisionError("first item")


def product_reads_when_made(x):
    items = [1, 2]
    made = itertools.product(items, "ab", repeat=1)
    items.append(9)
    return x + 1, list(made), _error(itertools.product, 3), _raised_by_product(), type(made).__name__


def _raised_by_product():
    try:
        itertools.product(_Raises())
    except ZeroDivisionError as e:
        return str(e)
    return None


def test_product_reads_its_inputs_and_raises_when_made():
    compiled_like_eager(product_reads_when_made, torch.ones(2))
