"""compile() on nn.Modules end to end: models (MLP, CNN, attention, unrolled GRU, nested blocks)
equal eager and compile once; a changed leaf-module setting, attribute, submodule or training flag
recompiles; gradients and an SGD loop equal eager; compiled modules, their parameters and their
entries are freed without reset() or the cycle collector."""
import gc
import weakref

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import rand, same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


class MLP(torch.nn.Module):
    def __init__(self, sizes=(8, 16, 4)):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = torch.relu(x)
        return x


class CNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x)))
        return self.fc(x.flatten(1))


class Attention(torch.nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.scale = d ** -0.5

    def forward(self, x, mask):
        scores = self.q(x) @ self.k(x).transpose(-2, -1) * self.scale
        scores = scores.masked_fill(mask, float("-inf"))
        return torch.softmax(scores, dim=-1) @ self.v(x)


class GRUUnrolled(torch.nn.Module):
    def __init__(self, n=4, h=6):
        super().__init__()
        self.cell = torch.nn.GRUCell(n, h)
        self.h = h

    def forward(self, xs):
        hx = torch.zeros(xs.shape[1], self.h)
        for t in range(xs.shape[0]):
            hx = self.cell(xs[t], hx)
        return hx


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = MLP((8, 8, 8))
        self.norm = torch.nn.LayerNorm(8)

    def helper(self, x):
        return self.norm(x) * 2

    def forward(self, x):
        return self.helper(self.inner(x)) + x


MODULE_CASES = [
    ("mlp", MLP, lambda: [(rand(2, 8),), (rand(2, 8),)]),
    ("cnn_eval", lambda: CNN().eval(), lambda: [(rand(2, 3, 8, 8),), (rand(2, 3, 8, 8),)]),
    ("attention", Attention, lambda: [(rand(2, 5, 8), torch.triu(torch.ones(5, 5, dtype=torch.bool), 1))] * 2),
    ("gru_unrolled", GRUUnrolled, lambda: [(rand(3, 2, 4),), (rand(3, 2, 4),)]),
    ("nested_block", Block, lambda: [(rand(2, 8),), (rand(2, 8),)]),
    ("sequential", lambda: torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)),
     lambda: [(rand(3, 8),), (rand(3, 8),)]),
]


@pytest.mark.parametrize("name, make, inputs", MODULE_CASES, ids=[c[0] for c in MODULE_CASES])
def test_module_matches_eager_and_compiles_once(name, make, inputs):
    mod = make()
    cnt = CompileCounter()
    opt = tjc.compile(mod, backend=cnt)
    for args in inputs():
        with torch.no_grad():
            assert same(mod(*args), opt(*args)), name
    assert cnt.frame_count == 1


def test_cnn_batchnorm_in_train_mode_updates_running_stats_like_eager():
    torch.manual_seed(1)
    a, b = CNN().train(), CNN().train()
    b.load_state_dict(a.state_dict())
    opt = tjc.compile(b, backend=CompileCounter())
    x = rand(4, 3, 8, 8)
    assert same(a(x), opt(x))
    assert same(a.bn.running_mean, b.bn.running_mean)
    assert int(a.bn.num_batches_tracked) == int(b.bn.num_batches_tracked)


@pytest.mark.parametrize("make,attr,value,shape", [
    (lambda: torch.nn.Dropout(0.0), "p", 1.0, (4, 5)),            # training mode: p=1 zeroes all
    (lambda: torch.nn.LeakyReLU(0.1), "negative_slope", 0.5, (4, 5)),
    (lambda: torch.nn.Softmax(dim=0), "dim", 1, (4, 5)),
    (lambda: torch.nn.Conv2d(3, 4, 3), "stride", (2, 2), (2, 3, 8, 8)),
    (lambda: torch.nn.LayerNorm(5), "eps", 10.0, (4, 5)),
    (lambda: torch.nn.BatchNorm1d(5).eval(), "eps", 10.0, (4, 5)),
])
def test_a_leaf_module_setting_changed_after_compiling_recompiles(make, attr, value, shape):
    """Leaf modules become functional calls with their settings as constants; those constants
    were read from the module unguarded, so changing dropout's p (or eps, stride, dim) kept
    running the old graph."""
    leaf = make()
    model = torch.nn.Sequential(leaf)
    opt = tjc.compile(model)
    x = rand(*shape)
    assert same(opt(x), model(x))
    setattr(leaf, attr, value)
    assert same(opt(x), model(x))


class KeyedBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.d = torch.nn.ModuleDict({"a": torch.nn.Identity()})
        self.s = torch.nn.Sequential(torch.nn.Identity())

    def forward(self, x, probe_sequential: bool):
        if probe_sequential:
            return x + 1 if "0" in self.s else x - 1   # Sequential compares children, not names
        return x * 2 if "b" in self.d else x


def test_membership_in_modules_follows_python():
    m = KeyedBlocks()
    opt = tjc.compile(m)
    x = rand(2)
    assert same(opt(x, True), m(x, True)), "'0' in Sequential is False in Python"
    assert same(opt(x, False), m(x, False))
    m.d["b"] = torch.nn.Identity()          # a key added after compiling
    assert same(opt(x, False), m(x, False))


def test_module_wrapper_behaves_like_the_module():
    mod = MLP()
    opt = tjc.compile(mod)
    assert opt.layers is mod.layers
    assert set(opt.state_dict()) == set(mod.state_dict())
    opt.eval()
    assert not mod.training
    opt.custom = 5
    assert mod.custom == 5
    assert same(opt.forward(rand(1, 8)).shape, torch.Size([1, 4]))


def test_recompile_on_module_attribute_submodule_and_training_flag():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = 2.0
            self.lin = torch.nn.Linear(4, 4)
            self.drop = torch.nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(self.lin(x)) * self.scale

    m = M().eval()
    cnt = CompileCounter()
    opt = tjc.compile(m, backend=cnt)
    x = rand(2, 4)
    assert same(opt(x), m(x))
    m.scale = 3.0
    assert same(opt(x), m(x))
    assert cnt.frame_count == 2, "attribute change"
    m.lin = torch.nn.Linear(4, 4)
    assert same(opt(x), m(x))
    assert cnt.frame_count == 3, "submodule change"
    m.train()
    torch.manual_seed(3)
    got = opt(x)
    torch.manual_seed(3)
    assert same(got, m(x))
    assert cnt.frame_count == 4, "training flag change"


# --- autograd ---

def test_gradients_through_compiled_function_and_module_equal_eager():
    mod = MLP()
    ref = MLP()
    ref.load_state_dict(mod.state_dict())
    opt = tjc.compile(mod, backend="aot_eager")
    x = rand(3, 8)
    opt(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    for p, q in zip(mod.parameters(), ref.parameters()):
        assert same(p.grad, q.grad)


def test_sgd_loop_trains_to_the_same_weights():
    torch.manual_seed(0)
    a = MLP()
    b = MLP()
    b.load_state_dict(a.state_dict())
    opt_b = tjc.compile(b)
    sa = torch.optim.SGD(a.parameters(), lr=0.1)
    sb = torch.optim.SGD(b.parameters(), lr=0.1)
    for _ in range(5):
        x, y = rand(4, 8), rand(4, 4)
        for model, sgd in ((a, sa), (opt_b, sb)):
            sgd.zero_grad()
            F.mse_loss(model(x), y).backward()
            sgd.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert same(p, q)


# --- lifetimes ---

def test_compiled_module_and_its_parameters_are_freed_without_reset():
    mod = MLP()
    opt = tjc.compile(mod, backend=CompileCounter())
    opt(rand(2, 8))
    dead = []
    weakref.finalize(mod, dead.append, "module")
    weakref.finalize(mod.layers[0].weight, dead.append, "weight")
    del mod, opt
    gc.collect()
    assert sorted(dead) == ["module", "weight"]


def test_fifty_models_compiled_and_dropped_leave_no_tensors():
    def live_tensors():
        gc.collect()
        return sum(1 for o in gc.get_objects() if isinstance(o, torch.Tensor))

    def one():
        m = MLP()
        tjc.compile(m, backend=CompileCounter())(rand(2, 8))

    one()
    before = live_tensors()
    for _ in range(50):
        one()
    assert live_tensors() <= before


def test_recompiled_module_is_freed_without_gc():
    """The trace's own bookkeeping (trackers, guard specs) must not wait for the cycle collector."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)
            self.scale = 0.5

        def forward(self, x):
            return self.lin(x) * self.scale

    net = Net().eval()
    model = tjc.compile(net, backend=CompileCounter())
    x = rand(2, 4)
    gc.collect()
    gc.disable()
    try:
        model(x)
        net.scale = 2.0
        model(x)
        assert len(tjc.cache_entries(model)) == 2
        freed = []
        weakref.finalize(net, freed.append, True)
        weakref.finalize(net.lin.weight, freed.append, True)
        del net, model
        assert freed == [True, True], "module and parameter freed at once"
    finally:
        gc.enable()


def test_a_code_whose_entries_die_every_call_stops_compiling(caplog):
    # Each call passes a new module: the entry guards it by identity (the `is` test relies on the
    # object), so it is evicted when the module dies, and the cache limit (live entries) never
    # sees the code. Before, every call compiled again (10 compiles for 10 calls, each far slower
    # than eager).
    cnt = CompileCounter()
    other = torch.nn.Identity()

    def f(m, x):
        if m is other:
            return x
        return m(x).relu() * 2

    compiled = tjc.compile(f, backend=cnt, cache_limit=3)
    x = torch.randn(2, 4)
    for _ in range(10):
        m = torch.nn.Linear(4, 4)
        torch.testing.assert_close(compiled(m, x), f(m, x))
    assert cnt.frame_count == 3
    messages = [r.getMessage() for r in caplog.records if "evicted because an object it guards" in r.getMessage()]
    assert len(messages) == 1, messages


class _FirstLayers(torch.nn.Module):
    """HuggingFace's decoder loop: `for layer in self.layers[: config.num_hidden_layers]`."""

    def __init__(self, n=3, used=2):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(4, 4) for _ in range(n))
        self.used = used

    def forward(self, x):
        for layer in self.layers[: self.used]:
            x = layer(x).tanh()
        return x, self.layers[1:]


def test_a_modulelist_slice_is_traced_as_its_layers():
    # Failed before: the slice was a graph break, and the new ModuleList it made per call was
    # guarded by identity in the resume function, which was compiled again on every call.
    model = _FirstLayers()
    x = torch.randn(2, 4)
    report = tjc.explain(model)(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0), str(report)
    cnt = CompileCounter()
    compiled = tjc.compile(model, backend=cnt)
    for _ in range(3):
        out, rest = compiled(x)
    torch.testing.assert_close(out, model(x)[0])
    assert type(rest) is torch.nn.ModuleList and list(rest) == list(model.layers[1:])
    assert cnt.frame_count == 1
    probe = weakref.ref(model)
    del model, compiled, rest
    assert probe() is None
