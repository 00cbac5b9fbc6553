"""tjc.explain(fn)(*args, **kwargs): graphs, ops, graph breaks with their places, fallbacks, guards."""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def _helper(y):
    print("in helper")
    return y.cos()


def three_breaks(x, n):
    a = x.sin() + 1
    print("hi")
    b = _helper(a) * n
    if b.sum() > 0:
        return b.relu()
    return b - 1


def _line(fn, text):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_explain_counts_graphs_ops_and_breaks_with_their_places():
    x = torch.zeros(4)   # cos(sin(0) + 1) * 3 > 0: the relu branch
    out = tjc.explain(three_breaks)(x, 3)
    assert out.graph_count == 3
    # The comparison stays in the graph on every version (3.13's COMPARE_OP casts to bool itself:
    # the break is at that cast).
    assert out.ops_per_graph == [["sin", "add"], ["mul", "sum", "gt"], ["relu"]]
    assert out.graph_break_count == 3
    first, in_helper, branch = out.break_reasons
    assert "print()" in first and f"{__file__}:{_line(three_breaks, 'print(')}" in first
    assert "print()" in in_helper and f":{_line(_helper, 'print(')}" in in_helper
    assert "bool(tensor)" in branch and f":{_line(three_breaks, 'if b.sum()')}" in branch
    text = str(out)
    assert "Graph count: 3" in text and "Graph break count: 3" in text
    assert "L['x']" in text and "TENSOR_MATCH" in text


def whole(x, scale):
    return (x * scale).relu().sum(dim=0)


def test_explain_of_a_whole_graph_lists_its_guards_and_no_breaks():
    out = tjc.explain(whole)(torch.ones(2, 3), 2.0)
    assert (out.graph_count, out.graph_break_count, out.fallbacks) == (1, 0, [])
    assert out.ops_per_graph == [["mul", "relu", "sum"]]
    (guards,) = out.guards
    assert "L['x']" in guards and "L['scale']" in guards and "EQUALS_MATCH: 2.0" in guards


def in_a_try_block(x):
    try:
        print("inside try")
        return x + 1
    finally:
        pass


def test_explain_names_a_frame_that_ran_uncompiled():
    out = tjc.explain(in_a_try_block)(torch.ones(2))
    assert out.graph_count == 0
    (fallback,) = out.fallbacks
    assert "in_a_try_block" in fallback and "print()" in fallback


def test_explain_keeps_no_argument_and_no_cache_entry_alive(no_gc):
    x = torch.ones(4)
    ref = weakref.ref(x)
    out = tjc.explain(three_breaks)(x, 3)
    del x
    assert ref() is None, "explain's report or cache kept the argument alive"
    assert tjc.cache_entries(three_breaks) == [], "explain's cache outlived the run"
    assert out.graph_count == 3


def test_explain_refuses_an_unknown_backend():
    with pytest.raises(Exception, match="nope"):
        tjc.explain(whole, backend="nope")
