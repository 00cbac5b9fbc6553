"""torch_jit_cache.tracer on nn.Modules: trace() a module's forward (an MLP, a CNN with batch norm in
eval and train, attention with a mask, an unrolled GRU cell, nested blocks in lists, dicts and
properties), run the graph on inputs loaded through the sources and compare with eager: parameters
are graph inputs, and the guards the trace relied on (module identity, training, attributes, list
lengths) are there. Modules with backward hooks are unsupported; nested sources load from a frame."""
import builtins
import math

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_jit_cache.guard.sources import AttrSource, GlobalSource, ItemSource, LocalSource, load_source  # noqa: E402
from torch_jit_cache.guard.trace_result import GuardKind, SourceOutput, Unsupported  # noqa: E402

from context_helpers import check_trace, do_trace, guard_kinds, rand, run_compiled  # noqa: E402


# -- modules --------------------------------------------------------------------------------------
class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(16, 4)
        self.drop = nn.Dropout(0.5)
        self.scale = 0.5

    def forward(self, x):
        return self.drop(self.fc2(self.act(self.fc1(x)))) * self.scale


def test_mlp_module_parameters_are_inputs():
    m = MLP().eval()
    r = check_trace(MLP.forward, (m, rand(3, 8)), (m, rand(3, 8)))
    w = AttrSource(AttrSource(LocalSource("self"), "fc1"), "weight")
    assert w in r.graph_inputs
    # By type and by what the trace read, not by identity: an equal instance shares the entry.
    assert GuardKind.TYPE_MATCH in guard_kinds(r, LocalSource("self"))
    assert GuardKind.ID_MATCH not in guard_kinds(r, LocalSource("self"))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, AttrSource(LocalSource("self"), "scale"))
    assert GuardKind.EQUALS_MATCH in guard_kinds(
        r, AttrSource(AttrSource(LocalSource("self"), "fc1"), "training"))
    # parameters are loaded at call time: a weight update shows through without retracing
    with torch.no_grad():
        m.fc1.weight.mul_(2)
    x = rand(3, 8)
    torch.testing.assert_close(run_compiled(r, MLP.forward, m, x), m(x))
    assert not any(n.op == "get_attr" for n in r.graph.graph.nodes)


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                      nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x):
        x = self.features(x)
        return self.head(torch.flatten(x, 1))


def test_cnn_batchnorm_eval():
    m = CNN().eval()
    check_trace(CNN.forward, (m, rand(2, 3, 8, 8)), (m, rand(2, 3, 8, 8)))


def test_cnn_batchnorm_train_updates_running_stats():
    m1 = CNN().train()
    m2 = CNN().train()
    m2.load_state_dict(m1.state_dict())
    x = rand(4, 3, 8, 8)
    r = do_trace(CNN.forward, m1, x)
    torch.testing.assert_close(m1.features[1].running_mean, m2.features[1].running_mean)
    expected = m2(x)
    got = run_compiled(r, CNN.forward, m1, x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(m1.features[1].running_mean, m2.features[1].running_mean)
    assert m1.features[1].num_batches_tracked.item() == 1
    bn = AttrSource(AttrSource(LocalSource("self"), "features"), "1")
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, AttrSource(bn, "training"))


class Attention(nn.Module):
    def __init__(self, d=16, heads=2):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)
        self.heads = heads
        self.norm = nn.LayerNorm(d)

    def split(self, t):
        b, n, d = t.shape
        return t.view(b, n, self.heads, d // self.heads).transpose(1, 2)

    def forward(self, x, mask):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = map_split(self, (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        scores = scores.masked_fill(mask == 0, float("-inf"))
        attn = scores.softmax(dim=-1)
        y = (attn @ v).transpose(1, 2).reshape(x.shape)
        return self.out(y) + x


def map_split(mod, ts):
    return [mod.split(t) for t in ts]


def test_attention_with_mask():
    m = Attention()
    mask = torch.tril(torch.ones(5, 5))
    check_trace(Attention.forward, (m, rand(2, 5, 16), mask), (m, rand(2, 5, 16), mask))


class GRUCell(nn.Module):
    def __init__(self, i=4, h=6):
        super().__init__()
        self.x2h = nn.Linear(i, 3 * h)
        self.h2h = nn.Linear(h, 3 * h)

    def forward(self, x, h):
        xr, xz, xn = self.x2h(x).chunk(3, 1)
        hr, hz, hn = self.h2h(h).chunk(3, 1)
        r = torch.sigmoid(xr + hr)
        z = torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        return (1 - z) * n + z * h


def gru_unrolled(cell, xs, h):
    outs = []
    for t in range(xs.shape[0]):
        h = cell(xs[t], h)
        outs.append(h)
    return torch.stack(outs), h


def test_gru_cell_unrolled():
    cell = GRUCell()
    r = check_trace(gru_unrolled, (cell, rand(5, 2, 4), rand(2, 6)), (cell, rand(5, 2, 4), rand(2, 6)))
    assert sum(1 for n in r.graph.graph.nodes if n.target is torch.sigmoid) == 10
    assert GuardKind.TYPE_MATCH in guard_kinds(r, LocalSource("cell"))
    assert GuardKind.ID_MATCH not in guard_kinds(r, LocalSource("cell"))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return x + self.helper(self.lin(x))

    def helper(self, y):
        return F.gelu(y) * self.factor

    @property
    def factor(self):
        return 2.0 if self.training else 1.0


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block() for _ in range(3)])
        self.heads = nn.ModuleDict({"a": nn.Linear(4, 2), "b": nn.Linear(4, 3)})
        self.emb = nn.Embedding(10, 4)

    def forward(self, idx):
        x = self.emb(idx)
        for i, blk in enumerate(self.blocks):
            x = blk(x) if i % 2 == 0 else self.blocks[i](x) * 0.5
        return {k: head(x) for k, head in self.heads.items()}


def test_nested_modules_module_list_dict_and_properties():
    m = Stack()
    idx = torch.randint(0, 10, (2, 3))
    r = check_trace(Stack.forward, (m, idx), (m, torch.randint(0, 10, (2, 3))))
    assert GuardKind.LENGTH in guard_kinds(r, AttrSource(LocalSource("self"), "blocks"))
    m.eval()
    check_trace(Stack.forward, (m, idx))


def test_module_with_backward_hooks_is_unsupported():
    m = MLP()
    m.fc1.register_full_backward_hook(lambda *a: None)
    with pytest.raises(Unsupported, match="backward hooks"):
        do_trace(MLP.forward, m, rand(2, 8))


def test_module_returned_by_source():
    def f(m, x):
        return m, m.fc1(x)
    mod = MLP()
    r = do_trace(f, mod, rand(2, 8))
    assert r.output.items[0] == SourceOutput(LocalSource("m"))


def test_load_source_nested():
    m = MLP()
    frame = ({"self": m, "xs": [1, (2, 3)]}, {"SCALE": 3.0}, builtins.__dict__)
    assert load_source(AttrSource(AttrSource(LocalSource("self"), "fc1"), "weight"),
                       *frame) is m.fc1.weight
    assert load_source(ItemSource(ItemSource(LocalSource("xs"), 1), 0), *frame) == 2
    assert load_source(GlobalSource("SCALE"), *frame) == 3.0
