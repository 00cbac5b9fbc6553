"""The Python that model code uses, traced into the graph or broken on with a reason (issue 11):
imports inside functions, torch's is_compiling queries, generators and generator expressions,
nn.Module's generator methods, sets, slices, itertools/functools helpers, torch value types and
modules built inside forward. Each compares with eager and counts graphs and breaks."""
import gc
import logging
import sys
import weakref

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import eager_and_compiled, leaves  # noqa: E402


def explain(fn, *args):
    rep = tjc.explain(fn)(*args)
    return rep.graph_count, rep.graph_break_count, rep.fallbacks


# -- imports --------------------------------------------------------------------------------------

def _import_plain(x):
    import math
    return x * math.pi


def _import_dotted_as(x):
    import torch.nn.functional as F
    return F.relu(x)


def _import_from(x):
    from torch.nn import functional
    from torch import sigmoid
    return sigmoid(functional.gelu(x))


def _import_in_try(x):
    # transformers' is_torchdynamo_compiling() and friends: an import inside a try block, where no
    # graph break can be made (the whole frame ran uncompiled before).
    try:
        import torch.fx
        y = isinstance(x, torch.fx.Proxy)
    except ImportError:
        y = True
    return x + 1 if not y else x - 1


@pytest.mark.parametrize("fn", [_import_plain, _import_dotted_as, _import_from, _import_in_try])
def test_import_of_a_loaded_module_is_traced(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3, 4)))
    assert (graphs, breaks) == (1, 0)
    assert explain(fn, torch.randn(3, 4))[2] == []


def test_import_of_a_module_not_loaded_yet_breaks_and_imports_it():
    name = "tjc_test_fresh_module_for_import"
    sys.modules.pop(name, None)

    def fn(x):
        y = x + 1
        try:
            import tjc_test_fresh_module_for_import  # noqa: F401
        except ImportError:
            pass
        return y * 2

    graphs, breaks, fallbacks = explain(fn, torch.randn(2))
    assert fallbacks and "not imported yet" in fallbacks[0]   # inside try: no break there
    assert graphs == 0

    def fn2(x):
        import json  # noqa: F401  (stdlib, maybe not loaded: either traced or broken on)
        import tjc_never_existing_module_xyz  # noqa: F401
        return x

    with pytest.raises(ModuleNotFoundError):   # raises where eager raises, never in the tracer
        tjc.compile(fn2)(torch.randn(2))


def test_module_imported_inside_reaches_its_attributes_through_a_guarded_source():
    mod = type(sys)("tjc_test_patched_module")
    mod.scale = lambda t: t * 2
    sys.modules["tjc_test_patched_module"] = mod
    g = {"__name__": "tjc_caller", "tjc_test_patched_module": mod}
    exec("def fn(x):\n    import tjc_test_patched_module as m\n    return m.scale(x)\n", g)
    fn = g["fn"]
    try:
        compiled = tjc.compile(fn, backend=CompileCounter())
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), x * 2)
        mod.scale = lambda t: t * 3   # a monkeypatch after compiling must be seen
        torch.testing.assert_close(compiled(x), x * 3)
    finally:
        del sys.modules["tjc_test_patched_module"]


def test_module_imported_inside_that_the_frame_does_not_reach_breaks():
    mod = type(sys)("tjc_test_unreachable_module")
    mod.scale = lambda t: t * 2
    sys.modules["tjc_test_unreachable_module"] = mod
    g = {"__name__": "tjc_caller2"}
    exec("def fn(x):\n    y = x + 1\n    import tjc_test_unreachable_module as m\n    return m.scale(y)\n", g)
    try:
        graphs, breaks, fallbacks = explain(g["fn"], torch.randn(3))
        # x + 1, then the resume function, which reads the module Python imported from its local
        assert (graphs, breaks, fallbacks) == (2, 1, [])
        compiled = tjc.compile(g["fn"])
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), (x + 1) * 2)
        mod.scale = lambda t: t * 3
        torch.testing.assert_close(compiled(x), (x + 1) * 3)
    finally:
        del sys.modules["tjc_test_unreachable_module"]


def test_torch_imported_inside_survives_a_graph_break():
    def fn(x):
        import torch
        y = x + 1
        print("", end="")
        return torch.relu(y)

    graphs, breaks, fallbacks = explain(fn, torch.randn(3))
    assert (graphs, breaks, fallbacks) == (2, 1, [])
    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))


def test_transformers_import_helpers_are_traced():
    iu = pytest.importorskip("transformers.utils.import_utils")

    def fn(x):
        if iu.is_torchdynamo_compiling() and not iu.is_jit_tracing() and not iu.is_torch_fx_proxy(x):
            return x + 1
        return x - 1

    graphs, breaks, fallbacks = explain(fn, torch.randn(2))
    assert (graphs, breaks, fallbacks) == (1, 0, [])
    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(fn)(x), x + 1)   # as under torch.compile


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


# -- generators -----------------------------------------------------------------------------------

def _genexpr_sum(x):
    return sum(x * i for i in range(3))


def _genexpr_tuple(x):
    return torch.cat(tuple(x + i for i in range(2)))


def _genexpr_any_all(x):
    a = any(i > 1 for i in [1, 2, 3])
    b = all(i > 1 for i in [1, 2, 3])
    return x + int(a) - int(b)


def _gen():
    yield 1
    yield 2


def _gen_of(x, n):
    for i in range(n):
        yield x * i


def _generator_function(x):
    return x + sum(list(_gen())) + torch.stack(list(_gen_of(x, 3))).sum(0)


def _generator_for_loop(x):
    out = x
    for t in _gen_of(x, 3):
        out = out + t
    return out


def _generator_next(x):
    g = _gen_of(x, 3)
    a = next(g)
    b = next(g)
    return a + b + next(g, x)


def _genexpr_join(x):
    return x + len(" ".join(str(i) for i in range(3)))


def _generator_interleaved_with_mutation(x):
    # Lazy as in Python: each item is computed after the body mutated x.
    y = x.clone()
    out = []
    for t in (y * 1 for _ in range(3)):
        y.add_(1)
        out.append(t)
    return torch.stack(out)


@pytest.mark.parametrize("fn", [_genexpr_sum, _genexpr_tuple, _genexpr_any_all, _generator_function,
                                _generator_for_loop, _generator_next, _genexpr_join,
                                _generator_interleaved_with_mutation])
def test_generators_are_traced_in_the_graph(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3, 4)))
    assert (graphs, breaks) == (1, 0)


def test_any_stops_at_the_first_true_item_as_python_does():
    seen = []

    def fn(x, log):
        def items():
            for i in range(4):
                log.append(i)
                yield i
        return x + any(i >= 1 for i in items())

    x = torch.randn(2)
    log_eager, log_compiled = [], []
    expected = fn(x, log_eager)
    torch.testing.assert_close(tjc.compile(fn)(x, log_compiled), expected)
    assert log_compiled == log_eager == [0, 1]
    del seen


def test_a_failure_inside_a_generator_breaks_where_it_was_made():
    def fn(x):
        y = x * 2
        g = (t.item() for t in [y, y])   # .item() is refused in the trace
        return y + sum(g)

    graphs, breaks, fallbacks = explain(fn, torch.randn(()))
    assert fallbacks == [] and breaks >= 1 and graphs >= 1
    x = torch.randn(())
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))


def test_a_break_inside_a_loop_over_a_generator_keeps_what_came_before():
    def fn(x):
        y = x * 2
        for t in _gen_of(y, 2):
            print("", end="")   # a graph break inside the loop
            y = y + t
        return y

    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    graphs, breaks, fallbacks = explain(fn, x)
    assert graphs >= 1 and breaks >= 1


def test_generator_traced_frees_its_inputs(no_gc):
    def fn(x):
        return torch.stack(list(_gen_of(x, 3))).sum(0) + sum(x * i for i in range(2))

    x = torch.randn(3)
    compiled = tjc.compile(fn, backend="eager")
    compiled(x)
    ref = weakref.ref(x)
    del x
    assert ref() is None


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
    graphs, breaks, fallbacks = explain(m, torch.randn(2, 4))
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


# -- sets -----------------------------------------------------------------------------------------

def _set_literal_and_ops(x):
    a = {1, 2, 3}
    b = set([2, 3, 4])
    c = {i * 2 for i in range(3)}
    alias = a
    alias |= {9}          # in place: `a` sees it
    a.add(5)
    a.discard(1)
    n = len(a & b) + len(a - b) + len(a ^ c) + (9 in a) + (1 not in a) + a.issuperset({2, 3})
    return x * n + sum(sorted(a))


def _frozenset_membership(x):
    keep = frozenset(["q", "k"])
    return x + ("q" in keep) + len(keep | {"v"})


@pytest.mark.parametrize("fn", [_set_literal_and_ops, _frozenset_membership])
def test_sets_are_traced(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3,)))
    assert (graphs, breaks) == (1, 0)


def test_a_set_built_in_the_trace_is_returned_fresh_per_call():
    def fn(x):
        s = {1, 2}
        s.add(3)
        return x + 1, s

    compiled = tjc.compile(fn)
    x = torch.randn(2)
    out1, s1 = compiled(x)
    s1.add(99)
    out2, s2 = compiled(x)
    assert s2 == {1, 2, 3} and s1 is not s2


def test_a_frozenset_argument_is_not_trusted_by_value():
    # EQUALS_MATCH holds only scalars and tuples: a frozenset read from the frame stays opaque, and
    # a membership test on it breaks rather than being baked into the graph.
    def fn(x, names):
        return x + 1 if "a" in names else x - 1

    compiled = tjc.compile(fn)
    x = torch.randn(2)
    torch.testing.assert_close(compiled(x, frozenset("ab")), x + 1)
    torch.testing.assert_close(compiled(x, frozenset("bc")), x - 1)


def test_set_pop_and_sets_of_tensors_break():
    def fn(x):
        s = {1, 2}
        s.pop()   # an arbitrary item: not followed
        return x + len(s)

    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    graphs, breaks, fallbacks = explain(fn, x)
    # The set is both a local and pop's self at the break, rebuilt as one set (codegen builds it
    # once); the resume function reads it from the frame, opaque there: len() breaks again.
    assert (graphs, breaks, fallbacks) == (1, 2, [])

    def fn2(x):
        return x + len({x, x})   # hashing tensors: by identity in Python, not a constant here

    torch.testing.assert_close(tjc.compile(fn2)(x), fn2(x))


# -- map / filter / zip / enumerate / itertools / functools / sorted ------------------------------

import functools  # noqa: E402
import itertools  # noqa: E402


def _map_zip(x):
    return sum(a * b for a, b in zip(map(lambda t: t + 1, [x, x * 2]), [1, 2]))


def _filter_chain_product(x):
    kept = list(filter(lambda v: v > 0, [1, -1, 2]))
    total = sum(t for t in itertools.chain([x], [x * 2], (x * i for i in range(2))))
    pairs = sum(a * b for a, b in itertools.product([1, 2], [3, 4]))
    return total * len(kept) + pairs + sum(itertools.chain.from_iterable([[1], [2]]))


def _reduce_partial_sorted(x):
    r = functools.reduce(lambda a, b: a + b, [x, x * 2, x * 3])
    r2 = functools.reduce(lambda a, b: a * b, [2, 3], 1)
    add2 = functools.partial(torch.add, alpha=2)
    order = sorted([3, 1, 2], key=lambda v: -v)
    named = sorted([("b", x), ("a", x * 2)], key=lambda kv: kv[0])
    return add2(r, x) * r2 + order[0] + named[0][1]


def _enumerate_zip_over_generators(x):
    out = x
    for i, (a, b) in enumerate(zip(_gen_of(x, 3), _gen_of(x, 2))):
        out = out + i * a - b
    return out


@pytest.mark.parametrize("fn", [_map_zip, _filter_chain_product, _reduce_partial_sorted,
                                _enumerate_zip_over_generators])
def test_lazy_builtins_and_helpers_are_traced(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3,)))
    assert (graphs, breaks) == (1, 0)


def test_map_calls_its_function_lazily_in_python_order():
    def fn(x, log):
        def f(t):
            log.append("f")
            return t + 1
        out = x
        for t in map(f, [x, x]):
            log.append("body")
            out = out + t
        return out

    x = torch.randn(2)
    log_eager, log_compiled = [], []
    expected = fn(x, log_eager)
    torch.testing.assert_close(tjc.compile(fn)(x, log_compiled), expected)
    assert log_compiled == log_eager == ["f", "body", "f", "body"]


def test_zip_over_generators_pulls_as_python_does():
    def fn(x, log):
        def g(n):
            for i in range(n):
                log.append(i)
                yield x * i
        return sum(a + b for a, b in zip(g(3), [1, 2]))

    x = torch.randn(2)
    log_eager, log_compiled = [], []
    expected = fn(x, log_eager)
    torch.testing.assert_close(tjc.compile(fn)(x, log_compiled), expected)
    assert log_compiled == log_eager == [0, 1, 2]


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


# -- logging --------------------------------------------------------------------------------------

def test_logging_calls_break_instead_of_running_the_frame_uncompiled():
    log = logging.getLogger("tjc_test_constructs")

    def fn(x):
        y = x + 1
        log.warning("a warning %d", 3)
        return y * 2

    graphs, breaks, fallbacks = explain(fn, torch.randn(2))
    assert fallbacks == [] and breaks == 1 and graphs == 2


def test_transformers_warning_once_breaks_instead_of_running_the_frame_uncompiled():
    tlog = pytest.importorskip("transformers.utils.logging")
    logger = tlog.get_logger("tjc_test_constructs")

    def fn(x):
        y = x + 1
        logger.warning_once("once")
        return y * 2

    graphs, breaks, fallbacks = explain(fn, torch.randn(2))
    assert fallbacks == [] and breaks >= 1 and graphs == 2
    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(fn)(x), (x + 1) * 2)


def test_a_break_goes_where_the_first_live_generator_was_made_in_time():
    # b is made at a lower instruction index than a but later in time: cutting at b's call would
    # find a alive (it cannot be rebuilt) and run the whole frame uncompiled.
    def fn(x):
        y = x * 2
        a = b = None
        for i in range(2):
            if i == 1:
                b = _gen_of(y, 2)
            else:
                a = _gen_of(y, 2)
        print("", end="")   # a graph break while both are alive
        return y + sum(a) + sum(b)

    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    graphs, breaks, fallbacks = explain(fn, x)
    assert fallbacks == [] and graphs >= 1


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
    graphs, breaks, fallbacks = explain(m, torch.randn(2, 4))
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


def test_a_generator_left_unexhausted_does_not_move_a_later_break():
    # any() stops at the first true item and drops the generator: a later break stays where it is
    # (the graph before it keeps both ops).
    def fn(x):
        y = x * 2
        ok = any(i > 0 for i in [1, 2, 3])
        z = y + 1
        print("", end="")
        return z * ok

    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    rep = tjc.explain(fn)(x)
    assert rep.graph_break_count == 1 and rep.fallbacks == []
    assert len(rep.ops_per_graph[0]) == 2
