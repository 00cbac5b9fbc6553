"""Each compile() call owns its cache; identical module instances each get
the full cache limit (counted per object guarded by identity) and all run compiled.

The runtime-level tests need no torch: a plain callback shares one owner; a callback carrying a
`runtime.CacheOwner` in `cache_owner` owns its entries, decisions and limit.
"""
import gc
import warnings
import weakref

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import ConstantJit, call_compiled


@pytest.fixture(autouse=True)
def fresh():
    tjc.reset()
    yield
    tjc.reset()


def owned(jit, cache_limit=0):
    jit.cache_owner = runtime.CacheOwner(cache_limit)
    return jit


# --- runtime: owners (no torch) ---

def test_callbacks_with_their_own_owner_do_not_share_entries():
    def f(x):
        return x + 1

    a = owned(ConstantJit(old=1, new=100, guard_types=("x",)))
    b = owned(ConstantJit(old=1, new=200, guard_types=("x",)))
    assert call_compiled(a, f, 1) == 101
    assert call_compiled(b, f, 1) == 201, "b's call must not run a's entry"
    assert call_compiled(a, f, 2) == 102 and call_compiled(b, f, 2) == 202
    assert len(a.misses) == 1 and len(b.misses) == 1
    assert len(runtime.cache_entries(f)) == 2
    assert len(runtime.cache_entries(f, owner=a.cache_owner)) == 1
    assert len(runtime.cache_entries(f, owner=b)) == 1, "a callback carrying an owner names it"


def test_plain_callbacks_share_one_owner():
    def f(x):
        return x + 1

    a = ConstantJit(old=1, new=100, guard_types=("x",))
    b = ConstantJit(old=1, new=200, guard_types=("x",))
    assert call_compiled(a, f, 1) == 101
    assert call_compiled(b, f, 1) == 101, "the JIT-author API keeps one cache per code"
    assert len(b.misses) == 0


def test_skip_decided_by_one_owner_does_not_leak_into_another():
    def f(x):
        return x + 1

    class Skipper:
        def __init__(self):
            self.cache_owner = runtime.CacheOwner()
            self.calls = 0

        def __call__(self, frame, entries):
            self.calls += 1
            return runtime.SKIP

    skipper = Skipper()
    assert call_compiled(skipper, f, 1) == 2
    assert call_compiled(skipper, f, 1) == 2
    assert skipper.calls == 1, "SKIP holds for its own owner"
    assert runtime.frame_action(f, owner=skipper) == "skip"
    jit = owned(ConstantJit(old=1, new=100, guard_types=("x",)))
    assert call_compiled(jit, f, 1) == 101, "another owner still compiles f"
    assert runtime.frame_action(f, owner=jit) == "default"
    assert runtime.frame_action(f) == "default", "the shared owner did not decide anything"


def test_set_skip_applies_to_every_owner():
    def f(x):
        return x + 1

    jit = owned(ConstantJit(old=1, new=100, guard_types=("x",)))
    runtime.set_skip(f)
    assert call_compiled(jit, f, 1) == 2
    assert jit.misses == []


def test_cache_limit_is_per_owner():
    def f(x):
        return x + 1

    small = owned(ConstantJit(old=1, new=100, guard_args=("x",)), cache_limit=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert call_compiled(small, f, 1) == 101
        assert call_compiled(small, f, 2) == 3, "past its limit of 1 the original runs"
    assert any("cache limit (1 entries)" in str(w.message) for w in caught)
    assert runtime.frame_action(f, owner=small) == "run-only"
    big = owned(ConstantJit(old=1, new=200, guard_args=("x",)))
    assert [call_compiled(big, f, x) for x in range(4)] == [200, 201, 202, 203]
    assert runtime.frame_action(f, owner=big) == "default", "the other owner's limit did not leak"


def test_an_owners_entries_die_with_it(no_gc):
    def f(x):
        return x + 1

    jit = owned(ConstantJit(old=1, new=100, guard_types=("x",)))
    assert call_compiled(jit, f, 1) == 101
    (entry,) = runtime.cache_entries(f)
    code = weakref.ref(entry.code)
    del jit
    assert entry.evicted and "wrapper was freed" in entry.eviction_reason
    assert code() is None, "the transformed code was released without gc"
    assert runtime.cache_entries(f) == []


# --- compile(): each call owns its cache ---

torch_only = pytest.mark.torch


def _torch():
    return pytest.importorskip("torch")


class Recording:
    """A backend whose compiled graphs say which backend ran them."""

    def __init__(self, name):
        self.name = name
        self.compiled = 0
        self.ran = []

    def __call__(self, gm, example_inputs):
        self.compiled += 1

        def run(*args):
            self.ran.append(self.name)
            return gm.forward(*args)

        return run


@torch_only
def test_two_compiles_of_one_function_use_their_own_backend():
    torch = _torch()

    def f(x):
        return x * 2 + 1

    b1, b2 = Recording("b1"), Recording("b2")
    opt1 = tjc.compile(f, backend=b1)
    opt2 = tjc.compile(f, backend=b2)
    x = torch.ones(3)
    assert torch.equal(opt1(x), f(x)) and torch.equal(opt2(x), f(x))
    assert torch.equal(opt1(x), f(x)) and torch.equal(opt2(x), f(x))
    assert (b1.compiled, b2.compiled) == (1, 1), "each compile() compiles with its own backend"
    assert b1.ran == ["b1", "b1"] and b2.ran == ["b2", "b2"]
    assert len(tjc.cache_entries(opt1)) == 1 and len(tjc.cache_entries(opt2)) == 1
    assert len(tjc.cache_entries(f)) == 2, "a plain function lists every compile's entries"


@torch_only
def test_a_fallback_does_not_make_a_later_fullgraph_compile_pass():
    torch = _torch()

    def g(x):
        if x.sum() > 0:  # data-dependent: the tracer cannot capture it
            return x + 1
        return x - 1

    x = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert torch.equal(tjc.compile(g)(x), x + 1)
    with pytest.raises(Exception, match="fullgraph"):
        tjc.compile(g, fullgraph=True)(x)


@torch_only
def test_cache_limit_of_one_compile_does_not_affect_another():
    torch = _torch()

    def f(x):
        return x * 3

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        limited = tjc.compile(f, backend=Recording("limited"), cache_limit=1, dynamic=False)
        for n in (1, 2, 3):
            assert torch.equal(limited(torch.ones(n)), torch.ones(n) * 3)
    free = Recording("free")
    opt = tjc.compile(f, backend=free, dynamic=False)  # one entry per size
    for n in (1, 2, 3):
        assert torch.equal(opt(torch.ones(n)), torch.ones(n) * 3)
    assert free.compiled == 3, "the other compile's limit of 1 does not apply here"
    assert len(tjc.cache_entries(limited)) == 1 and len(tjc.cache_entries(opt)) == 3


@torch_only
def test_entries_of_a_compile_die_with_the_compiled_function(no_gc):
    # The entry is evicted by reference counting; the fx GraphModule it held is in a cycle of its
    # own (graph <-> owning module), so freeing it is the collector's job once nothing else holds
    # it.
    torch = _torch()

    def f(x):
        return x - 1

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(weakref.ref(gm))
        return gm.forward

    opt = tjc.compile(f, backend=backend)
    assert torch.equal(opt(torch.ones(2)), torch.zeros(2))
    (entry,) = tjc.cache_entries(opt)
    del opt
    assert entry.evicted, "evicted when the compiled function died, without gc"
    assert tjc.cache_entries(f) == []
    gc.collect()
    assert graphs[0]() is None, "nothing in the cache holds the compiled graph" 


# --- point 5: identical module instances ---

@torch_only
def test_twelve_identical_blocks_called_from_an_uncompiled_caller_all_run_compiled():
    torch = _torch()
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(8, 8)

        def forward(self, x):
            return torch.relu(self.lin(x)) + x

    from context_helpers import compile_layers_in_separate_frames

    opt, model = compile_layers_in_separate_frames(Block, grad=True)
    entries = tjc.cache_entries(Block.forward)
    # Blocks equal in what the trace read share entries (guarded by value, not identity): one for
    # the first block, whose input needs no grad, one for the eleven others.
    assert len(entries) == 2, "two entries for twelve blocks"
    assert sorted(e.hits for e in entries) == [2, 3 * 11 - 1], [e.hits for e in entries]
    assert tjc.stats()["cache_limit_hits"] == 0
    del opt, model, entries
    gc.collect()
    assert tjc.cache_entries(Block.forward) == []


def test_eighteen_blocks_with_a_graph_break_inside_forward_all_run_compiled():
    # As ConvNeXt's blocks (each its own stochastic-depth rate) with a break inside forward: the
    # resume code after the break is guarded per block (its live rate differs) and must not
    # count all blocks against one cache limit (blocks 9-18 would run uncompiled).
    torch = _torch()
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, rate):
            super().__init__()
            self.lin = nn.Linear(8, 8)
            self.rate = rate

        def forward(self, x):
            rate = self.rate
            y = self.lin(torch.relu(self.lin(x)))
            print("", end="")          # a graph break in every block
            return x + (1 - rate) * y

    torch.manual_seed(0)
    model = nn.Sequential(*[Block(i / 18) for i in range(18)])
    x = torch.randn(2, 8)
    expected = model(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = tjc.compile(model)
        torch.testing.assert_close(opt(x), expected)
        compiled = tjc.stats()["compiles"]
        for _ in range(2):
            torch.testing.assert_close(opt(x), expected)
    assert not [w for w in caught if "cache limit" in str(w.message)], "no block reached the limit"
    stats = tjc.stats()
    assert stats["cache_limit_hits"] == 0 and stats["fallbacks"] == 0, stats
    assert stats["compiles"] == compiled, "the second and third calls only hit"
    assert stats["graphs"] == 36, "two graphs per block: before and after the break"
