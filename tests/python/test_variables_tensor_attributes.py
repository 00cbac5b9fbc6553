"""Python attributes stored on tensors and read back (tracer/variables/torch_objects/tensor_attributes.py): the
store is a side effect replayed after the graph on the very tensor (the frame's own, or the graph
output the caller gets); reads in the same trace see it; a frame tensor's own `__dict__` entries
are read through their source and guarded."""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import explain_counts  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def tag_input(x, flag):
    x.offload = flag
    return x * 2


def tag_result(x, flag):
    y = x - 1
    y.offload = flag
    y.grad = x
    return y, y.offload, hasattr(y, "offload"), y.grad is x


def test_a_tag_on_an_input_is_set_on_the_callers_tensor():
    assert explain_counts(tag_input, torch.ones(3), True) == (1, 0, [])
    compiled = tjc.compile(tag_input, backend="eager")
    x = torch.ones(3)
    torch.testing.assert_close(compiled(x, True), tag_input(torch.ones(3), True))
    assert x.offload is True
    compiled(x, "later")            # another value: the replay stores what this call passed
    assert x.offload == "later"


def test_a_tag_on_a_result_travels_with_it_and_reads_back_in_the_trace():
    assert explain_counts(tag_result, torch.ones(3), 7) == (1, 0, [])
    x = torch.ones(3)
    y, seen, has, same = tjc.compile(tag_result, backend="eager")(x, 7)
    y_eager, *eager_rest = tag_result(x, 7)
    torch.testing.assert_close(y, y_eager)
    assert [seen, has, same] == eager_rest == [7, True, True]
    assert y.offload == 7 and y.grad is x


def test_a_grad_its_setter_would_refuse_runs_as_eager():
    def bad(x):
        y = x + 1
        y.grad = torch.ones(2)       # wrong shape: eager raises here
        return y
    with pytest.raises(RuntimeError):
        bad(torch.ones(3))
    with pytest.raises(RuntimeError):
        tjc.compile(bad, backend="eager")(torch.ones(3))


def test_a_function_kept_on_a_parameter_is_read_and_guarded():
    p = torch.nn.Parameter(torch.ones(2))
    p.scale = lambda t: t * 3

    def use(x):
        return p.scale(p) + x
    cnt = CompileCounter()
    compiled = tjc.compile(use, backend=cnt)
    x = torch.ones(2)
    assert explain_counts(use, x) == (1, 0, [])
    torch.testing.assert_close(compiled(x), use(x))
    p.scale = lambda t: t * 5       # another function there: recompiles, eager's value again
    torch.testing.assert_close(compiled(x), use(x))
    assert cnt.frame_count == 2


def test_a_tagged_result_is_freed_with_its_caller():
    compiled = tjc.compile(tag_result, backend="eager")
    x = torch.ones(3)
    y, *_ = compiled(x, 1)
    ref = weakref.ref(y)
    del y, _
    assert ref() is None
