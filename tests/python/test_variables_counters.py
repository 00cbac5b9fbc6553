"""collections.Counter built in the trace (tracer/variables/collections/counters.py): counting, the missing-key
rules, arithmetic, comparisons, repr, elements, most_common, update/subtract and in-place operators
computed by Counter itself on the constant counts. Each case compares with eager and asserts one
graph, no break and nothing run uncompiled."""
import collections
import copy
from collections import Counter

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import assert_same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def run_both(fn, *args, whole=True):
    cnt = CompileCounter()
    want = fn(*copy.deepcopy(args))
    got = tjc.compile(fn, backend=cnt)(*copy.deepcopy(args))
    assert_same(got, want)
    for g, w in zip(got, want):   # Counters compare equal to dicts: their classes must match too
        assert type(g) is type(w)
    if whole:
        stats = tjc.stats()
        assert cnt.frame_count == 1 and stats["graph_breaks"] == 0 and stats["fallbacks"] == 0, stats
    return got


def counting(x, text):
    c = Counter(text)
    return x + c.total(), list(c.items()), c["missing"], "missing" in c, len(c), c


def reads(x):
    c = Counter(a=10, b=-2, c=0)
    return (x * c["a"], c.most_common(), c.most_common(1), list(c.elements()), sorted(c), dict(c),
            repr(c), str(Counter(a=2, b=None)), [k in c for k in c], type(c.copy()))


def arithmetic(x):
    p, q = Counter("aaabbcd"), Counter("abbcccz")
    return (x + 1, p + q, p - q, p | q, p & q, +Counter(a=-1, b=2), -Counter(a=-1, b=2),
            list((p + q).items()), p == Counter("dcbaaab"), Counter(a=1, z=0) == Counter(a=1),
            p <= p + q, Counter(a=1) == {"a": 1}, Counter(a=1) != Counter(a=2))


def changes(x):
    c = Counter(a=1)
    alias = c
    c.update("abb")
    c.update({"z": 3})
    c.subtract(a=1)
    c += Counter(b=1)
    c -= Counter(z=5)
    del c["absent"]   # Counter ignores a missing key
    del c["b"]
    return x + 1, c is alias, alias, list(c.items())


@pytest.mark.parametrize("fn,args", [
    (counting, ("abracadabra",)),
    (counting, (["x", "y", "x"],)),
    (reads, ()),
    (arithmetic, ()),
    (changes, ()),
], ids=lambda v: getattr(v, "__name__", ""))
def test_counter_matches_eager(fn, args):
    run_both(fn, torch.ones(2), *args)


def test_counting_a_frame_value_recompiles_when_it_changes():
    cnt = CompileCounter()
    compiled = tjc.compile(counting, backend=cnt)
    for text in ("aab", "aab", "abc"):
        assert_same(compiled(torch.ones(2), text), counting(torch.ones(2), text))
    assert cnt.frame_count == 2


def counts_a_tensor(x):
    c = Counter(a=1)
    c["a"] = x.sum()             # a count that is no constant: Counter's computations break
    return c + Counter(a=1), c["a"] * 2


def test_a_count_that_is_no_constant_breaks_and_matches_eager():
    run_both(counts_a_tensor, torch.ones(2), whole=False)


def test_a_counter_leaving_the_trace_is_a_counter_of_its_items():
    def fn(x):
        c = Counter("zyzx")
        return x + 1, c, collections.OrderedDict(c)
    got = run_both(fn, torch.ones(2))
    assert list(got[1]) == ["z", "y", "x"]
