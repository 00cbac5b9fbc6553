"""`torch.autograd.graph.disable_saved_tensors_hooks(message)` in traced code, as a with block and as
a decorator: traced whole, the disabled message at call time and after the call as eager's (also
where the caller disabled hooks first), eager's error where the caller pushed hooks (with the state
restored after it), and a graph break inside the block running the frame as written."""
import contextlib
import io

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = pytest.mark.torch

_disabled_message = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message
_disable = torch.autograd.graph.disable_saved_tensors_hooks


def _block(x):
    with _disable("not in this block"):
        y = x.sin() * 2
    return y + 1


def _decorated_inside(x):
    @_disable("not in f")
    def f(a, b):
        return a * b

    return f(x, x + 1) - 1


def _nested(x):
    @_disable("outer")
    def f(a):
        with _disable("inner"):
            b = a.cos()
        return b + a

    return f(x)


def _run_both(fn, x, cnt):
    compiled = tjc.compile(fn, backend=cnt)
    expected, after_eager = fn(x), _disabled_message()
    got, after = compiled(x), _disabled_message()
    return expected, got, after_eager, after


@pytest.mark.parametrize("fn", [_block, _decorated_inside, _nested])
@pytest.mark.parametrize("outer", [None, "the caller's"])
def test_traced_whole_and_the_state_after_is_eagers(fn, outer):
    cnt = CompileCounter()
    before = tjc.stats()
    x = torch.randn(4)
    with _disable(outer) if outer is not None else contextlib.nullcontext():
        expected, got, after_eager, after = _run_both(fn, x, cnt)
    assert torch.equal(got, expected)
    assert after == after_eager == outer
    assert _disabled_message() is None
    assert cnt.frame_count == 1
    assert tjc.stats()["graph_breaks"] == before["graph_breaks"] and tjc.stats()["fallbacks"] == before["fallbacks"]


def test_the_block_is_entered_at_call_time_not_while_tracing():
    # The state inside is set by the graph when it runs: a caller that pushed hooks gets eager's
    # error from the compiled call too, and the state is restored after it.
    compiled = tjc.compile(_block, backend=CompileCounter())
    x = torch.randn(3)
    compiled(x)   # compiled without hooks pushed
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        with pytest.raises(RuntimeError, match="not in this block"):
            _block(x)
        with pytest.raises(RuntimeError, match="not in this block"):
            compiled(x)
    assert _disabled_message() is None


def _breaks_inside(x):
    with _disable("a break inside"):
        y = x * 2
        print("break")
        z = y + 1
    return z


def test_a_break_inside_the_block_runs_the_frame_as_written():
    cnt = CompileCounter()
    before = tjc.stats()
    x = torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()):
        expected, got, after_eager, after = _run_both(_breaks_inside, x, cnt)
    assert torch.equal(got, expected) and after is None and after_eager is None
    assert tjc.stats()["fallbacks"] > before["fallbacks"]


def _returns_decorated(x):
    return x + 1, _disable("kept")(torch.sin)


def test_a_decorated_function_that_leaves_the_trace_is_made_again():
    out, f = tjc.compile(_returns_decorated, backend=CompileCounter())(torch.zeros(2))
    assert torch.equal(out, torch.ones(2))
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        with pytest.raises(RuntimeError, match="kept"):
            f(torch.zeros(2))
    assert _disabled_message() is None


def _message_from_argument(x, message):
    with _disable(message):
        y = x * 3
    return y


def test_the_message_is_guarded():
    cnt = CompileCounter()
    compiled = tjc.compile(_message_from_argument, backend=cnt)
    x = torch.randn(2)
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        for message in ("first", "second"):
            with pytest.raises(RuntimeError, match=message):
                compiled(x, message)
    assert cnt.frame_count == 2


def _entered_twice(x):
    cm = _disable("once")
    with cm:
        y = x + 1
    try:
        with cm:
            y = y + 1
    except Exception as e:   # noqa: BLE001 - eager's error for a second entry
        return y, type(e)
    return y, None


def test_an_object_entered_twice_raises_as_in_eager():
    x = torch.randn(2)
    expected = _entered_twice(x)
    got = tjc.compile(_entered_twice, backend=CompileCounter())(x)
    assert torch.equal(got[0], expected[0]) and got[1] is expected[1]
    assert _disabled_message() is None
