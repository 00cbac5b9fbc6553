"""tracer/variables/polyfills.py through the public API: map, filter, zip, enumerate, itertools
and functools helpers in traced code.

The contract: the lazy builtins and helpers are traced as Python versions of themselves (generator
functions), so their functions are called lazily, in Python's order, and zip over generators pulls
as Python does. Each compares with eager and counts graphs and breaks."""
import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import eager_and_compiled, leaves  # noqa: E402


# -- map / filter / zip / enumerate / itertools / functools / sorted ------------------------------

import functools  # noqa: E402
import itertools  # noqa: E402


def _map_zip(x):
    return sum(a * b for a, b in zip(map(lambda t: t + 1, [x, x * 2]), [1, 2]))


def _filter_chain_product(x):
    kept = list(filter(lambda v: v > 0, [1, -1, 2]))
    total = sum(t for t in itertools.chain([x], [x * 2], (x * i for i in range(2))))
    pairs = sum(a * b for a, b in itertools.product([1, 2], [3, 4]))
    return total * len(kept) + pairs + sum(itertools.chain.from_iterable([[1], [2]]))


def _reduce_partial_sorted(x):
    r = functools.reduce(lambda a, b: a + b, [x, x * 2, x * 3])
    r2 = functools.reduce(lambda a, b: a * b, [2, 3], 1)
    add2 = functools.partial(torch.add, alpha=2)
    order = sorted([3, 1, 2], key=lambda v: -v)
    named = sorted([("b", x), ("a", x * 2)], key=lambda kv: kv[0])
    return add2(r, x) * r2 + order[0] + named[0][1]


def _multiples(x, n):
    for i in range(n):
        yield x * i


def _enumerate_zip_over_generators(x):
    out = x
    for i, (a, b) in enumerate(zip(_multiples(x, 3), _multiples(x, 2))):
        out = out + i * a - b
    return out


@pytest.mark.parametrize("fn", [_map_zip, _filter_chain_product, _reduce_partial_sorted,
                                _enumerate_zip_over_generators])
def test_lazy_builtins_and_helpers_are_traced(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3,)))
    assert (graphs, breaks) == (1, 0)


def test_map_calls_its_function_lazily_in_python_order():
    def fn(x, log):
        def f(t):
            log.append("f")
            return t + 1
        out = x
        for t in map(f, [x, x]):
            log.append("body")
            out = out + t
        return out

    x = torch.randn(2)
    log_eager, log_compiled = [], []
    expected = fn(x, log_eager)
    torch.testing.assert_close(tjc.compile(fn)(x, log_compiled), expected)
    assert log_compiled == log_eager == ["f", "body", "f", "body"]


def test_zip_over_generators_pulls_as_python_does():
    def fn(x, log):
        def g(n):
            for i in range(n):
                log.append(i)
                yield x * i
        return sum(a + b for a, b in zip(g(3), [1, 2]))

    x = torch.randn(2)
    log_eager, log_compiled = [], []
    expected = fn(x, log_eager)
    torch.testing.assert_close(tjc.compile(fn)(x, log_compiled), expected)
    assert log_compiled == log_eager == [0, 1, 2]
