"""tracer/variables/python_objects/partials.py through the public API: functools.partial in traced code.

The contract: a partial made in the trace is the one CPython makes: a partial of such a partial
is flattened (func, args, keywords read as eager's), its keywords dict is its own (a change through
it changes later calls), and it leaves the trace made again from its parts. A partial read from the
frame answers func, args and keywords from its guarded parts; a different partial recompiles. A
partial of a frame partial calls as eager but refuses its attributes (a graph break, not a guess).
Each case compares with eager, counts graphs and breaks, and checks what leaves is freed.
"""
import functools
import gc
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from context_helpers import CompiledCalls, compiled_like_eager, same  # noqa: E402


def _scaled(x, k, *, alpha=1, beta=0):
    return x * k * alpha + beta


def _nested_attributes(x):
    p = functools.partial(_scaled, x, alpha=2)
    q = functools.partial(p, 3, beta=1)
    return q.func is _scaled, len(q.args), q.args[1], q.keywords, q(), p.keywords


def _keywords_changed_through_the_dict(x):
    p = functools.partial(_scaled, x, 2)
    p.keywords["alpha"] = 5
    first = p()
    del p.keywords["alpha"]
    return first, p(), p.keywords


def test_a_partial_of_a_partial_made_in_the_trace_is_flattened_as_eagers():
    compiled_like_eager(_nested_attributes, torch.randn(3))


def test_a_change_through_keywords_changes_later_calls():
    compiled_like_eager(_keywords_changed_through_the_dict, torch.randn(3))


def _returns_nested(x):
    p = functools.partial(_scaled, x + 1, beta=1)
    q = functools.partial(p, 2)
    q.keywords["alpha"] = 3
    return q


def test_a_flattened_partial_that_leaves_the_trace_has_eagers_parts_and_is_freed():
    x = torch.randn(3)
    expected = _returns_nested(x)
    calls = CompiledCalls(_returns_nested)
    for _ in range(2):
        got = calls(x)
        assert type(got) is functools.partial and got.func is expected.func is _scaled
        assert same(got.args, expected.args) and got.keywords == expected.keywords
        assert same(got(), expected())
    calls.check(graphs=1, breaks=0, recompiles=0)
    ref = weakref.ref(got)
    del got
    assert ref() is None


def _reads_frame_partial(x, p):
    return p.func is _scaled, p.args, p.keywords.get("alpha"), p(x)


def test_a_frame_partials_parts_are_read_and_guarded():
    x = torch.randn(3)
    calls = CompiledCalls(_reads_frame_partial)
    for p in (functools.partial(_scaled, k=2, alpha=3), functools.partial(_scaled, k=2, alpha=3),
              functools.partial(_scaled, k=4)):
        assert same(calls(x, p), _reads_frame_partial(x, p))
    assert calls.cnt.frame_count == 2   # the third partial's keywords differ: one recompile
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0


def _changes_frame_keywords(x, p):
    p.keywords["alpha"] = 7
    return p(x, 1)


def test_a_change_to_a_frame_partials_keywords_is_replayed_on_it():
    x = torch.randn(3)
    eager_p, p = functools.partial(_scaled, beta=1), functools.partial(_scaled, beta=1)
    expected = _changes_frame_keywords(x, eager_p)
    got = tjc.compile(_changes_frame_keywords)(x, p)
    assert same(got, expected) and p.keywords == eager_p.keywords


def _partial_of_frame_partial(x, p):
    q = functools.partial(p, 2)
    r = q(x)
    return r, q.args, q.keywords


def test_a_partial_of_a_frame_partial_calls_as_eager_and_breaks_at_its_attributes():
    x = torch.randn(3)
    p = functools.partial(_scaled, alpha=3)
    calls = CompiledCalls(_partial_of_frame_partial)
    got = calls(x, p)
    assert same(got, _partial_of_frame_partial(x, p))
    assert calls.delta("graph_breaks") == 1


def test_what_a_partial_made_in_the_trace_holds_is_freed():
    class Box:
        def scale(self, x):
            return x * 2

    def make(x, box):
        return functools.partial(functools.partial(box.scale), x + 1)

    box = Box()
    got = tjc.compile(make)(torch.randn(2), box)
    assert got.func.__self__ is box and not isinstance(got.func, functools.partial)
    ref = weakref.ref(box)
    del got, box
    assert ref() is None
    gc.collect()
