"""The exception the caller handles when a traced frame is entered: where it is None (and the frame's
globals hold `sys`), `sys.exc_info()`, `sys.exception()`, the `__context__` of an exception raised
outside every except block of the trace, and a bare `raise` there are known and traced whole; a call
from inside the caller's except block misses that guard and still gives eager's answers."""
import sys
import types

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = pytest.mark.torch


def _context_of_a_raise(x):
    try:
        raise KeyError("k")
    except KeyError as e:
        context = e.__context__
    return x + 1, context


def _bare_raise(x):
    try:
        raise
    except RuntimeError as e:
        message = str(e)
    return x * 2, message


def _handled(x):
    info = sys.exc_info()
    return x - 1, sys.exception(), info


def _same(a, b):
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(p, q) for p, q in zip(a, b))
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, types.TracebackType):   # each raise of the caller's exception makes its own
        return isinstance(b, types.TracebackType)
    return a is b or a == b


def _from_an_except_block(fn, x, caught):
    """fn(x) called inside an except block; what it raised stands as (type, args)."""
    try:
        raise caught
    except ValueError:
        try:
            return fn(x)
        except Exception as e:   # noqa: BLE001 - a bare raise re-raises the caller's exception
            return type(e), e.args


@pytest.mark.parametrize("fn", [_context_of_a_raise, _bare_raise, _handled])
def test_known_none_when_the_caller_handles_nothing(fn):
    cnt = CompileCounter()
    before = tjc.stats()
    compiled = tjc.compile(fn, backend=cnt)
    x = torch.randn(3)
    assert _same(compiled(x), fn(x))
    assert cnt.frame_count == 1
    assert tjc.stats()["graph_breaks"] == before["graph_breaks"] and tjc.stats()["fallbacks"] == before["fallbacks"]
    # Called from inside an except block: the guard misses, and the answer is the caller's exception.
    caught = ValueError("the caller's")
    assert _same(_from_an_except_block(compiled, x, caught), _from_an_except_block(fn, x, caught))
    assert cnt.frame_count <= 2
    assert _same(compiled(x), fn(x))   # back outside: the first entry again
    assert cnt.frame_count <= 2


def test_without_sys_in_the_globals_nothing_is_assumed():
    namespace = {"torch": torch}
    exec("def f(x):\n    try:\n        raise\n    except RuntimeError as e:\n        m = str(e)\n    return x + 1, m\n",
         namespace)
    fn = namespace["f"]
    x = torch.randn(2)
    assert _same(tjc.compile(fn, backend=CompileCounter())(x), fn(x))
