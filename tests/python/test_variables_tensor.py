"""tracer/variables/torch_objects/tensor.py through the public API: tensor methods, attributes and torch functions.

The contract: every tensor op becomes an fx node, run once on fake example tensors to learn its
result; a result without tensors (x.size(), x.dim(), x.dtype, x.shape) is a constant, legal because
guards pin the input's shape and dtype, so another shape or dtype recompiles; tensor methods that
mutate (add_, copy_) mutate the real input as eager does; an op whose Python result depends on the
data (.item(), .tolist()) is a graph break with a reason, by default. Each case compares with eager
and counts graphs and breaks.
"""
import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import compiled_like_eager  # noqa: E402


def _methods_and_functions(x):
    y = x.view(2, 3).transpose(0, 1).contiguous()
    z = torch.cat([y, y.flip(0)], dim=1).softmax(-1)
    return z.mean(dim=0, keepdim=True), torch.where(x > 0, x, -x), x.T.shape


def _static_properties(x):
    return x * x.dim() + x.numel(), x.dtype, x.shape[0], x.size(-1), x.is_floating_point(), x.ndim


def _dtype_and_device_conversions(x):
    return x.to(torch.float64) * 2, x.long(), x.new_ones(2), torch.zeros_like(x, dtype=torch.int32)


@pytest.mark.parametrize("fn, args", [
    (_methods_and_functions, lambda: (torch.randn(6),)),
    (_static_properties, lambda: (torch.randn(3, 4),)),
    (_dtype_and_device_conversions, lambda: (torch.randn(3),)),
], ids=["methods", "properties", "conversions"])
def test_tensor_ops_are_traced_in_one_graph(fn, args):
    compiled_like_eager(fn, *args())


def test_a_static_property_is_guarded_by_the_inputs_shape_and_dtype():
    def scale_by_width(x):
        return x * x.shape[-1]

    cnt = CompileCounter()
    compiled = tjc.compile(scale_by_width, backend=cnt, dynamic=False)
    for x in (torch.ones(2, 3), torch.ones(2, 5), torch.ones(2, 3, dtype=torch.float64)):
        torch.testing.assert_close(compiled(x), scale_by_width(x))
    assert cnt.frame_count == 3, "each shape and dtype compiled on its own"


def test_in_place_methods_mutate_the_input_as_eager_does():
    def bump(x, y):
        x.add_(1)
        y.copy_(x * 2)
        return x.sum()

    ex, ey, cx, cy = torch.zeros(3), torch.zeros(3), torch.zeros(3), torch.zeros(3)
    expected = bump(ex, ey)
    got = tjc.compile(bump, backend="eager")(cx, cy)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close((cx, cy), (ex, ey))


@pytest.mark.parametrize("read", ["item", "tolist"])
def test_a_data_dependent_python_value_breaks_with_a_reason(read):
    def uses_value(x):
        y = x * 2
        n = getattr(y.sum(), read)()
        return y + n

    x = torch.ones(3)
    compiled_like_eager(uses_value, x, graphs=2, breaks=1)
    (why,) = tjc.explain(uses_value)(x).break_reasons
    assert read in why and "capture_scalar_outputs" in why


def _logs_api_usage(x, p):
    # torchvision's _log_api_usage_once, as stochastic_depth and every model's constructor call it
    torch._C._log_api_usage_once(f"torchvision.ops.{_logs_api_usage.__name__}")
    return x * (1 - p)


def test_api_usage_logging_runs_at_trace_time_without_a_break():
    compiled_like_eager(_logs_api_usage, torch.randn(3), 0.25, graphs=1, breaks=0)


def test_a_torch_call_that_changes_global_state_still_breaks():
    # Only the idempotent API-usage logging runs at trace time; manual_seed must run at call time.
    def seeds(x):
        torch.manual_seed(3)
        return x * 2
    compiled_like_eager(seeds, torch.ones(2), graphs=1, breaks=1)


# -- tensor methods called through the class: torch.Tensor.view(x, 2, -1) ------------------------

def _through_the_class(x, buf):
    y = torch.Tensor.view(x, 2, -1)
    n = torch.Tensor.size(x, 0)
    torch.Tensor.add_(buf, y.sum(0))      # mutates the caller's tensor, as eager does
    return torch.Tensor.mul(y, n) + torch.Tensor.relu(x).sum(), torch.Tensor.dim(x)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_tensor_method_called_through_the_class_is_the_method(backend):
    x, buf = torch.randn(2, 3), torch.zeros(3)
    ex, ebuf = x.clone(), buf.clone()
    expected = _through_the_class(ex, ebuf)
    report = tjc.explain(_through_the_class)(x.clone(), buf.clone())
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])
    got = tjc.compile(_through_the_class, backend=backend)(x, buf)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1]
    torch.testing.assert_close(buf, ebuf)


def test_a_tensor_method_replaced_on_the_class_recompiles():
    def f(x):
        return torch.Tensor.neg(x) + 1

    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    x = torch.randn(3)
    compiled(x)
    original = torch.Tensor.neg
    torch.Tensor.neg = lambda t: t * 10
    try:
        torch.testing.assert_close(compiled(x), f(x))
    finally:
        torch.Tensor.neg = original
    torch.testing.assert_close(compiled(x), f(x))
    assert cnt.frame_count == 2


class _Logged(torch.Tensor):
    """A __torch_function__ subclass that counts the torch calls made on it (as a user's or a
    library's subclass would add behaviour to every op)."""
    calls = 0

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls += 1
        return super().__torch_function__(func, types, args, kwargs or {})


def _scale_shift(x):
    return x * 2 + 1


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_tensor_subclass_input_runs_as_written(backend):
    # A tensor subclass is not a graph input: traced as a plain tensor, the eager backend returned a
    # plain tensor where eager returns the subclass, and aot_eager raised TypeError inside
    # AOTAutograd (the subclass's __torch_function__ met its analysis mode) on the user's call.
    base = torch.randn(3, requires_grad=True)
    x = (base * 1).as_subclass(_Logged)
    _Logged.calls = 0
    want = _scale_shift(x)
    eager_calls = _Logged.calls
    compiled = tjc.compile(_scale_shift, backend=backend)
    _Logged.calls = 0
    got = compiled(x)
    assert type(got) is _Logged and _Logged.calls == eager_calls
    assert torch.equal(got, want) and got.grad_fn is not None
    got.sum().backward()
    assert torch.equal(base.grad, torch.full((3,), 2.0))
    assert tjc.stats()["graphs"] == 0


def _python_types_as_dtypes(x):
    return (x * 5).to(bool).to(float).to(int) + 8, torch.full((2,), 3, dtype=float), x.sum(dtype=complex)


def test_a_python_number_type_where_torch_takes_a_dtype_is_that_dtype_in_the_graph():
    # torch reads bool, int, float and complex as torch.bool, int64, float64 and complex128; the
    # graph's code spells them so (before: FX wrote `<class 'bool'>`, and the frame ran as written).
    from context_helpers import explain_counts
    x = torch.randn(5)
    assert explain_counts(_python_types_as_dtypes, x) == (1, 0, [])
    got, want = tjc.compile(_python_types_as_dtypes, backend="eager")(x), _python_types_as_dtypes(x)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w)


def _unbind_into(x, outs):
    torch.unbind_copy(x * 2, out=outs)


def _split_into(x, outs, scratch):
    torch.split_with_sizes_copy(x, [1, 2], dim=1, out=outs)
    torch.sum(outs[1], dim=1, out=scratch)   # a later op reads what the first one wrote
    return scratch + 1


def test_an_op_given_out_tensors_that_returns_none_writes_them_in_the_graph():
    # unbind_copy / split_with_sizes_copy with out= return None: the node is a side effect the
    # graph keeps (before: a break at each call, "returns None"). Compared with eager, outputs
    # and the out tensors after the call; a second shape recompiles.
    from context_helpers import explain_counts
    x = torch.randn(3, 3)
    assert explain_counts(_unbind_into, x, tuple(torch.zeros(3) for _ in range(3)))[:2] == (1, 0)
    compiled = tjc.compile(_unbind_into, backend="eager")
    for n in (3, 4):
        x = torch.randn(n, n)
        got, want = tuple(torch.zeros(n) for _ in range(n)), tuple(torch.zeros(n) for _ in range(n))
        assert compiled(x, got) is None and _unbind_into(x, want) is None
        for g, w in zip(got, want):
            assert torch.equal(g, w)
    x = torch.randn(2, 3)
    assert explain_counts(_split_into, x, [torch.empty(2, 1), torch.empty(2, 2)], torch.empty(2))[:2] == (1, 0)
    got_outs, want_outs = [torch.empty(2, 1), torch.empty(2, 2)], [torch.empty(2, 1), torch.empty(2, 2)]
    got_s, want_s = torch.empty(2), torch.empty(2)
    got = tjc.compile(_split_into, backend="eager")(x, got_outs, got_s)
    want = _split_into(x, want_outs, want_s)
    assert torch.equal(got, want) and torch.equal(got_s, want_s)
    assert all(torch.equal(g, w) for g, w in zip(got_outs, want_outs))


def _overloads(a, b):
    u = torch.ops.aten.unsqueeze.default(b, 1)
    return torch.ops.aten.mul.Tensor(a, u), torch.ops.aten.add(a, 1)


def test_an_overload_of_an_op_packet_is_a_graph_op():
    # torch.ops.aten.mul.Tensor: before, reading `.Tensor` / `.default` was a graph break.
    from context_helpers import explain_counts
    a, b = torch.randn(2, 3), torch.randn(2)
    assert explain_counts(_overloads, a, b)[:2] == (1, 0)
    got, want = tjc.compile(_overloads, backend="eager")(a, b), _overloads(a, b)
    assert all(torch.equal(g, w) for g, w in zip(got, want))


def _through_data(x, w):
    y = x.data                  # shares x's storage, not its version counter
    loss = (w * x).sum()        # x saved for w's gradient
    y.add_(1)                   # unseen by autograd: backward still runs
    return y * 2, x + 0, loss, y.requires_grad


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_data_is_the_tensor_without_autograd_in_one_graph(backend):
    cnt = CompileCounter()
    compiled = tjc.compile(_through_data, backend=backend if backend != "eager" else cnt)
    for n in (3, 4):
        x, w = torch.randn(n), torch.randn(n, requires_grad=True)
        x2, w2 = x.clone(), w.detach().clone().requires_grad_()
        got, want = compiled(x, w), _through_data(x2, w2)
        for a, b in zip(got, want):
            assert torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b
        assert torch.equal(x, x2)
        got[2].backward()
        want[2].backward()
        assert torch.equal(w.grad, w2.grad)
    assert tjc.explain(_through_data)(torch.randn(3), torch.randn(3, requires_grad=True)).graph_break_count == 0


def test_data_of_an_inference_tensor_is_an_inference_tensor():
    def fn(x):
        return x.data
    with torch.inference_mode():
        x = torch.randn(3)
        got = tjc.compile(fn, backend="eager")(x)
    assert got.is_inference() and torch.equal(got, x)


@pytest.mark.parametrize("masks", [False, True])
def test_attention_layers_in_eval_are_one_graph(masks):
    # compiled as the frame itself, their forward asks torch.nn.functional's mask helpers, which
    # return None without a mask (a value, not an effect), and `query.is_nested` (pinned with the
    # dispatch keys)
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    layer = torch.nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2]) if masks else None
    with torch.no_grad():
        for module, args in ((mha, (x, x, x)), (layer, (x,))):
            kwargs = {"key_padding_mask" if module is mha else "src_key_padding_mask": pad}
            want = module(*args, **kwargs)
            cnt = CompileCounter()
            before = tjc.stats()["graph_breaks"]
            got = tjc.compile(module, backend=cnt)(*args, **kwargs)
            for g, w in zip(*((got, want) if module is mha else ((got,), (want,)))):
                if w is not None:
                    assert g.is_nested == w.is_nested
                    torch.testing.assert_close(g, w)
            assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)


def test_a_tensors_own_iter_and_len_called_by_name_are_iter_and_len():
    def walk(x):
        rows = x.__iter__()
        for row in rows:
            row.mul_(2)
        return row + 1, x.__len__(), x[0].__len__()

    x = torch.randn(3, 2)
    want, copy = walk(x.clone()), x.clone()
    cnt = CompileCounter()
    before = tjc.stats()["graph_breaks"]
    got = tjc.compile(walk, backend=cnt)(copy)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:] and torch.equal(copy, x * 2)
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)
    with pytest.raises(TypeError, match="0-d"):
        tjc.compile(lambda t: t.__len__(), backend=CompileCounter())(torch.tensor(1.0))


_LIB = torch.library.Library("tjc_op_writes", "FRAGMENT")   # noqa: TOR901 - a test's own namespace
_LIB.define("accumulate(Tensor x, Tensor(a!) acc, int scale) -> ()")


@torch.library.impl(_LIB, "accumulate", "CompositeExplicitAutograd")
def _accumulate(x, acc, scale):
    acc.add_(x * scale)


@torch.library.register_fake("tjc_op_writes::accumulate", lib=_LIB)
def _accumulate_fake(x, acc, scale):
    return None


def _custom_and_aten_writes(x, acc, other):
    torch.ops.tjc_op_writes.accumulate(x, acc, 2)                # a packet: its one overload's schema
    torch.ops.tjc_op_writes.accumulate.default(x + 1, acc, 3)    # acc is written: `Tensor(a!)`
    torch.ops.aten.mul_.Tensor(other, 2)                         # result unused: still runs
    return acc.sum() + 1


def test_an_op_whose_schema_writes_an_argument_or_returns_nothing_is_kept_in_the_graph():
    # Before: the custom op's None result was a break ("returns None"). Compared with eager: the
    # result and the written arguments.
    from context_helpers import explain_counts
    assert explain_counts(_custom_and_aten_writes, torch.randn(3), torch.zeros(3), torch.ones(3))[:2] == (1, 0)
    compiled = tjc.compile(_custom_and_aten_writes, backend="eager")
    for _ in range(2):
        x = torch.randn(3)
        got, want = (x, torch.zeros(3), torch.ones(3)), (x.clone(), torch.zeros(3), torch.ones(3))
        torch.testing.assert_close(compiled(*got), _custom_and_aten_writes(*want))
        torch.testing.assert_close(got[1], want[1])
        torch.testing.assert_close(got[2], want[2])
