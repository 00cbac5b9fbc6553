"""tracer/variables/torch_objects/autograd_functions.py through the public API: `Fn.apply(...)` of a custom
torch.autograd.Function.

The contract: where autograd records nothing (grad mode off, or no tensor argument requires
grad), forward is traced into the graph with a stand-in ctx, and the result equals eager's; where
the function's backward must run, the call is a graph break and runs as written, so gradients
are the custom backward's, never autograd's derivative of forward. Replacing forward recompiles.
"""
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402


class StraightThroughRound(torch.autograd.Function):
    """Rounds forward; passes the gradient through unchanged backward (autograd's derivative of
    round is zero, so a traced forward would give other gradients)."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        ctx.save_for_backward(x)
        ctx.mark_non_differentiable()
        return torch.round(x * ctx.scale) / scale + sum(ctx.needs_input_grad)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class ScaledSilu(torch.autograd.Function):
    """The setup_context style: forward without ctx, keyword defaults bound by apply."""

    @staticmethod
    def forward(x, alpha=2.0):
        return torch.nn.functional.silu(x) * alpha

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.alpha, None


def _round(x):
    return StraightThroughRound.apply(x, 4.0).sin()


def _silu(x):
    return ScaledSilu.apply(x).cos() + ScaledSilu.apply(x, 3.0)


def _explain(fn, x):
    rep = tjc.explain(fn)(x)
    return rep.graph_count, rep.graph_break_count, rep.fallbacks


@pytest.mark.parametrize("fn", [_round, _silu], ids=["ctx-forward", "setup_context"])
def test_apply_without_grad_is_traced_into_one_graph(fn):
    # Failed before: "_is_setup_context_defined() is given the Python callable ...", a break.
    x = torch.randn(8)
    assert _explain(fn, x) == (1, 0, [])
    compiled = tjc.compile(fn, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), fn(x))
    out = compiled(x)
    torch.testing.assert_close(out, fn(x))
    assert out.requires_grad is False


def test_apply_whose_backward_must_run_gives_the_custom_gradient():
    compiled = tjc.compile(_round, backend="eager")
    x = torch.randn(8, requires_grad=True)
    got = torch.autograd.grad(compiled(x).sum(), x)[0]
    expected = torch.autograd.grad(_round(x).sum(), x)[0]
    torch.testing.assert_close(got, expected)
    assert not torch.equal(expected, torch.zeros(8))   # straight-through: not round's zero derivative


def test_replacing_forward_recompiles():
    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def fn(x):
        return Twice.apply(x) + 1

    compiled = tjc.compile(fn, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), fn(x))
    Twice.forward = staticmethod(lambda ctx, x: x * 3)
    torch.testing.assert_close(compiled(x), x * 3 + 1)
    assert tjc.stats()["recompiles"] == 1


class Identity(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def _identity(x):
    y = Identity.apply(x)
    return y is x, y + 1


def test_a_forward_returning_its_argument_runs_as_written():
    x = torch.randn(3)
    compiled = tjc.compile(_identity, backend="eager")
    got, expected = compiled(x), _identity(x)
    assert got[0] == expected[0]
    torch.testing.assert_close(got[1], expected[1])


def test_the_function_class_is_freed_with_its_compiled_caller():
    def run():
        class Local(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x.exp()

            @staticmethod
            def backward(ctx, g):
                return g

        def fn(x):
            return Local.apply(x)

        tjc.compile(fn, backend="eager")(torch.randn(2))
        return weakref.ref(Local)

    probe = run()
    import gc
    gc.collect()   # a class is always in a cycle (its __mro__ and its functions' __globals__ aside)
    assert probe() is None
