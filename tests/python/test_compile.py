"""compile() on functions end to end: results equal eager and compile once, kwargs and in-place
updates, recompiles on a changed global, tensor or grad mode, augmented assignment and names in the
generated code, tuple subclasses, aliased inputs, methods. Modules: test_compile_modules.py;
arguments, config, log and stats: test_compile_options.py."""
import math
from typing import Any

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import rand, same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]

SCALE = 2.0
OFFSET = 1


def check(fn, *input_sets, compiles=1):
    """Compiled fn equals eager fn on every input set; `compiles` graphs were made."""
    cnt = CompileCounter()
    opt = tjc.compile(fn, backend=cnt)
    for args in input_sets:
        expected = fn(*args)
        got = opt(*args)
        assert same(expected, got), (fn.__name__, expected, got)
    assert cnt.frame_count == compiles, (fn.__name__, cnt.frame_count)
    return cnt


# --- functions: each compiled once, then served from the cache ---

def f_arith(x, y):
    return x * y + x - y / 2


def f_pow_neg(x):
    return -(x ** 2) + abs(x)


def f_reductions(x):
    return x.sum(), x.mean(dim=1), x.max(), torch.amax(x, dim=0)


def f_views(x):
    return x.view(4, 2).t().reshape(-1), x.transpose(0, 1).contiguous()


def f_index(x):
    return x[0], x[:, 1], x[1:3, ::2], x[..., -1]


def f_broadcast(x, b):
    return x + b, x * b[None, :]


def f_matmul(a, b):
    return a @ b, torch.mm(a, b).relu()


def f_shape_math(x):
    n = x.shape[0] * x.size(1)
    return x.reshape(n) * x.dim()


def f_globals(x):
    return x * SCALE + OFFSET


def f_math_module(x):
    return x * math.sqrt(4.0) + math.pi


def f_kwargs(x, y=None, *, scale=3.0):
    if y is None:
        return x * scale
    return x * y * scale


def f_defaults(x, alpha=0.5):
    return x * alpha


def f_tuple_out(x):
    return (x + 1, (x * 2, [x - 1, 3]), {"a": x, "b": "text"})


def f_list_in(xs):
    total = xs[0]
    for t in xs[1:]:
        total = total + t
    return total


def f_dict_in(d):
    return d["a"] * d["b"]


def f_loop_range(x):
    for i in range(3):
        x = x * (i + 1)
    return x


def f_while(x):
    i = 0
    while i < 3:
        x = x + i
        i += 1
    return x


def f_enumerate_zip(xs, ys):
    out = []
    for i, (a, b) in enumerate(zip(xs, ys)):
        out.append(a * b + i)
    return out


def f_branch_on_const(x, flag):
    if flag:
        return x.relu()
    return x.sigmoid()


def f_isinstance(x, n):
    if isinstance(n, int):
        return x + n
    return x


def f_functional(x):
    return F.softmax(x, dim=-1), F.gelu(x), F.layer_norm(x, (x.shape[-1],))


def f_torch_fns(x):
    return torch.cat([x, x], dim=0), torch.stack([x, x]), torch.where(x > 0, x, torch.zeros_like(x))


def f_inplace(x):
    x.add_(1)
    x.mul_(2)
    return x


def f_masked(x):
    mask = x > 0
    return x.masked_fill(mask, 0.0)


def helper(a, b):
    return a * b + 1


def f_calls_helper(x):
    return helper(x, x) + helper(x, 2)


def make_closure(k):
    scale = torch.tensor(k)

    def inner(x):
        return x * scale + k
    return inner


f_closure = make_closure(3.0)


def f_min_max_len(x, xs):
    return x * min(len(xs), 3) + max(xs)


def f_floor_mod(x):
    return x // 2, x % 3


def f_comparisons(x):
    return (x > 0).float() + (x == 0).float() - (x <= -1).float()


def f_unpack(xs):
    a, b, *rest = xs
    return a * b, len(rest)


def f_nested_fn_and_lambda(x):
    def double(t):
        return t * 2

    triple = lambda t: t * 3  # noqa: E731
    return double(x) + triple(x)


def f_comprehension(xs):
    return [t * 2 for t in xs if t.dim() == 1]


def f_dict_items(d):
    out = {}
    for k, v in d.items():
        out[k] = v.sum()
    return out


def f_chunk(x):
    a, b = torch.chunk(x, 2, dim=0)
    return a - b, torch.split(x, 1)


def f_unary_chain(x):
    return x.exp().log1p().tanh().clamp(-0.5, 0.5)


def f_casts(x):
    return x.to(torch.float64) * 2, x.int(), x.float().mean()


def f_factories(x):
    return torch.zeros(x.shape) + x, torch.ones_like(x) * 3, torch.arange(4) * 2


def f_star_args(*xs):
    total = xs[0]
    for t in xs[1:]:
        total = total * t
    return total


def f_kwargs_dict(x, **kw):
    return x * kw["a"] + kw["b"]


def call_kwargs_dict(x):
    return f_kwargs_dict(x, a=2.0, b=1)


FUNCTION_CASES = [
    (f_floor_mod, lambda: [(rand(4),), (rand(4),)]),
    (f_comparisons, lambda: [(rand(5),), (rand(5),)]),
    (f_unpack, lambda: [([rand(2), rand(2), rand(2), rand(2)],), ([rand(2), rand(2), rand(2), rand(2)],)]),
    (f_nested_fn_and_lambda, lambda: [(rand(3),), (rand(3),)]),
    (f_comprehension, lambda: [([rand(2), rand(2, 2), rand(3)],), ([rand(2), rand(2, 2), rand(3)],)]),
    (f_dict_items, lambda: [({"a": rand(2), "b": rand(3)},), ({"a": rand(2), "b": rand(3)},)]),
    (f_chunk, lambda: [(rand(2, 3),), (rand(2, 3),)]),
    (f_unary_chain, lambda: [(rand(6),), (rand(6),)]),
    (f_casts, lambda: [(rand(3),), (rand(3),)]),
    (f_factories, lambda: [(rand(4),), (rand(4),)]),
    (f_star_args, lambda: [(rand(2), rand(2), rand(2)), (rand(2), rand(2), rand(2))]),
    (call_kwargs_dict, lambda: [(rand(2),), (rand(2),)]),
    (f_arith, lambda: [(rand(3, 4), rand(3, 4)), (rand(3, 4), rand(3, 4))]),
    (f_pow_neg, lambda: [(rand(5),), (rand(5),)]),
    (f_reductions, lambda: [(rand(3, 4),), (rand(3, 4),)]),
    (f_views, lambda: [(rand(2, 4),), (rand(2, 4),)]),
    (f_index, lambda: [(rand(4, 4),), (rand(4, 4),)]),
    (f_broadcast, lambda: [(rand(3, 4), rand(4)), (rand(3, 4), rand(4))]),
    (f_matmul, lambda: [(rand(3, 4), rand(4, 5)), (rand(3, 4), rand(4, 5))]),
    (f_shape_math, lambda: [(rand(2, 3),), (rand(2, 3),)]),
    (f_globals, lambda: [(rand(3),), (rand(3),)]),
    (f_math_module, lambda: [(rand(3),), (rand(3),)]),
    (f_defaults, lambda: [(rand(3),), (rand(3),)]),
    (f_tuple_out, lambda: [(rand(2),), (rand(2),)]),
    (f_list_in, lambda: [([rand(2), rand(2), rand(2)],), ([rand(2), rand(2), rand(2)],)]),
    (f_dict_in, lambda: [({"a": rand(2), "b": rand(2)},), ({"a": rand(2), "b": rand(2)},)]),
    (f_loop_range, lambda: [(rand(3),), (rand(3),)]),
    (f_while, lambda: [(rand(3),), (rand(3),)]),
    (f_enumerate_zip, lambda: [([rand(2), rand(2)], [rand(2), rand(2)]), ([rand(2), rand(2)], [rand(2), rand(2)])]),
    (f_branch_on_const, lambda: [(rand(3), True), (rand(3), True)]),
    (f_isinstance, lambda: [(rand(3), 2), (rand(3), 2)]),
    (f_functional, lambda: [(rand(2, 5),), (rand(2, 5),)]),
    (f_torch_fns, lambda: [(rand(3),), (rand(3),)]),
    (f_masked, lambda: [(rand(4),), (rand(4),)]),
    (f_calls_helper, lambda: [(rand(3),), (rand(3),)]),
    (f_closure, lambda: [(rand(3),), (rand(3),)]),
    (f_min_max_len, lambda: [(rand(2), [1, 5, 2]), (rand(2), [1, 5, 2])]),
]


@pytest.mark.parametrize("fn, inputs", FUNCTION_CASES, ids=[c[0].__name__ for c in FUNCTION_CASES])
def test_function_matches_eager_and_compiles_once(fn, inputs):
    check(fn, *inputs())


def test_kwargs_variants_each_compile_once():
    x = rand(3)
    cnt = CompileCounter()
    opt = tjc.compile(f_kwargs, backend=cnt)
    assert same(opt(x), f_kwargs(x))
    assert same(opt(x, scale=2.0), f_kwargs(x, scale=2.0))
    y = rand(3)
    assert same(opt(x, y), f_kwargs(x, y))
    assert cnt.frame_count == 3, "y=None, scale=2.0 and y given are three specializations"


def test_inplace_update_of_an_input():
    a = rand(4)
    b = a.clone()
    cnt = CompileCounter()
    out = tjc.compile(f_inplace, backend=cnt)(a)
    f_inplace(b)
    assert same(a, b), "the input was updated in place"
    assert same(out, b)
    assert cnt.frame_count == 1


# --- recompiles: each change gives a fresh correct result and exactly one more compile ---

def test_recompile_on_global_change():
    global SCALE
    cnt = CompileCounter()
    opt = tjc.compile(f_globals, backend=cnt)
    x = rand(3)
    assert same(opt(x), x * SCALE + OFFSET)
    old = SCALE
    try:
        SCALE = 5.0
        assert same(opt(x), x * 5.0 + OFFSET)
    finally:
        SCALE = old
    assert cnt.frame_count == 2


@pytest.mark.parametrize("change", ["shape", "dtype", "requires_grad", "grad_mode"])
def test_recompile_on_tensor_and_state_changes(change):
    def f(x):
        return x * 2 + 1

    cnt = CompileCounter()
    opt = tjc.compile(f, backend=cnt)
    x = rand(3)
    assert same(opt(x), f(x))
    if change == "shape":
        y = rand(5)
    elif change == "dtype":
        y = rand(3).double()
    elif change == "requires_grad":
        y = rand(3).requires_grad_()
    else:
        y = rand(3)
    if change == "grad_mode":
        with torch.no_grad():
            assert same(opt(y), f(y))
    else:
        assert same(opt(y), f(y))
    assert opt(x) is not None
    assert cnt.frame_count == 2, change


def f_iadd_on_int(t):
    b = 0
    b += t
    return b


def f_imul_on_float(t):
    b = 1.0
    b *= t
    return b


def f_accumulate(ts):
    acc = 0
    for t in ts:
        acc = acc + t
    total = 0
    for t in ts:
        total += t
    n = 3
    n -= 1      # an int stays an int, folded in Python
    return acc, total * n


def f_augmented_on_other_immutables(t):
    s = (t,)
    alias = s
    s += (t * 2,)           # a new tuple: alias still has one item
    name = "x"
    name += "y"
    return s, alias, name


def f_list_imul_aliases(t):
    xs = [t]
    alias = xs
    xs *= 2                 # in place: alias sees both items
    return alias


@pytest.mark.parametrize("fn,args", [
    (f_iadd_on_int, (rand(3),)), (f_imul_on_float, (rand(3),)), (f_accumulate, ([rand(2), rand(2), rand(2)],)),
    (f_augmented_on_other_immutables, (rand(2),)), (f_list_imul_aliases, (rand(2),))])
def test_augmented_assignment_on_immutable_values_traces_out_of_place(fn, args):
    """`b = 0; b += t` rebinds b to `0 + t` (ints have no __iadd__). Traced as operator.iadd with
    the literal 0, the graph's generated Python was `0 += t`, a SyntaxError in the user's call."""
    import operator
    targets = []

    def recording(gm, example_inputs):
        # An in-place operator may only update a tensor (a node), never a literal.
        targets.extend(n.target for n in gm.graph.nodes if not isinstance(n.args[0:1] and n.args[0], torch.fx.Node))
        return gm.forward

    opt = tjc.compile(fn, backend=recording, fullgraph=True)
    assert same(fn(*args), opt(*args))
    assert same(fn(*args), opt(*args))
    assert len(tjc.cache_entries(fn)) == 1
    assert not set(targets) & {operator.iadd, operator.imul}, targets  # on a non-tensor


def f_jit_annotate(x):
    y = torch.jit.annotate(Any, x)          # `typing` itself is not a global of this module
    return y * 2 + 1


def test_names_in_generated_code_are_reachable_from_the_frame():
    """torch.jit.annotate(Any, x) put a node with the constant typing.Any in the graph; fx printed
    it as `typing.Any`, and the generated forward raised NameError in the user's call."""
    assert "typing" not in globals()
    x = rand(3)
    assert same(tjc.compile(f_jit_annotate, fullgraph=True)(x), f_jit_annotate(x))


def test_a_source_the_frame_cannot_reach_falls_back_instead_of_raising(caplog):
    """Every load and guard must start from the frame; a trace whose output names a global the
    function's module lacks (here: injected) runs uncompiled rather than raising NameError."""
    from torch_jit_cache import tracer
    from torch_jit_cache.guard.sources import GlobalSource
    from torch_jit_cache.guard.trace_result import SourceOutput, TupleOutput

    real = tracer.trace

    def trace_with_a_stray_global(*args, **kwargs):
        result = real(*args, **kwargs)
        result.output = TupleOutput((result.output, SourceOutput(GlobalSource("typing"))))
        return result

    def f(x):
        return x + 1

    x = rand(3)
    tjc.reset()   # pytest --refleaks repeats the body: f's code must miss again
    with pytest.MonkeyPatch.context() as mp, caplog.at_level("WARNING", logger="torch_jit_cache"):
        mp.setattr(tracer, "trace", trace_with_a_stray_global)
        assert same(tjc.compile(f)(x), x + 1)
    assert any("G['typing']: 'typing' is not a global" in rec.getMessage() for rec in caplog.records)


def test_one_tensor_passed_twice_is_one_input_and_guarded():
    def f(a, b):
        a.add_(1)
        return a + b

    cnt = CompileCounter()
    opt = tjc.compile(f, backend=cnt)
    t = torch.zeros(3)
    assert same(opt(t, t), torch.full((3,), 2.0)), "b sees a's in-place update"
    u, v = torch.zeros(3), torch.zeros(3)
    assert same(opt(u, v), torch.ones(3)), "two distinct tensors must not reuse the aliased graph"
    assert cnt.frame_count == 2


def test_compiled_methods_and_bound_methods():
    class Scaler:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x * self.k + 1

    s = Scaler(3.0)
    cnt = CompileCounter()
    bound = tjc.compile(s.apply, backend=cnt)
    x = rand(3)
    assert same(bound(x), s.apply(x)) and same(bound(x), s.apply(x))

    class WithCompiled:
        k = 2.0

        @tjc.compile
        def apply(self, x):
            return x * self.k

    w = WithCompiled()
    assert same(w.apply(x), x * 2.0)
    assert cnt.frame_count == 1
    s.k = 5.0
    assert same(bound(x), x * 5.0 + 1), "an attribute change of a plain object recompiles"
    assert cnt.frame_count == 2
    other = Scaler(5.0)
    assert same(tjc.compile(other.apply, backend=cnt)(x), x * 5.0 + 1)
    assert cnt.frame_count == 3, "another compile() call owns its own cache"
    unbound = tjc.compile(Scaler.apply, backend=cnt)
    assert same(unbound(s, x), x * 5.0 + 1) and same(unbound(other, x), x * 5.0 + 1)
    assert cnt.frame_count == 4, "within one compile(), another instance with the same values hits the same entry"


# --- tuple subclasses come back as the class eager returns --------------------------------------
Pair = __import__("collections").namedtuple("Pair", "first second")


def f_tuple_subclasses(x, pair):
    return x.max(dim=1), x.shape, x.size(), pair, x.sort(dim=0)


def test_tuple_subclasses_are_rebuilt_as_their_class():
    """torch.return_types.max, torch.Size and a namedtuple argument come back as those classes,
    not as plain tuples (`.values`, `.indices` work as in eager)."""
    args = (rand(3, 4), Pair(1, rand(2)))
    check(f_tuple_subclasses, args, (rand(3, 4), args[1]))
    got = tjc.compile(f_tuple_subclasses)(*args)
    assert torch.equal(got[0].values, args[0].max(dim=1).values)
    assert got[4].indices.shape == (3, 4)
