"""Autograd inside a graph (tracer/variables/torch_objects/traced_backward.py): `requires_grad_()` on
a tensor the trace made, `backward()`, and the `.grad` / `.is_leaf` reads after them, for a backend
that runs the graph as traced. Each compiled result is compared with eager's, and so are the
gradients left on the frame's tensors."""
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402


def _run(fn, *args, backend=None):
    """(eager result, compiled result, frames compiled, graph breaks) on copies of `args`."""
    copy = lambda a: a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a  # noqa: E731
    cnt = backend or CompileCounter()
    before = tjc.stats()["graph_breaks"]
    got = tjc.compile(fn, backend=cnt)(*map(copy, args))
    breaks = tjc.stats()["graph_breaks"] - before
    return fn(*map(copy, args)), got, getattr(cnt, "frame_count", None), breaks


def _close(a, b):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b)
        assert a.requires_grad == b.requires_grad
    elif isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y)
    else:
        assert a == b


def new_leaf_gradient(x):
    h = torch.tanh(x) + 1
    h.requires_grad_()
    scaled = h * h * 0.5
    scaled.sum().backward()
    return h.grad * 3 - 1, scaled.detach(), h.requires_grad, h.is_leaf


def test_a_leaf_made_in_the_trace_gets_its_gradient_in_one_graph():
    expected, got, frames, breaks = _run(new_leaf_gradient, torch.randn(2, 5))
    _close(expected, got)
    assert (frames, breaks) == (1, 0)


def weighted_chunks(x, w):
    hidden = x.sin() * w
    cut = hidden.detach().requires_grad_(True)
    total = torch.zeros(())
    for part in cut.split(2):
        loss = (part ** 2).mean()
        loss.backward(retain_graph=False)
        total = total + loss.detach()
    hidden.backward(gradient=cut.grad)
    return x.grad, total


def test_backward_into_the_frames_leaves_accumulates_as_eager():
    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(3)
    expected, got, frames, breaks = _run(weighted_chunks, x, w)
    _close(expected, got)
    assert (frames, breaks) == (1, 0)
    # a second call on the same leaf accumulates into the gradient the first left
    ex, cx = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    compiled = tjc.compile(weighted_chunks, backend=CompileCounter())
    for _ in range(2):
        _close(weighted_chunks(ex, w), compiled(cx, w))
    torch.testing.assert_close(cx.grad, ex.grad)
    assert compiled(cx, w)[0] is cx.grad


def branch_on_leafness(x):
    y = x * 2
    if y.is_leaf:
        y.requires_grad_()
    if y.requires_grad:
        y.exp().sum().backward()
    return y.grad if y.is_leaf else y * 0


def test_the_inputs_requires_grad_flag_recompiles():
    cnt = CompileCounter()
    compiled = tjc.compile(branch_on_leafness, backend=cnt)
    for flag in (False, True, False):
        x = torch.randn(3, requires_grad=flag)
        _close(branch_on_leafness(x.detach().clone().requires_grad_(flag)), compiled(x))
    assert cnt.frame_count == 2


def returns_the_new_leaf(x):
    y = (x + 1).requires_grad_()
    return y * 2, y


def test_a_leaf_made_in_the_trace_may_leave_the_graph():
    expected, got, frames, breaks = _run(returns_the_new_leaf, torch.randn(3))
    _close(expected, got)
    assert (frames, breaks) == (1, 0) and got[1].is_leaf and got[0].grad_fn is not None
    got[0].sum().backward()
    torch.testing.assert_close(got[1].grad, torch.full((3,), 2.0))


def test_a_backend_through_aot_autograd_breaks_and_matches_eager():
    expected, got, _, breaks = _run(new_leaf_gradient, torch.randn(2, 5), backend="aot_eager")
    _close(expected, got)
    assert breaks >= 1


def stored_then_backward(x):
    y = (x * 3).requires_grad_()
    y.grad = torch.ones_like(y)
    (y * y).sum().backward()
    return y.grad + 0


def unreached_frame_leaf(x, other):
    y = (x * 2).requires_grad_()
    y.sum().backward()
    return y.grad, other.grad


def frame_flag(x):
    x.requires_grad_()
    return x * 2


@pytest.mark.parametrize("fn, make", [
    (stored_then_backward, lambda: (torch.randn(3),)),
    (unreached_frame_leaf, lambda: (torch.randn(3), torch.randn(3, requires_grad=True))),
    (frame_flag, lambda: (torch.randn(3),)),
])
def test_what_the_graph_cannot_follow_breaks_and_matches_eager(fn, make):
    expected, got, _, breaks = _run(fn, *make())
    _close(expected, got)
    assert breaks >= 1


def test_backward_on_a_tensor_without_grad_raises_as_eager():
    def no_grad_loss(x):
        return (x * 2).sum().backward()

    with pytest.raises(RuntimeError, match="does not require grad"):
        tjc.compile(no_grad_loss, backend=CompileCounter())(torch.randn(3))


def test_the_frames_tensors_are_not_held():
    x = torch.randn(4, 3, requires_grad=True)
    compiled = tjc.compile(weighted_chunks, backend=CompileCounter())
    grad, _ = compiled(x, torch.randn(3))
    ref, gref = weakref.ref(x), weakref.ref(grad)
    del x, grad
    assert ref() is None and gref() is None


def grad_under_its_other_name(x, y):
    x._grad = y * 2
    y.grad = x + 1
    return x.grad + 0, y._grad * 3


def test_underscore_grad_is_grad_for_reads_and_stores():
    x, y = torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True)
    ex, ey, cx, cy = (t.detach().clone().requires_grad_() for t in (x, y, x, y))
    cnt = CompileCounter()
    before = tjc.stats()["graph_breaks"]
    _close(grad_under_its_other_name(ex, ey), tjc.compile(grad_under_its_other_name, backend=cnt)(cx, cy))
    torch.testing.assert_close((cx.grad, cy.grad), (ex.grad, ey.grad))
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)


def autograd_metadata(x):
    y = x * 2
    y.detach_()
    return y + 1, y.grad_fn is None, y.is_leaf, x.grad_fn is None, x.is_leaf


def test_grad_fn_and_is_leaf_follow_the_flags_and_recompile():
    cnt = CompileCounter()
    compiled = tjc.compile(autograd_metadata, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    for flag in (False, False):
        x = torch.randn(3, requires_grad=flag)
        _close(autograd_metadata(x), compiled(x))
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)
    # a frame tensor that requires grad may be a leaf or not, which no guard says: a break
    leaf = torch.randn(3, requires_grad=True)
    _close(autograd_metadata(leaf), compiled(leaf))
    _close(autograd_metadata(leaf * 1), compiled(leaf * 1))
    assert tjc.stats()["graph_breaks"] - before >= 1


def graph_tensor_grad_fn(x):
    return (x * 2).grad_fn


def test_a_grad_fn_that_exists_breaks():
    x = torch.randn(3, requires_grad=True)
    got = tjc.compile(graph_tensor_grad_fn, backend=CompileCounter())(x)
    assert type(got) is type(graph_tensor_grad_fn(x))
