"""tracer/variables/python_objects/signatures.py: inspect.signature(f) of a function read from the frame, its
`parameters[name]` and each Parameter's name, kind and default, traced whole and compared with
eager. A default is read through `f.__defaults__` / `f.__kwdefaults__`: replacing them later
recompiles to eager's answer; a parameter without one is `inspect.Parameter.empty`."""
import inspect

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def _by_default(x, f):
    params = inspect.signature(f).parameters
    if params["a"].default is inspect.Parameter.empty:
        return torch.sin(x)
    return x * params["a"].default + params["k"].default


def _no_defaults(a, b, *, k=1.0):
    return a + b


def _with_defaults(a=2.0, b=1.0, *, k=4.0):
    return a - b


def test_defaults_are_read_and_guarded_through_the_function():
    x = torch.randn(3)
    calls = CompiledCalls(_by_default)
    for f in (_no_defaults, _with_defaults, _no_defaults, _with_defaults):
        assert same(calls(x, f), _by_default(x, f))
    calls.check(graphs=2)
    saved = _with_defaults.__defaults__, _with_defaults.__kwdefaults__
    try:
        _with_defaults.__defaults__ = (3.0, 1.0)      # replaced: recompiles
        assert same(calls(x, _with_defaults), _by_default(x, _with_defaults))
        _with_defaults.__kwdefaults__ = {"k": -1.0}
        assert same(calls(x, _with_defaults), _by_default(x, _with_defaults))
        _with_defaults.__defaults__ = None             # none left: `a` has no default now
        assert same(calls(x, _with_defaults), _by_default(x, _with_defaults))
    finally:
        _with_defaults.__defaults__, _with_defaults.__kwdefaults__ = saved


def _name_and_kind(x, f):
    p = inspect.signature(f).parameters["b"]
    return x + p.kind + len(p.name), p.name


def test_a_parameters_name_and_kind_follow_from_the_code():
    x = torch.randn(2)
    calls = CompiledCalls(_name_and_kind)
    assert same(calls(x, _no_defaults), _name_and_kind(x, _no_defaults))
    calls.check(graphs=1)


def _annotation(x, f):
    return x, inspect.signature(f).parameters["a"].annotation


def _annotated(a: int):
    return a


def test_an_annotation_is_left_to_eager():
    x = torch.randn(2)
    got, want = tjc.compile(_annotation)(x, _annotated), _annotation(x, _annotated)
    assert same(got[0], want[0]) and got[1] is int
