"""What a trace reads of a tensor input's properties is true of the input and guarded.

tracer/fake_shapes.py: the fake tensor a trace runs on keeps the input's strides, storage offset,
conj/neg bits and inference-ness (FakeShapes.fakeify); a storage_offset() the trace reads is the
input's, and a guard. Every case compares the compiled call with eager on each call, and counts the graphs the
backend was given where an entry must (or must not) be reused.
"""
import gc
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from torch_jit_cache.guard.sources import LocalSource  # noqa: E402
from torch_jit_cache.tracer.fake_shapes import FakeShapes  # noqa: E402


def check_all(fn, inputs, **options):
    counter = CompileCounter()
    compiled = tjc.compile(fn, backend=counter, **options)
    for args in inputs:
        args = args if isinstance(args, tuple) else (args,)
        want, got = fn(*args), compiled(*args)
        assert got.shape == want.shape and torch.equal(got, want), (args, got, want)
    return counter


def branch_contiguous(x):
    return x + 1 if x.is_contiguous() else x + 3


def inference(*shape):
    with torch.inference_mode():
        return torch.zeros(*shape)


@pytest.mark.parametrize("dynamic", [None, True, False])
def test_is_contiguous_of_a_non_dense_view(dynamic):
    # clone() of x[:, ::2] is contiguous: the trace took the wrong branch on the first call.
    z = torch.zeros
    check_all(branch_contiguous, [z(4, 8)[:, ::2], z(4, 4), z(5, 5), z(6, 6).t(), z(7, 14)[:, ::2]], dynamic=dynamic)


def test_is_contiguous_after_a_dynamic_entry():
    # The order: a static entry, an automatic dynamic one, then strided views.
    z = torch.zeros
    check_all(branch_contiguous, [z(4, 4), z(5, 5), z(6, 6).t(), z(6, 12)[:, ::2], z(7, 7),
                                  z(2, 3, 6, 6).to(memory_format=torch.channels_last)[0]])


def test_is_contiguous_memory_format():
    def fn(x):
        return x + 1 if x.is_contiguous(memory_format=torch.channels_last) else x + 3
    z = torch.zeros
    cl = torch.channels_last
    check_all(fn, [z(2, 3, 4, 4), z(2, 3, 4, 4).to(memory_format=cl), z(2, 3, 5, 5).to(memory_format=cl),
                   z(2, 3, 6, 6), z(2, 3, 8, 8)[:, :, ::2, ::2]])


@pytest.mark.parametrize("dynamic", [None, True])
def test_is_inference(dynamic):
    def fn(x):
        return x + 1 if not x.is_inference() else x + 3
    z = torch.zeros
    check_all(fn, [inference(3), z(3), inference(4), z(4), inference(5)], dynamic=dynamic)


def test_inference_entry_is_not_reused_for_a_normal_tensor():
    def fn(x):
        return x * 2 if x.is_inference() else x * 5
    counter = check_all(fn, [inference(3), torch.zeros(3) + 1, inference(3)])
    assert counter.frame_count == 2


@pytest.mark.parametrize("dynamic", [None, True])
def test_conj_and_neg_bits(dynamic):
    c = torch.ones(3, dtype=torch.complex64)

    def conj(x):
        return x + 1 if x.is_conj() else x + 3

    def neg(x):
        return x + 1 if x.is_neg() else x + 3
    check_all(conj, [c, c.conj(), torch.ones(4, dtype=torch.complex64).conj()], dynamic=dynamic)
    check_all(neg, [c.imag, c.conj().imag, torch.ones(4, dtype=torch.complex64).conj().imag], dynamic=dynamic)


@pytest.mark.parametrize("dynamic", [None, True, False])
def test_storage_offset_read_is_guarded(dynamic):
    def fn(x):
        return x + x.storage_offset()
    base = torch.zeros(20)
    # Same size, other offsets (0 and 1 are specialised by the ShapeEnv: constants, guarded here).
    counter = check_all(fn, [base[1:5], base[2:6], base[0:4], base[1:5], base[7:11], base[3:8]], dynamic=dynamic)
    assert counter.frame_count >= 2


def test_storage_offset_not_read_is_not_guarded():
    # Offsets the trace never reads do not multiply entries: slices of one batch share one.
    def fn(x):
        return x * 2
    base = torch.zeros(6, 4)
    counter = check_all(fn, [base[i] for i in range(6)])
    assert counter.frame_count == 1


def test_view_needing_contiguity_raises_as_eager():
    # .view() of a non-dense view raises in eager; a contiguous clone let the trace succeed.
    def fn(x):
        try:
            return x.view(-1) + 1
        except RuntimeError:
            return x.reshape(-1) + 2
    check_all(fn, [torch.zeros(4, 8)[:, ::2], torch.zeros(4, 4)])


def test_fake_example_mirrors_the_input():
    shapes = FakeShapes()

    def example(t):
        return shapes.fakeify(t, LocalSource("x"), None)

    base = torch.arange(40.0)
    x = base.as_strided((3, 4), (1, 5), 2)
    e = example(x)
    assert (e.shape, e.stride(), e.storage_offset()) == (x.shape, x.stride(), 2)
    assert isinstance(e, torch._subclasses.fake_tensor.FakeTensor) and e.device == x.device
    with shapes.running():
        e.add_(1)
    assert torch.equal(x, torch.arange(40.0).as_strided((3, 4), (1, 5), 2))   # the user's tensor is untouched
    c = torch.randn(3, dtype=torch.complex64).conj()
    assert example(c).is_conj()
    n = torch.randn(3, dtype=torch.complex64).conj().imag
    assert example(n).is_neg()
    i = inference(2, 3).t()
    ei = example(i)
    assert ei.is_inference() and ei.stride() == i.stride()
    w = torch.randn(4, 6, requires_grad=True)[:, ::2]
    ew = example(w)
    assert ew.requires_grad and ew.stride() == w.stride()
    shapes.release()


def test_examples_of_views_are_freed():
    def fn(x):
        return x + 1 if x.is_contiguous() else x + 3
    compiled = tjc.compile(fn)
    x = torch.zeros(4, 8)[:, ::2]
    ref = weakref.ref(x)
    base_ref = weakref.ref(x._base)
    compiled(x)
    del x
    assert ref() is None and base_ref() is None
