"""Tests for torch_jit_cache.tracer: trace() a real function, run the graph on inputs loaded from
the frame through the sources, compare with eager, and check the guards the trace relied on; what
it cannot trace raises Unsupported (with its location), side effects are recorded, not applied.
nn.Modules: test_tracer_modules.py."""
import builtins
import math
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from torch_jit_cache.guard.sources import ClosureSource, GlobalSource, ItemSource, LocalSource  # noqa: E402
from torch_jit_cache.guard.trace_result import (ConstantOutput, DictOutput, GuardKind, TupleOutput,  # noqa: E402
                                                Unsupported)

from context_helpers import check_trace, do_trace, guard_kinds, rand, run_compiled  # noqa: E402

SCALE = 3.0
BIAS = torch.randn(4)
FLAG = True


def sets(n, *shapes):
    return [tuple(rand(*s) for s in shapes) for _ in range(n)]


# -- arithmetic, reductions, views --------------------------------------------------------------
def test_arithmetic_and_guards():
    def f(x, y):
        return (x + y) * 2 - x / (y.abs() + 1) + x ** 2 - (-y) @ x.t()[:, :3].t()
    r = check_trace(f, *sets(3, (3, 3), (3, 3)))
    assert GuardKind.TENSOR_MATCH in guard_kinds(r, LocalSource("x"))
    assert GuardKind.TENSOR_MATCH in guard_kinds(r, LocalSource("y"))


def test_floordiv_mod_and_reverse_ops():
    def f(x):
        return 1 - x, 2 / (x.abs() + 1), x // 0.5, x % 0.3, 3 * x
    check_trace(f, *sets(3, (5,)))


def test_reductions():
    def f(x):
        return x.sum(), x.mean(dim=1), x.max(dim=0).values, torch.amax(x, 1, keepdim=True), \
            x.std(0), x.argmax(1)
    check_trace(f, *sets(3, (4, 5)))


def test_views_and_shapes():
    def f(x):
        n = x.size(0)
        y = x.view(n, -1).reshape(n, 2, -1).transpose(1, 2).contiguous()
        return y.permute(2, 0, 1).flatten(1), x.shape, x.dim(), x.unsqueeze(0).squeeze(0)
    r = check_trace(f, *sets(3, (2, 4, 3)))
    assert r.output.items[1] == ConstantOutput(torch.Size([2, 4, 3]))


def test_indexing_and_slicing():
    def f(x):
        return x[0], x[:, 1], x[1:, ::2], x[..., -1], x[None, 0, :2], x[torch.tensor([0, 2])]
    check_trace(f, *sets(3, (3, 4)))


def test_broadcasting():
    def f(x, b):
        return x * b + b.unsqueeze(0)
    check_trace(f, *sets(3, (5, 4), (4,)))


def test_scalar_results_fold_to_constants():
    def f(x):
        return x.numel(), x.shape[-1] * 2, x.dtype, len(x), x.ndim
    r = check_trace(f, *sets(2, (3, 7)))
    assert r.output == TupleOutput(tuple(ConstantOutput(v) for v in (21, 14, torch.float32, 3, 2)))
    assert list(r.graph.graph.nodes)[-1].args == ((),)


def test_torch_functions_and_split():
    def f(x, y):
        a, b = torch.chunk(x, 2, dim=1)
        c = torch.cat([a, b, y], dim=0)
        return torch.stack((a, b)), c, torch.where(x > 0, x, y[:, :2].repeat(1, 2)), \
            F.softmax(c, -1), torch.einsum("ij,kj->ik", x, x)
    check_trace(f, *sets(3, (4, 4), (4, 2)))


def test_math_and_constants():
    def f(x):
        scale = math.sqrt(x.shape[-1])
        return x / scale + math.pi
    check_trace(f, *sets(2, (2, 16)))


def test_comparisons_produce_tensors():
    def f(x, y):
        return x > y, x <= 0.5, (x == y) | (x != 0)
    check_trace(f, *sets(3, (6,), (6,)))


# -- frame values: globals, closures, kwargs, defaults -------------------------------------------
def test_globals_constant_and_tensor():
    def f(x):
        return x * SCALE + BIAS
    r = check_trace(f, *sets(3, (2, 4)))
    assert {GuardKind.EQUALS_MATCH, GuardKind.TYPE_MATCH} <= guard_kinds(r, GlobalSource("SCALE"))
    assert GlobalSource("BIAS") in r.graph_inputs
    assert GuardKind.TENSOR_MATCH in guard_kinds(r, GlobalSource("BIAS"))


def test_global_flag_branch():
    def f(x):
        if FLAG:
            return x + 1
        return x - 1
    r = check_trace(f, *sets(2, (3,)))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, GlobalSource("FLAG"))


def test_closure_cells():
    scale = 2.5
    w = torch.randn(4)

    def f(x):
        return x * scale + w
    r = check_trace(f, *sets(3, (4,)))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, ClosureSource("scale"))
    assert ClosureSource("w") in r.graph_inputs


def test_kwargs_and_defaults():
    def g(x, alpha=2.0, *, beta=1.0, mode="add"):
        if mode == "add":
            return x * alpha + beta
        return x * alpha - beta

    def f(x, y, mode="sub"):
        return g(x, beta=3.0), g(y, 0.5, mode=mode)
    check_trace(f, *sets(3, (3,), (3,)))
    r = do_trace(f, rand(3), rand(3), mode="add")
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, LocalSource("mode"))


def test_star_args_and_kwargs():
    def g(*xs, **kw):
        return sum(xs) * kw["k"]

    def f(a, b):
        args = (a, b)
        return g(*args, k=2), g(a, **{"k": 3})
    check_trace(f, *sets(3, (2,), (2,)))


def test_nested_function_and_lambda_closure():
    def f(x, n):
        k = n + 1

        def inner(y):
            return y * k
        sq = lambda t: t * t  # noqa: E731
        return sq(inner(x))
    check_trace(f, (rand(3), 2), (rand(3), 2))


def test_list_comprehension_and_dict_comprehension():
    def f(xs):
        ys = [x * i for i, x in enumerate(xs)]
        return {f"k{i}": y.sum() for i, y in enumerate(ys)}
    r = check_trace(f, ([rand(2), rand(2), rand(2)],), ([rand(2), rand(2), rand(2)],))
    assert GuardKind.LENGTH in guard_kinds(r, LocalSource("xs"))


# -- containers in and out ------------------------------------------------------------------------
def test_list_tuple_dict_inputs_and_outputs():
    def f(xs, pair, d):
        a, b = pair
        out = [x + 1 for x in xs]
        out.append(a * b)
        return {"sum": d["w"] * sum(out), "items": tuple(out), "n": len(xs), "none": None}
    inputs = ([rand(2), rand(2)], (rand(2), rand(2)), {"w": rand(2), "unused": 3})
    r = check_trace(f, inputs)
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
    r = check_trace(f, ({"a": rand(3), "bb": rand(3)},))
    assert GuardKind.DICT_KEYS in guard_kinds(r, LocalSource("d"))


def test_unpack_ex_and_tuple_ops():
    def f(x):
        a, *rest = x.unbind(0)
        t = (a,) + tuple(rest) * 2
        return t[-1], len(t), [*t[:2], x]
    check_trace(f, *sets(2, (3, 2)))


def test_same_tensor_through_two_sources_is_one_input():
    def f(x, y):
        return x + y
    t = rand(3)
    r = do_trace(f, t, t)
    assert len(r.graph_inputs) == 1
    assert GuardSpecLike(LocalSource("y"), GuardKind.SAME_AS) in r.guards


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
    r = check_trace(Tied.forward, (m, rand(2, 3)))
    assert len(r.graph_inputs) == 4


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
    r = check_trace(f, (rand(2), 3))
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
    r = check_trace(f, (rand(3), 4), (rand(3), 4))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, LocalSource("n"))


def test_zip_min_max_isinstance_getattr():
    def f(xs, ys, x):
        out = [a * b for a, b in zip(xs, ys)]
        k = min(len(xs), 5) + max(2, 3) + abs(-1)
        flag = isinstance(x, torch.Tensor) and not isinstance(k, float)
        return out, k, flag, getattr(x, "shape"), int(2.7), float(k)
    check_trace(f, ([rand(2)] * 2, [rand(2)] * 2, rand(1)))


def test_conditional_expressions_and_none():
    def f(x, mask=None, scale=None):
        if mask is not None:
            x = x.masked_fill(mask, 0.0)
        y = x * (scale if scale is not None else 1.0)
        return y if y.dim() == 2 else y.sum()
    m = torch.rand(2, 3) > 0.5
    check_trace(f, (rand(2, 3), m), (rand(2, 3), ~m))
    check_trace(f, (rand(2, 3), None, 2.0))


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
    from torch_jit_cache.guard.trace_result import EffectKind

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

    class P:   # a __slots__ member deleted: a C descriptor's delete, not replayed
        __slots__ = ("v",)

        def __init__(self):
            self.v = 1

    def slot_delete(o, x):
        del o.v
        return x
    with pytest.raises(Unsupported, match="member_descriptor"):
        do_trace(slot_delete, P(), rand(2))

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
    r = check_trace(f, (rand(3), 5, "ab"), (rand(3), 5, "ab"))
    assert GuardKind.EQUALS_MATCH in guard_kinds(r, LocalSource("n"))


def test_every_opcode_the_decoder_produces_for_this_module_has_a_handler_or_a_reason():
    """A decoding table that names an op no handler knows (a typo, a new version's opcode) would
    turn into fallbacks silently; every op decoded from this module's functions (and from the
    helpers in context_helpers.py) is either handled or in the short list of what the tracer
    deliberately does not trace."""
    import types as pytypes

    import context_helpers
    from torch_jit_cache.bytecode.instructions import decode
    from torch_jit_cache.tracer.handlers import DISPATCH

    not_traced = {"GET_LEN", "MATCH_CLASS", "MATCH_MAPPING", "MATCH_SEQUENCE", "MATCH_KEYS",
                  "JUMP_IF_NOT_EXC_MATCH", "CLEANUP_THROW"}
    # This module's functions, and the helpers that trace and run them (context_helpers.py).
    namespaces = (globals(), vars(context_helpers))
    codes, todo = set(), [v.__code__ for ns in namespaces for v in ns.values() if isinstance(v, pytypes.FunctionType)]
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


@torch.jit.script
def _scripted_cos(x, c: float = 2.0):
    return torch.cos(x) * c


class _CallsScripted(nn.Module):
    def __init__(self):
        super().__init__()
        self.fast_cos = _scripted_cos

    def forward(self, x):
        return self.fast_cos(x) + _scripted_cos(x, 3.0)


@pytest.mark.usefixtures("fresh_caches")   # it reads tjc.stats()
def test_a_torch_callable_its_qualified_name_does_not_reach_is_called_itself():
    # fx writes a callable of a torch module by its qualified name; a ScriptFunction's is the class
    # torch.jit.ScriptFunction, so the graph called the class (TypeError: No constructor defined).
    import torch_jit_cache as tjc

    mod, x = _CallsScripted(), torch.randn(4)
    counter = tjc.testing.CompileCounter()
    torch.testing.assert_close(tjc.compile(mod, backend=counter)(x), mod(x))
    assert counter.frame_count == 1 and tjc.stats()["fallbacks"] == 0
