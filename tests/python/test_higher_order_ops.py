"""torch's higher-order control flow (torch.cond, torch.while_loop, control_flow.map) inside a
compiled function: called from Python, each compiles its branches with TorchDynamo itself, so the
tracer does not run it on its examples; the call runs as written, at a graph break, and matches
eager (trace_rules.FUNCTORCH_CODE_MODULES). Before, a cond with builtin branches raised dynamo's
"Attempt to trace generator" where eager returned."""
import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def _builtin_branches(x):
    return torch.cond(x.sum() > 0, torch.sin, torch.cos, (x,)) + 1


def _python_branches(x, flag: bool):
    def yes(t):
        return t * 2

    def no(t):
        return t - 1
    return torch.cond(flag, yes, no, (x,)).relu()


def _nested(x):
    def outer_true(t):
        return torch.cond(t.mean() > 0, torch.sin, torch.cos, (t,))

    def outer_false(t):
        return t * 3
    return torch.cond(x.sum() > 0, outer_true, outer_false, (x,))


def _while(x):
    def cond_fn(i, t):
        return i < 3

    def body_fn(i, t):
        return i + 1, t * 2
    i, t = torch.while_loop(cond_fn, body_fn, (torch.tensor(0), x))
    return t + i


@pytest.mark.parametrize("fn,args", [
    (_builtin_branches, (torch.tensor([1.0, -2.0, 3.0]),)),
    (_builtin_branches, (torch.tensor([-1.0, -2.0, 3.0]),)),
    (_python_branches, (torch.randn(3), True)),
    (_python_branches, (torch.randn(3), False)),
    (_nested, (torch.tensor([0.5, 1.0]),)),
    (_while, (torch.ones(2),)),
], ids=["builtin-true", "builtin-false", "python-true", "python-false", "nested", "while_loop"])
def test_control_flow_ops_match_eager(fn, args):
    expected = fn(*args)
    got = tjc.compile(fn, backend="eager")(*args)
    torch.testing.assert_close(got, expected)


def test_a_compiled_call_after_a_cond_still_hits_its_entry():
    x = torch.tensor([1.0, 2.0])
    torch.testing.assert_close(tjc.compile(_builtin_branches, backend="eager")(x), _builtin_branches(x))
    compiled = tjc.compile(lambda t: t * 2 + 1, backend="eager")
    compiled(x)
    before = tjc.stats()["hits"]
    torch.testing.assert_close(compiled(x), x * 2 + 1)
    assert tjc.stats()["hits"] == before + 1   # tjc's frame hook is still in place
