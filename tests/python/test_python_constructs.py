"""The Python that model code uses, traced into the graph or broken on with a reason: torch's
is_compiling queries, nn.Module's generator methods and containers, torch value types (slices,
finfo, dtypes, sizes), modules built inside forward, and logging calls. (Imports, generators, sets
and the lazy builtins have their own files: test_variables_imports.py, test_variables_generators.py,
test_variables_sets.py, test_variables_polyfills.py.) Each compares with eager and counts graphs and
breaks."""
import logging
import weakref

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import eager_and_compiled, explain_counts, leaves  # noqa: E402


# -- is_compiling ---------------------------------------------------------------------------------

@pytest.mark.parametrize("query", ["torch.compiler.is_compiling", "torch.compiler.is_dynamo_compiling",
                                   "torch._dynamo.is_compiling"])
def test_is_compiling_is_true_in_the_trace_and_false_in_eager(query):
    import torch._dynamo  # noqa: F401
    fn_q = eval(query)

    def fn(x):
        return x + 1 if fn_q() else x - 1

    x = torch.randn(3)
    torch.testing.assert_close(fn(x), x - 1)
    cnt = CompileCounter()
    torch.testing.assert_close(tjc.compile(fn, backend=cnt)(x), x + 1)
    assert cnt.frame_count == 1
    expected = torch.compile(fn, backend="eager")(x)   # what torch.compile answers
    torch.testing.assert_close(expected, x + 1)


# -- nn.Module's generator methods ----------------------------------------------------------------

class _Members(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.ModuleList([nn.Linear(4, 4), nn.ReLU()])
        self.register_buffer("scale", torch.ones(4))

    def forward(self, x):
        n = sum(p.numel() for p in self.parameters())
        for name, p in self.named_parameters():
            x = x + p.sum() * len(name)
        for name, m in self.named_modules():
            x = x + len(name)
        return x * n + len(list(self.children())) + next(self.buffers()) + len(list(self.modules()))


def test_module_generator_methods_are_traced_by_their_result():
    m = _Members()
    graphs, breaks, fallbacks = explain_counts(m, torch.randn(2, 4))
    assert (graphs, breaks, fallbacks) == (1, 0, [])
    cnt = CompileCounter()
    compiled = tjc.compile(m, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), m(x))
    m.extra = nn.Parameter(torch.ones(1))   # a new parameter: the key guard fails, and it counts
    torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 2


def test_module_generator_methods_gradients():
    m = _Members()
    x = torch.randn(2, 4)
    eager = m(x).sum()
    eager.backward()
    expected = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    tjc.compile(m)(x).sum().backward()
    for p, e in zip(m.parameters(), expected):
        torch.testing.assert_close(p.grad, e)


def test_module_traced_through_its_generator_methods_is_freed(no_gc):
    m = _Members()
    compiled = tjc.compile(m, backend="eager")
    compiled(torch.randn(2, 4))
    refs = [weakref.ref(m), weakref.ref(m.a.weight)]
    del m, compiled
    assert [r() for r in refs] == [None, None]


# -- value types ----------------------------------------------------------------------------------

def _slice_object(x):
    s = slice(0, 2)
    return x[s] + x[slice(1, 3)]


def _finfo_iinfo_device(x):
    y = x.clamp(min=torch.finfo(x.dtype).min, max=torch.finfo(torch.float16).max)
    return y.to(torch.device("cpu")) + torch.iinfo(torch.int32).max % 7


def _size_ops(x):
    s = x.shape
    t = torch.Size([s[0], 2]) + s[1:]
    return x.reshape(s.numel()).sum() + len(t) + t.numel() + x.new_zeros(s[:-1] + (1,)).sum()


def _dtype_values(x):
    if x.dtype == torch.float32 and x.dtype.is_floating_point:
        return x.to(torch.float64).to(x.dtype) * 2
    return x


@pytest.mark.parametrize("fn", [_slice_object, _finfo_iinfo_device, _dtype_values, _size_ops])
def test_value_types_are_constants_in_the_graph(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3, 4)))
    assert (graphs, breaks) == (1, 0)


def test_finfo_of_the_input_dtype_is_guarded():
    cnt = CompileCounter()
    compiled = tjc.compile(_finfo_iinfo_device, backend=cnt)
    for dtype in (torch.float32, torch.float64, torch.float32):
        x = torch.randn(3, dtype=dtype)
        torch.testing.assert_close(compiled(x), _finfo_iinfo_device(x))
    assert cnt.frame_count == 2


# -- modules built inside forward -----------------------------------------------------------------

class _BuildsModules(nn.Module):
    def forward(self, x):
        y = nn.Softmax(dim=1)(x)
        y = nn.Identity()(nn.ReLU()(y - 0.2)) + nn.GELU(approximate="tanh")(x)
        return nn.Flatten(0, 1)(nn.LogSoftmax(dim=-1)(y))


def test_modules_built_in_forward_are_their_functional_form():
    m = _BuildsModules()
    graphs, breaks = eager_and_compiled(m, leaves((2, 3)))
    assert (graphs, breaks) == (1, 0)
    ops = tjc.explain(m)(torch.randn(2, 3)).ops_per_graph[0]
    assert "softmax" in " ".join(map(str, ops))


def test_module_built_in_forward_does_not_reach_the_artifact(no_gc):
    built = []
    orig = nn.Softmax.__init__

    def tracking_init(self, *a, **k):
        orig(self, *a, **k)
        built.append(weakref.ref(self))

    nn.Softmax.__init__ = tracking_init
    try:
        compiled = tjc.compile(_BuildsModules(), backend="eager")
        compiled(torch.randn(2, 3))
    finally:
        nn.Softmax.__init__ = orig
    assert built and [r() for r in built] == [None] * len(built)
    del compiled


def test_global_module_hooks_are_guarded_for_modules_built_in_forward():
    m = _BuildsModules()
    compiled = tjc.compile(m)
    x = torch.randn(2, 3)
    compiled(x)
    calls = []
    handle = nn.modules.module.register_module_forward_hook(lambda mod, i, o: calls.append(type(mod)))
    try:
        expected = m(x)
        eager_calls = list(calls)
        calls.clear()
        torch.testing.assert_close(compiled(x), expected)
        assert calls == eager_calls and nn.Softmax in calls   # the hooks ran in the compiled call
    finally:
        handle.remove()


class SiLUOnly(nn.Module):
    """transformers' SiLUActivation: a forward alone, built from a registry inside forward."""

    def forward(self, x):
        return nn.functional.silu(x)


class GeluTanh(nn.GELU):
    def forward(self, x):
        return super().forward(x) * 2   # nn.GELU's forward, reading the built module's settings


class CountsBuilds(nn.Module):
    built = 0

    def __init__(self):
        super().__init__()
        type(self).built += 1   # a side effect of construction: the trace must not run it once for all

    def forward(self, x):
        return x + 1


class _ActivationRegistry(dict):
    """transformers' ClassInstantier: each read makes a module from the class stored."""

    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


ACTIVATIONS = _ActivationRegistry(silu=SiLUOnly, gelu=(GeluTanh, {"approximate": "tanh"}), counts=CountsBuilds)


def test_user_modules_made_by_torchs_code_alone_are_built_in_the_trace():
    def fn(x, name):
        return ACTIVATIONS[name](x) + 1

    for name in ("silu", "gelu"):
        graphs, breaks = eager_and_compiled(lambda x: fn(x, name), leaves((2, 3)))
        assert (graphs, breaks) == (1, 0), name
        # One frame, compiled whole: no cut before the first op (which a callee's break would be).
        frames = tjc.explain(fn)(torch.randn(2, 3), name).frames
        assert [f.graph is not None for f in frames] == [True], [(f.frame, f.break_reason) for f in frames]


def test_a_user_module_with_its_own_init_is_built_as_eager_builds_it():
    def fn(x):
        return ACTIVATIONS["counts"](x) * 2

    CountsBuilds.built = 0
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert CountsBuilds.built == 6   # once per call, compiled or not


def test_a_registry_entry_replaced_recompiles():
    # The entry is guarded through dict's own item (test_guards.py: the guard never runs the
    # class's __getitem__, which here would build a module on every check).
    registry = _ActivationRegistry(act=SiLUOnly)

    def fn(x):
        return registry["act"](x)

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    x = torch.randn(4)
    for _ in range(3):
        torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 1
    dict.__setitem__(registry, "act", GeluTanh)
    torch.testing.assert_close(compiled(x), fn(x))
    assert cnt.frame_count == 2


# -- logging --------------------------------------------------------------------------------------

def test_logging_calls_break_instead_of_running_the_frame_uncompiled():
    log = logging.getLogger("tjc_test_constructs")

    def fn(x):
        y = x + 1
        log.warning("a warning %d", 3)
        return y * 2

    graphs, breaks, fallbacks = explain_counts(fn, torch.randn(2))
    assert fallbacks == [] and breaks == 1 and graphs == 2


def test_transformers_warning_once_breaks_instead_of_running_the_frame_uncompiled():
    tlog = pytest.importorskip("transformers.utils.logging")
    logger = tlog.get_logger("tjc_test_constructs")

    def fn(x):
        y = x + 1
        logger.warning_once("once")
        return y * 2

    graphs, breaks, fallbacks = explain_counts(fn, torch.randn(2))
    assert fallbacks == [] and breaks >= 1 and graphs == 2
    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(fn)(x), (x + 1) * 2)


# -- nn containers --------------------------------------------------------------------------------

class _SlicedLayers(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.n = 2

    def forward(self, x):
        for layer in self.layers[: self.n]:
            x = layer(x)
        return x + len(self.layers[1:]) + self.layers[-2:][0](x)


def test_module_list_slices_are_traced_and_guarded():
    m = _SlicedLayers()
    graphs, breaks, fallbacks = explain_counts(m, torch.randn(2, 4))
    assert (graphs, breaks, fallbacks) == (1, 0, [])
    cnt = CompileCounter()
    compiled = tjc.compile(m, backend=cnt)
    x = torch.randn(2, 4)
    torch.testing.assert_close(compiled(x), m(x))
    m.layers.append(nn.Linear(4, 4))   # the list's length is guarded
    torch.testing.assert_close(compiled(x), m(x))
    m.n = 3
    torch.testing.assert_close(compiled(x), m(x))
    assert cnt.frame_count == 3


class _BuildsOtherModules(nn.Module):
    def forward(self, x):
        y = nn.Hardswish()(x) + nn.ReLU6()(x) + nn.Hardtanh(-0.3, max_val=0.4)(x)
        return nn.InstanceNorm2d(4)(nn.Mish()(y)), nn.Upsample(scale_factor=2)(y)


def test_other_torch_modules_built_in_forward_run_their_own_forward():
    m = _BuildsOtherModules()
    graphs, breaks = eager_and_compiled(m, leaves((2, 4, 3, 3)))
    assert (graphs, breaks) == (1, 0)
    ops = " ".join(map(str, tjc.explain(m)(torch.randn(2, 4, 3, 3)).ops_per_graph[0]))
    assert "hardswish" in ops and "instance_norm" in ops



def _built_module_live_at_a_break(x):
    act = nn.Hardtanh(-0.3, max_val=0.4)
    y = x * 2
    print("break")          # act is live here: made again after the graph, by keyword
    return act(y) + act.min_val


def test_a_module_built_in_forward_live_at_a_break_is_made_again():
    x = torch.randn(5)
    assert explain_counts(_built_module_live_at_a_break, x)[1:] == (1, [])
    graphs, breaks = eager_and_compiled(_built_module_live_at_a_break, leaves((5,)))
    assert breaks == 1
