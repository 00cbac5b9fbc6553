"""Grad-mode context managers in traced code: `with torch.no_grad()`,
`torch.enable_grad()`, `torch.set_grad_enabled(flag)`, methods decorated with `@torch.no_grad()`,
and graph breaks inside such blocks. Compared with eager: values, `requires_grad` of the results,
gradients, `torch.is_grad_enabled()` after the call, and the number of graphs and breaks."""
import contextlib
import io
import threading
import traceback

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter, CompileCounterWithBackend  # noqa: E402
from context_helpers import assert_break_frees_everything, eager_and_compiled, leaves  # noqa: E402

pytestmark = pytest.mark.torch










# -- traced without a break ------------------------------------------------------------------------

def _no_grad_root(x, w):
    a = x * w
    with torch.no_grad():
        b = a * 3
        c = b.sin()
    return a + c, b, c


def _nested(x, w):
    with torch.no_grad():
        a = x * w
        with torch.enable_grad():
            b = (x * w).cos()
        c = b * 2
    return a, b, c + x


def _set_grad_enabled(x, w, flag):
    with torch.set_grad_enabled(flag):
        a = x * w
    return a, a.requires_grad, x + a


def _helper(x, w):
    with torch.no_grad():
        return (x * w).exp()


def _inlined(x, w):
    y = _helper(x, w)
    return x * y + w


def _reads_mode(x):
    with torch.no_grad():
        inside = torch.is_grad_enabled()
        y = x * 2
    return y, inside, y.requires_grad


@pytest.mark.parametrize("fn", [_no_grad_root, _nested, _inlined], ids=lambda f: f.__name__)
def test_grad_blocks_are_traced_into_one_graph(fn):
    assert eager_and_compiled(fn, leaves((4,), (4,))) == (1, 0)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_backends_see_the_grad_mode_switch(backend):
    assert eager_and_compiled(_nested, leaves((3, 4), (4,)), backend=backend) == (1, 0)
    assert eager_and_compiled(_no_grad_root, leaves((3, 4), (4,)), backend=backend) == (1, 0)


def test_graph_records_the_switch_and_restores_the_mode():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    x, w = leaves((4,), (4,))
    tjc.compile(_no_grad_root, backend=backend)(x, w)
    (gm,) = graphs
    switches = [n.args for n in gm.graph.nodes if n.target is torch._C._set_grad_enabled]
    assert switches == [(False,), (True,)]


def test_set_grad_enabled_with_a_guarded_flag():
    cnt = CompileCounter()
    compiled = tjc.compile(_set_grad_enabled, backend=cnt)
    x, w = leaves((4,), (4,))
    for flag in (False, True, False, True):
        out = compiled(x, w, flag)
        assert out[1] is flag and out[0].requires_grad is flag
        assert torch.is_grad_enabled()
    assert cnt.frame_count == 2
    assert eager_and_compiled(_set_grad_enabled, [x, w, False], grad=False) == (1, 0)


def test_is_grad_enabled_inside_the_block_is_the_blocks_mode():
    x = torch.randn(3, requires_grad=True)
    out = tjc.compile(_reads_mode, backend="eager")(x)
    assert out[1:] == (False, False)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    @torch.no_grad()
    def stats(self, x):
        return self.lin(x).mean(0)

    def forward(self, x):
        return self.lin(x).relu() * self.stats(x)


def test_method_decorated_with_no_grad_is_inlined_under_the_mode():
    m = _Net()
    x = torch.randn(2, 4)
    cnt = CompileCounter()
    compiled = tjc.compile(m, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    expected = m(x)
    got = compiled(x)
    torch.testing.assert_close(got, expected)
    expected.sum().backward()
    grads = [p.grad.clone() for p in m.parameters()]
    m.zero_grad()
    compiled(x).sum().backward()
    for p, g in zip(m.parameters(), grads):
        torch.testing.assert_close(p.grad, g)
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)


# -- graph breaks inside a block ---------------------------------------------------------------------

_MODES: list = []


class _Probe:
    """Printed at a graph break: records the grad mode the print runs in."""

    def __str__(self):
        _MODES.append(torch.is_grad_enabled())
        return "probe"


_PROBE = _Probe()


def _record_mode():
    print(_PROBE, end="")   # print is a graph break; the probe records the mode it runs in


def _break_print(x, w):
    a = x * w
    with torch.no_grad():
        b = a * 2
        print("inside", b.shape, _PROBE)
        c = b + a
    return a * c, c


def _break_item(x, w):
    with torch.no_grad():
        b = (x * w).sum()
        v = b.item()
        _record_mode()
        c = x * v
    return c, x * w


def _break_nested(x, w):
    with torch.no_grad():
        a = x * w
        with torch.enable_grad():
            b = x * w
            _record_mode()
            c = b * 2
        d = c + a
    return a, b, c, d


def _break_in_helper(x, w):
    with torch.no_grad():
        a = x * w
        b = _helper_that_breaks(a)
    return a, b * w


def _helper_that_breaks(a):
    _record_mode()
    return a + 1


def _break_on_a_tensor(x, w):
    with torch.no_grad():
        y = x * w
        if y.sum() > -100:   # a jump on a tensor: two resume functions, each entering the block
            z = y + 1
        else:
            z = y - 1
        _record_mode()
    return z, x * w


@pytest.mark.parametrize("fn, graphs, breaks", [(_break_print, 2, 1), (_break_nested, 2, 1),
                                                (_break_on_a_tensor, 3, 2),
                                                (_break_in_helper, 2, 1), (_break_item, 2, 2)],
                         ids=lambda v: getattr(v, "__name__", str(v)))
def test_break_inside_a_block_runs_the_instruction_in_the_blocks_mode(fn, graphs, breaks):
    _MODES.clear()
    assert eager_and_compiled(fn, leaves((4,), (4,))) == (graphs, breaks)
    # the unsupported instruction ran in the block's mode in every call, as in eager
    n = len(_MODES) // 3
    assert n > 0 and _MODES == _MODES[:n] * 3


def test_break_inside_a_block_under_an_outer_no_grad_and_then_with_grad():
    x, w = leaves((4,), (4,))
    cnt = CompileCounter()
    compiled = tjc.compile(_break_print, backend=cnt)
    with contextlib.redirect_stdout(io.StringIO()):
        with torch.no_grad():
            a, c = compiled(x, w)
            assert torch.is_grad_enabled() is False
        assert (a.requires_grad, c.requires_grad) == (False, False)
        a, c = compiled(x, w)
        assert torch.is_grad_enabled() is True
        assert (a.requires_grad, c.requires_grad) == (True, False)
        with torch.no_grad():
            compiled(x, w)
        compiled(x, w)
    assert cnt.frame_count == 4   # entry + resume function, per grad mode


def test_exception_at_the_break_leaves_the_mode_as_eager_does():
    def fn(x):
        y = x + 1
        with torch.no_grad():
            y = y * 2
            int("not a number")
        return y

    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        with pytest.raises(ValueError) as info:
            compiled(torch.randn(2))
        assert torch.is_grad_enabled()
        lines = [f.lineno for f in traceback.extract_tb(info.value.__traceback__)]
        assert fn.__code__.co_firstlineno + 4 in lines


def test_break_inside_a_with_block_inside_try_falls_back():
    def fn(x):
        y = x + 1
        try:
            with torch.no_grad():
                print("inside")
        except ValueError:
            pass
        return y * 2

    before = tjc.stats()
    assert eager_and_compiled(fn, leaves((3,))) == (0, 0)
    assert tjc.stats()["fallbacks"] > before["fallbacks"]


_LOCK = threading.Lock()


def test_unknown_context_manager_falls_back():
    # A context manager written in C (nullcontext and other Python ones are traced:
    # test_variables_contexts.py).
    def fn(x):
        with _LOCK:
            y = x + 1
        return y * 2

    before = tjc.stats()
    assert eager_and_compiled(fn, leaves((3,)))[0] == 0
    assert tjc.stats()["fallbacks"] > before["fallbacks"]


def test_set_grad_enabled_outside_a_with_block_is_traced():
    def fn(x):
        y = x * 2
        torch.set_grad_enabled(False)
        z = y * 3
        torch.set_grad_enabled(True)
        return y, z

    # each call switches the mode for what follows, in the trace as in eager (test_grad_switches.py)
    assert eager_and_compiled(fn, leaves((3,))) == (1, 0)
    assert torch.is_grad_enabled()


def test_inference_mode_results_are_inference_tensors():
    # Traced since inference mode became a block of the graph (test_inference_mode.py).
    def fn(x):
        with torch.inference_mode():
            y = x * 2
        return y, y + 0

    x = torch.randn(3)
    expected = fn(x)
    for _ in range(2):
        got = tjc.compile(fn, backend="eager")(x)
        assert [t.is_inference() for t in got] == [t.is_inference() for t in expected]
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)


def test_resume_function_and_arguments_die_with_the_compiled_function(no_gc):
    def fn(x, w):
        a = x * w
        with torch.no_grad():
            b = a * 2
            print("inside")
            c = b + 1
        return a * c

    assert_break_frees_everything(fn, leaves((4,), (4,)))


def _break_then_assert_in_block(x, w):
    with torch.no_grad():
        print("inside")
        if torch.is_grad_enabled():   # the block's body ends in a raise path (pytest rewrites asserts)
            raise RuntimeError("grad mode inside no_grad")
    return x * w


def _break_then_assert_then_block(x, w):
    with torch.no_grad():
        y = x.mul
        print("inside")
        if torch.is_grad_enabled():
            raise RuntimeError("grad mode inside no_grad")
    with torch.no_grad():
        return y(w)


@pytest.mark.parametrize("fn", [_break_then_assert_in_block, _break_then_assert_then_block],
                         ids=lambda f: f.__name__)
def test_break_before_a_raise_path_inside_a_block_is_resumed(fn):
    # The resume function jumps into the block's protected range; where the range ends in a raise
    # (an assert, a raise) its handler's depth was measured from the prologue's empty stack and the code
    # could not be built ("negative stack size"): the frame ran uncompiled.
    assert eager_and_compiled(fn, leaves((4,), (4,)), grad=False)[1] >= 1
    with contextlib.redirect_stdout(io.StringIO()):
        assert tjc.explain(fn)(*leaves((4,), (4,))).fallbacks == []


def test_a_fallback_after_a_refused_cut_names_the_break_that_caused_it():
    def fn(x):
        y = x + 1
        with contextlib.nullcontext():
            print("inside")   # the break; its with block is one a resume function does not enter
        return y

    with contextlib.redirect_stdout(io.StringIO()):
        fallbacks = tjc.explain(fn)(torch.randn(2)).fallbacks
    assert len(fallbacks) == 1
    # The cause first (what reports group by), then why the frame could not be cut there.
    cause, _, why = fallbacks[0].partition("; no graph break there: ")
    assert "print" in cause and "with block" not in cause
    assert why.startswith("the break is inside a with block")


def _decorate_in_the_trace(decorate, outer):
    def fn(x):
        def scaled(t):
            return t * 3

        with outer():
            scaled = decorate(scaled)
            inside = torch.is_grad_enabled()   # decorating does not change the mode
        with outer():
            return scaled(x), inside
    return fn


@pytest.mark.parametrize("decorate, outer", [
    (lambda f: torch.enable_grad()(f), torch.no_grad), (lambda f: torch.no_grad()(f), torch.enable_grad),
    (torch.enable_grad, torch.no_grad), (torch.no_grad, torch.enable_grad)],
    ids=["enable_grad()", "no_grad()", "enable_grad", "no_grad"])
def test_a_function_decorated_with_a_grad_mode_in_the_trace_runs_in_its_mode(decorate, outer):
    fn = _decorate_in_the_trace(decorate, outer)
    x = torch.randn(3, requires_grad=True)
    compiled = tjc.compile(fn, backend="eager", fullgraph=True)
    for _ in range(2):
        (got, got_inside), (expected, expected_inside) = compiled(x), fn(x)
        torch.testing.assert_close(got, expected)
        assert (got.requires_grad, got_inside) == (expected.requires_grad, expected_inside)
        assert torch.is_grad_enabled()


def _returns_a_decorated_function(x):
    def shifted(t):
        return t + 1
    return torch.no_grad()(shifted), x * 2


def test_a_decorated_function_made_in_the_trace_is_made_again_after_it():
    x = torch.randn(3, requires_grad=True)
    with contextlib.redirect_stdout(io.StringIO()):
        report = tjc.explain(_returns_a_decorated_function)(x)
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, [])
    compiled = tjc.compile(_returns_a_decorated_function, backend="eager")
    for _ in range(2):
        (got_fn, got), (expected_fn, expected) = compiled(x), _returns_a_decorated_function(x)
        torch.testing.assert_close(got, expected)
        out = got_fn(x)
        torch.testing.assert_close(out, expected_fn(x))
        assert out.requires_grad is False and torch.is_grad_enabled()
