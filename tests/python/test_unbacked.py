"""Data-dependent values as unbacked symbols: config.capture_scalar_outputs and
config.capture_dynamic_output_shape_ops (config.py), tracer/variables/torch_objects/value_sizes.py, tensor.py,
symbolic.py and tracer/fake_shapes.py.

Off (the default, as torch.compile's), `.item()`, `.tolist()`, nonzero and the like are a graph break
whose reason names the switch. On, they run on fake tensors and give unbacked SymInts/SymFloats and
tensors with unbacked sizes: one graph that serves every value, no guard on the data, the ShapeEnv's
deferred runtime asserts checked in the graph, and a branch on such a value a graph break. A small
Mixture-of-Experts layer written as users write it compiles in one graph for eager, aot_eager and
inductor. Every result is compared with eager's.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import config  # noqa: E402
from torch_jit_cache.config import Config  # noqa: E402
from torch_jit_cache.testing import CompileCounter, CompileCounterWithBackend  # noqa: E402

BACKENDS = ["eager", "aot_eager", "inductor"]


@pytest.fixture
def capture(monkeypatch):
    """Both switches on for the test (monkeypatch restores them)."""
    monkeypatch.setattr(config, "capture_scalar_outputs", True)
    monkeypatch.setattr(config, "capture_dynamic_output_shape_ops", True)


def _check(fn, calls, backend="eager", graphs=1, **options):
    """Compile `fn`, compare each call with eager, and check the graphs compiled and the breaks."""
    counter = CompileCounterWithBackend(backend) if backend != "eager" else CompileCounter()
    compiled = tjc.compile(fn, backend=counter, **options)
    for args in calls:
        got, want = compiled(*args), fn(*args)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert counter.frame_count == graphs, counter
    explanation = tjc.explain(fn)(*calls[0])
    assert explanation.graph_break_count == 0, explanation.break_reasons
    return counter


# -- the switches ---------------------------------------------------------------------------------

def test_switches_default_off_as_torch_compile():
    assert Config().capture_scalar_outputs is False
    assert Config().capture_dynamic_output_shape_ops is False


@pytest.mark.parametrize("raw, value", [("1", True), ("true", True), ("on", True), ("0", False), ("", False)])
def test_switches_read_from_the_environment(monkeypatch, raw, value):
    monkeypatch.setenv("TJC_CAPTURE_SCALAR_OUTPUTS", raw)
    monkeypatch.setenv("TJC_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS", raw)
    assert Config().capture_scalar_outputs is value
    assert Config().capture_dynamic_output_shape_ops is value


def test_a_bad_environment_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("TJC_CAPTURE_SCALAR_OUTPUTS", "maybe")
    with pytest.raises(ValueError, match="TJC_CAPTURE_SCALAR_OUTPUTS"):
        Config()


@pytest.mark.parametrize("name", ["capture_scalar_outputs", "capture_dynamic_output_shape_ops"])
def test_switches_take_only_bools(name):
    with pytest.raises(TypeError, match=name):
        setattr(config, name, 1)


# -- off: a graph break that names the switch -----------------------------------------------------

@pytest.mark.parametrize("fn, arg, switch", [
    (lambda x, c: torch.zeros(c.item()) + x.sum(), torch.tensor(3), "capture_scalar_outputs"),
    (lambda x, c: x[: c.tolist()[0]] * 2, torch.tensor([3]), "capture_scalar_outputs"),
    (lambda x, c: torch.arange(0, c.max()) + x.sum(), torch.tensor([3]), "capture_scalar_outputs"),
    (lambda x, c: x[c.nonzero()[:, 0]] * 2, torch.tensor([1, 0, 1, 1, 0, 0, 0, 1]), "capture_dynamic_output_shape_ops"),
    (lambda x, c: x[c > 0] * 2, torch.tensor([1, 0, 1, 1, 0, 0, 0, 1]), "capture_dynamic_output_shape_ops"),
    (lambda x, c: torch.bincount(c) + x.sum(), torch.tensor([1, 0, 1]), "capture_dynamic_output_shape_ops"),
])
def test_off_the_break_names_the_switch(fn, arg, switch):
    x = torch.arange(8.0)
    explanation = tjc.explain(fn)(x, arg)
    assert explanation.graph_break_count >= 1
    assert switch in explanation.break_reasons[0], explanation.break_reasons
    torch.testing.assert_close(tjc.compile(fn)(x, arg), fn(x, arg))


# -- on: unbacked SymInts from .item() and .tolist() ----------------------------------------------

def _item_sizes(x, c):
    n = c.item()
    return torch.zeros(n) + 1, x[:n] * 2, x.narrow(0, 0, n) - 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_item_is_an_unbacked_size_in_one_graph(capture, backend):
    x = torch.arange(8.0)
    # Three values, 0 among them (a size torch specialises when it is an input): one graph.
    _check(_item_sizes, [(x, torch.tensor(3)), (x, torch.tensor(5)), (x, torch.tensor(0))], backend)


def test_tolist_gives_a_list_of_unbacked_ints(capture):
    def fn(x, c):
        a, b = c.tolist()
        return x[a:b] * 2, torch.ones(b - a)

    x = torch.arange(8.0)
    _check(fn, [(x, torch.tensor([1, 4])), (x, torch.tensor([2, 7]))])


def test_float_item_is_an_unbacked_float(capture):
    def fn(x, t):
        return x * t.item()

    x = torch.arange(4.0)
    _check(fn, [(x, torch.tensor(0.5)), (x, torch.tensor(2.5))])


# A 0-d tensor given where an op takes a number for its values only (a foreach op's scalar, `alpha`):
# the op reads it as a number inside, and that number shapes nothing of the result.
SCALAR_ARGUMENTS = {
    "foreach_scalar": lambda a, b, t: torch._foreach_add([a, b], 1 - t),
    "foreach_value_keyword": lambda a, b, t: torch._foreach_addcmul([a], [b], [a], value=t * 3),
    "foreach_in_place": lambda a, b, t: (torch._foreach_mul_([a], t), a)[1],
    "alpha": lambda a, b, t: torch.add(a, b, alpha=t),
}


@pytest.mark.parametrize("case", sorted(SCALAR_ARGUMENTS))
def test_a_tensor_read_as_an_op_scalar_is_one_graph_for_every_value(capture, case):
    fn = SCALAR_ARGUMENTS[case]

    def args(v):
        return torch.arange(4.0), torch.ones(4), torch.tensor(v, dtype=torch.float64)

    counter = CompileCounter()
    compiled = tjc.compile(fn, backend=counter)
    for v in (0.5, -2.0, 3.0):
        torch.testing.assert_close(compiled(*args(v)), fn(*args(v)))
    assert counter.frame_count == 1
    assert tjc.explain(fn)(*args(0.5)).graph_break_count == 0


def test_item_is_no_constant_of_the_graph_and_no_guard(capture):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = tjc.compile(lambda x, c: x[: c.item()] * 2, backend=backend)
    x = torch.arange(8.0)
    for k in (3, 6):
        torch.testing.assert_close(compiled(x, torch.tensor(k)), x[:k] * 2)
    assert len(graphs) == 1
    (gm,) = graphs
    assert "item" in gm.code and "3" not in gm.code
    # The graph keeps no example values (fake tensors hold the trace's ShapeEnv).
    assert not any("example_value" in n.meta or "unbacked_bindings" in n.meta for n in gm.graph.nodes)


# -- on: tensors with unbacked sizes --------------------------------------------------------------

x3 = torch.zeros(3)
VALUE_SIZED = {
    "nonzero_size": (lambda x: x + x.nonzero().size(0), [torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])]),
    "where_one_arg": (lambda x: x + torch.where(x > 0)[0].shape[0], [torch.tensor([1, 0, 1]), torch.tensor([0, 0, 0])]),
    "masked_select": (lambda x: x.masked_select(x > 0).sum() + x, [torch.tensor([1, 0, 1]), torch.tensor([1, 2, 3])]),
    "bool_mask": (lambda x: x[x > 0].shape[0] + x, [torch.tensor([1, 0, 1]), torch.tensor([1, 1, 1])]),
    "unique": (lambda x: torch.unique(x).shape[0] + x, [torch.tensor([1, 1, 2]), torch.tensor([1, 2, 3])]),
    "repeat_interleave": (lambda x: torch.repeat_interleave(torch.ones(3), x).sum() + x,
                          [torch.tensor([1, 1, 2]), torch.tensor([1, 2, 3])]),
    "arange_end": (lambda x: torch.arange(0, x.max()).sum() + x, [torch.tensor([1, 3, 2]), torch.tensor([5, 2, 3])]),
    "bincount": (lambda x: torch.bincount(x).shape[0] + x.sum(), [torch.tensor([1, 3, 2]), torch.tensor([5, 2, 3])]),
}


@pytest.mark.parametrize("case", sorted(VALUE_SIZED))
def test_value_sized_ops_have_unbacked_sizes(capture, case):
    fn, inputs = VALUE_SIZED[case]
    _check(fn, [(v,) for v in inputs])


# -- guards and asserts ---------------------------------------------------------------------------

def test_deferred_runtime_asserts_are_checked_in_the_graph(capture):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    fn = lambda c: torch.zeros(c.item()) + 1  # noqa: E731 - zeros needs u0 >= 0: an assert
    compiled = tjc.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(torch.tensor(2)), fn(torch.tensor(2)))
    asserts = [n for n in graphs[0].graph.nodes if n.target is torch.ops.aten._assert_scalar.default]
    assert asserts, graphs[0].code
    with pytest.raises(RuntimeError):
        fn(torch.tensor(-1))
    with pytest.raises(RuntimeError):
        compiled(torch.tensor(-1))
    assert len(graphs) == 1   # the same entry served it: the data is not guarded


def test_a_branch_on_an_unbacked_value_is_a_graph_break(capture):
    def fn(x, c):
        n = c.item()
        if n > 3:
            return x[:n] + 1
        return x[:n] - 1

    x = torch.arange(8.0)
    explanation = tjc.explain(fn)(x, torch.tensor(2))
    assert explanation.graph_break_count == 1
    assert "data-dependent" in explanation.break_reasons[0], explanation.break_reasons
    compiled = tjc.compile(fn)
    for k in (2, 5, 3, 7):
        torch.testing.assert_close(compiled(x, torch.tensor(k)), fn(x, torch.tensor(k)))


def test_range_of_an_unbacked_value_is_a_graph_break(capture):
    def fn(x, c):
        total = x
        for i in range(c.item()):
            total = total + i
        return total

    x = torch.arange(3.0)
    compiled = tjc.compile(fn)
    for k in (2, 4):
        torch.testing.assert_close(compiled(x, torch.tensor(k)), fn(x, torch.tensor(k)))


# -- a question the shape environment cannot decide -------------------------------------------------

def _order_of_strides_read_from_data(xs):
    a, b, c = xs.tolist()
    torch._check(b >= a)
    torch._check(c >= a)
    # Which of b and c is larger is open: the trace cannot know the order of the strides.
    return torch.empty_strided([4, 4, 4], [a, b, c]).dim_order()


@pytest.mark.parametrize("values", [[2, 3, 4], [2, 4, 3], [1, 1, 5]])
def test_an_answer_torch_would_guess_for_unbacked_sizes_is_a_graph_break(capture, values):
    # torch answers dim_order() of unbacked strides by assuming each undecidable comparison false;
    # a constant built on such a guess is wrong for other data, so the op runs eagerly instead.
    fn = _order_of_strides_read_from_data
    compiled = tjc.compile(fn)
    for xs in (values, [3, 5, 4]):
        assert compiled(torch.tensor(xs)) == fn(torch.tensor(xs))
    explanation = tjc.explain(fn)(torch.tensor(values))
    assert explanation.graph_break_count == 1
    assert "cannot decide" in explanation.break_reasons[0], explanation.break_reasons


# -- Mixture of Experts ---------------------------------------------------------------------------

class MoE(torch.nn.Module):
    """Top-k routing as users write it: per-expert token counts (bincount), the tokens of each
    expert found with torch.where, gathered, run, weighted and index_add-ed back."""

    def __init__(self, dim=8, hidden=16, n_experts=4, top_k=2):
        super().__init__()
        self.top_k, self.n_experts = top_k, n_experts
        self.router = torch.nn.Linear(dim, n_experts, bias=False)
        self.experts = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, dim))
            for _ in range(n_experts))

    def forward(self, x):
        probs = self.router(x).softmax(dim=-1)
        weights, chosen = probs.topk(self.top_k, dim=-1)
        weights = weights / weights.sum(dim=-1, keepdim=True)
        counts = torch.bincount(chosen.flatten(), minlength=self.n_experts)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            token, slot = torch.where(chosen == e)
            y = expert(x[token]) * weights[token, slot].unsqueeze(-1)
            out = out.index_add(0, token, y)
        return out, counts


@pytest.mark.parametrize("backend", BACKENDS)
def test_moe_routing_compiles_in_one_graph(capture, backend):
    model = MoE()
    counter = CompileCounterWithBackend(backend)
    compiled = tjc.compile(model, backend=counter)
    seen = set()
    for seed in range(4):
        torch.manual_seed(100 + seed)
        x = torch.randn(6, 8)
        x_eager, x_compiled = x.clone().requires_grad_(), x.clone().requires_grad_()
        want, got = model(x_eager), compiled(x_compiled)
        seen.add(tuple(want[1].tolist()))
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
        grads = []
        for inp, (out, _) in ((x_eager, want), (x_compiled, got)):
            model.zero_grad()
            out.square().sum().backward()
            grads.append([inp.grad] + [p.grad.clone() for p in model.parameters()])
        for g_eager, g_compiled in zip(*grads):
            torch.testing.assert_close(g_compiled, g_eager, rtol=1e-5, atol=1e-5)
    assert len(seen) > 1   # the routing (tokens per expert) differed between calls
    assert counter.frame_count == 1, counter   # one graph, and no recompile for new routing
    explanation = tjc.explain(model)(torch.randn(6, 8))
    assert (explanation.graph_count, explanation.graph_break_count) == (1, 0), explanation.break_reasons


def test_moe_off_still_matches_eager():
    model = MoE()
    compiled = tjc.compile(model)
    x = torch.randn(6, 8)
    torch.testing.assert_close(compiled(x), model(x))


# -- lifetimes ------------------------------------------------------------------------------------

def test_the_shape_env_with_unbacked_symbols_dies_with_the_trace(capture, no_gc, monkeypatch):
    # The graph keeps its runtime asserts, not the example values the pass read (they hold the
    # ShapeEnv): after the compile, one collection frees it (fake dispatch's closures are cycles).
    import gc
    import weakref

    from torch_jit_cache.tracer import fake_shapes

    made = []
    original = fake_shapes.FakeShapes.__init__

    def recording(self):
        original(self)
        made.append(weakref.ref(self.shape_env))
    monkeypatch.setattr(fake_shapes.FakeShapes, "__init__", recording)
    compiled = tjc.compile(_item_sizes)
    x = torch.arange(8.0)
    torch.testing.assert_close(compiled(x, torch.tensor(3)), _item_sizes(x, torch.tensor(3)))
    assert made
    gc.collect()
    assert all(env() is None for env in made), "the ShapeEnv is held after the compile"
    torch.testing.assert_close(compiled(x, torch.tensor(6)), _item_sizes(x, torch.tensor(6)))


def test_a_compiled_moe_dies_with_its_module(capture, no_gc):
    import weakref

    model = MoE()
    compiled = tjc.compile(model)
    compiled(torch.randn(6, 8))
    ref = weakref.ref(model)
    del model, compiled
    assert ref() is None


def test_torch_check_on_an_unbacked_value_is_an_assert_in_the_graph(capture):
    # What users write next to .item(): no graph break; the check runs at call time.
    def fn(x, c):
        n = c.item()
        torch._check(n >= 0)
        torch._check(n <= x.shape[0])
        return x[:n] * 2

    x = torch.arange(8.0)
    _check(fn, [(x, torch.tensor(3)), (x, torch.tensor(8))])
    compiled = tjc.compile(fn)
    compiled(x, torch.tensor(2))
    with pytest.raises(RuntimeError):
        fn(x, torch.tensor(9))
    with pytest.raises(RuntimeError):
        compiled(x, torch.tensor(9))


@pytest.mark.parametrize("dynamic", [True, False])
@pytest.mark.parametrize("other, good", [
    (lambda x, y, k: x.shape[0] + y.shape[0], 7),
    (lambda x, y, k: x.shape[0] * y.shape[0], 12),
    (lambda x, y, k: x.shape[0] + k, 8),
    (lambda x, y, k: x.shape[0] - y.shape[0], -1),
    # Max(s0, s1) is not computed in the graph: the symbolic graph is refused, a static one kept.
    (lambda x, y, k: torch.sym_max(x.shape[0], y.shape[0]), 4),
])
def test_torch_check_equating_an_unbacked_value_to_sizes_stays_checked(capture, dynamic, other, good):
    # The ShapeEnv answers the check by making the .item() symbol stand for the expression in
    # sizes and ints (or for its number): a call whose data breaks the equality must still raise.
    def fn(x, y, k, c):
        n = c.item()
        torch._check(n == other(x, y, k))
        return torch.cat([x, y]) * n

    x, y = torch.randn(3, 2), torch.randn(4, 2)
    compiled = tjc.compile(fn, dynamic=dynamic, backend=CompileCounter())
    torch.testing.assert_close(compiled(x, y, 5, torch.tensor(good)), fn(x, y, 5, torch.tensor(good)))
    with pytest.raises(RuntimeError):
        fn(x, y, 5, torch.tensor(good + 2))
    with pytest.raises(RuntimeError):
        compiled(x, y, 5, torch.tensor(good + 2))
    torch.testing.assert_close(compiled(x, y, 5, torch.tensor(good)), fn(x, y, 5, torch.tensor(good)))


# -- bool() of a data-dependent value: a SymBool in the graph, never a guard on the data ------------

def _truth_of_item(x, c):
    return bool(c.item()), x * 2


@pytest.mark.parametrize("values", [
    [torch.tensor([4]), torch.tensor([0]), torch.tensor([-1])],          # SymInt: != 0
    [torch.tensor([0.5]), torch.tensor([0.0]), torch.tensor([-0.0])],    # SymFloat
    [torch.tensor([True]), torch.tensor([False])],                       # SymBool: itself
])
def test_bool_of_an_item_is_one_graph_for_every_value(capture, values):
    cnt = CompileCounter()
    compiled = tjc.compile(_truth_of_item, backend=cnt)
    x = torch.arange(3.0)
    for c in values:
        got, want = compiled(x, c), _truth_of_item(x, c)
        assert type(got[0]) is bool and got[0] == want[0], (c, got[0], want[0])
        torch.testing.assert_close(got[1], want[1])
    assert cnt.frame_count == 1, "the truth is computed by the graph, not guarded per value"
    assert tjc.explain(_truth_of_item)(x, values[0]).graph_break_count == 0


def test_bool_of_a_tensor_is_its_item(capture):
    def fn(x):
        return bool(x), bool((x == 0).all())

    compiled = tjc.compile(fn, backend="eager")
    for x in [torch.tensor(3), torch.tensor(0.0), torch.tensor([[1]]), torch.zeros(1)]:
        assert compiled(x) == fn(x)
    assert tjc.explain(fn)(torch.tensor(2)).graph_break_count == 0
    # More than one element: bool() raises as eager does.
    with pytest.raises(RuntimeError, match="ambiguous"):
        compiled(torch.tensor([1, 2]))


def test_bool_of_a_tensor_still_breaks_with_the_switch_off():
    def fn(x):
        return bool(x)

    explanation = tjc.explain(fn)(torch.tensor(1))
    assert explanation.graph_break_count == 1
    assert tjc.compile(fn)(torch.tensor(0)) is False


def test_a_tensor_indexed_by_an_unbacked_int_selects_in_one_graph(capture):
    # t[i] with i = index.item() is t.select(0, i): one graph for every index, negative ones too.
    def row(x, index):
        i = index.item()
        torch._check(i >= -x.size(0))
        torch._check(i < x.size(0))
        return x[i] * 2

    x = torch.arange(12.0).reshape(4, 3)
    _check(row, [(x, torch.tensor(1)), (x, torch.tensor(3)), (x, torch.tensor(-2))])
