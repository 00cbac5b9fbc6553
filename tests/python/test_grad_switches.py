"""Grad mode switched outside a with statement in traced code: `torch._C._set_grad_enabled(mode)`
(a context manager written in Python that sets it in __enter__/__exit__, or a bare switch), and
`torch.set_grad_enabled(mode)` made as a value (entered later, used as a decorator, returned, live
at a graph break). Compared with eager: values, `requires_grad`, the grad mode the call leaves
behind, the objects it returns, and the number of graphs and breaks; a call made in the other
mode recompiles."""
import contextlib
import io
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(autouse=True)
def _grad_mode_restored():
    before = torch.is_grad_enabled()
    yield
    torch._C._set_grad_enabled(before)


def _outcome(out):
    """What must agree with eager: tensors' values and requires_grad, set_grad_enabled objects' and
    user objects' attributes, anything else as is."""
    if isinstance(out, tuple):
        return tuple(_outcome(o) for o in out)
    if isinstance(out, torch.Tensor):
        return ("tensor", out.detach().tolist(), out.requires_grad)
    if isinstance(out, (torch.set_grad_enabled, _Switching)):
        return (type(out), dict(vars(out)))
    return out


def _runs(fn, make_args, modes=(True, True, False)):
    """fn eagerly and compiled, each call entered in the mode of `modes`: the outcomes and the
    grad mode each call leaves, for eager and compiled, and the compile counter."""
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    got = {"eager": [], "compiled": []}
    for name, f in (("eager", fn), ("compiled", compiled)):
        for mode in modes:
            torch._C._set_grad_enabled(mode)
            with contextlib.redirect_stdout(io.StringIO()):
                out = f(*make_args())
            got[name].append((_outcome(out), torch.is_grad_enabled()))
    torch._C._set_grad_enabled(True)
    return got["eager"], got["compiled"], cnt


def _leaf():
    return (torch.arange(3.0, requires_grad=True),)


class _Switching:
    """A context manager written in Python that sets grad mode by the C function, as torch's own
    set_grad_enabled does."""

    def __init__(self, mode):
        self.before = torch.is_grad_enabled()
        self.mode = mode

    def __enter__(self):
        torch._C._set_grad_enabled(self.mode)
        return self

    def __exit__(self, *exc):
        torch._C._set_grad_enabled(self.before)


def _python_switching_block(x):
    y = x * 2
    with _Switching(False) as cm:
        z = y * 3
    return y, z, cm.mode, torch.is_grad_enabled()


def test_a_python_context_manager_switching_grad_mode_is_traced_whole():
    eager, compiled, cnt = _runs(_python_switching_block, _leaf)
    assert compiled == eager
    assert cnt.frame_count == 2   # entered in the other mode: a new entry


def _bare_switch(x):
    a = x + 1
    torch._C._set_grad_enabled(False)
    return a, a * 2


def test_a_switch_outside_any_block_holds_after_the_call():
    before = tjc.stats()
    eager, compiled, cnt = _runs(_bare_switch, _leaf)
    assert compiled == eager
    assert [mode for _, mode in compiled] == [False, False, False]
    assert tjc.stats()["graph_breaks"] == before["graph_breaks"] and tjc.stats()["fallbacks"] == before["fallbacks"]


def _returns_its_context_manager(x):
    cm = _Switching(False)
    with cm:
        y = x * 2
    return cm, y


def test_a_returned_context_manager_keeps_its_state():
    eager, compiled, _ = _runs(_returns_its_context_manager, _leaf)
    assert compiled == eager


def _made_then_entered(x):
    ctx = torch.set_grad_enabled(False)
    a = x * 2   # already in the new mode: making it switched
    with ctx:
        b = x * 3
    return a, b, ctx, torch.is_grad_enabled()


def test_set_grad_enabled_made_as_a_value_switches_when_made_and_its_exit_restores_prev():
    eager, compiled, cnt = _runs(_made_then_entered, _leaf)
    assert compiled == eager
    assert cnt.frame_count == 2


def _decorates_inside_a_block(x, mode):
    with torch.set_grad_enabled(not mode):
        @torch.set_grad_enabled(mode)
        def inner(t):
            return t.sin()
        inside = torch.is_grad_enabled()   # the decorator set back the mode it found
    with torch.set_grad_enabled(not mode):
        return inner(x), inside, torch.is_grad_enabled()


@pytest.mark.parametrize("mode", [True, False])
def test_set_grad_enabled_as_a_decorator_in_the_trace(mode):
    eager, compiled, cnt = _runs(_decorates_inside_a_block, lambda: (*_leaf(), mode))
    assert compiled == eager
    assert cnt.frame_count == 2


def _returns_decorated(x):
    inner = torch.set_grad_enabled(False)(torch.sin)
    return x * 2, inner


def test_a_decorated_function_that_leaves_the_trace_is_made_again():
    compiled = tjc.compile(_returns_decorated, backend="eager")
    x = _leaf()[0]
    y, inner = compiled(x)
    assert torch.is_grad_enabled() and y.requires_grad
    assert not inner(x).requires_grad and torch.is_grad_enabled()


_decorated_global = torch.set_grad_enabled(False)(lambda t: t.cos())
torch._C._set_grad_enabled(True)


def _calls_decorated_global(x):
    return _decorated_global(x * 2), torch.is_grad_enabled()


def test_a_decorated_function_read_from_the_frame_runs_in_its_mode():
    eager, compiled, cnt = _runs(_calls_decorated_global, _leaf)
    assert compiled == eager


def _switch_then_break(x):
    a = x + 1
    torch._C._set_grad_enabled(False)
    print("break")
    return a * 2, torch.is_grad_enabled()


def _made_then_break_then_entered(x):
    a = x + 1
    ctx = torch.set_grad_enabled(False)
    print("break")
    with ctx:
        b = a * 2
    return a, b, torch.is_grad_enabled()


def _switch_then_break_in_a_block(x):
    torch._C._set_grad_enabled(False)
    with torch.enable_grad():
        a = x * 2
        print("break")
        b = a * 3
    return b, x * 4, torch.is_grad_enabled()


@pytest.mark.parametrize("fn", [_switch_then_break, _made_then_break_then_entered, _switch_then_break_in_a_block])
def test_a_switch_before_a_graph_break_holds_for_the_rest_of_the_frame(fn):
    before = tjc.stats()
    eager, compiled, _ = _runs(fn, _leaf)
    assert compiled == eager
    assert tjc.stats()["graph_breaks"] - before["graph_breaks"] >= 1
    assert tjc.stats()["fallbacks"] == before["fallbacks"]


def _switch_inside_a_block_then_break(x):
    with torch.no_grad():
        torch._C._set_grad_enabled(True)
        a = x * 2
        print("break")
    return a, x * 3, torch.is_grad_enabled()


def test_a_break_where_the_mode_is_not_its_blocks_runs_the_frame_as_written():
    eager, compiled, _ = _runs(_switch_inside_a_block_then_break, _leaf)
    assert compiled == eager


def _switch_in_inference_mode(x):
    with torch.inference_mode():
        torch._C._set_grad_enabled(True)
        y = x * 2
    return y, torch.is_grad_enabled()


def test_a_switch_inside_inference_mode_is_refused_and_runs_as_eager():
    eager, compiled, _ = _runs(_switch_in_inference_mode, lambda: (torch.arange(3.0),))
    assert [(o[0][1], o[1], m) for o, m in compiled] == [(o[0][1], o[1], m) for o, m in eager]


def test_a_returned_set_grad_enabled_object_is_freed():
    compiled = tjc.compile(_made_then_entered, backend="eager")
    x = _leaf()[0]
    out = compiled(x)
    torch._C._set_grad_enabled(True)
    ref = weakref.ref(out[2])
    del out
    assert ref() is None
