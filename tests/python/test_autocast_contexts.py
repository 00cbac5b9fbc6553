"""Autocast blocks in traced code: `with torch.autocast("cpu", dtype=...)`, `torch.amp.autocast(...)`,
nested with grad-mode blocks, in inlined calls, and graph breaks inside them. Compared with eager:
values and dtypes of the results, gradients, the autocast state after the call, and the number of
graphs and breaks.

Forward values must be equal; gradients are compared at bfloat16's tolerance: they are sums of
low-precision terms, summed in another order by AOTAutograd's backward, and at a graph break the
autocast weight cache (one cast of a weight per block, in eager) ends with the graph, so the rest
of the block casts the weight again and its gradient is summed in float32 rather than bfloat16.
The values of the casts are the same."""
import contextlib
import io
import traceback
import warnings

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter, CompileCounterWithBackend  # noqa: E402
from context_helpers import assert_break_frees_everything, eager_and_compiled, global_state, leaves  # noqa: E402

pytestmark = pytest.mark.torch


# Gradients within two bfloat16 steps of their largest element: torch caches one low-precision
# copy of each weight per autocast block, and the cache ends with each graph, so after a break a
# weight is cast again and its gradient is summed in float32 instead of bfloat16 (measured over
# 300 random inputs of _break_print: at most 0.0038 of the largest element, one step).
_BF16_GRAD = 2 ** -7


def _run(fn, inputs, **options):
    return eager_and_compiled(fn, inputs, grad_tol=_BF16_GRAD, **options)


class _Recorder(CompileCounter):
    """Counts like CompileCounter and keeps the graphs."""

    def __init__(self):
        super().__init__()
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return super().__call__(gm, example_inputs)


def _call_targets(gm) -> list:
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]












# -- traced without a break ------------------------------------------------------------------------

def _matmul_linear(x, w, b):
    a = x @ w
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        y = x @ w
        z = torch.nn.functional.linear(y, w, b)
        s = z.sum(dim=0)
    return a, y, z, s, z.float() + a


def _amp_default_dtype(x, w, b):
    with torch.amp.autocast("cpu"):
        y = torch.mm(x, w)
    return y, y + b


def _disabled(x, w, b):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=False):
        y = x @ w
    return y, y + b


def _fp16_no_cache(x, w, b):
    with torch.autocast("cpu", dtype=torch.float16, cache_enabled=False):
        y = x @ w
    return y.float() + b


def _nested_in_no_grad(x, w, b):
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
        z = y.float() + b
    return y, z, x @ w


def _no_grad_inside(x, w, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        with torch.no_grad():
            z = y @ w
            with torch.autocast("cpu", enabled=False):
                u = z.float() @ w
        v = y @ w
    return y, z, u, v


def _helper(x, w):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return x @ w


def _inlined(x, w, b):
    y = _helper(x, w)
    return y, y.float() + b, x @ w


@pytest.mark.parametrize("fn", [_matmul_linear, _amp_default_dtype, _disabled, _fp16_no_cache,
                                _nested_in_no_grad, _no_grad_inside, _inlined],
                         ids=lambda f: f.__name__)
def test_autocast_blocks_are_traced_into_one_graph(fn):
    assert _run(fn, leaves((4, 4), (4, 4), (4,))) == (1, 0)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backends_see_the_autocast_block(backend):
    assert _run(_matmul_linear, leaves((4, 4), (4, 4), (4,)), backend=backend) == (1, 0)


def test_graph_records_enter_and_exit_nodes():
    cnt = _Recorder()
    tjc.compile(_matmul_linear, backend=cnt)(*leaves((4, 4), (4, 4), (4,)))
    (gm,) = cnt.graphs
    targets = _call_targets(gm)
    enter, exit_ = torch.amp.autocast_mode._enter_autocast, torch.amp.autocast_mode._exit_autocast
    assert targets.count(enter) == 1 and targets.count(exit_) == 1
    assert targets.index(enter) == 1   # after the first matmul, before the block's first op
    assert targets.index(exit_) == targets.index(enter) + 3   # after the linear (sum: a method)


def test_graph_exits_the_block_when_the_frame_returns_inside_it():
    cnt = _Recorder()
    tjc.compile(_inlined, backend=cnt)(*leaves((4, 4), (4, 4), (4,)))
    (gm,) = cnt.graphs
    targets = _call_targets(gm)
    assert targets.count(torch.amp.autocast_mode._exit_autocast) == 1


def test_an_outer_autocast_is_a_different_entry():
    x, w, b = leaves((4, 4), (4, 4), (4,))
    cnt = CompileCounter()
    compiled = tjc.compile(_disabled, backend=cnt)
    compiled(x, w, b)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got, expected = compiled(x, w, b), _disabled(x, w, b)
    assert [t.dtype for t in got] == [t.dtype for t in expected]
    assert cnt.frame_count == 2   # the GLOBAL_STATE guard pins autocast_cpu


# -- refused: the frame falls back --------------------------------------------------------------

def _cuda(x, w):
    with torch.autocast("cuda"):
        return x @ w


def _dtype_from_tensor(x, w):
    with torch.autocast("cpu", dtype=x.dtype):   # float32 on CPU: eager warns and disables it
        return x @ w


def _as_decorator(x, w):
    return torch.autocast("cpu")(torch.mm)(x, w)


_NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is here: autocast('cuda') is traced")


@pytest.mark.parametrize("fn", [pytest.param(_cuda, marks=_NO_CUDA), _dtype_from_tensor, _as_decorator],
                         ids=lambda f: f.__name__)
def test_refused_autocast_falls_back_like_eager(fn):
    x, w = leaves((3, 3), (3, 3))
    state = global_state()
    with warnings.catch_warnings(record=True) as eager_warnings:
        warnings.simplefilter("always")
        expected = fn(x, w)
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    for _ in range(2):
        with warnings.catch_warnings(record=True) as got_warnings:
            warnings.simplefilter("always")
            got = compiled(x, w)
        assert [str(w.message) for w in got_warnings] == [str(w.message) for w in eager_warnings]
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)
        assert global_state() == state
    assert cnt.frame_count == 0


def test_cpu_amp_autocast_is_refused_by_name():
    def fn(x):
        with torch.cpu.amp.autocast():
            return x @ x

    x = torch.randn(3, 3)
    cnt = CompileCounter()
    with pytest.warns(FutureWarning):
        got = tjc.compile(fn, backend=cnt)(x)
    assert got.dtype == torch.bfloat16 and cnt.frame_count == 0


def test_trace_failing_inside_the_block_leaves_autocast_as_it_was():
    def fn(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            try:                       # a break inside a try block: the whole frame falls back
                print("inside")
                z = y * 2
            except ValueError:
                z = y
        return z

    x, w = leaves((3, 3), (3, 3))
    state = global_state()
    cnt = CompileCounter()
    with contextlib.redirect_stdout(io.StringIO()):
        got = tjc.compile(fn, backend=cnt)(x, w)
    assert global_state() == state and got.dtype == torch.bfloat16
    # a trace that fails while the real autocast is entered (an unsupported construct in the block)
    assert _run(fn, [x, w], grad=False)[0] == 0
    assert global_state() == state


# -- graph breaks inside a block -------------------------------------------------------------------

_STATES: list = []


class _Probe:
    """Printed at a graph break: records the autocast and grad state the print runs in."""

    def __str__(self):
        _STATES.append(global_state())
        return "probe"


_PROBE = _Probe()


def _record_state():
    print(_PROBE, end="")   # print is a graph break; the probe records the state it runs in


def _break_print(x, w, b):
    a = x @ w
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = a @ w
        print("inside", y.dtype, _PROBE)
        z = torch.nn.functional.linear(y, w, b)
    return a, y, z, z.float() + a


def _break_item(x, w, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        v = y.sum().item()
        _record_state()
        z = (x * v) @ w
    return y, z


def _break_nested(x, w, b):
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = x @ w
            with torch.autocast("cpu", dtype=torch.float16, cache_enabled=False):
                _record_state()
                z = y @ w
            u = z @ w
        v = u.float() + b
    return y, z, u, v, x @ w


def _break_in_grad_inside(x, w, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = x @ w
        with torch.no_grad():
            _record_state()
            z = y @ w
        u = y @ w
    return y, z, u


def _break_in_helper(x, w, b):
    with torch.amp.autocast(device_type="cpu", dtype=torch.bfloat16):
        y = _helper_that_breaks(x @ w)
    return y, y.float() @ w


def _helper_that_breaks(a):
    _record_state()
    return a @ a


@pytest.mark.parametrize("fn, graphs, breaks", [(_break_print, 2, 1), (_break_item, 2, 2),
                                                (_break_nested, 2, 1), (_break_in_grad_inside, 2, 1),
                                                (_break_in_helper, 2, 1)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_break_inside_a_block_runs_the_instruction_in_the_blocks_state(fn, graphs, breaks):
    _STATES.clear()
    assert _run(fn, leaves((4, 4), (4, 4), (4,))) == (graphs, breaks)
    # the unsupported instruction ran in the block's state in every call, as in eager
    n = len(_STATES) // 3
    assert n > 0 and _STATES == _STATES[:n] * 3
    assert any(s[1] for s in _STATES)   # global_state()[1]: autocast on, in some break


def test_break_code_enters_the_block_and_the_resume_function_again():
    cnt = _Recorder()
    compiled = tjc.compile(_break_print, backend=cnt)
    with contextlib.redirect_stdout(io.StringIO()):
        compiled(*leaves((4, 4), (4, 4), (4,)))
    (entry,) = tjc.cache_entries(compiled)
    (resume,) = [c for c in entry.code.co_consts if isinstance(c, type(_break_print))]
    enters = [c for c in resume.__code__.co_consts if getattr(c, "func", None) is torch.autocast]
    assert [(e.args, e.keywords) for e in enters] == [(("cpu", torch.bfloat16, True, None), {})]
    # both graphs start and end outside the block
    for gm in cnt.graphs:
        targets = _call_targets(gm)
        assert targets.count(torch.amp.autocast_mode._enter_autocast) == 1
        assert targets.count(torch.amp.autocast_mode._exit_autocast) == 1


def test_exception_at_the_break_leaves_autocast_as_eager_does():
    def fn(x):
        y = x + 1
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = y @ y
            int("not a number")
        return y

    state = global_state()
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        with pytest.raises(ValueError) as info:
            compiled(torch.randn(2, 2))
        assert global_state() == state
        lines = [f.lineno for f in traceback.extract_tb(info.value.__traceback__)]
        assert fn.__code__.co_firstlineno + 4 in lines


def test_resume_function_and_arguments_die_with_the_compiled_function(no_gc):
    def fn(x, w):
        a = x @ w
        with torch.autocast("cpu", dtype=torch.bfloat16):
            b = a @ w
            print("inside")
            c = b @ w
        return a, c

    assert_break_frees_everything(fn, leaves((4, 4), (4, 4)))


# -- CUDA autocast -------------------------------------------------------------------------------

def _rotary(x, w):
    """HF's rotary embeddings: autocast turned off for the device the tensors are on, which is
    "cuda" on a GPU; CPU tensors are untouched by it."""
    with torch.autocast(device_type="cuda", enabled=False):
        y = (x.float() @ w.float()).cos()
    return y * 2


def test_a_disabled_cuda_autocast_block_is_traced_whole():
    x, w = leaves((3, 3), (3, 3))
    cnt = CompileCounter()
    state = global_state()
    compiled = tjc.compile(_rotary, backend=cnt)
    torch.testing.assert_close(compiled(x, w), _rotary(x, w))
    assert global_state() == state
    report = tjc.explain(_rotary)(x, w)
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])
    assert cnt.frame_count == 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA: autocast('cuda') disables itself without it")
def test_cuda_autocast_on_cuda_tensors_is_traced_with_eagers_dtypes():
    def fn(x, w):
        with torch.autocast("cuda", dtype=torch.float16):
            y = x @ w
        return y, y.float().relu()

    x, w = torch.randn(8, 8, device="cuda"), torch.randn(8, 8, device="cuda")
    expected = fn(x, w)
    for backend in ("eager", "aot_eager"):
        got = tjc.compile(fn, backend=backend)(x, w)
        assert [t.dtype for t in got] == [t.dtype for t in expected] == [torch.float16, torch.float32]
        torch.testing.assert_close(got, expected)
    report = tjc.explain(fn)(x, w)
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])
