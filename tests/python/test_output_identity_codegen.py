"""How object identity after the graph is made (guard/trace_result.py, pipeline/codegen.py): the transformed code
builds an object the frame reaches twice once, into a temporary, and needs no temporary for one
reached once; the objects built once hold nothing after the call; an iterator over a list that is
live at a graph break sees the list's later changes, as in eager. The identities themselves, scenario
by scenario: test_output_identity.py."""
import contextlib
import gc
import io
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.pipeline import codegen  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


# -- what the transformed code is --------------------------------------------------------------
def _transformed(compiled_fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        compiled_fn(*args)
    (entry,) = tjc.cache_entries(compiled_fn)
    return codegen.format_code(entry.code)


def test_objects_reached_once_need_no_temporary():
    def fn(x):
        return (x + 1, x * 2), [x - 1], {"k": x}

    text = _transformed(tjc.compile(fn), torch.ones(2))
    assert "___tjc_made" not in text and "COPY" not in text


def test_an_object_reached_twice_is_built_once():
    def fn(x):
        a = [x + 1]
        return a, a

    text = _transformed(tjc.compile(fn), torch.ones(2))
    assert text.count("BUILD_LIST") == 1 and text.count("STORE_FAST       ___tjc_made") == 1


# -- lifetimes ---------------------------------------------------------------------------------
def test_objects_built_once_hold_nothing_after_the_call(no_gc):
    def fn(x):
        y = x + 1
        a = [y]
        d = {"a": a}
        return a, d, a

    def broken(x):
        y = x + 1
        a = [y]
        b = a
        print("break")
        return a, b

    for f in (fn, broken):
        compiled = tjc.compile(f)
        for _ in range(2):
            with contextlib.redirect_stdout(io.StringIO()):
                r = compiled(torch.ones(2))
            assert r[0] is r[-1]
            ref = weakref.ref(r[0][0])
            del r
            assert ref() is None
    assert gc.isenabled() is False


# -- a loop's iterator and its container -------------------------------------------------------
def _loop_over_a_list_live_at_a_break(x):
    xs = [x + 1, x + 2]
    out = []
    for t in xs:   # the iterator on the stack, the list a local
        print("break")
        if len(xs) < 3:
            xs.append(t * 10)   # Python's iterator sees it
        out.append(t)
    return out


def _iterator_local_over_a_list_live_at_a_break(x):
    xs = [x + 1, x + 2]
    it = iter(xs)
    first = next(it)
    print("break")
    xs.append(first * 10)
    return [first, *it]


@pytest.mark.parametrize("fn", [_loop_over_a_list_live_at_a_break, _iterator_local_over_a_list_live_at_a_break])
def test_an_iterator_over_a_list_live_at_a_break_sees_its_changes(fn):
    x = torch.ones(2)
    with contextlib.redirect_stdout(io.StringIO()):
        expected = fn(x)
        for _ in range(2):
            got = tjc.compile(fn)(x)
            assert len(got) == len(expected) == 3
            for g, e in zip(got, expected):
                torch.testing.assert_close(g, e)
