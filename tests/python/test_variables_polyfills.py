"""tracer/variables/builtin_functions/polyfills.py through the public API: map, filter, zip, enumerate, itertools
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


# -- itertools' lazy iterators (repeat, count, cycle, islice, accumulate, ...) ------------------
from torch_jit_cache.tracer.variables.builtin_functions import polyfills  # noqa: E402


def _repeat_count_cycle(x):
    total = x
    for v in itertools.repeat(2.0, 3):
        total = total + v
    for i, v in zip(range(4), itertools.cycle([1, 2])):
        total = total * v + i
    for n, v in enumerate(itertools.repeat(x)):   # without end: the loop stops it
        total = total + v
        if n == 2:
            break
    return total + sum(itertools.islice(itertools.count(3, 2), 1, 4))


def _accumulate_and_friends(x):
    sums = list(itertools.accumulate([x, x * 2, x * 3]))
    products = list(itertools.accumulate([1, 2, 3], lambda a, b: a * b, initial=5))
    kept = list(itertools.takewhile(lambda v: v < 3, [1, 2, 5, 1])) + list(itertools.dropwhile(lambda v: v < 3, [1, 5, 1]))
    chosen = list(itertools.compress([x, x * 2, x * 3], [1, 0, 1]))
    pairs = [a * b for a, b in itertools.pairwise([1, 2, 3])]
    return (sums[-1] * products[-1] + sum(kept) + chosen[1] + sum(pairs)
            + sum(itertools.starmap(pow, [(2, 3)])) + sum(itertools.filterfalse(None, [0, 4, 0])))


def _ntuple(x):
    # torch.nn.modules.utils._pair: tuple(repeat(v, 2)).
    from torch.nn.modules.utils import _pair
    return x * _pair(3)[1]


@pytest.mark.parametrize("fn", [_repeat_count_cycle, _accumulate_and_friends, _ntuple])
def test_itertools_iterators_are_traced(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3,)))
    assert (graphs, breaks) == (1, 0)


def test_an_itertools_iterator_leaving_the_trace_is_itertools_own():
    def made(x):
        return itertools.islice(itertools.repeat(x, 5), 1, 3), itertools.count(4), x + 1

    x = torch.ones(2)
    it, counter, _ = tjc.compile(made)(x)
    assert type(it) is itertools.islice and type(counter) is itertools.count
    assert [t is x for t in it] == [True, True] and next(counter) == 4


def _consumed(real, model, make, args):
    a, b = make(), make()
    outcome = []
    for fn, src in ((real, a), (model, b)):
        try:
            outcome.append((list(fn(src, *args)), list(src)))
        except ValueError:
            outcome.append((ValueError, list(src)))
    return outcome


@pytest.mark.parametrize("args", [(3,), (0,), (2, 5), (5, 2), (2, 2), (0, 9, 3), (1, None, 4), (3, 20), (None,),
                                  (None, None, 2), (12,), (-1,), (1, 5, 0)], ids=str)
def test_the_islice_model_takes_what_cpythons_takes(args):
    # The items, and what is left of the input afterwards (islice consumes up to stop).
    real, model = _consumed(itertools.islice, polyfills.islice_, lambda: iter(range(10)), args)
    assert real == model


def test_the_itertools_models_agree_with_cpython():
    cases = [("accumulate", ([1, 2, 3],), {}), ("accumulate", ([1, 2, 3], lambda a, b: a * b), {}),
             ("accumulate", ([1, 2], None), {"initial": 10}), ("accumulate", ([],), {"initial": 1}),
             ("takewhile", (lambda v: v < 3, [1, 2, 5, 1]), {}), ("dropwhile", (lambda v: v < 3, [1, 2, 5, 1]), {}),
             ("filterfalse", (None, [0, 1, 2, 0]), {}), ("compress", ("abcd", [1, 0, 1]), {}),
             ("starmap", (pow, [(2, 3), (3, 2)]), {}), ("pairwise", ("abcd",), {}), ("pairwise", ("a",), {}),
             ("repeat", (3, 4), {}), ("repeat", (3, -1), {}), ("cycle", ("",), {})]
    for name, args, kwargs in cases:
        model = getattr(polyfills, name + "_")
        assert list(getattr(itertools, name)(*args, **kwargs)) == list(model(*args, **kwargs)), name
    for name, args in (("count", (3, 2)), ("count", (0.5,)), ("cycle", ("ab",)), ("repeat", ("z",))):
        real, model = getattr(itertools, name)(*args), getattr(polyfills, name + "_")(*args)
        assert list(itertools.islice(real, 7)) == list(itertools.islice(model, 7)), name


# -- groupby and tee: shared iterators ------------------------------------------------------------

def _groups_and_copies(x):
    runs = [(k, len(list(g))) for k, g in itertools.groupby([1, 1, 2, 3, 3, 3, 1])]
    by_sign = [(k, [x * v for v in g]) for k, g in itertools.groupby([-2, -1, 3, 4, -5], key=lambda v: v > 0)]
    a, b, c = itertools.tee(iter([x, x * 2, x * 3]), 3)
    first = next(b)
    pairs = [u * v for u, v in zip(b, c)]
    is_tee = isinstance(a, type(itertools.tee(())[0]))
    return (sum(k * n for k, n in runs) * x, *[sum(ts) for _, ts in by_sign], *list(a), *pairs, first * is_tee)


def test_groupby_and_tee_are_traced():
    graphs, breaks = eager_and_compiled(_groups_and_copies, leaves((3,)))
    assert (graphs, breaks) == (1, 0)


def _interleaved(groupby, items, key, steps):
    """Outer and inner groupby iterators advanced in the order `steps` says (0: the next group;
    i > 0: the i-th group taken so far, from the end), each outcome recorded."""
    outer, groups, seen = groupby(items, key), [], []
    for step in steps:
        if step == 0:
            k, g = next(outer, (None, None))
            if g is not None:
                groups.append(g)
            seen.append(("group", k))
        elif groups:
            seen.append(("item", next(groups[-min(step, len(groups))], "end")))
    return seen


@pytest.mark.parametrize("key", [None, abs])
def test_the_groupby_model_agrees_with_cpython(key):
    # An older group yields nothing once the next group is asked for; skipping a group reads past it.
    import random
    rng = random.Random(7)
    for _ in range(300):
        items = [rng.randint(-2, 2) for _ in range(rng.randint(0, 8))]
        steps = [rng.randint(0, 2) for _ in range(12)]
        assert _interleaved(itertools.groupby, items, key, steps) == \
            _interleaved(polyfills.groupby_, items, key, steps), (items, steps)


def test_the_tee_model_agrees_with_cpython():
    for n in (0, 1, 2, 3):
        real, model = itertools.tee(iter("abcde"), n), polyfills.tee_(iter("abcde"), n)
        order = [i % n for i in (0, 0, 1, 2, 1, 0, 2, 2, 1, 1, 0, 0)] if n else []
        assert [next(real[i], None) for i in order] == [next(model[i], None) for i in order]
    for bad in (-1, "2"):
        with pytest.raises(Exception) as real:
            itertools.tee([], bad)
        with pytest.raises(type(real.value), match=str(real.value)):
            polyfills.tee_([], bad)


def test_tee_of_a_tee_still_breaks_and_matches_eager():
    # CPython copies a tee iterator (its __copy__) instead of reading it: not modelled.
    def fn(x):
        a, = itertools.tee([x, x + 1], 1)
        b, c = itertools.tee(a)
        return (*list(b), *list(a), *list(c))

    assert eager_and_compiled(fn, leaves((2,)))[1] >= 1


def _fromkeys(x):
    d = dict.fromkeys("abca")
    e = dict.fromkeys([3, 1], x)     # every key maps to the one value
    make = dict.fromkeys
    try:
        dict.fromkeys(7)
    except TypeError:
        x = x + 1
    return x * len(d) + e[1] + len(make("xy", 0)), list(d), e[3] is e[1]


def test_dict_fromkeys_is_traced_as_python_makes_it():
    x = torch.randn(3)
    expected = _fromkeys(x)
    got = tjc.compile(_fromkeys)(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:]
    report = tjc.explain(_fromkeys)(x)
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])
