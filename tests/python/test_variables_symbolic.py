"""tracer/variables/torch_objects/symbolic.py through the public API: sizes that are symbolic in the trace.

The contract: under dynamic shapes a size read from a tensor (`x.size(0)`, `x.shape`) is an fx
node, so arithmetic on it is computed by the graph and one graph serves every size; where the
trace needs a real value (a branch on the size) the ShapeEnv guards the symbol, so a size on the
other side of the branch recompiles instead of reusing the wrong branch. Each case compares with
eager and counts graphs.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402


def _size_arithmetic(x):
    n, d = x.shape
    half = n // 2
    return x[:half].reshape(half * d) * (n + d), n * d


def _branch_on_size(x):
    if x.size(0) > 8:
        return x.sum() * 2
    return x.sum() - 1


def _run(fn, sizes):
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt, dynamic=True)
    for n in sizes:
        x = torch.randn(n, 3)
        got, expected = compiled(x), fn(x)
        torch.testing.assert_close(got, expected)
    return cnt.frame_count


def test_size_arithmetic_is_one_graph_for_every_size():
    assert _run(_size_arithmetic, [4, 6, 10, 7]) == 1


def test_a_python_int_made_from_sizes_is_returned_as_eagers_int():
    out = tjc.compile(_size_arithmetic, backend="eager", dynamic=True)(torch.randn(6, 5))
    assert type(out[1]) is int and out[1] == 30


def test_a_branch_on_a_size_is_guarded_by_the_symbol():
    # One graph per side of the branch; sizes on a side already seen are hits.
    assert _run(_branch_on_size, [4, 5, 12, 16, 3]) == 2


def test_the_size_is_a_graph_node_under_dynamic_shapes():
    graphs = []

    def record(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = tjc.compile(lambda x: x.new_zeros(x.size(0) * 2), backend=record, dynamic=True)
    assert compiled(torch.randn(3)).shape == (6,)
    assert compiled(torch.randn(5)).shape == (10,)
    (graph,) = graphs
    ops = [n.target for n in graph.graph.nodes if n.op in ("call_method", "call_function")]
    assert "size" in ops, "the size is computed by the graph, not a constant"


def _truth_of_size(x):
    return bool(x.size(0) - 4), bool(x.size(0) / 4 - 1.0), x * 2


def test_bool_of_a_size_is_computed_by_the_graph():
    # bool() of a SymInt or SymFloat is `value != 0` in the graph: no guard on the size, so both
    # truths come from one graph.
    cnt = CompileCounter()
    compiled = tjc.compile(_truth_of_size, backend=cnt, dynamic=True)
    for n in [5, 4, 7, 4]:
        x = torch.randn(n)
        got, want = compiled(x), _truth_of_size(x)
        assert got[:2] == want[:2] and all(type(v) is bool for v in got[:2])
        torch.testing.assert_close(got[2], want[2])
    assert cnt.frame_count == 1
