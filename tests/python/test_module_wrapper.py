"""A compiled module is the nn.Module it wraps (module_wrapper.py): registered as a child,
its parameters, state_dict keys, modes, dtype and hooks are the wrapped module's, methods that
return self return the compiled module, copies compile on their own cache, compile_() compiles in
place, and dropping either frees everything without the cycle collector."""
import copy
import gc
import io
import pickle
import weakref

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


class Child(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.bn = nn.BatchNorm1d(width)
        self.drop = nn.Dropout(0.5)
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        return self.drop(torch.relu(self.bn(self.lin(x))))


class Parent(nn.Module):
    def __init__(self, child):
        super().__init__()
        self.head = nn.Linear(4, 4)
        self.child = child
        self.tail = nn.Linear(4, 2)

    def forward(self, x):
        return self.tail(self.child(self.head(x)))


class Stack(nn.Module):
    def __init__(self, n=3):
        super().__init__()
        self.layers = nn.ModuleList(nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(n))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x) + x
        return x


def pair(compile_child):
    """An eager Parent and a Parent whose child is compile_child(child), with equal weights."""
    eager = Parent(Child())
    twin = Parent(Child())
    twin.load_state_dict(eager.state_dict())
    twin.child = compile_child(twin.child)
    return eager, twin


def r(*shape):
    return torch.randn(*shape)


# --- an nn.Module, registered where it is assigned --------------------------------------------

def test_compiled_module_is_an_nn_module_of_the_wrapped_class():
    child = Child()
    compiled = tjc.compile(child)
    assert isinstance(compiled, nn.Module)
    assert isinstance(compiled, Child), "isinstance(compiled, type(module)) holds, as for the module"
    assert isinstance(compiled, tjc.CompiledModule)
    assert compiled.original_module is child
    assert compiled.lin is child.lin


def test_a_compiled_child_is_registered_in_its_parent():
    cnt = CompileCounter()
    eager, twin = pair(lambda c: tjc.compile(c, backend=cnt))
    assert [n for n, _ in twin.named_parameters()] == [n for n, _ in eager.named_parameters()]
    assert len(list(twin.parameters())) == len(list(eager.parameters())) == 8
    assert list(twin.state_dict()) == list(eager.state_dict())
    assert [n for n, _ in twin.named_modules()] == [n for n, _ in eager.named_modules()], \
        "no extra level, the wrapped module is not counted twice"
    assert [n for n, _ in twin.named_buffers()] == [n for n, _ in eager.named_buffers()]
    eager.eval()
    twin.eval()
    assert not twin.child.training and not twin.child.original_module.training
    assert not twin.child.drop.training, "parent.eval() reaches the compiled child's Dropout"
    x = r(3, 4)
    assert torch.allclose(twin(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 1


def test_zero_grad_double_and_to_reach_a_compiled_child():
    _, twin = pair(tjc.compile)
    twin.train()
    twin(r(3, 4)).sum().backward()
    assert twin.child.lin.weight.grad is not None
    twin.zero_grad()
    assert twin.child.lin.weight.grad is None
    twin.double()
    assert twin.child.lin.weight.dtype == torch.float64
    assert twin.child.original_module.lin.weight.dtype == torch.float64
    assert twin.child.bn.running_mean.dtype == torch.float64
    x = r(3, 4).double()
    twin.eval()
    assert twin(x).dtype == torch.float64
    twin.to(torch.float32)
    assert twin.child.lin.weight.dtype == torch.float32


def test_modulelist_item_assignment_of_a_compiled_block():
    cnt = CompileCounter()
    eager = Stack()
    model = Stack()
    model.load_state_dict(eager.state_dict())
    for i, block in enumerate(model.layers):
        model.layers[i] = tjc.compile(block, backend=cnt)
    assert all(isinstance(b, tjc.CompiledModule) for b in model.layers)
    assert list(model.state_dict()) == list(eager.state_dict())
    x = r(2, 4)
    assert torch.allclose(model(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 3, "each block compiled on its own cache"


# --- state_dict: the wrapped module's keys, no prefix -------------------------------------------

def test_state_dict_keys_equal_the_wrapped_modules_and_load_either_way():
    child = Child()
    compiled = tjc.compile(child)
    assert list(compiled.state_dict()) == list(child.state_dict())
    assert all(compiled.state_dict()[k] is child.state_dict()[k] or
               torch.equal(compiled.state_dict()[k], child.state_dict()[k]) for k in child.state_dict())
    other = Child()
    compiled.load_state_dict(other.state_dict())
    assert torch.equal(child.lin.weight, other.lin.weight), "loading into the compiled loads the module"
    fresh = Child()
    fresh.load_state_dict(compiled.state_dict())
    assert torch.equal(fresh.lin.weight, other.lin.weight)
    eager, twin = pair(tjc.compile)
    twin.load_state_dict(Parent(Child()).state_dict())   # an eager checkpoint into a compiled child
    eager.load_state_dict(twin.state_dict())             # and back


def test_parameters_and_named_parameters_are_the_wrapped_modules():
    child = Child()
    compiled = tjc.compile(child)
    assert [id(p) for p in compiled.parameters()] == [id(p) for p in child.parameters()]
    assert [n for n, _ in compiled.named_parameters()] == [n for n, _ in child.named_parameters()]
    assert [n for n, _ in compiled.named_modules()] == [n for n, _ in child.named_modules()]


# --- methods that return self return the compiled module ----------------------------------------

SELF_RETURNING = {
    "eval": lambda m: m.eval(), "train": lambda m: m.train(), "train(False)": lambda m: m.train(False),
    "to(device)": lambda m: m.to("cpu"), "to(dtype)": lambda m: m.to(torch.float32), "float": lambda m: m.float(),
    "cpu": lambda m: m.cpu(), "requires_grad_": lambda m: m.requires_grad_(),
    "requires_grad_(False)": lambda m: m.requires_grad_(False), "apply": lambda m: m.apply(lambda s: None),
    "share_memory": lambda m: m.share_memory(), "type": lambda m: m.type(torch.float32),
    "double": lambda m: m.double().float(), "bfloat16": lambda m: m.bfloat16().float(),
    "half": lambda m: m.half().float(),
}


@pytest.mark.parametrize("call", SELF_RETURNING.values(), ids=SELF_RETURNING.keys())
def test_methods_returning_self_return_the_compiled_module(call):
    cnt = CompileCounter()
    compiled = tjc.compile(Child(), backend=cnt)
    model = call(compiled)
    assert model is compiled
    model.eval()
    x = r(3, 4)
    assert torch.allclose(model(x), compiled.original_module(x), atol=1e-3)
    assert cnt.frame_count == 1, "model = tjc.compile(M()).eval() still compiles"


def test_eval_then_call_compiles():
    before = tjc.stats()["graphs"]
    model = tjc.compile(Child()).eval()
    model(r(2, 4))
    assert tjc.stats()["graphs"] == before + 1
    assert model.zero_grad() is None


# --- hooks, attributes, forward ----------------------------------------------------------------

def test_hooks_registered_on_the_compiled_module_run():
    compiled = tjc.compile(Child().eval())
    seen = []
    h1 = compiled.register_forward_pre_hook(lambda m, args: seen.append("pre"))
    h2 = compiled.register_forward_hook(lambda m, args, out: out * 0 + 7)
    out = compiled(r(2, 4))
    assert seen == ["pre"] and torch.all(out == 7)
    h1.remove()
    h2.remove()
    assert not torch.all(compiled(r(2, 4)) == 7)


def test_attributes_forward_and_cache_entries_still_work():
    child = Child().eval()
    compiled = tjc.compile(child, backend=CompileCounter())
    compiled.custom = 5
    assert child.custom == 5 and compiled.custom == 5
    x = r(2, 4)
    assert torch.allclose(compiled.forward(x), child(x))
    assert len(tjc.cache_entries(compiled)) == 1, "forward(x) ran compiled"
    compiled(x)
    assert len(tjc.cache_entries(compiled)) == 1
    report = tjc.explain(compiled)(x)
    assert report.graph_count == 1


def test_compiling_a_compiled_module_wraps_its_module():
    child = Child().eval()
    once = tjc.compile(child)
    twice = tjc.compile(once, backend=CompileCounter())
    assert twice.original_module is child
    x = r(2, 4)
    assert torch.allclose(twice(x), child(x))
    assert len(tjc.cache_entries(twice)) == 1


def test_a_compiled_parent_with_a_compiled_child_equals_eager():
    eager, twin = pair(tjc.compile)
    eager.eval()
    twin.eval()
    outer = tjc.compile(twin)
    x = r(3, 4)
    assert torch.allclose(outer(x), eager(x), atol=1e-6)
    assert torch.allclose(outer(x), eager(x), atol=1e-6)


# --- copies ------------------------------------------------------------------------------------

def _roundtrip(how, m):
    if how == "copy":
        return copy.copy(m)
    if how == "deepcopy":
        return copy.deepcopy(m)
    if how == "pickle":
        return pickle.loads(pickle.dumps(m))
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle", "torch.save"])
def test_copies_are_compiled_modules_on_their_own_cache(how):
    child = Child().eval()
    compiled = tjc.compile(child, backend="eager", fullgraph=True, dynamic=False, cache_limit=3)
    x = r(2, 4)
    compiled(x)
    dup = _roundtrip(how, compiled)
    assert isinstance(dup, tjc.CompiledModule) and isinstance(dup, Child)
    assert dup is not compiled and dup.original_module is not child
    assert list(dup.state_dict()) == list(child.state_dict())
    opts = dup.compile_options
    assert opts == {"backend": "eager", "fullgraph": True, "dynamic": False, "cache_limit": 3}
    assert tjc.cache_entries(dup) == [], "the copy has a cache of its own"
    assert torch.allclose(dup(x), child(x))
    assert len(tjc.cache_entries(dup)) == 1 and len(tjc.cache_entries(compiled)) == 1
    if how != "copy":
        assert dup.lin.weight is not child.lin.weight
        with torch.no_grad():
            dup.lin.weight.add_(1)
        assert not torch.equal(dup.lin.weight, child.lin.weight)


@pytest.mark.parametrize("how", ["deepcopy", "pickle", "torch.save"])
def test_a_copy_of_a_parent_holds_a_compiled_copy_of_its_child(how):
    _, twin = pair(tjc.compile)
    twin.raw = twin.child.original_module     # reached twice: copied once
    dup = _roundtrip(how, twin)
    assert isinstance(dup.child, tjc.CompiledModule)
    assert dup.child.lin.weight is not twin.child.lin.weight
    assert dup.raw is dup.child.original_module
    assert list(dup.state_dict()) == list(twin.state_dict())
    dup.eval()
    twin.eval()
    x = r(2, 4)
    assert torch.allclose(dup(x), twin(x))
    assert len(tjc.cache_entries(dup.child)) == 1


def test_pickling_with_an_unpicklable_backend_raises_a_clear_error():
    compiled = tjc.compile(Child(), backend=lambda gm, example_inputs: gm.forward)
    with pytest.raises(pickle.PicklingError, match="backend"):
        pickle.dumps(compiled)
    assert isinstance(copy.deepcopy(compiled), tjc.CompiledModule), "copying needs no pickling"


# --- compile_: in place --------------------------------------------------------------------------

def test_compile_in_place_compiles_blocks_without_reassignment():
    cnt = CompileCounter()
    eager = Stack()
    model = Stack()
    model.load_state_dict(eager.state_dict())
    for block in model.layers:
        assert tjc.compile_(block, backend=cnt) is block
    assert type(model.layers[0]) is nn.Sequential, "the module keeps its class"
    assert list(model.state_dict()) == list(eager.state_dict())
    x = r(2, 4)
    assert torch.allclose(model(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 3
    assert torch.allclose(model(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 3
    assert len(tjc.cache_entries(model.layers[0])) == 1


def test_compile_in_place_module_called_directly_and_copied():
    """Copies of a module compiled in place are plain modules, as for torch's Module.compile():
    nn.Module.__getstate__ drops `_compiled_call_impl`; the copy is right, and uncompiled."""
    cnt = CompileCounter()
    child = Child().eval()
    tjc.compile_(child, backend=cnt)
    x = r(2, 4)
    out = child(x)
    assert cnt.frame_count == 1
    for dup in (copy.copy(child), copy.deepcopy(child), pickle.loads(pickle.dumps(child))):
        assert "_compiled_call_impl" not in vars(dup)
        assert torch.allclose(dup(x), out)
    assert cnt.frame_count == 1
    dup = copy.deepcopy(child)
    with torch.no_grad():
        dup.lin.weight.add_(1)
    assert not torch.allclose(dup(x), child(x)), "the deep copy calls itself, not the original"
    assert len(tjc.cache_entries(child)) == 1


def test_compile_in_place_with_bad_arguments():
    with pytest.raises(TypeError):
        tjc.compile_(lambda x: x)
    with pytest.raises(TypeError, match="dynamic"):
        tjc.compile_(Child(), dynamic="yes")
    with pytest.raises(ValueError, match="cache_limit"):
        tjc.compile_(Child(), cache_limit=0)


# --- lifetimes: no reference cycles ------------------------------------------------------------

def test_dropping_a_compiled_module_frees_it_without_gc():
    x = r(2, 4)
    gc.collect()
    gc.disable()
    try:
        child = Child().eval()
        compiled = tjc.compile(child, backend=CompileCounter())
        compiled(x)
        compiled.forward(x)
        compiled.eval()
        assert len(tjc.cache_entries(compiled)) == 1
        freed = []
        weakref.finalize(child, freed.append, "module")
        weakref.finalize(child.lin.weight, freed.append, "weight")
        weakref.finalize(compiled, freed.append, "compiled")
        code = type(child).forward
        del child, compiled
        assert sorted(freed) == ["compiled", "module", "weight"]
        assert tjc.cache_entries(code) == []
    finally:
        gc.enable()


def test_dropping_a_parent_with_a_compiled_child_frees_it_without_gc():
    x = r(3, 4)
    gc.collect()
    gc.disable()
    try:
        _, twin = pair(lambda c: tjc.compile(c, backend=CompileCounter()))
        twin.eval()
        twin(x)
        freed = []
        weakref.finalize(twin, freed.append, "parent")
        weakref.finalize(twin.child.original_module, freed.append, "child")
        del twin, _
        assert sorted(freed) == ["child", "parent"]
    finally:
        gc.enable()


def test_a_module_compiled_in_place_is_freed_without_gc():
    x = r(2, 4)
    gc.collect()
    gc.disable()
    try:
        model = Stack()
        for block in model.layers:
            tjc.compile_(block, backend=CompileCounter())
        model(x)
        freed = []
        weakref.finalize(model, freed.append, "model")
        weakref.finalize(model.layers[0], freed.append, "block")
        weakref.finalize(model.layers[0][0].weight, freed.append, "weight")
        del model
        assert sorted(freed) == ["block", "model", "weight"]
    finally:
        gc.enable()


# --- training: a compiled child trains as the eager one ------------------------------------------

def _train(model, make_opt, steps=3):
    torch.manual_seed(1)
    opt = make_opt(model.parameters())
    xs = [r(8, 4) for _ in range(steps)]
    torch.manual_seed(2)      # the Dropout masks: the same draws in both runs
    for x in xs:
        opt.zero_grad()
        model(x).pow(2).mean().backward()
        opt.step()
    return opt


OPTIMIZERS = {
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.01),
    "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
}
COMPILERS = {
    "wrapped_eager": lambda c: tjc.compile(c, backend="eager"),
    "wrapped_aot_eager": lambda c: tjc.compile(c, backend="aot_eager"),
    "in_place": lambda c: tjc.compile_(c, backend="eager"),
}


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("how", sorted(COMPILERS))
def test_a_parent_with_a_compiled_child_trains_as_eager(opt_name, how):
    eager, twin = pair(COMPILERS[how])
    eager.train()
    twin.train()
    before = tjc.stats()["graphs"]
    opt_e = _train(eager, OPTIMIZERS[opt_name])
    opt_t = _train(twin, OPTIMIZERS[opt_name])
    assert tjc.stats()["graphs"] > before, "the child ran compiled"
    sd_e, sd_t = eager.state_dict(), twin.state_dict()
    assert list(sd_e) == list(sd_t)
    for k in sd_e:   # parameters and buffers: BatchNorm's running stats and num_batches_tracked
        assert torch.allclose(sd_e[k].double(), sd_t[k].double(), atol=1e-6, rtol=1e-5), k
    assert sd_t["child.bn.num_batches_tracked"].item() == 3
    st_e, st_t = opt_e.state_dict()["state"], opt_t.state_dict()["state"]
    assert sorted(st_e) == sorted(st_t) and len(st_e) == len(list(eager.parameters()))
    for i in st_e:
        for k in st_e[i]:
            a, b = st_e[i][k], st_t[i][k]
            assert torch.allclose(torch.as_tensor(a).double(), torch.as_tensor(b).double(),
                                  atol=1e-6, rtol=1e-5), (i, k)


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


# --- classes: what the made subclass must not change ---------------------------------------------

def test_sequential_slicing_of_a_compiled_sequential_gives_a_plain_sequential():
    seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    compiled = tjc.compile(seq)
    head = compiled[:2]
    assert type(head) is nn.Sequential and len(head) == 2 and head[0] is seq[0]
    assert compiled[0] is seq[0] and len(compiled) == 3
    x = r(2, 4)
    assert torch.allclose(head(x), seq[1](seq[0](x)))
    with pytest.raises(TypeError, match="made by torch_jit_cache.compile"):
        tjc.CompiledModule()


_REGISTERED = []


class Registered(nn.Module):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _REGISTERED.append(cls.__name__)

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)

    def double_it(self, x):
        return self(x) * 2


def test_the_wrapped_class_is_kept_and_its_subclass_hook_not_run():
    compiled = tjc.compile(Registered())
    assert _REGISTERED == [], "no subclass registered by compiling"
    assert type(compiled).__name__ == "Registered" and type(compiled).__module__ == __name__
    assert type(compiled) is type(tjc.compile(Registered())), "one made class per wrapped class"
    x = r(2, 4)
    assert torch.allclose(compiled.double_it(x), compiled.original_module(x) * 2)
    assert repr(compiled) == repr(compiled.original_module)


def test_a_class_that_cannot_be_subclassed_is_still_a_compiled_module():
    class Slotted(nn.Module):   # made here: the warning comes once per class
        __slots__ = ("tag",)

        def __init__(self):
            super().__init__()
            self.tag = 3
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x) * self.tag

        def scaled(self, x):
            return self.forward(x) + 1

    module = Slotted().eval()
    with pytest.warns(RuntimeWarning, match="cannot subclass"):
        compiled = tjc.compile(module, backend=CompileCounter())
    assert isinstance(compiled, tjc.CompiledModule) and isinstance(compiled, nn.Module)
    parent = nn.ModuleDict({"m": compiled})
    assert [n for n, _ in parent.named_parameters()] == ["m.lin.weight", "m.lin.bias"]
    x = r(2, 4)
    assert torch.allclose(compiled(x), module(x)) and compiled.tag == 3
    assert torch.allclose(compiled.scaled(x), module(x) + 1)
    assert compiled.double() is compiled and module.lin.weight.dtype == torch.float64
    assert list(compiled.state_dict()) == ["lin.weight", "lin.bias"]
    compiled.train(False)
    assert not module.training
    assert len(tjc.cache_entries(compiled)) == 1


def test_forward_can_be_replaced_and_has_the_modules_signature():
    import inspect

    child = Child().eval()
    compiled = tjc.compile(child, backend=CompileCounter())
    assert list(inspect.signature(compiled.forward).parameters) == ["x"]
    compiled.forward = lambda x: x * 3
    x = r(2, 4)
    assert torch.allclose(compiled(x), x * 3) and torch.allclose(child(x), x * 3)
    del compiled.forward
    assert torch.allclose(compiled(x), Child.forward(child, x))


def test_a_model_of_blocks_compiled_in_place_then_compiled_whole_is_one_graph():
    cnt = CompileCounter()
    eager = Stack()
    model = Stack()
    model.load_state_dict(eager.state_dict())
    for block in model.layers:
        tjc.compile_(block)
    whole = tjc.compile(model, backend=cnt)
    x = r(2, 4)
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 1, "the whole model's trace inlines its blocks"


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
    x = r(2, 4)
    breaks = tjc.stats()["graph_breaks"]
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    assert (outer.frame_count, tjc.stats()["graph_breaks"] - breaks) == (1, 0)
    assert inner.frame_count == 0, "the blocks' own caches are not used inside the whole"
    report = tjc.explain(model)(x)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    assert outer.frame_count == 1
    # Gradients equal eager's.
    xe = r(2, 4).requires_grad_()
    xc = xe.detach().clone().requires_grad_()
    eager(xe).square().sum().backward()
    whole(xc).square().sum().backward()
    assert torch.allclose(xe.grad, xc.grad, atol=1e-6)
    for (name, pe), (_, pc) in zip(eager.named_parameters(), model.named_parameters()):
        assert torch.allclose(pe.grad, pc.grad, atol=1e-6), name
    # Each block still runs alone, compiled on its own cache.
    for be, bc in zip(eager.layers, model.layers):
        assert torch.allclose(bc(x), be(x), atol=1e-6)
    assert inner.frame_count == 3


@pytest.mark.parametrize("how", [_as_child, _in_place], ids=["compile", "compile_"])
def test_an_inlined_compiled_block_is_guarded(how):
    """The whole's trace holds while the block is the same object with the same compiled call:
    another block, a hook, or a `_compiled_call_impl` set anew is noticed."""
    eager, model, whole, outer, _ = _graphs_and_breaks(how)
    x = r(2, 4)
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
