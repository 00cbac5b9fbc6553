"""tracer/variables/torch_objects/made_functions.py through the public API: a function torch's
own code made while tracing, from constants (`torch.nn.modules.utils._ntuple(3)`).

The contract: called on constants it runs while tracing and its result is a constant of the graph;
called with a tensor, or returned, it is a graph break; always eager's result.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

from torch.nn.modules.utils import _ntuple  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from context_helpers import CompiledCalls, assert_same, compiled_like_eager  # noqa: E402


def _sizes_from_a_made_parser(x, n):
    triple = _ntuple(3)
    return torch.ones(triple(n)).sum() + x, triple((1, 2, 3)), _ntuple(2, "_pair")(n)


def test_a_function_torch_made_runs_on_constants_while_tracing():
    compiled_like_eager(_sizes_from_a_made_parser, torch.randn(2), 2)


def test_the_constants_it_was_made_from_are_guarded():
    calls = CompiledCalls(_sizes_from_a_made_parser)
    x = torch.randn(2)
    for n in (2, 3, 2):
        assert_same(calls(x, n), _sizes_from_a_made_parser(x, n))
    calls.check(graphs=2, breaks=0)


def test_called_with_a_tensor_or_returned_it_is_a_break():
    def with_a_tensor(x):
        return _ntuple(2)(x)

    def returned(x):
        return x + 1, _ntuple(2)

    x = torch.randn(2)
    calls = CompiledCalls(with_a_tensor)
    assert_same(calls(x), with_a_tensor(x))   # a tensor is iterable: its rows, as a tuple
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1
    out = tjc.compile(returned)(x)
    torch.testing.assert_close(out[0], x + 1)
    assert out[1](5) == (5, 5)
