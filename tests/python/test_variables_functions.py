"""tracer/variables/python_objects/functions.py through the public API: user functions called in traced code.

The contract: a user function is inlined (its bytecode interpreted with its own locals), so the
whole call chain is one graph; arguments bind as Python binds them (defaults, keyword-only,
*args, **kwargs); closures read their cells, and a nested function made in the trace is callable
there; the globals a callee reads are guarded where they live, so a global changed after
compiling is a miss; and a callee the trace cannot follow breaks the graph in the callee, with
the caller's work kept. Each case compares with eager and counts graphs and breaks.
"""
import functools

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import compiled_like_eager  # noqa: E402

SCALE = 2.0


def _binds(a, b=3, *rest, c, d=4, **extra):
    return a * b + sum(rest) + c * d + sum(extra.values())


def _calls_with_every_binding(x):
    return (_binds(x, c=1), _binds(x, 2, 5, 6, c=1, d=2, e=7), _binds(a=x, c=x),
            _binds(*[x, 1], **{"c": 2, "f": 1}))


def _closures(x):
    k = 3

    def inner(y):
        return y * k

    def counter():
        nonlocal k
        k += 1
        return k

    counter()
    return inner(x), (lambda z: z + k)(x), k


def _reads_global(x):
    return x * SCALE


def _calls_a_global_reader(x):
    return _reads_global(x) + 1


def _recursive(x, n):
    return x if n == 0 else _recursive(x + 1, n - 1)


@pytest.mark.parametrize("fn, args", [
    (_calls_with_every_binding, lambda: (torch.randn(2),)),
    (_closures, lambda: (torch.randn(2),)),
    (_calls_a_global_reader, lambda: (torch.randn(2),)),
    (_recursive, lambda: (torch.randn(2), 4)),
], ids=["binding", "closures", "globals", "recursion"])
def test_user_functions_are_inlined_into_one_graph(fn, args):
    compiled_like_eager(fn, *args())


def test_a_global_read_by_an_inlined_function_is_guarded():
    global SCALE
    cnt = CompileCounter()
    compiled = tjc.compile(_calls_a_global_reader, backend=cnt)
    x = torch.ones(2)
    try:
        assert compiled(x).tolist() == [3.0, 3.0]
        SCALE = 5.0
        assert compiled(x).tolist() == [6.0, 6.0], "the changed global is read, not the old one"
        assert cnt.frame_count == 2
    finally:
        SCALE = 2.0


def _breaks_inside(y):
    y = y * 2
    print("in the callee")
    return y + 1


def _caller(x):
    return _breaks_inside(x.sin()).cos()


def test_a_break_inside_a_callee_keeps_the_callers_work(capsys):
    # The caller breaks at the call (its work before is a graph); the callee then runs as a frame
    # of its own, compiled up to the print and resumed after it; the caller resumes after the call.
    compiled_like_eager(_caller, torch.randn(3), graphs=4, breaks=2)
    out = tjc.explain(_caller)(torch.randn(3))
    assert out.ops_per_graph == [["sin"], ["mul"], ["add"], ["cos"]]
    assert all("print()" in why for why in out.break_reasons)


def test_a_binding_error_raises_eagers_type_error():
    def wrong_call(x):
        return _binds(x)     # c is keyword-only and missing

    with pytest.raises(TypeError) as eager:
        wrong_call(torch.ones(1))
    with pytest.raises(TypeError) as compiled:
        tjc.compile(wrong_call, backend="eager")(torch.ones(1))
    assert str(compiled.value) == str(eager.value)


# -- functools.wraps on functions made in the trace -------------------------------------------------
def _wrapped_in_the_trace(x):
    def twice(fn):
        @functools.wraps(fn)
        def wrapper(t):
            return fn(fn(t))
        return wrapper

    def logged(fn):
        @functools.wraps(fn, assigned=("__name__",))
        def wrapper(t):
            return fn(t) * 2
        return wrapper

    @twice
    def inc(t):
        return t + 1

    @logged
    def dec(t):
        return t - 1

    return inc(x), inc.__name__, inc.__qualname__, inc.__wrapped__(x), dec(x), dec.__name__, dec.__qualname__


def test_functools_wraps_decorators_made_in_the_trace_are_inlined_with_the_wrapped_names():
    compiled_like_eager(_wrapped_in_the_trace, torch.randn(3))


def test_a_wrapped_function_that_leaves_the_trace_is_a_graph_break_with_eager_result():
    def f(x):
        def deco(fn):
            @functools.wraps(fn)
            def wrapper(t):
                return fn(t) + 1
            return wrapper

        @deco
        def g(t):
            return t * 2
        return g(x), g

    x = torch.randn(2)
    out, g = tjc.compile(f, backend="eager")(x)
    torch.testing.assert_close(out, f(x)[0])
    assert g.__name__ == "g" and g.__wrapped__(x).equal(x * 2)
