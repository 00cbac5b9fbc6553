"""A module class's own Python __getattribute__ (tracer/variables/modules/module_getattribute.py):
`self.name` in a module traced as Python runs it, the class's hook inlined with the module as
self, `super().__getattribute__(n)` / `object.__getattribute__(self, n)` inside it being object's
lookup on the module, and a name that lookup lacks going on to the class's __getattr__
(nn.Module's: parameters, buffers, submodules).

Each case runs eagerly and compiled on the module (twice: the second call a cache hit): outputs
equal, one graph and no break. Guards never run the hook (a counting hook counts what eager
counts), a changed value the hook read recompiles, and the module is freed after the calls.
"""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]
nn = torch.nn


class Aliased(nn.Module):
    """`gain` is another name for `factor`; every other name is the module's own."""

    def __init__(self):
        super().__init__()
        self.factor = 3.0
        self.proj = nn.Linear(4, 4)

    def __getattribute__(self, name):
        if name == "gain":
            return super().__getattribute__("factor")
        return super().__getattribute__(name)

    def forward(self, x):
        return self.proj(x) * self.gain + self.factor


def run_twice(calls, module, x):
    for _ in range(2):
        assert same(calls(x), module(x))


def test_a_renaming_getattribute_and_the_submodule_behind_it_are_traced():
    m = Aliased()
    x = torch.randn(2, 4)
    calls = CompiledCalls(m)
    run_twice(calls, m, x)
    calls.check(graphs=1, breaks=0)


def test_a_value_the_hook_read_is_guarded():
    m = Aliased()
    x = torch.randn(2, 4)
    calls = CompiledCalls(m)
    run_twice(calls, m, x)
    m.factor = -1.5                     # read by the hook through object's lookup
    run_twice(calls, m, x)
    calls.check(graphs=2, breaks=0)


class Answering(nn.Module):
    """A hook that answers one name itself with a tensor it makes, through object's hook."""

    def __init__(self):
        super().__init__()
        self.n = 2

    def __getattribute__(self, name):
        if name == "table":
            return torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        return object.__getattribute__(self, name)

    def forward(self, x):
        return self.n * x + self.table * x


def test_a_hook_that_makes_its_own_answer():
    m = Answering()
    calls = CompiledCalls(m)
    run_twice(calls, m, torch.randn(2, 2))
    calls.check(graphs=1, breaks=0)


READS = []


class Logged(nn.Module):
    """Each read of a public name is logged: the trace runs the hook as often as eager does, and
    guards never run it."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3))
        self.k = 4

    def __getattribute__(self, name):
        if not name.startswith("_"):
            READS.append(name)
        return super().__getattribute__(name)

    def forward(self, x):
        return x * self.w + self.k


def call_module(m, x):
    return m(x)


@pytest.mark.parametrize("compiled_as", ["function", "module"])
def test_the_hooks_own_effects_match_eager(compiled_as):
    # Called from a compiled function, nn.Module.__call__'s own reads (forward among them) are
    # traced through the hook too. (Compiling may read the module through the hook, as the
    # tracer's isinstance checks of it do: the logs are compared at calls that hit the cache.)
    m = Logged()
    x = torch.randn(3)
    calls = CompiledCalls(call_module if compiled_as == "function" else m)
    args = (m, x) if compiled_as == "function" else (x,)
    run = call_module if compiled_as == "function" else m
    READS.clear()
    calls(*args)
    for _ in range(2):
        READS.clear()
        want = run(*args)
        eager = list(READS)
        READS.clear()
        got = calls(*args)
        assert same(got, want)
        assert READS == eager == ["forward", "w", "k"]
    calls.check(graphs=1, breaks=0)


class Fallback(nn.Module):
    """A hook that refuses a name (AttributeError), which the class's own __getattr__ answers,
    deferring the rest to nn.Module's (the submodule and the parameter)."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3)
        self.bias2 = nn.Parameter(torch.zeros(3))

    def __getattribute__(self, name):
        if name == "hidden":
            raise AttributeError(name)
        return super().__getattribute__(name)

    def __getattr__(self, name):
        if name == "hidden":
            return 0.5
        return super().__getattr__(name)

    def forward(self, x):
        return self.inner(x) * self.hidden + self.bias2


def test_an_attribute_error_in_the_hook_goes_on_to_getattr():
    m = Fallback()
    x = torch.randn(2, 3)
    calls = CompiledCalls(m)
    run_twice(calls, m, x)
    calls.check(graphs=1, breaks=0)


class Untraceable(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def __getattribute__(self, name):
        if name == "offset":
            return len(globals()["__name__"]) + int(eval("1"))
        return super().__getattribute__(name)

    def forward(self, x):
        return self.lin(x) + self.offset


def test_a_hook_the_tracer_cannot_follow_gives_eagers_answer():
    m = Untraceable()
    x = torch.randn(2, 4)
    compiled = tjc.compile(m, backend="eager")
    for _ in range(2):
        assert same(compiled(x), m(x))


def test_the_module_is_freed_after_the_calls():
    m = Aliased()
    x = torch.randn(2, 4)
    compiled = tjc.compile(lambda mod, t: mod(t), backend="eager")
    for _ in range(2):
        assert same(compiled(m, x), m(x))
    ref = weakref.ref(m)
    del m
    assert ref() is None


class ObjectLookup(nn.Module):
    """No hook of its own: forward asks object's lookup directly, which finds the plain attribute
    and misses the parameter (nn.Module keeps it in _parameters), as in eager."""

    def __init__(self):
        super().__init__()
        self.scale = 2.0
        self.p = nn.Parameter(torch.ones(3))

    def forward(self, x):
        try:
            extra = object.__getattribute__(self, "p")
        except AttributeError:
            extra = 1.0
        return x * super().__getattribute__("scale") + extra


def test_objects_lookup_on_a_plain_module():
    m = ObjectLookup()
    x = torch.randn(3)
    calls = CompiledCalls(m)
    run_twice(calls, m, x)
    m.scale = 4.0
    run_twice(calls, m, x)
    calls.check(graphs=2, breaks=0)


def test_module_hooks_and_training_on_a_hooked_module_give_eagers_answer():
    m = Aliased()
    x = torch.randn(2, 4)
    compiled = tjc.compile(call_module, backend="eager")
    assert same(compiled(m, x), call_module(m, x))
    m.eval()                                     # training is guarded past the hook: recompiles
    assert same(compiled(m, x), call_module(m, x))
    handle = m.register_forward_hook(lambda mod, args, out: out * 2)
    for _ in range(2):                           # a module hook on such a module: a break
        assert same(compiled(m, x), call_module(m, x))
    handle.remove()
    assert same(compiled(m, x), call_module(m, x))
