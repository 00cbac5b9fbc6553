"""Comprehensions and loops over the iterators model code builds: `d.items()`, `d.keys()`,
`d.values()`, `zip`, `enumerate(zip(...))`, `reversed(list)`, `iter(list)`, in list, dict and
generator comprehensions. On 3.11 a comprehension is its own code object called with the iterator
(inlined by the trace); on 3.12+ it is inlined by the compiler (PEP 709): this file runs on each
and pins one graph and no break. Each is compared with eager, and a changed dict or list (the
keys, the length) recompiles rather than reusing the unrolled loop.

Not covered (still a fallback, graph_break docs): a Python iterator the frame receives (an
argument, or the `.0` of a 3.11 comprehension whose body breaks and so runs as its own frame):
the trace cannot read it without consuming it, and no guard source reaches its items."""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import CompiledCalls  # noqa: E402


def items(x, d):
    return [v * x + len(k) for k, v in d.items()]


def keys(x, d):
    return [x + len(k) for k in d.keys()]


def values(x, d):
    return [v + x for v in d.values()]


def dict_comp(x, d):
    return {k: v * x for k, v in d.items()}


def zipped(x, a, b):
    return [p * q + x for p, q in zip(a, b)]


def enumerate_zip(x, a, b):
    return [i * p + q + x for i, (p, q) in enumerate(zip(a, b))]


def reversed_list(x, a):
    return [p * (i + 1) + x for i, p in enumerate(reversed(a))]


def iter_list(x, a):
    return [p + x for p in iter(a)]


def generator_sum(x, d):
    return sum(v * x for v in d.values())


def nested(x, d, a):
    return [[v * p + x for p in reversed(a)] for k, v in d.items() if k != "skip"]


def _dict(n):
    return {f"k{i}": torch.full((3,), float(i)) for i in range(n)}


def _list(n):
    return [torch.full((3,), float(i + 1)) for i in range(n)]


def _same(a, b):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert type(a) is type(b) and len(a) == len(b)
        for p, q in zip(a, b):
            _same(p, q)


CASES = [
    (items, lambda n: (_dict(n),)),
    (keys, lambda n: (_dict(n),)),
    (values, lambda n: (_dict(n),)),
    (dict_comp, lambda n: (_dict(n),)),
    (zipped, lambda n: (_list(n), _list(n + 1))),
    (enumerate_zip, lambda n: (_list(n), _list(n))),
    (reversed_list, lambda n: (_list(n),)),
    (iter_list, lambda n: (_list(n),)),
    (generator_sum, lambda n: (_dict(n),)),
    (nested, lambda n: (_dict(n), _list(n))),
]


@pytest.mark.parametrize("fn, make", CASES, ids=[fn.__name__ for fn, _ in CASES])
def test_comprehension_is_one_graph_and_a_changed_container_recompiles(fn, make):
    x = torch.randn(3)
    compiled = CompiledCalls(fn)
    args = make(2)
    _same(compiled(x, *args), fn(x, *args))
    _same(compiled(x, *make(2)), fn(x, *make(2)))    # equal keys and lengths: the same graph
    compiled.check(graphs=1, breaks=0)
    args = make(3)                                    # one more key / item: guarded
    _same(compiled(x, *args), fn(x, *args))
    compiled.check(graphs=2, breaks=0)


def test_a_dict_whose_keys_change_in_place_recompiles():
    x = torch.randn(3)
    d = _dict(2)
    compiled = CompiledCalls(items)
    _same(compiled(x, d), items(x, d))
    d["longer_key"] = d.pop("k0")
    _same(compiled(x, d), items(x, d))
    compiled.check(graphs=2, breaks=0)


def _empty_zips(x, pairs):
    return x + len(list(zip())) + len(list(zip(*pairs))), list(zip()), list(zip(*pairs))


def test_zip_of_nothing_yields_nothing():
    # zip() and zip(*[]) are empty iterators (the model once yielded () forever and hung).
    x = torch.randn(3)
    compiled = CompiledCalls(_empty_zips)
    _same(compiled(x, []), _empty_zips(x, []))
    compiled.check(graphs=1, breaks=0)


# -- `in` over an iterator: consumes it up to the item found ----------------------------------------

def _membership_in_iterators(x, l):
    it = iter(["a", "b", "c"])
    next(it)
    found_a = "a" in it              # not among the rest: the iterator ends exhausted
    lst = iter(l)
    found_3 = 3 in lst               # stops just past the 3
    rest = list(lst)
    ranged = iter(range(10))
    return x + found_a + found_3 * 2 + len(rest) * 4 + (5.0 in ranged) * 8 + next(ranged) * 16


def test_membership_in_an_iterator_consumes_it_as_eager():
    cnt = CompileCounter()
    compiled = tjc.compile(_membership_in_iterators, backend=cnt)
    for l in ([1, 2, 3, 4, 5], [3], [7, 8]):
        x = torch.zeros(1)
        torch.testing.assert_close(compiled(x, list(l)), _membership_in_iterators(x, list(l)))
    assert tjc.explain(_membership_in_iterators)(torch.zeros(1), [1, 3]).graph_break_count == 0


def test_membership_over_items_that_are_not_constants_breaks_before_taking_any():
    def fn(x, it):
        return x + (2 in it), next(it)

    items = (torch.ones(1), 2, 3)
    eager_it, compiled_it = iter(items), iter(items)
    want, got = fn(torch.zeros(1), eager_it), tjc.compile(fn)(torch.zeros(1), compiled_it)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1] == 3 and list(compiled_it) == list(eager_it) == []


def _iterate_a_number(x, n):
    caught = []
    for value in (n, None, 2.5):
        try:
            for _ in value:
                x = x + 100
        except TypeError as e:
            caught.append(str(e))
    return x + len(caught), caught


def test_iterating_a_number_raises_typeerror_in_the_trace():
    x = torch.randn(2)
    expected = _iterate_a_number(x, 3)
    got = tjc.compile(_iterate_a_number)(x, 3)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1]
    report = tjc.explain(_iterate_a_number)(x, 3)
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])


# -- a dict changed while an iterator over it runs (iterators.DictIteratorVariable) -----------------

def _churn(view, n, step):
    """A dict made empty and filled with n keys, then a loop over `view` of it that deletes the key
    it reached and inserts `step(k)` (the size kept): Python's iterator ends, goes on over the
    keys after a resize, or raises, as the table's layout says."""
    def f(x):
        d = {}
        for i in range(n):
            d[i] = (i,)
        seen = []
        try:
            for item in getattr(d, view)():
                k = item if view == "keys" else item[0]
                seen.append(item)
                if len(seen) > 40:
                    break
                del d[k]
                new = step(k)
                d[new] = (new,)
        except RuntimeError as e:
            seen.append(str(e))
        return x + 1, seen, list(d.items())
    return f


@pytest.mark.parametrize("view", ["keys", "values", "items"])
@pytest.mark.parametrize("n", [1, 2, 4, 5, 6, 11])
@pytest.mark.parametrize("step", [lambda k: k, lambda k: k + 100, lambda k: str(k)], ids=["same", "new", "str"])
def test_a_dict_changed_keeping_its_size_under_its_iterator_steps_as_eager(view, n, step):
    f = _churn(view, n, step)
    x = torch.ones(2)
    calls = CompiledCalls(f)
    _same_outputs(f(x), calls(x))
    calls.check(graphs=1)


def _same_outputs(a, b):
    torch.testing.assert_close(a[0], b[0])
    assert a[1:] == b[1:]


def test_a_value_replaced_while_its_values_are_iterated_shows():
    def f(x):
        d = {"a": 1, "b": 2, "c": 3}
        out = []
        for k, v in d.items():
            d["c"] = 30
            out.append(v)
        for v in d.values():
            d["c"] = 300
            out.append(v)
        return x + 1, out
    x = torch.ones(2)
    calls = CompiledCalls(f)
    _same_outputs(f(x), calls(x))
    calls.check(graphs=1)


def test_reversed_and_keys_changed_during_iteration_raise_in_the_trace():
    def f(x):
        d = dict()
        d["a"] = 1
        out = []
        for view in (d, d.keys(), d.values(), d.items()):
            try:
                for _ in reversed(view):
                    d.pop("a")
                    d.setdefault("a", 2)
            except RuntimeError as e:
                out.append(str(e))
            out.append(type(reversed(view)).__name__)
        return x + 1, out
    x = torch.ones(2)
    calls = CompiledCalls(f)
    _same_outputs(f(x), calls(x))
    calls.check(graphs=1)


def test_a_frame_dict_changed_keeping_its_size_is_not_guessed():
    # its table's layout (its history before the call) is unknown: the frame runs as written
    def f(x, d):
        try:
            for k in d:
                del d[k]
                d[k] = 0
        except RuntimeError as e:
            return x + 1, str(e)
        return x, "no error"
    x = torch.ones(2)
    expected = f(x, {0: 0})
    got = tjc.compile(f, backend="eager")(x, {0: 0})
    _same_outputs(expected, got)
