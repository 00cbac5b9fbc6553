"""tracer/variables/sets.py through the public API: set and frozenset in traced code.

The contract: set literals, operations and membership are traced in the graph; a set built in the
trace is a fresh object per call; a frozenset argument is guarded, not trusted by value; what the
trace cannot keep exact (set.pop, sets of tensors) breaks. Each compares with eager and counts
graphs and breaks."""
import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import eager_and_compiled, explain_counts, leaves  # noqa: E402


# -- sets -----------------------------------------------------------------------------------------

def _set_literal_and_ops(x):
    a = {1, 2, 3}
    b = set([2, 3, 4])
    c = {i * 2 for i in range(3)}
    alias = a
    alias |= {9}          # in place: `a` sees it
    a.add(5)
    a.discard(1)
    n = len(a & b) + len(a - b) + len(a ^ c) + (9 in a) + (1 not in a) + a.issuperset({2, 3})
    return x * n + sum(sorted(a))


def _frozenset_membership(x):
    keep = frozenset(["q", "k"])
    return x + ("q" in keep) + len(keep | {"v"})


@pytest.mark.parametrize("fn", [_set_literal_and_ops, _frozenset_membership])
def test_sets_are_traced(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3,)))
    assert (graphs, breaks) == (1, 0)


def test_a_set_built_in_the_trace_is_returned_fresh_per_call():
    def fn(x):
        s = {1, 2}
        s.add(3)
        return x + 1, s

    compiled = tjc.compile(fn)
    x = torch.randn(2)
    out1, s1 = compiled(x)
    s1.add(99)
    out2, s2 = compiled(x)
    assert s2 == {1, 2, 3} and s1 is not s2


def test_a_frozenset_argument_is_not_trusted_by_value():
    # EQUALS_MATCH holds only scalars and tuples: a frozenset read from the frame is a constant
    # guarded by identity, so another frozenset recompiles rather than reusing the answer.
    def fn(x, names):
        return x + 1 if "a" in names else x - 1

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    x = torch.randn(2)
    ab, bc = frozenset("ab"), frozenset("bc")
    torch.testing.assert_close(compiled(x, ab), x + 1)
    torch.testing.assert_close(compiled(x, bc), x - 1)
    torch.testing.assert_close(compiled(x, ab), x + 1)
    assert cnt.frame_count == 2


NAMES = frozenset({"q", "k"})


class _Attention:
    skip = frozenset({"bias"})

    def __init__(self, own):
        self.own = own


def _frozen_attributes(x, m):
    if "q" in NAMES and "bias" in m.skip and "v" not in m.own:
        x = x * 2
    return x + len(m.own), sorted(m.skip | m.own)


@pytest.mark.parametrize("own", [frozenset({"w"}), frozenset()], ids=["own", "empty"])
def test_frozenset_attributes_and_globals_are_constants_in_one_graph(own):
    m = _Attention(own)
    x = torch.randn(3)
    assert explain_counts(_frozen_attributes, x, m) == (1, 0, [])
    cnt = CompileCounter()
    compiled = tjc.compile(_frozen_attributes, backend=cnt)
    assert compiled(x, m)[1] == _frozen_attributes(x, m)[1]
    m.own = frozenset({"v"})   # another frozenset: the guard fails, the branch is taken anew
    got, expected = compiled(x, m), _frozen_attributes(x, m)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] and cnt.frame_count == 2


def test_set_pop_and_sets_of_tensors_break():
    def fn(x):
        s = {1, 2}
        s.pop()   # an arbitrary item: not followed
        return x + len(s)

    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    graphs, breaks, fallbacks = explain_counts(fn, x)
    # The set is both a local and pop's self at the break, rebuilt as one set (codegen builds it
    # once); the resume function reads it from the frame, opaque there: len() breaks again.
    assert (graphs, breaks, fallbacks) == (1, 2, [])

    def fn2(x):
        return x + len({x, x})   # hashing tensors: by identity in Python, not a constant here

    torch.testing.assert_close(tjc.compile(fn2)(x), fn2(x))
