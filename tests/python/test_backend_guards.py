"""Backend specialisations are guards.

pipeline/convert_frame.py builds an entry's shape guards from the trace's ShapeEnv after the backend
compiled: a backend that compiles symbolically may specialise a size while it compiles (inductor
fixes a convolution's channel count), adding a replacement or a guard to the ShapeEnv. Before, the
guards were taken when the trace ended, and the entry compiled for 96 channels was reused for 240
(inductor: `AssertionError: expected size 240==96`; a backend without such an assertion: a silently
wrong result). The cheap tests use a backend that specialises the fake inputs' symbols itself.
"""

import gc

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch
import torch_jit_cache as tjc  # noqa: E402


def specialising(read):
    """A backend that reads `read(example_inputs)` as a Python int (a ShapeEnv guard, as inductor's
    specialisations are) and bakes it into what it returns: right only for that size."""
    graphs = []

    def backend(gm, example_inputs):
        n = int(read(example_inputs))
        graphs.append(n)

        def run(*args):
            out = gm(*args)
            return [o * 0 + n for o in out] if isinstance(out, (list, tuple)) else out * 0 + n
        return run
    return backend, graphs


def size_sum(x):
    return (x * 1).sum(0, keepdim=True).expand(1) * 0 + x.shape[0]


def test_backend_specialisation_recompiles_dynamic_entry():
    backend, graphs = specialising(lambda inputs: inputs[0].shape[0])
    compiled = tjc.compile(size_sum, backend=backend, dynamic=True)
    for n in (5, 7, 9, 7):
        x = torch.ones(n)
        got = compiled(x)
        assert torch.equal(got, size_sum(x)), (n, got)   # before: 5 for every n (silently wrong)
    assert graphs == [5, 7, 9]


def test_backend_specialisation_under_automatic_dynamic():
    backend, graphs = specialising(lambda inputs: inputs[0].shape[0])
    compiled = tjc.compile(size_sum, backend=backend)
    for n in (4, 6, 8, 6):
        x = torch.ones(n)
        assert torch.equal(compiled(x), size_sum(x)), n
    assert graphs == [4, 6, 8]


def test_backend_guard_without_replacement():
    # A guard (s0 > 6) rather than a replacement: the entry serves every size the guard admits.
    def backend(gm, example_inputs):
        big = bool(example_inputs[0].shape[0] > 6)

        def run(*args):
            out = gm(*args)
            return [o * 0 + (1 if big else -1) for o in out]
        return run

    def fn(x):
        return x.sum(0, keepdim=True) * 0 + (1 if x.shape[0] > 6 else -1)
    compiled = tjc.compile(fn, backend=backend, dynamic=True)
    for n in (8, 9, 3, 10, 2):
        x = torch.ones(n)
        assert torch.equal(compiled(x), fn(x)), n
    assert len(tjc.cache_entries(compiled)) == 2


def test_the_trace_state_is_released_after_the_backend():
    # The ShapeEnv now lives past the trace (until the guards are built): nothing of ours may keep
    # it once the compile is done. As docs/dynamic_shapes.md says, torch's fake dispatch leaves
    # cycles through the mode, so one collection is allowed (test_dynamic does the same).
    import weakref
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    envs = []
    original = ShapeEnv.__init__

    def record(self, *a, **k):
        original(self, *a, **k)
        envs.append(weakref.ref(self))

    def backend(gm, example_inputs):
        n = int(example_inputs[0].shape[0])
        return lambda *args: [torch.full((1,), float(n))]
    ShapeEnv.__init__ = record
    try:
        compiled = tjc.compile(size_sum, backend=backend, dynamic=True)
        assert torch.equal(compiled(torch.ones(5)), torch.tensor([5.0]))
        assert torch.equal(compiled(torch.ones(6)), torch.tensor([6.0]))
    finally:
        ShapeEnv.__init__ = original
    gc.collect()
    assert len(envs) >= 2 and all(r() is None for r in envs)


def conv_block(x, w1, w2):
    F = torch.nn.functional
    return torch.relu(F.conv2d(F.conv2d(x.mean(1, keepdim=True).expand_as(x), w1), w2))


def test_inductor_conv_channels():
    # The repro: C = 16, 96, 240 with inductor; the third call raised
    # AssertionError: expected size 240==96.
    compiled = tjc.compile(conv_block, backend="inductor")
    torch.manual_seed(0)
    for c in (16, 96, 240):
        x, w1, w2 = torch.randn(1, c, 4, 4), torch.randn(c, c, 1, 1), torch.randn(8, c, 1, 1)
        assert torch.allclose(compiled(x, w1, w2), conv_block(x, w1, w2), atol=1e-3, rtol=1e-3), c
