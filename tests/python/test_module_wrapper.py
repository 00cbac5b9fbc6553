"""A compiled module is the nn.Module it wraps (frontend/module_wrapper.py): registered as a child,
its parameters, state_dict keys, modes, dtype and hooks are the wrapped module's, methods that
return self return the compiled module, copies compile on their own cache, compile_() compiles in
place, dropping either frees everything without the cycle collector, a compiled child trains as
the eager one, and the made subclass changes nothing the class does. Inside a model compiled whole
and under DistributedDataParallel: test_module_wrapper_callers.py."""
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

from context_helpers import rand  # noqa: E402

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
    x = rand(3, 4)
    assert torch.allclose(twin(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 1


def test_zero_grad_double_and_to_reach_a_compiled_child():
    _, twin = pair(tjc.compile)
    twin.train()
    twin(rand(3, 4)).sum().backward()
    assert twin.child.lin.weight.grad is not None
    twin.zero_grad()
    assert twin.child.lin.weight.grad is None
    twin.double()
    assert twin.child.lin.weight.dtype == torch.float64
    assert twin.child.original_module.lin.weight.dtype == torch.float64
    assert twin.child.bn.running_mean.dtype == torch.float64
    x = rand(3, 4).double()
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
    x = rand(2, 4)
    assert torch.allclose(model(x), eager(x), atol=1e-6)
    # The blocks share one cache (one class, one set of options): a trace for the first block's
    # input without grad and one for the others' input with grad, not one trace per block.
    assert cnt.frame_count == 2, "blocks of one class compiled alike share a cache"


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
    x = rand(3, 4)
    assert torch.allclose(model(x), compiled.original_module(x), atol=1e-3)
    assert cnt.frame_count == 1, "model = tjc.compile(M()).eval() still compiles"


def test_eval_then_call_compiles():
    before = tjc.stats()["graphs"]
    model = tjc.compile(Child()).eval()
    model(rand(2, 4))
    assert tjc.stats()["graphs"] == before + 1
    assert model.zero_grad() is None


# --- hooks, attributes, forward ----------------------------------------------------------------

def test_hooks_registered_on_the_compiled_module_run():
    compiled = tjc.compile(Child().eval())
    seen = []
    h1 = compiled.register_forward_pre_hook(lambda m, args: seen.append("pre"))
    h2 = compiled.register_forward_hook(lambda m, args, out: out * 0 + 7)
    out = compiled(rand(2, 4))
    assert seen == ["pre"] and torch.all(out == 7)
    h1.remove()
    h2.remove()
    assert not torch.all(compiled(rand(2, 4)) == 7)


def test_attributes_forward_and_cache_entries_still_work():
    child = Child().eval()
    compiled = tjc.compile(child, backend=CompileCounter())
    compiled.custom = 5
    assert child.custom == 5 and compiled.custom == 5
    x = rand(2, 4)
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
    x = rand(2, 4)
    assert torch.allclose(twice(x), child(x))
    assert len(tjc.cache_entries(twice)) == 1


def test_a_compiled_parent_with_a_compiled_child_equals_eager():
    eager, twin = pair(tjc.compile)
    eager.eval()
    twin.eval()
    outer = tjc.compile(twin)
    x = rand(3, 4)
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
def test_copies_are_compiled_modules_with_the_same_options(how):
    child = Child().eval()
    compiled = tjc.compile(child, backend="eager", fullgraph=True, dynamic=False, cache_limit=3)
    x = rand(2, 4)
    compiled(x)
    dup = _roundtrip(how, compiled)
    assert isinstance(dup, tjc.CompiledModule) and isinstance(dup, Child)
    assert dup is not compiled and dup.original_module is not child
    assert list(dup.state_dict()) == list(child.state_dict())
    opts = dup.compile_options
    assert opts == {"backend": "eager", "fullgraph": True, "dynamic": False, "cache_limit": 3, "mode": None,
                    "options": None}
    # Compiled with the original's options, the copy shares its cache (modules of one class
    # compiled alike do): the original's entry serves it.
    assert tjc.cache_entries(dup) == tjc.cache_entries(compiled) and len(tjc.cache_entries(dup)) == 1
    hits = tjc.cache_entries(dup)[0].hits
    assert torch.allclose(dup(x), child(x))
    assert len(tjc.cache_entries(dup)) == 1 and tjc.cache_entries(dup)[0].hits == hits + 1
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
    x = rand(2, 4)
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
    x = rand(2, 4)
    assert torch.allclose(model(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 2, "one cache for the blocks: input without grad, then with"
    assert torch.allclose(model(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 2
    assert len(tjc.cache_entries(model.layers[0])) == 2, "the blocks' shared entries"


def test_compile_in_place_module_called_directly_and_copied():
    """Copies of a module compiled in place are plain modules, as for torch's Module.compile():
    nn.Module.__getstate__ drops `_compiled_call_impl`; the copy is right, and uncompiled."""
    cnt = CompileCounter()
    child = Child().eval()
    tjc.compile_(child, backend=cnt)
    x = rand(2, 4)
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
    x = rand(2, 4)
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
    x = rand(3, 4)
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
    x = rand(2, 4)
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
    xs = [rand(8, 4) for _ in range(steps)]
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


# --- classes: what the made subclass must not change ---------------------------------------------

def test_sequential_slicing_of_a_compiled_sequential_gives_a_plain_sequential():
    seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
    compiled = tjc.compile(seq)
    head = compiled[:2]
    assert type(head) is nn.Sequential and len(head) == 2 and head[0] is seq[0]
    assert compiled[0] is seq[0] and len(compiled) == 3
    x = rand(2, 4)
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
    x = rand(2, 4)
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
    x = rand(2, 4)
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
    x = rand(2, 4)
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
    x = rand(2, 4)
    assert torch.allclose(whole(x), eager(x), atol=1e-6)
    assert cnt.frame_count == 1, "the whole model's trace inlines its blocks"


def test_the_cache_blocks_share_dies_with_the_last_block(no_gc):
    from torch_jit_cache import api

    blocks = [nn.Sequential(nn.Linear(4, 4), nn.Tanh()) for _ in range(3)]
    for b in blocks:
        tjc.compile_(b, backend="eager")
    for b in blocks:
        b(rand(2, 4))
    del b
    assert len(api._MODULE_COMPILERS) == 1 and len(tjc.cache_entries(blocks[2])) == 1
    entry = weakref.ref(tjc.cache_entries(blocks[0])[0])
    del blocks[:2]
    assert len(api._MODULE_COMPILERS) == 1, "the last block still uses it"
    del blocks
    assert not api._MODULE_COMPILERS and entry() is None, "freed by reference counting with the last block"
