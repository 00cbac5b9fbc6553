"""Shared by the grad-mode and autocast tests: run a function eagerly and compiled on copies of
the same inputs and compare what a context manager can change. Imports torch: import it after
`pytest.importorskip("torch")`."""
import contextlib
import io

import torch

import torch_jit_cache as tjc
from torch_jit_cache.testing import CompileCounter, CompileCounterWithBackend


def global_state():
    """What grad-mode and autocast blocks change: it must be eager's after every call."""
    return (torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
            torch.is_autocast_cache_enabled())


def leaves(*shapes):
    return [torch.randn(*s, requires_grad=True) for s in shapes]


def clones(tensors):
    return [t.detach().clone().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t
            for t in tensors]


def flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def eager_and_compiled(fn, inputs, *, backend=None, calls=2, grad=True, grad_tol=None):
    """Run `fn` eagerly and compiled (`calls` times) on copies of `inputs`; check values, dtypes,
    requires_grad, gradients (within `grad_tol`, (rtol, atol), where given) and `global_state()`
    after each call against eager's. Returns (graphs, breaks)."""
    cnt = CompileCounter() if backend is None else CompileCounterWithBackend(backend)
    compiled = tjc.compile(fn, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    runs = []
    with contextlib.redirect_stdout(io.StringIO()):
        for f in [fn] + [compiled] * calls:
            args = clones(inputs)
            out = flat(f(*args))
            runs.append((out, global_state(), args))
    expected, state_after, eager_args = runs[0]
    if grad:
        sum(o.float().sum() for o in expected if o.requires_grad).backward()
    tol = {} if grad_tol is None else dict(zip(("rtol", "atol"), grad_tol))
    for out, state, args in runs[1:]:
        assert state == state_after
        assert [getattr(o, "dtype", o) for o in out] == [getattr(o, "dtype", o) for o in expected]
        assert [getattr(o, "requires_grad", o) for o in out] == \
            [getattr(o, "requires_grad", o) for o in expected]
        for o, e in zip(out, expected):
            torch.testing.assert_close(o, e)
        if grad:
            sum(o.float().sum() for o in out if o.requires_grad).backward()
            for a, e in zip(args, eager_args):
                if isinstance(a, torch.Tensor):
                    torch.testing.assert_close(a.grad, e.grad, **tol)
    return cnt.frame_count, tjc.stats()["graph_breaks"] - before
