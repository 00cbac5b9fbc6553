"""A compiled module inside what calls it (frontend/module_wrapper.py): blocks compiled with compile() or
compile_() and then a model compiled whole inline as the modules they wrap (one graph, no break,
gradients equal eager's, each block still runs alone on its own cache), and the whole's trace is
guarded on the block (another block, a hook, a new `_compiled_call_impl`); DistributedDataParallel
over a compiled module sees its parameters and reduces their gradients. The module itself:
test_module_wrapper.py."""
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import rand  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


# --- compiled blocks inside a model compiled whole (the tracer inlines them) ---------------------

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.lin(x)) + x


class Blocks(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _as_child(model, cnt):
    for i, block in enumerate(model.layers):
        model.layers[i] = tjc.compile(block, backend=cnt)


def _in_place(model, cnt):
    for block in model.layers:
        tjc.compile_(block, backend=cnt)


def _graphs_and_breaks(how):
    """(eager, model with its blocks compiled by `how` and then compiled whole, the whole's counter,
    the blocks' counter)."""
    eager = Blocks()
    model = Blocks()
    model.load_state_dict(eager.state_dict())
    inner = CompileCounter()
    how(model, inner)
    outer = CompileCounter()
    return eager, model, tjc.compile(model, backend=outer), outer, inner


@pytest.mark.parametrize("how", [_as_child, _in_place], ids=["compile", "compile_"])
def test_compiled_blocks_in_a_model_compiled_whole_are_one_graph(how):
    """torch.compile traces an OptimizedModule child as its `_orig_mod`; here a compiled block (or
    one compiled in place) inlines as the module it wraps: one graph, no break."""
    eager, model, whole, outer, inner = _graphs_and_breaks(how)
    x = rand(2, 4)
    breaks = tjc.stats()["graph_breaks"]
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    assert (outer.frame_count, tjc.stats()["graph_breaks"] - breaks) == (1, 0)
    assert inner.frame_count == 0, "the blocks' own caches are not used inside the whole"
    report = tjc.explain(model)(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    assert outer.frame_count == 1
    # Gradients equal eager's.
    xe = rand(2, 4).requires_grad_()
    xc = xe.detach().clone().requires_grad_()
    eager(xe).square().sum().backward()
    whole(xc).square().sum().backward()
    assert torch.allclose(xe.grad, xc.grad, atol=1e-6)
    for (name, pe), (_, pc) in zip(eager.named_parameters(), model.named_parameters()):
        assert torch.allclose(pe.grad, pc.grad, atol=1e-6), name
    # Each block still runs alone, compiled, on the cache the blocks share: one trace.
    for be, bc in zip(eager.layers, model.layers):
        assert torch.allclose(bc(x), be(x), atol=1e-6)
    assert inner.frame_count == 1


@pytest.mark.parametrize("how", [_as_child, _in_place], ids=["compile", "compile_"])
def test_an_inlined_compiled_block_is_guarded(how):
    """The whole's trace holds while the block is the same object with the same compiled call:
    another block, a hook, or a `_compiled_call_impl` set anew is noticed."""
    eager, model, whole, outer, _ = _graphs_and_breaks(how)
    x = rand(2, 4)
    whole(x)
    whole(x)
    # Another block in its place (compiled the same way): its weights, not the old ones.
    fresh = Block()
    eager.layers[1].load_state_dict(fresh.state_dict())
    model.layers[1] = fresh
    how(model, CompileCounter())
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    # A hook on the block runs.
    handle = model.layers[0].register_forward_hook(lambda m, args, out: out * 0)
    eager_handle = eager.layers[0].register_forward_hook(lambda m, args, out: out * 0)
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    handle.remove()
    eager_handle.remove()
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    # A call of the block that is no longer compile's: nn.Module.__call__ calls it.
    block = model.layers[2]
    block._compiled_call_impl = lambda *args, **kwargs: args[0] * 0 + 5
    assert torch.all(whole(x) == 5)


# --- DistributedDataParallel -----------------------------------------------------------------------

_DDP_SCRIPT = r"""
import datetime, socket, sys
import torch, torch.distributed as dist
from torch import nn
import torch_jit_cache as tjc
from torch_jit_cache.testing import CompileCounter

s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1,
                        timeout=datetime.timedelta(seconds=60))
try:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    ref = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    ref.load_state_dict(m.state_dict())
    cnt = CompileCounter()
    ddp = nn.parallel.DistributedDataParallel(tjc.compile(m, backend=cnt))
    assert len(list(ddp.parameters())) == 4, len(list(ddp.parameters()))
    assert [n for n, _ in ddp.named_parameters()] == ["module." + n for n, _ in ref.named_parameters()]
    x = torch.randn(3, 4)
    ddp(x).sum().backward()
    ref(x).sum().backward()
    for p, q in zip(m.parameters(), ref.parameters()):
        assert torch.allclose(p.grad, q.grad), "gradients reduced over the compiled module's parameters"
    assert cnt.frame_count == 1, cnt.frame_count
    print("DDP-OK")
finally:
    dist.destroy_process_group()
"""


def test_ddp_sees_the_compiled_modules_parameters():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _DDP_SCRIPT], capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0 and "DDP-OK" in proc.stdout, proc.stdout + proc.stderr
