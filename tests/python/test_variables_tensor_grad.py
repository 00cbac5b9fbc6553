"""`x.grad` in traced code (tracer/variables/torch_objects/tensor.py, TensorVariable._grad).

The contract: the gradient of a tensor read from the frame is read through its source `x.grad`, a
graph input (TENSOR_MATCH) or None (guarded), so a call where it changed recompiles; an in-place
update of it is a graph input's mutation, as eager's. A tensor the graph makes has no gradient
(None, no break), unless it is the frame tensor itself (an in-place op's result), which breaks.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import check_graphs_and_breaks, compiled_like_eager  # noqa: E402


def _with_grad(values):
    x = torch.tensor(values)
    x.grad = torch.arange(len(values), dtype=torch.float32)
    return x


def test_updating_a_frame_tensors_gradient_in_place_matches_eager():
    def accumulate(x, y):
        x.grad.add_(y)
        return torch.abs(y) + x.grad

    y = torch.ones(3)
    ex, cx = _with_grad([1.0, 2.0, 3.0]), _with_grad([1.0, 2.0, 3.0])
    cnt = CompileCounter()
    compiled = tjc.compile(accumulate, backend=cnt)
    expected = accumulate(ex, y)
    before = tjc.stats()["graph_breaks"]
    torch.testing.assert_close(compiled(cx, y), expected)
    torch.testing.assert_close(cx.grad, ex.grad)
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)


def test_a_gradient_that_appears_or_goes_recompiles():
    def scale(x):
        if x.grad is None:
            return x * 2
        return x * x.grad

    cnt = CompileCounter()
    compiled = tjc.compile(scale, backend=cnt)
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x), scale(x))
    x.grad = torch.full((3,), 5.0)
    torch.testing.assert_close(compiled(x), scale(x))
    x.grad = torch.full((3,), 7.0)   # another gradient tensor of the same kind: a graph input, no recompile
    torch.testing.assert_close(compiled(x), scale(x))
    x.grad = None
    torch.testing.assert_close(compiled(x), scale(x))
    assert cnt.frame_count == 2


def test_a_parameters_gradient_read_through_its_module():
    model = torch.nn.Linear(2, 1)
    model(torch.ones(4, 2)).sum().backward()

    def grads(x):
        return [p.grad * x for p in model.parameters()]

    check_graphs_and_breaks(grads, torch.full((1,), 2.0), graphs=1, breaks=0)


def test_a_tensor_the_graph_makes_has_no_gradient():
    def fresh(a):
        t = torch.ones(2, 2)
        return [t.grad, a + t, (a * 2).detach().grad]

    compiled_like_eager(fresh, torch.ones(2, 2))


def test_the_gradient_of_an_in_place_result_that_is_the_input_breaks_and_stays_right():
    def through_in_place(x):
        y = x.add_(1)   # y is x: its gradient is x's, which the graph does not see
        return y.grad

    ex, cx = _with_grad([1.0]), _with_grad([1.0])
    compiled = tjc.compile(through_in_place, backend=CompileCounter())
    before = tjc.stats()["graph_breaks"]
    torch.testing.assert_close(compiled(cx), through_in_place(ex))
    assert tjc.stats()["graph_breaks"] - before >= 1
    torch.testing.assert_close(cx, ex)
