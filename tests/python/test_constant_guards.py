"""torch's immutable constants read from the frame are guarded by identity or value.

tracer/variables/builder.py + guard/tree.py: a torch.dtype, torch.layout or torch.memory_format cannot
be weakly referenced, so ID_MATCH holds it strongly (it lives as long as the process); a
torch.device is made anew by each torch.device(...) call and is guarded by value. Before, building
the guard failed ("ID_MATCH needs a weakrefable object, got dtype") and the frame ran uncompiled
(an error under fullgraph=True).
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402



def test_dtype_argument_recompiles_and_is_right():
    def fn(x, dt):
        return x.to(dt) + 1
    backend = CompileCounter()
    compiled = tjc.compile(fn, backend=backend, fullgraph=True)
    x = torch.zeros(2)
    for dt in (torch.float64, torch.float16, torch.float64, torch.int32, torch.float16):
        got = compiled(x, dt)
        assert got.dtype == dt and torch.equal(got, fn(x, dt))
    assert backend.frame_count == 3


def test_layout_and_memory_format_arguments():
    def fn(x, fmt, layout):
        return torch.zeros(x.shape, layout=layout) + x.contiguous(memory_format=fmt)
    backend = CompileCounter()
    compiled = tjc.compile(fn, backend=backend, fullgraph=True)
    x = torch.randn(1, 2, 3, 3)
    for fmt in (torch.channels_last, torch.contiguous_format, torch.channels_last):
        got, want = compiled(x, fmt, torch.strided), fn(x, fmt, torch.strided)
        assert torch.equal(got, want) and got.stride() == want.stride()
    assert backend.frame_count == 2


def test_device_argument_is_guarded_by_value():
    def fn(x, dev):
        return x.to(dev) * 2 if dev.type == "cpu" else x - 1
    backend = CompileCounter()
    compiled = tjc.compile(fn, backend=backend, fullgraph=True)
    x = torch.ones(2)
    assert torch.equal(compiled(x, torch.device("cpu")), fn(x, torch.device("cpu")))
    # An equal device made anew is the same entry; "meta" is not.
    assert torch.equal(compiled(x, torch.device("cpu")), fn(x, torch.device("cpu")))
    assert backend.frame_count == 1
    assert torch.equal(compiled(x, torch.device("meta")), fn(x, torch.device("meta")))
    assert backend.frame_count == 2


def test_dtype_in_a_closure_and_a_default():
    dt = torch.float64

    def fn(x, other=torch.int64):
        return x.to(dt) + x.to(other)
    backend = CompileCounter()
    compiled = tjc.compile(fn, backend=backend, fullgraph=True)
    x = torch.ones(2)
    assert torch.equal(compiled(x), fn(x)) and backend.frame_count == 1
    assert torch.equal(compiled(x, torch.float16), fn(x, torch.float16)) and backend.frame_count == 2


def test_an_ellipsis_argument_is_pinned_by_its_type():
    # Ellipsis is its type's only object: TYPE_MATCH pins it (EQUALS_MATCH refused it, and the frame
    # ran uncompiled)
    def pick(x, index):
        return x[index] * 2

    backend = CompileCounter()
    compiled = tjc.compile(pick, backend=backend, fullgraph=True)
    x = torch.arange(6.0).reshape(2, 3)
    for index in (..., 1, (..., 0), ..., (..., 0)):
        torch.testing.assert_close(compiled(x, index), pick(x, index))
    assert backend.frame_count == 3
