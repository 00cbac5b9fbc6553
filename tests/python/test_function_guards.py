"""Closures, lambdas and functools.partial objects made per call are guarded by what the trace
relied on (code, closure contents, defaults, globals, partial's func/args/keywords), not by the
identity of a short-lived object."""
import builtins
import functools
import logging
import types
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.config import config  # noqa: E402



def apply(fn, x):
    return fn(x) + 1


def make_scale(k):
    def scale(t):
        return t * k
    return scale


def counts():
    s = tjc.stats()
    return s["compiles"], s["hits"], s["recompiles"]


def test_closure_made_per_call_compiles_once():
    # Failed before: the closure was guarded by identity; it died after each call, its entry was
    # evicted, and every call compiled again (5 compiles, 0 hits).
    compiled = tjc.compile(apply)
    x = torch.ones(3)
    for _ in range(5):
        assert torch.equal(compiled(make_scale(2.0), x), x * 2 + 1)
    assert counts() == (1, 4, 0)
    assert tjc.stats()["evictions"] == 0


def test_changed_closure_value_recompiles():
    compiled = tjc.compile(apply)
    x = torch.ones(3)
    compiled(make_scale(2.0), x)
    assert torch.equal(compiled(make_scale(3.0), x), x * 3 + 1)
    assert counts() == (2, 0, 1)
    assert torch.equal(compiled(make_scale(2.0), x), x * 2 + 1)
    assert torch.equal(compiled(make_scale(3.0), x), x * 3 + 1)
    assert counts() == (2, 2, 1)


def test_recompile_log_names_the_closure_cell(caplog, monkeypatch):
    monkeypatch.setattr(config, "log", frozenset({"recompiles"}))
    caplog.set_level(logging.INFO, logger="torch_jit_cache")
    compiled = tjc.compile(apply)
    compiled(make_scale(2.0), torch.ones(2))
    compiled(make_scale(5.0), torch.ones(2))
    text = caplog.text
    assert "recompiling 'apply'" in text
    assert "L['fn'].__closure__[0].cell_contents == 2.0 failed: got 5.0" in text


def test_lambda_defaults_are_guarded():
    compiled = tjc.compile(apply)
    x = torch.ones(3)
    for _ in range(3):
        assert torch.equal(compiled(lambda t, k=2.0: t - k, x), x - 2 + 1)
    assert counts() == (1, 2, 0)
    assert torch.equal(compiled(lambda t, k=7.0: t - k, x), x - 7 + 1)
    assert counts() == (2, 2, 1)


def test_closure_over_a_tensor_reads_the_new_tensor():
    # HuggingFace's padding_mask_function: a closure over a tensor, made per call. The tensor is a
    # graph input loaded from the closure at call time, so a new tensor's values are used.
    def masker(mask):
        def inner(t):
            return t * mask
        return inner

    compiled = tjc.compile(apply)
    x = torch.ones(4)
    for i in range(4):
        mask = torch.full((4,), float(i))
        assert torch.equal(compiled(masker(mask), x), x * i + 1)
    assert counts() == (1, 3, 0)


def and_fns(*fns):
    def both(t):
        out = t
        for f in fns:
            out = f(out)
        return out
    return both


def test_nested_closures_like_and_masks():
    compiled = tjc.compile(apply)
    x = torch.ones(2)
    for _ in range(4):
        assert torch.equal(compiled(and_fns(make_scale(2.0), lambda t: t + 3), x), x * 2 + 3 + 1)
    assert counts() == (1, 3, 0)
    # a different number of functions, then a different inner value: both recompile
    assert torch.equal(compiled(and_fns(make_scale(2.0)), x), x * 2 + 1)
    assert torch.equal(compiled(and_fns(make_scale(4.0), lambda t: t + 3), x), x * 4 + 3 + 1)
    assert counts() == (3, 3, 2)


def test_partial_made_per_call_compiles_once_and_guards_its_parts():
    # Failed before: a functools.partial argument was unsupported (the frame ran uncompiled).
    compiled = tjc.compile(apply)
    x = torch.ones(3)
    for _ in range(5):
        assert torch.equal(compiled(functools.partial(torch.mul, other=2.0), x), x * 2 + 1)
    assert counts() == (1, 4, 0)
    assert torch.equal(compiled(functools.partial(torch.mul, other=3.0), x), x * 3 + 1)
    assert torch.equal(compiled(functools.partial(torch.add, other=3.0), x), x + 3 + 1)
    assert torch.equal(compiled(functools.partial(lambda a, t: t * a, 5.0), x), x * 5 + 1)
    assert counts() == (4, 4, 3)


def pick(fn, other, x):
    return x + 1 if fn is other else x - 1


def test_identity_is_guarded_where_the_trace_relies_on_it():
    compiled = tjc.compile(pick)
    x = torch.zeros(2)
    a = make_scale(2.0)
    assert torch.equal(compiled(a, a, x), x + 1)
    # same code, same contents, another object: `fn is other` is now False
    assert torch.equal(compiled(a, make_scale(2.0), x), x - 1)


def test_same_code_with_other_globals_recompiles():
    def maker():
        def inner(t):
            return t * FACTOR  # noqa: F821 - a global of whichever dict the function carries
        return inner

    first = maker()
    globals_a = {"FACTOR": 2.0, "__builtins__": builtins}
    globals_b = {"FACTOR": 5.0, "__builtins__": builtins}
    fa = types.FunctionType(first.__code__, globals_a, "inner", None, first.__closure__)
    fb = types.FunctionType(first.__code__, globals_b, "inner", None, first.__closure__)
    compiled = tjc.compile(apply)
    x = torch.ones(2)
    assert torch.equal(compiled(fa, x), x * 2 + 1)
    assert torch.equal(compiled(fb, x), x * 5 + 1)


def test_per_call_closures_and_their_contents_are_freed(no_gc):
    compiled = tjc.compile(apply)
    x = torch.ones(2)
    for _ in range(3):
        mask = torch.ones(2)
        fn = and_fns(make_scale(2.0), lambda t: t * mask)
        refs = [weakref.ref(fn), weakref.ref(mask)]
        compiled(fn, x)
        del fn, mask
        assert [r() for r in refs] == [None, None]
    assert len(tjc.cache_entries(apply)) == 1
