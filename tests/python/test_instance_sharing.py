"""Identical module instances share one entry: `self` is guarded by type and by the values the
trace read (attributes, hooks, `training`, submodule structure), not by identity, unless the
trace relies on the object itself (an `is` test, an opaque call, a store). Instances that differ
in anything the trace read must not share; every result is compared with eager (outputs and
gradients)."""
import copy
import types

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

import torch_jit_cache as tjc  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


class Block(nn.Module):
    kind = "plain"          # a class attribute the forward reads (shadowed on the instance below)

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(0.0)
        self.conv = nn.Conv1d(1, 1, 3, padding=1)
        self.gain = nn.Parameter(torch.ones(8))
        self.register_buffer("offset", torch.zeros(8))
        self.scale = 0.5
        self.reps = 1
        self.use_offset = True
        self.mode = "add"

    def forward(self, x):
        h = self.norm(self.lin(x))
        for _ in range(self.reps):
            h = self.act(h) * self.gain
        if self.use_offset:
            h = h + self.offset
        if self.mode == "add":
            h = h + x
        if self.training:
            h = h + 1
        if self.kind == "plain":
            h = h - 1
        h = (self.drop(h) * self.scale).float()   # a float64 gain or offset promoted h
        return self.conv(h.unsqueeze(1)).flatten(1)


def _set(name, value):
    return lambda b: setattr(b, name, value)


def _hook(b):
    b.register_forward_hook(lambda m, args, out: out + 1)


def _sub_hook(b):
    b.lin.register_forward_pre_hook(lambda m, args: (args[0] * 2,))


def _instance_forward(b):
    b.forward = types.MethodType(lambda self, x: self.lin(x) * 3, b)


def _conv_stride(b):
    b.conv.stride = (2,)


def _dtype(t, dtype):
    def change(b):
        owner, _, name = t.rpartition(".")
        m = b.get_submodule(owner) if owner else b
        old = getattr(m, name)
        new = old.detach().to(dtype)
        setattr(m, name, nn.Parameter(new, requires_grad=old.requires_grad) if isinstance(old, nn.Parameter) else new)
    return change


def _no_grad(name):
    return lambda b: b.get_parameter(name).requires_grad_(False)


# One difference each, in something the trace reads: the two instances must not share an entry.
DIFFERENCES = {
    "float attribute": _set("scale", 0.25),
    "int attribute": _set("reps", 2),
    "bool attribute": _set("use_offset", False),
    "str attribute": _set("mode", "none"),
    "class attribute shadowed on the instance": _set("kind", "other"),
    "training": lambda b: b.train(),
    "a forward hook": _hook,
    "a submodule's pre-hook": _sub_hook,
    "a submodule of another type": _set("act", nn.GELU()),
    "Dropout p": lambda b: setattr(b.drop, "p", 0.5),
    "LayerNorm eps": lambda b: setattr(b.norm, "eps", 1e-2),
    "Conv stride": _conv_stride,
    "parameter shape": lambda b: setattr(b, "gain", nn.Parameter(torch.ones(1))),
    "parameter dtype": _dtype("gain", torch.float64),
    "parameter requires_grad": _no_grad("lin.weight"),
    "buffer dtype": _dtype("offset", torch.float64),
    "buffer replaced by a parameter": lambda b: (delattr(b, "offset"),
                                                 setattr(b, "offset", nn.Parameter(torch.zeros(8)))),
    "an instance forward": _instance_forward,
}

# Differences in values that are graph inputs: sharing is right.
SAME_PROGRAM = {
    "identical": lambda b: None,
    "other parameter values": lambda b: b.lin.weight.data.normal_(),
    "other buffer values": lambda b: b.offset.data.fill_(3.0),
}


def _run_both(first, second):
    """Runs `first` then `second` through one compiled function, each compared with a deep copy run
    eagerly (outputs, the input's and the parameters' gradients); returns the stats."""
    call = tjc.compile(lambda m, x: m(x))
    for module in (first, second):
        twin = copy.deepcopy(module)
        x = torch.randn(2, 8, requires_grad=True)
        xe = x.detach().clone().requires_grad_(True)
        out, expected = call(module, x), twin(xe)
        torch.testing.assert_close(out, expected)
        out.square().sum().backward()
        expected.square().sum().backward()
        torch.testing.assert_close(x.grad, xe.grad)
        for (name, p), q in zip(module.named_parameters(), twin.parameters()):
            if p.requires_grad:
                torch.testing.assert_close(p.grad, q.grad, msg=name)
    return tjc.stats()


def _pair(change):
    torch.manual_seed(0)
    a = Block().eval()
    b = copy.deepcopy(a)
    change(b)
    return a, b


@pytest.mark.parametrize("what", list(DIFFERENCES))
def test_instances_differing_in_one_read_value_do_not_share(what):
    stats = _run_both(*_pair(DIFFERENCES[what]))
    assert stats["hits"] == 0, (what, stats)


@pytest.mark.parametrize("what", list(SAME_PROGRAM))
def test_instances_differing_only_in_graph_inputs_share_one_entry(what):
    stats = _run_both(*_pair(SAME_PROGRAM[what]))
    assert stats["compiles"] == 1 and stats["hits"] == 1, (what, stats)


class Twins(nn.Module):
    def __init__(self, tied):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = self.a if tied else nn.Linear(8, 8)

    def forward(self, x):
        if self.a is self.b:
            return self.a(x) * 2
        return self.b(self.a(x))


def test_an_is_test_between_submodules_keeps_identity():
    torch.manual_seed(0)
    tied, untied = Twins(True), Twins(False)
    stats = _run_both(tied, untied)
    assert stats["hits"] == 0, stats
    # Two untied instances each rely on their own objects' identity: no sharing either.
    stats = _run_both(Twins(False), Twins(False))
    assert stats["hits"] == 0, stats


def test_a_store_to_the_module_keeps_identity():
    class Counter(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.calls = 0

        def forward(self, x):
            self.last = x.shape[0]
            return self.lin(x)

    a, b = Counter(), Counter()
    call = tjc.compile(lambda m, x: m(x))
    x = torch.randn(2, 4)
    for m in (a, b):
        torch.testing.assert_close(call(m, x), m.lin(x))
        assert m.last == 2
    assert tjc.stats()["hits"] == 0


def test_a_modules_walk_keeps_identity():
    class Walk(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8)

        def forward(self, x):
            return sum(p.sum() for p in self.parameters()) + x

    a, b = Walk(), Walk()
    b.c = b.a     # the same module twice: parameters() yields its weights once
    stats = _run_both(a, b)
    assert stats["hits"] == 0, stats


def test_a_model_with_identical_layers_in_separate_frames_compiles_the_layer_once():
    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)
            self.norm = nn.LayerNorm(8)

        def forward(self, x):
            return x + torch.relu(self.lin(self.norm(x)))

    from context_helpers import compile_layers_in_separate_frames

    opt, model = compile_layers_in_separate_frames(Layer, grad=False)
    entries = tjc.cache_entries(Layer.forward)
    assert len(entries) == 1, "one entry for twelve identical layers"
    assert entries[0].hits == 35, "every other call of a layer hits it"
    assert tjc.stats()["graphs"] == 1


def _dropped_module_and_weight(call):
    import weakref

    m = Block().eval()
    x = torch.randn(2, 8)
    call(m, x)
    call(m, x)   # a hit: the DICT_TAGS record (where supported) is this instance's
    refs = weakref.ref(m), weakref.ref(m.lin.weight)
    del m
    return refs


def test_a_shared_entry_does_not_keep_its_module(no_gc):
    call = tjc.compile(lambda m, x: m(x))
    module, weight = _dropped_module_and_weight(call)
    assert module() is None, "the module is freed by reference counting; its entry stays"
    assert len(tjc.cache_entries(call)) == 1
    call(Block().eval(), torch.randn(2, 8))   # another instance re-records the tags
    assert weight() is None
    assert tjc.stats()["compiles"] == 1
    del call
    assert weight() is None


def test_a_dropped_modules_parameters_are_freed_while_its_entry_lives(no_gc):
    call = tjc.compile(lambda m, x: m(x))
    _, weight = _dropped_module_and_weight(call)
    assert weight() is None


class TwoNorms(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn1 = nn.BatchNorm1d(8)
        self.bn2 = nn.BatchNorm1d(8)

    def forward(self, x):
        return self.bn2(self.bn1(x))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_submodule_shared_in_one_instance_only_matches_eager(backend):
    # Training mode: each call updates the running stats in place. In the second instance both
    # names reach one BatchNorm, so its buffers are updated twice, as eager does.
    call = tjc.compile(lambda m, x: m(x), backend=backend)
    shared = TwoNorms()
    shared.bn2 = shared.bn1
    for m in (TwoNorms(), shared):
        twin = copy.deepcopy(m)
        for seed in range(2):
            x = torch.randn(4, 8, generator=torch.Generator().manual_seed(seed))
            torch.testing.assert_close(call(m, x), twin(x))
            for (name, b), c in zip(m.named_buffers(), twin.buffers()):
                torch.testing.assert_close(b, c, msg=name)


class TwoBuffers(nn.Module):
    def __init__(self, aliased=False, through_a_view=False):
        super().__init__()
        self.register_buffer("a", torch.zeros(8))
        self.register_buffer("b", self.a if aliased else torch.zeros(8))
        self.through_a_view = through_a_view

    def forward(self, x):
        # In place on a buffer: what `b` reads depends on whether it is `a`.
        if self.through_a_view:
            self.a.view(2, 4)[1:].add_(1)
        else:
            self.a.add_(1)
        return x + self.b


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("through_a_view", [False, True], ids=["directly", "through a view"])
def test_a_buffer_mutated_in_place_keeps_identity(backend, through_a_view):
    call = tjc.compile(lambda m, x: m(x), backend=backend)
    for m in (TwoBuffers(False, through_a_view), TwoBuffers(True, through_a_view), TwoBuffers(False, through_a_view)):
        twin = copy.deepcopy(m)
        x = torch.randn(2, 8)
        torch.testing.assert_close(call(m, x), twin(x))
        torch.testing.assert_close(m.b, twin.b)
    assert tjc.stats()["hits"] == 0


class FunctionalNorms(nn.Module):
    def __init__(self, aliased=False):
        super().__init__()
        self.register_buffer("m1", torch.zeros(8))
        self.register_buffer("m2", self.m1 if aliased else torch.zeros(8))
        self.register_buffer("v", torch.ones(8))

    def forward(self, x):
        y = torch.nn.functional.batch_norm(x, self.m1, self.v, training=True)
        return torch.nn.functional.batch_norm(y, self.m2, self.v, training=True) + self.m2


def test_running_stats_updated_by_a_functional_batch_norm_keep_identity():
    call = tjc.compile(lambda m, x: m(x))
    for m in (FunctionalNorms(), FunctionalNorms(aliased=True)):
        twin = copy.deepcopy(m)
        x = torch.randn(4, 8)
        torch.testing.assert_close(call(m, x), twin(x))
        torch.testing.assert_close(m.m2, twin.m2)
    assert tjc.stats()["hits"] == 0
