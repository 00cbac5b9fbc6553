"""Tests for torch_jit_cache.tracer: trace() a real function, run the graph on inputs loaded from
the frame through the sources, compare with eager, and check the guards the trace relied on."""
import builtins
import inspect
import math

import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_jit_cache.sources import (AttrSource, ClosureSource, GlobalSource,  # noqa: E402
                                     ItemSource, LocalSource, load_source)
from torch_jit_cache.trace_result import (ConstantOutput, DictOutput, GraphOutput,  # noqa: E402
                                          GuardKind, ListOutput, SourceOutput, TupleOutput,
                                          Unsupported)
from torch_jit_cache.tracer import trace  # noqa: E402

SCALE = 3.0
BIAS = torch.randn(4)
FLAG = True


# -- helpers ---------------------------------------------------------------------------------------
def frame_of(f, *args, **kwargs):
    """(f_locals, f_globals, f_builtins) as the runtime would see f's frame."""
    bound = inspect.signature(f).bind(*args, **kwargs)
    bound.apply_defaults()
    f_locals = dict(bound.arguments)
    for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
        f_locals[name] = cell.cell_contents
    return f_locals, f.__globals__, builtins.__dict__


def evaluate_source(source, f_locals, f_globals, f_builtins):
    return load_source(source, f_locals, f_globals, f_builtins)


def do_trace(f, *args, **kwargs):
    f_locals, g, b = frame_of(f, *args, **kwargs)
    return trace(f.__code__, f_locals, g, b, f.__closure__)


def rebuild(spec, outs, frame):
    if isinstance(spec, GraphOutput):
        return outs[spec.index]
    if isinstance(spec, ConstantOutput):
        return spec.value
    if isinstance(spec, SourceOutput):
        return evaluate_source(spec.source, *frame)
    if isinstance(spec, TupleOutput):
        items = tuple(rebuild(s, outs, frame) for s in spec.items)
        if spec.cls is None:
            return items
        return spec.cls._make(items) if hasattr(spec.cls, "_make") else spec.cls(items)
    if isinstance(spec, ListOutput):
        return [rebuild(s, outs, frame) for s in spec.items]
    if isinstance(spec, DictOutput):
        return {k: rebuild(s, outs, frame) for k, s in spec.items}
    raise AssertionError(spec)


def run_compiled(result, f, *args, **kwargs):
    frame = frame_of(f, *args, **kwargs)
    inputs = [evaluate_source(s, *frame) for s in result.graph_inputs]
    return rebuild(result.output, result.graph(*inputs), frame)


def assert_same(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        torch.testing.assert_close(a, b)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    else:
        assert type(a) is type(b) and a == b


def check(f, *arg_sets, trace_args=None):
    """Trace f on the first argument set, then compare graph and eager on every set."""
    result = do_trace(f, *(trace_args or arg_sets[0]))
    for args in arg_sets:
        assert_same(f(*args), run_compiled(result, f, *args))
    return result


def guard_kinds(result, source):
    return {g.kind for g in result.guards if g.source == source}


def rand(*shape):
    return torch.randn(*shape)


def sets(n, *shapes):
    return [tuple(rand(*s) for s in shapes) for _ in range(n)]


# -- arithmetic, reductions, views --------------------------------------------------------------
def test_arithmetic_and_guards():
    def f(x, y):
        return (x + y) * 2 - x / (y.abs() + 1) + x ** 2 - (-y) @ x.t()[:, :3].t()
    r = check(f, *sets(3, (3, 3), (3, 3)))
    assert GuardKind.TENSOR_MATCH in guard_kinds(r, LocalSource("x"))
    assert GuardKind.TENSOR_MATCH in guard_kinds(r, LocalSource("y"))


def test_floordiv_mod_and_reverse_ops():
    def f(x):
        return 1 - x, 2 / (x.abs() + 1), x // 0.5, x % 0.3, 3 * x
    check(f, *sets(3, (5,)))


def test_reductions():
    def f(x):
        return x.sum(), x.mean(dim=1), x.max(dim=0).values, torch.amax(x, 1, keepdim=True), \
            x.std(0), x.argmax(1)
    check(f, *sets(3, (4, 5)))


def test_views_and_shapes():
    def f(x):
        n = x.size(0)
        y = x.view(n, -1).reshape(n, 2, -1).transpose(1, 2).contiguous()
        return y.permute(2, 0, 1).flatten(1), x.shape, x.dim(), x.unsqueeze(0).squeeze(0)
    r = check(f, *sets(3, (2, 4, 3)))
    assert r.output.items[1] == ConstantOutput(torch.Size([2, 4, 3]))


def test_indexing_and_slicing():
    def f(x):
        return x[0], x[:, 1], x[1:, ::2], x[..., -1], x[None, 0, :2], x[torch.tensor([0, 2])]
    check(f, *sets(3, (3, 4)))


def test_broadcasting():
    def f(x, b):
        return x * b + b.unsqueeze(0)
    check(f, *sets(3, (5, 4), (4,)))


def test_scalar_results_fold_to_constants():
    def f(x):
        return x.numel(), x.shape[-1] * 2, x.dtype, len(x), x.ndim
    r = check(f, *sets(2, (3, 7)))
    assert r.output == TupleOutput(tuple(ConstantOutput(v) for v in (21, 14, torch.float32, 3, 2)))
    assert list(r.graph.graph.nodes)[-1].args == ((),)


def test_torch_functions_and_split():
    def f(x, y):
        a, b = torch.chunk(x, 2, dim=1)
        c = torch.cat([a, b, y], dim=0)
        return torch.stack((a, b)), c, torch.where(x > 0, x, y[:, :2].repeat(1, 2)), \
            F.softmax(c, -1), torch.einsum("ij,kj->ik", x, x)
    check(f, *sets(3, (4, 4), (4, 2)))


def test_math_and_constants():
    def f(x):
        scale = math.sqrt(x.shape[-1])
        return x / scale + math.pi
    check(f, *sets(2, (2, 16)))


def test_comparisons_produce_tensors():
    def f(x, y):
        return x > y, x <= 0.5, (x == y) | (x != 0)
    check(f, *sets(3, (6,), (6,)))


# -- frame values: globals, closures, kwargs, defaults -------------------------------------------
def test_globals_constant_and_tensor():
    def f(x):
        return x * SCALE + BIAS
    r = check(f, *sets(3, (2, 4)))
    assert {GuardKind.EQUALS_MATCH, GuardKind.TYPE_MATCH} <= guard_kinds(r, GlobalSource("SCALE"))
    assert GlobalSource("BIAS") in r.graph_inputs
    assert GuardKind.TENSOR_MATCH in guard_kinds(r, GlobalSource("BIAS"))


def test_global_flag_branch():
    def f(x):
        if FLAG:
            return x + 1
        return x - 1
    r = check(f, *sets(2, (3,)))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, GlobalSource("FLAG"))


def test_closure_cells():
    scale = 2.5
    w = torch.randn(4)

    def f(x):
        return x * scale + w
    r = check(f, *sets(3, (4,)))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, ClosureSource("scale"))
    assert ClosureSource("w") in r.graph_inputs


def test_kwargs_and_defaults():
    def g(x, alpha=2.0, *, beta=1.0, mode="add"):
        if mode == "add":
            return x * alpha + beta
        return x * alpha - beta

    def f(x, y, mode="sub"):
        return g(x, beta=3.0), g(y, 0.5, mode=mode)
    check(f, *sets(3, (3,), (3,)))
    r = do_trace(f, rand(3), rand(3), mode="add")
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, LocalSource("mode"))


def test_star_args_and_kwargs():
    def g(*xs, **kw):
        return sum(xs) * kw["k"]

    def f(a, b):
        args = (a, b)
        return g(*args, k=2), g(a, **{"k": 3})
    check(f, *sets(3, (2,), (2,)))


def test_nested_function_and_lambda_closure():
    def f(x, n):
        k = n + 1

        def inner(y):
            return y * k
        sq = lambda t: t * t  # noqa: E731
        return sq(inner(x))
    check(f, (rand(3), 2), (rand(3), 2))


def test_list_comprehension_and_dict_comprehension():
    def f(xs):
        ys = [x * i for i, x in enumerate(xs)]
        return {f"k{i}": y.sum() for i, y in enumerate(ys)}
    r = check(f, ([rand(2), rand(2), rand(2)],), ([rand(2), rand(2), rand(2)],))
    assert GuardKind.LENGTH in guard_kinds(r, LocalSource("xs"))


# -- containers in and out ------------------------------------------------------------------------
def test_list_tuple_dict_inputs_and_outputs():
    def f(xs, pair, d):
        a, b = pair
        out = [x + 1 for x in xs]
        out.append(a * b)
        return {"sum": d["w"] * sum(out), "items": tuple(out), "n": len(xs), "none": None}
    inputs = ([rand(2), rand(2)], (rand(2), rand(2)), {"w": rand(2), "unused": 3})
    r = check(f, inputs)
    assert GuardKind.LENGTH in guard_kinds(r, LocalSource("xs"))
    assert GuardKind.LENGTH in guard_kinds(r, LocalSource("pair"))
    assert GuardKind.DICT_KEYS in guard_kinds(r, LocalSource("d"))
    assert ItemSource(LocalSource("d"), "w") in r.graph_inputs
    assert isinstance(r.output, DictOutput)


def test_dict_iteration():
    def f(d):
        total = 0
        for k, v in d.items():
            total = total + v * len(k)
        for k in d:
            total = total + d[k]
        return total
    r = check(f, ({"a": rand(3), "bb": rand(3)},))
    assert GuardKind.DICT_KEYS in guard_kinds(r, LocalSource("d"))


def test_unpack_ex_and_tuple_ops():
    def f(x):
        a, *rest = x.unbind(0)
        t = (a,) + tuple(rest) * 2
        return t[-1], len(t), [*t[:2], x]
    check(f, *sets(2, (3, 2)))


def test_same_tensor_through_two_sources_is_one_input():
    def f(x, y):
        return x + y
    t = rand(3)
    r = do_trace(f, t, t)
    assert len(r.graph_inputs) == 1
    assert GuardSpecLike(LocalSource("y"), GuardKind.SAME_AS) in r.guards


class GuardSpecLike:
    def __init__(self, source, kind):
        self.source, self.kind = source, kind

    def __eq__(self, other):
        return other.source == self.source and other.kind == self.kind


def test_unused_tensor_is_not_a_graph_input():
    def f(x, y):
        return x * 2, y.shape
    r = do_trace(f, rand(2), rand(5))
    assert r.graph_inputs == [LocalSource("x")]
    assert GuardKind.TENSOR_MATCH in guard_kinds(r, LocalSource("y"))


def test_returning_an_input_and_a_constant():
    def f(x, n):
        return x, n * 2, "s"
    r = check(f, (rand(2), 3))
    assert r.output.items[1] == ConstantOutput(6)


# -- control flow ------------------------------------------------------------------------------------
def test_for_over_range_while_and_break():
    def f(x, n):
        i = 0
        while i < n:
            x = x * 1.5
            i += 1
        for j in range(10):
            if j == 3:
                break
            if j % 2:
                continue
            x = x + j
        return x
    r = check(f, (rand(3), 4), (rand(3), 4))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, LocalSource("n"))


def test_zip_min_max_isinstance_getattr():
    def f(xs, ys, x):
        out = [a * b for a, b in zip(xs, ys)]
        k = min(len(xs), 5) + max(2, 3) + abs(-1)
        flag = isinstance(x, torch.Tensor) and not isinstance(k, float)
        return out, k, flag, getattr(x, "shape"), int(2.7), float(k)
    check(f, ([rand(2)] * 2, [rand(2)] * 2, rand(1)))


def test_conditional_expressions_and_none():
    def f(x, mask=None, scale=None):
        if mask is not None:
            x = x.masked_fill(mask, 0.0)
        y = x * (scale if scale is not None else 1.0)
        return y if y.dim() == 2 else y.sum()
    m = torch.rand(2, 3) > 0.5
    check(f, (rand(2, 3), m), (rand(2, 3), ~m))
    check(f, (rand(2, 3), None, 2.0))


# -- in-place updates ---------------------------------------------------------------------------
def test_inplace_updates_inputs():
    def f(x, y):
        x.add_(1)
        y[0] = 3.0
        y += x
        return x * 2

    def run(fn_args):
        x, y = rand(4), rand(4)
        return x, y
    x0, y0 = rand(4), rand(4)
    r = do_trace(f, x0.clone(), y0.clone())
    xe, ye = x0.clone(), y0.clone()
    expected = f(xe, ye)
    xc, yc = x0.clone(), y0.clone()
    got = run_compiled(r, f, xc, yc)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(xc, xe)
    torch.testing.assert_close(yc, ye)
    r.graph.graph.eliminate_dead_code()
    r.graph.recompile()
    xc, yc = x0.clone(), y0.clone()
    run_compiled(r, f, xc, yc)
    torch.testing.assert_close(yc, ye)


def test_tracing_does_not_mutate_inputs():
    def f(x):
        x.mul_(2)
        return x
    t = rand(3)
    before = t.clone()
    do_trace(f, t)
    torch.testing.assert_close(t, before)


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
    r = check(MLP.forward, (m, rand(3, 8)), (m, rand(3, 8)))
    w = AttrSource(AttrSource(LocalSource("self"), "fc1"), "weight")
    assert w in r.graph_inputs
    assert {GuardKind.TYPE_MATCH, GuardKind.ID_MATCH} <= guard_kinds(r, LocalSource("self"))
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
    check(CNN.forward, (m, rand(2, 3, 8, 8)), (m, rand(2, 3, 8, 8)))


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
    check(Attention.forward, (m, rand(2, 5, 16), mask), (m, rand(2, 5, 16), mask))


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
    r = check(gru_unrolled, (cell, rand(5, 2, 4), rand(2, 6)), (cell, rand(5, 2, 4), rand(2, 6)))
    assert sum(1 for n in r.graph.graph.nodes if n.target is torch.sigmoid) == 10
    assert GuardKind.ID_MATCH in guard_kinds(r, LocalSource("cell"))


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
    r = check(Stack.forward, (m, idx), (m, torch.randint(0, 10, (2, 3))))
    assert GuardKind.LENGTH in guard_kinds(r, AttrSource(LocalSource("self"), "blocks"))
    m.eval()
    check(Stack.forward, (m, idx))


def test_shared_parameters_are_one_input():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)
            self.b = nn.Linear(3, 3)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))
    m = Tied()
    r = check(Tied.forward, (m, rand(2, 3)))
    assert len(r.graph_inputs) == 4


def test_module_with_hooks_is_unsupported():
    m = MLP()
    m.fc1.register_forward_hook(lambda *a: None)
    with pytest.raises(Unsupported, match="hooks"):
        do_trace(MLP.forward, m, rand(2, 8))


def test_module_returned_by_source():
    def f(m, x):
        return m, m.fc1(x)
    mod = MLP()
    r = do_trace(f, mod, rand(2, 8))
    assert r.output.items[0] == SourceOutput(LocalSource("m"))


# -- Unsupported --------------------------------------------------------------------------------
def _data_dependent(x):
    if x.sum() > 0:
        return x + 1
    return x - 1


def test_data_dependent_branch_is_unsupported_with_location():
    with pytest.raises(Unsupported) as info:
        do_trace(_data_dependent, rand(3))
    e = info.value
    assert e.filename == __file__
    assert e.lineno == _data_dependent.__code__.co_firstlineno + 1
    # Where bool(tensor) happens: the conditional jump, or on 3.13 the comparison that feeds it
    # (COMPARE_OP's bool-cast bit).
    expected = {(3, 11): "POP_JUMP_FORWARD_IF_FALSE", (3, 12): "POP_JUMP_IF_FALSE",
                (3, 13): "COMPARE_OP >"}[sys.version_info[:2]]
    assert e.instruction == expected


def test_print_is_unsupported():
    def f(x):
        print(x)
        return x
    with pytest.raises(Unsupported, match="print"):
        do_trace(f, rand(2))


@pytest.mark.parametrize("body", [
    lambda x: x.item() + 1,
    lambda x: x.tolist(),
    lambda x: x.numpy(),
    lambda x: int(x.sum()),
    lambda x: x.nonzero(),
    lambda x: [v for v in range(int(x.max()))],
])
def test_data_dependent_values_are_unsupported(body):
    with pytest.raises(Unsupported):
        do_trace(body, rand(3))


def test_side_effects_are_recorded_not_applied():
    """Stores and container mutations become SideEffect specs (replayed by codegen); the trace
    leaves the real objects alone (tests/python/test_side_effects.py runs them end to end)."""
    from torch_jit_cache.trace_result import EffectKind

    class Counter(nn.Module):
        def forward(self, x):
            self.count = 1
            return x + self.count
    m = Counter()
    r = do_trace(Counter.forward, m, rand(2))
    assert [(e.kind, e.name, e.value) for e in r.side_effects] == \
        [(EffectKind.SET_ATTR, "count", ConstantOutput(1))]
    assert "count" not in vars(m)

    def f(xs, x):
        xs.append(x + 1)
        return x
    xs = []
    r = do_trace(f, xs, rand(2))
    assert [e.kind for e in r.side_effects] == [EffectKind.SET_LIST] and xs == []


def test_side_effects_that_cannot_be_replayed_are_unsupported():
    def tensor_attr(x):
        x.requires_grad = True
        return x
    with pytest.raises(Unsupported, match="STORE_ATTR requires_grad"):
        do_trace(tensor_attr, rand(2))

    class P:
        @property
        def v(self):
            return 1

        @v.setter
        def v(self, value):
            pass

    def prop(o, x):
        o.v = 2
        return x
    with pytest.raises(Unsupported, match="data descriptor"):
        do_trace(prop, P(), rand(2))

    def aliased(a, b, x):
        a.append(x)
        return x * len(b)
    shared = []
    with pytest.raises(Unsupported, match="reached again through another source"):
        do_trace(aliased, shared, shared, rand(2))   # one list, two trackers: they would disagree
    r = do_trace(aliased, [], [], rand(2))           # two lists: pinned distinct instead
    assert GuardSpecLike(LocalSource("a"), GuardKind.DISTINCT_FROM) in r.guards


def test_unknown_call_is_unsupported():
    import os

    def f(x):
        return x + len(os.getcwd())
    with pytest.raises(Unsupported):
        do_trace(f, rand(2))


def test_load_source_nested():
    m = MLP()
    frame = ({"self": m, "xs": [1, (2, 3)]}, {"SCALE": SCALE}, builtins.__dict__)
    assert load_source(AttrSource(AttrSource(LocalSource("self"), "fc1"), "weight"),
                       *frame) is m.fc1.weight
    assert load_source(ItemSource(ItemSource(LocalSource("xs"), 1), 0), *frame) == 2
    assert load_source(GlobalSource("SCALE"), *frame) == 3.0


def test_a_graph_whose_generated_code_cannot_reach_a_name_is_unsupported():
    """fx prints a constant it cannot name by its repr: `typing.Any` in a module without `typing`."""
    import typing

    from torch_jit_cache.tracer.output_graph import OutputGraph

    out = OutputGraph({}, builtins.__dict__)
    x = out.add_placeholder(LocalSource("x"), torch.ones(2))
    node = out.create_node("call_function", torch.jit.annotate, (typing.Any, x), {})
    with pytest.raises(Unsupported, match="loads typing, which it cannot reach"):
        out.finish([node])


def test_a_traced_graph_takes_its_generated_source_along_when_it_dies():
    """torch.fx registers each GraphModule's source in linecache and its loader's cache under a new
    name and never drops it; a traced graph's entries go when the graph does. (A GraphModule and its
    Graph point at each other, `graph.owning_module`: torch.fx's own cycle, so the graph dies at the
    collector's next pass, not at its last reference.)"""
    import gc
    import linecache

    from torch.fx.graph_module import _loader

    def f(x):
        return x * 2 + 1

    gc.collect()
    before = (len(linecache.cache), len(_loader.eval_cache))
    for _ in range(20):
        r = do_trace(f, rand(3))
        filename = type(r.graph).forward.__code__.co_filename
        assert filename in _loader.eval_cache
        del r
        gc.collect()
        assert filename not in _loader.eval_cache and filename not in linecache.cache
    assert (len(linecache.cache), len(_loader.eval_cache)) == before


def test_an_fstring_with_conversion_and_spec():
    # 3.11/3.12 decode FORMAT_VALUE with both into SWAP, CONVERT_VALUE, SWAP, FORMAT_WITH_SPEC.
    def f(x, n, s):
        return x * len(f"{n!r:>8}|{s!s:<3}|{n:x}")
    r = check(f, (rand(3), 5, "ab"), (rand(3), 5, "ab"))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, LocalSource("n"))


def test_every_opcode_the_decoder_produces_for_this_module_has_a_handler_or_a_reason():
    """A decoding table that names an op no handler knows (a typo, a new version's opcode) would
    turn into fallbacks silently; every op decoded from this module's functions is either handled
    or in the short list of what the tracer deliberately does not trace."""
    import types as pytypes

    from torch_jit_cache.bytecode.instructions import decode
    from torch_jit_cache.tracer.handlers import DISPATCH

    not_traced = {"RERAISE", "PUSH_EXC_INFO", "POP_EXCEPT", "CHECK_EXC_MATCH",
                  "WITH_EXCEPT_START",
                  "LOAD_ASSERTION_ERROR", "LOAD_BUILD_CLASS",
                  "GET_LEN", "MATCH_CLASS", "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS",
                  "JUMP_IF_NOT_EXC_MATCH", "CLEANUP_THROW", "END_SEND", "SEND",
                  "LOAD_NAME", "STORE_NAME"}   # class bodies
    codes, todo = set(), [v.__code__ for v in globals().values() if isinstance(v, pytypes.FunctionType)]
    while todo:
        code = todo.pop()
        if code in codes:
            continue
        codes.add(code)
        todo += [c for c in code.co_consts if isinstance(c, pytypes.CodeType)]
    ops = {inst.op for code in codes for inst in decode(code).insts}
    assert len(codes) > 100
    assert ops - DISPATCH.keys() - not_traced == set()
    assert not_traced & DISPATCH.keys() == set()
