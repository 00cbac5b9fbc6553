"""A subclass of a built-in module whose forward calls super().forward (HuggingFace BART's
BartLearnedPositionalEmbedding is an nn.Embedding). The built-in forward is traced as the plain
module's is (one op of the graph, its parameters graph inputs), so gradients reach every parameter
on every entry, whatever the backend; a built-in forward the tracer does not know is a graph break
with its reason, never an error eager did not raise."""
import copy

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounterWithBackend  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class DoubledEmbedding(nn.Embedding):
    def forward(self, x):
        return super().forward(x) * 2


class ShiftedConv(nn.Conv1d):
    def forward(self, x):
        return super().forward(x + 1)


class ScaledLinear(nn.Linear):
    def forward(self, x):
        return super().forward(x) * 0.5


class CenteredLayerNorm(nn.LayerNorm):
    def forward(self, x):
        return super().forward(x - x.mean())


class ExplicitSuper(nn.Linear):
    def forward(self, x):
        return super(ExplicitSuper, self).forward(x).relu()


class PositionalEmbedding(nn.Embedding):
    """transformers' BartLearnedPositionalEmbedding, as it is in transformers 5.x."""

    def __init__(self, num_embeddings, embedding_dim):
        self.offset = 2
        super().__init__(num_embeddings + self.offset, embedding_dim)

    def forward(self, input_ids, past_key_values_length=0):
        bsz, seq_len = input_ids.shape[:2]
        positions = torch.arange(past_key_values_length, past_key_values_length + seq_len,
                                 dtype=torch.long, device=self.weight.device).expand(bsz, -1)
        return super().forward(positions + self.offset)


class WithPositions(nn.Module):
    def __init__(self):
        super().__init__()
        self.pos = PositionalEmbedding(16, 4)
        self.proj = nn.Linear(4, 3)

    def forward(self, ids):
        return self.proj(self.pos(ids)).tanh()


class DoubledGroupNorm(nn.GroupNorm):   # outside the leaf table: its forward is inlined
    def forward(self, x):
        return super().forward(x) * 2


class ShiftedHardswish(nn.Hardswish):
    def forward(self, x):
        return nn.Hardswish.forward(self, x) + 1


class PairBilinear(nn.Bilinear):
    def forward(self, x):
        return super().forward(x, x)


CASES = [
    (lambda: DoubledGroupNorm(2, 4), lambda: torch.randn(2, 4, 3)),
    (lambda: ShiftedHardswish(), lambda: torch.randn(2, 4)),
    (lambda: PairBilinear(3, 3, 2), lambda: torch.randn(4, 3)),
    (lambda: DoubledEmbedding(10, 4), lambda: torch.tensor([[1, 2, 3]])),
    (lambda: ShiftedConv(2, 3, 3), lambda: torch.randn(2, 2, 8)),
    (lambda: ScaledLinear(4, 3), lambda: torch.randn(5, 4)),
    (lambda: CenteredLayerNorm(4), lambda: torch.randn(2, 4)),
    (lambda: ExplicitSuper(4, 3), lambda: torch.randn(5, 4)),
]


@pytest.mark.parametrize("make,inp", CASES, ids=lambda c: getattr(c, "__name__", ""))
def test_super_forward_of_builtin_module_traces_into_one_graph(make, inp):
    torch.manual_seed(0)
    m = make()
    cnt = CompileCounterWithBackend("eager")
    compiled = tjc.compile(m, backend=cnt)
    x = inp()
    torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 1
    assert tjc.stats()["graph_breaks"] == 0 and tjc.stats()["fallbacks"] == 0


class WeirdSuper(nn.InstanceNorm1d):
    def forward(self, x):
        return super().forward(x * 2) + 1


def test_super_forward_of_a_builtin_that_is_not_inlined_breaks_with_its_reason():
    # Running statistics updated in place by the forward: not inlined (builtin_forward_refusal).
    torch.manual_seed(0)
    m, ref = WeirdSuper(3, track_running_stats=True), WeirdSuper(3, track_running_stats=True)
    x = torch.randn(4, 3, 5)
    rep = tjc.explain(WeirdSuper(3, track_running_stats=True))(x)
    assert any("InstanceNorm" in str(r) and "buffers" in str(r) for r in rep.break_reasons), rep
    torch.testing.assert_close(tjc.compile(m)(x), ref(x))
    torch.testing.assert_close(m.running_mean, ref.running_mean)


def test_bound_method_of_a_builtin_module_is_not_a_torch_function():
    # A bound method of a torch module reached from the frame (`fn = self.emb.forward`) was taken
    # for a torch function and put into the graph by its module's name, which does not resolve.
    emb = nn.Embedding(10, 4)

    def fn(f, x):
        return f(x) + 1

    x = torch.tensor([1, 2])
    torch.testing.assert_close(tjc.compile(fn)(emb.forward, x), fn(emb.forward, x))


def _train_and_compare(make, inputs, backend):
    torch.manual_seed(0)
    eager = make()
    model = copy.deepcopy(eager)
    compiled = tjc.compile(model, backend=backend)
    for x in inputs:
        a, b = eager(x), compiled(x)
        assert b.requires_grad == a.requires_grad
        torch.testing.assert_close(b, a)
        a.sum().backward()
        b.sum().backward()
        for (name, p), q in zip(eager.named_parameters(), model.parameters()):
            assert (q.grad is None) == (p.grad is None), name
            torch.testing.assert_close(q.grad, p.grad, msg=name)
        eager.zero_grad()
        model.zero_grad()


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_gradients_reach_the_weight_after_a_recompile(backend):
    inputs = [torch.zeros(2, n, dtype=torch.long) for n in (3, 5, 7, 5)]
    _train_and_compare(WithPositions, inputs, backend)


def test_gradients_reach_the_weight_under_inductor():
    pytest.importorskip("torch._inductor")
    _train_and_compare(WithPositions, [torch.zeros(1, n, dtype=torch.long) for n in (3, 4)], "inductor")


@pytest.mark.skipif(not __import__("torch_jit_cache.testing.models", fromlist=["available"]).available("bart"),
                    reason="needs transformers")
def test_bart_trains_as_eager_across_recompiles_under_aot_eager():
    # HuggingFace BART (tiny config, random weights): three SGD steps at two sequence lengths, so
    # the second is a recompile. Before: the positional embedding's weight got no gradient.
    from torch_jit_cache.testing import models as zoo

    eager, _ = zoo.build("bart")
    eager.train()
    twin = copy.deepcopy(eager)
    compiled = tjc.compile(twin, backend="aot_eager")
    generator = torch.Generator().manual_seed(1)
    for step, (source, target) in enumerate([(16, 8), (12, 6), (16, 8)]):
        ids = torch.randint(3, 100, (2, source), generator=generator)
        labels = torch.randint(3, 100, (2, target), generator=generator)
        expected, got = eager(input_ids=ids, labels=labels).loss, compiled(input_ids=ids, labels=labels).loss
        torch.testing.assert_close(got, expected, msg=f"step {step} loss")
        expected.backward()
        got.backward()
        with torch.no_grad():
            for (name, p), q in zip(eager.named_parameters(), twin.parameters()):
                assert (q.grad is None) == (p.grad is None), f"step {step}: {name}"
                if p.grad is not None:
                    torch.testing.assert_close(q.grad, p.grad, rtol=1e-4, atol=1e-5, msg=f"step {step}: {name}")
                    p -= 0.1 * p.grad
                    q -= 0.1 * q.grad
                p.grad = q.grad = None
    for (name, p), q in zip(eager.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5, msg=name)
    assert tjc.stats()["fallbacks"] == 0 and tjc.stats()["graph_breaks"] == 0
