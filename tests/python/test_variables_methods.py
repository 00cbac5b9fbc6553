"""tracer/variables/base.py MethodVariable: `obj.name` loaded before it is called, for constants,
tensors, containers, modules and user objects. Calling it is the object's own method call; held
at a graph break it is made again as the attribute of the rebuilt object, so the resumed code
calls the very method. Compared with eager: values, side effects, graphs and breaks."""
import contextlib
import io

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from torch_jit_cache.tracer.variables.base import MethodVariable  # noqa: E402
from torch_jit_cache.tracer.variables.constant import ConstantVariable  # noqa: E402

pytestmark = pytest.mark.torch


def _run(fn, *args):
    """(eager result, compiled result, graphs, breaks: as tjc.explain counts them), stdout swallowed."""
    with contextlib.redirect_stdout(io.StringIO()):
        report = tjc.explain(fn)(*args)
        return fn(*args), tjc.compile(fn)(*args), report.graph_count, report.graph_break_count


def test_a_constant_method_folds():
    def f(x):
        split = "a,b,c".split
        upper = "x".upper
        return x * len(split(",")), upper()

    expected, got, graphs, breaks = _run(f, torch.ones(2))
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == "X" and (graphs, breaks) == (1, 0)


def test_a_tensor_method_becomes_its_op():
    def f(x):
        view = x.view
        neg = x.neg
        return view(-1) * 2, neg()

    cnt = CompileCounter()
    x = torch.ones(2, 2)
    for got, expected in zip(tjc.compile(f, backend=cnt)(x), f(x)):
        torch.testing.assert_close(got, expected)
    assert (cnt.frame_count, cnt.op_count) == (1, 3)   # view, mul, neg


def test_a_list_method_mutates_the_list():
    def f(x, xs):
        append = xs.append
        append(x)
        append(x + 1)
        return len(xs)

    xs_eager, xs_compiled = [], []
    cnt = CompileCounter()
    assert f(torch.ones(1), xs_eager) == tjc.compile(f, backend=cnt)(torch.ones(1), xs_compiled) == 2
    assert len(xs_compiled) == 2 and cnt.frame_count == 1
    torch.testing.assert_close(xs_compiled[1], xs_eager[1])


def test_a_module_method_is_traced_by_its_result():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())

    def f(x):
        params = model.parameters
        return x + sum(p.sum() for p in params())

    expected, got, graphs, breaks = _run(f, torch.ones(3))
    torch.testing.assert_close(got, expected)
    assert (graphs, breaks) == (1, 0)


def test_a_user_object_method_is_inlined():
    class Scale:
        def __init__(self, k):
            self.k = k

        def apply(self, x):
            return x * self.k

    s = Scale(3.0)

    def f(x):
        apply = s.apply
        return apply(x) + 1

    expected, got, graphs, breaks = _run(f, torch.ones(2))
    torch.testing.assert_close(got, expected)
    assert (graphs, breaks) == (1, 0)


def _break():
    print("break")


def test_a_tensor_method_held_across_a_break_is_the_same_method():
    def f(x):
        view = x.view
        y = x * 2
        _break()
        return view(-1) + y.sum()

    expected, got, graphs, breaks = _run(f, torch.arange(4.0).reshape(2, 2))
    torch.testing.assert_close(got, expected)
    # The resumed code reads `view` back as x.view, a builtin method of a frame value, whose call
    # is a second break (as in eager, the real method runs); the rest is the second graph.
    assert (graphs, breaks) == (2, 2)


def test_a_list_method_held_across_a_break_appends_to_the_callers_list():
    def f(x, xs):
        append = xs.append
        append(x)
        _break()
        append(x * 3)
        return x + 1

    xs_eager, xs_compiled = [], []
    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    with contextlib.redirect_stdout(io.StringIO()):
        torch.testing.assert_close(compiled(torch.ones(2), xs_compiled), f(torch.ones(2), xs_eager))
    assert len(xs_compiled) == len(xs_eager) == 2
    torch.testing.assert_close(xs_compiled[1], xs_eager[1])


def test_a_constant_method_held_across_a_break():
    def f(x):
        join = "-".join
        _break()
        return x + len(join(["a", "b"]))

    expected, got, graphs, breaks = _run(f, torch.ones(2))
    torch.testing.assert_close(got, expected)
    # The bound str.join, held across the print's break, is called in the resume function on
    # constants: pure.py folds it there (before, its call was a second break).
    assert (graphs, breaks) == (1, 0)


class _Outputs:
    """What MethodVariable.reconstruct asks of the rebuilder."""

    def __init__(self):
        self.made = {}

    def once(self, v, make):
        return self.made.setdefault(id(v), make())

    def rebuild(self, v):
        return v.reconstruct(self)


def test_method_variable_rebuilds_as_the_attribute_of_its_object():
    method = MethodVariable(ConstantVariable("a,b"), "split")
    outputs = _Outputs()
    spec = method.reconstruct(outputs)
    assert type(spec).__name__ == "AttrOutput"
    assert method.reconstruct(outputs) is spec   # once, however often it is reached
    assert "split" in repr(method)
