"""backends/sharing.py: identical graphs share one backend compile; graphs that differ in anything
the compiled code depends on (a constant, a dtype, a shape, training, requires_grad, grad mode)
each get their own; a user's backend is never skipped; the memo dies with the entries."""
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.backends import sharing  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


class Block(nn.Module):
    def __init__(self, d=16, scale=0.5, dtype=torch.float32):
        super().__init__()
        self.ln = nn.LayerNorm(d, dtype=dtype)
        self.fc1 = nn.Linear(d, 2 * d, dtype=dtype)
        self.fc2 = nn.Linear(2 * d, d, dtype=dtype)
        self.drop = nn.Dropout(0.25)
        self.scale = scale

    def forward(self, x):
        return x + self.scale * self.drop(self.fc2(torch.relu(self.fc1(self.ln(x)))))


def _regional(blocks, backend="aot_eager"):
    """Each block's forward compiled on a cache of its own (a bound method's compile() call owns
    one; modules of one class compiled alike would share one cache, and trace once): equal graphs
    traced in different caches share the backend's compile."""
    return [tjc.compile(b.forward, backend=backend) for b in blocks]


def test_six_identical_blocks_compile_once_and_match_eager():
    blocks = [Block().eval() for _ in range(6)]
    compiled = _regional(blocks)
    x = torch.randn(2, 16)
    with torch.no_grad():
        for block, opt in zip(blocks, compiled):
            torch.testing.assert_close(opt(x), block(x), rtol=0, atol=0)
    stats = tjc.stats()
    assert stats["graphs"] == 6 and stats["shared_backend_compiles"] == 5, stats


def test_shared_compiles_train_with_eager_gradients():
    blocks = [Block().train() for _ in range(3)]
    for b in blocks:
        b.drop.p = 0.0        # dropout on, but deterministic for the comparison
    twins = [Block() for _ in range(3)]
    for twin, b in zip(twins, blocks):
        twin.load_state_dict(b.state_dict())
        twin.drop.p = 0.0
    compiled = _regional(blocks)
    x = torch.randn(2, 16)
    for opt in compiled:
        opt(x).square().sum().backward()
    for twin in twins:
        twin(x).square().sum().backward()
    for b, twin in zip(blocks, twins):
        for (name, p), q in zip(b.named_parameters(), twin.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=name)
    assert tjc.stats()["shared_backend_compiles"] == 2


@pytest.mark.parametrize("differ", ["scale", "dtype", "width", "training", "frozen", "grad mode"])
def test_blocks_that_differ_in_one_thing_do_not_share(differ):
    # A property of sharing: any difference the compiled code depends on gives its own compile.
    first = Block().eval()
    second = {
        "scale": lambda: Block(scale=0.75).eval(),
        "dtype": lambda: Block(dtype=torch.float64).eval(),
        "width": lambda: Block(d=8).eval(),
        "training": lambda: Block().train(),
        "frozen": lambda: Block().eval().requires_grad_(False),
        "grad mode": lambda: Block().eval(),
    }[differ]()
    torch.manual_seed(1)
    inputs = [torch.randn(2, 16), torch.randn(2, 8 if differ == "width" else 16,
                                               dtype=torch.float64 if differ == "dtype" else torch.float32)]
    a, b = _regional([first, second])
    for block, opt, x in ((first, a, inputs[0]), (second, b, inputs[1])):
        no_grad = differ == "grad mode" and block is second
        with torch.no_grad() if no_grad else torch.enable_grad():
            torch.manual_seed(2)
            got = opt(x)
            torch.manual_seed(2)
            want = block(x)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert tjc.stats()["shared_backend_compiles"] == 0


def test_a_users_backend_is_called_for_every_graph():
    counter = CompileCounter()
    blocks = [Block().eval() for _ in range(3)]
    compiled = _regional(blocks, backend=counter)
    x = torch.randn(2, 16)
    for opt in compiled:
        opt(x)
    assert counter.frame_count == 3 and tjc.stats()["shared_backend_compiles"] == 0


def test_the_shared_callable_goes_with_the_last_entry_using_it(no_gc):
    blocks = [Block().eval() for _ in range(3)]
    compiled = _regional(blocks)
    x = torch.randn(2, 16)
    with torch.no_grad():
        for i in range(3):
            compiled[i](x)
    assert len(sharing._MEMO) == 1
    del compiled[:2]
    assert len(sharing._MEMO) == 1, "the third block's entry still uses it"
    del compiled
    assert not sharing._MEMO, "freed by reference counting with the last compiled block"


class _BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


def test_a_graph_whose_key_cannot_be_written_is_not_shared():
    import types

    import torch.fx

    def graph_of(target, *constants):
        g = torch.fx.Graph()
        x = g.placeholder("x")
        g.output(g.call_function(target, (x, *constants)))
        return types.SimpleNamespace(graph=g)   # what key() reads of a GraphModule
    example = [torch.randn(2)]
    assert sharing.key("aot_eager", graph_of(torch.add, 1.0), example) is not None
    assert sharing.key("aot_eager", graph_of(torch.add, _BadRepr()), example) is None
    # A tensor constant's repr is a summary: two different ones print the same.
    big, other = torch.zeros(2000), torch.zeros(2000)
    other[1000] = 1.0
    assert repr(big) == repr(other)
    assert sharing.key("aot_eager", graph_of(torch.add, big), example) is None
    assert sharing.key("aot_eager", graph_of(torch.add, slice(1, None), torch.float16, (2, [3])), example) \
        is not None
    assert sharing.key("aot_eager", graph_of(torch.add, 1.0), [torch.randn(2), 3]) is None
    assert sharing.key(lambda gm, ex: gm.forward, graph_of(torch.add, 1.0), example) is None
    import torch._inductor.config as inductor_config
    assert sharing.key("inductor", graph_of(torch.add, 1.0), example) is not None
    with inductor_config.patch(freezing=True):   # parameters may be folded in as constants
        assert sharing.key("inductor", graph_of(torch.add, 1.0), example) is None
