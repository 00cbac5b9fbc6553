"""torch._dynamo's own context managers in traced code (tracer/variables/torch_objects/dynamo_contexts.py):
`with torch._dynamo.error_on_graph_break(flag)` is a block that does nothing in the graph, and a
graph break inside it runs the break instruction inside a real block and resumes inside one.
Compared with eager: values, TorchDynamo's setting as the code inside the block sees it, and the
setting after the call."""
import contextlib
import io

import pytest

torch = pytest.importorskip("torch")
import torch._dynamo  # noqa: E402
from torch._dynamo.decorators import _get_error_on_graph_break  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402

pytestmark = pytest.mark.torch

_SEEN = []


def _probe():
    print("probe")   # a graph break: the call runs as written, in the block's state
    _SEEN.append(_get_error_on_graph_break())


def _no_break(x):
    y = x + 1
    with torch._dynamo.error_on_graph_break(False):
        y = y * 3
    with torch._dynamo.error_on_graph_break(True):
        y = y - 1
    return y


def _with_break(x):
    y = x + 1
    with torch._dynamo.error_on_graph_break(True):
        y = y * 3
        _probe()   # the break: runs inside a real block
        y = y - 1
    _probe()
    return y


def _explain(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return tjc.explain(fn)(*args)


def test_a_block_without_a_break_is_one_graph():
    x = torch.randn(3)
    e = _explain(_no_break, x)
    assert (e.graph_count, e.graph_break_count, e.fallbacks) == (1, 0, [])
    compiled = tjc.compile(_no_break, backend="eager")
    for _ in range(2):
        torch.testing.assert_close(compiled(x), _no_break(x))
    assert _get_error_on_graph_break() is False


def test_a_break_inside_the_block_resumes_inside_it():
    x = torch.randn(3)
    e = _explain(_with_break, x)
    assert (e.graph_count, e.graph_break_count, e.fallbacks) == (2, 2, [])
    compiled = tjc.compile(_with_break, backend="eager")
    _SEEN.clear()
    with contextlib.redirect_stdout(io.StringIO()):
        _SEEN.clear()
        expected = _with_break(x)
        eager_seen = list(_SEEN)
        for _ in range(2):
            _SEEN.clear()
            torch.testing.assert_close(compiled(x), expected)
            assert _SEEN == eager_seen == [True, False]   # set inside the block, restored after
    assert _get_error_on_graph_break() is False


def test_an_exception_at_the_break_restores_the_setting():
    def fn(x):
        y = x + 1
        with torch._dynamo.error_on_graph_break(True):
            int("not a number")
        return y

    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        with pytest.raises(ValueError):
            compiled(torch.randn(2))
        assert _get_error_on_graph_break() is False
