"""tracer/variables/python_objects/weakrefs.py: `weakref.ref(obj[, callback])` made in the trace.

The contract: calling the reference gives the referent where eager's is surely alive (the frame
reaches it, or holds it in a local); a reference that leaves the trace is CPython's own reference
to the very object eager's refers to, keeps nothing alive, and keeps its callback; anything else
breaks and still matches eager.
"""
import contextlib
import io
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import compiled_like_eager  # noqa: E402


def _counted(fn):
    cnt = CompileCounter()
    return tjc.compile(fn, backend=cnt), cnt


def test_a_reference_to_an_argument_called_in_the_trace_is_the_argument():
    def scaled(x, y):
        w = weakref.ref(x)
        return w() * y

    compiled_like_eager(scaled, torch.randn(4), torch.randn(4))
    compiled, cnt = _counted(scaled)
    for x in (torch.randn(4), torch.randn(4)):   # another argument: the result follows it
        torch.testing.assert_close(compiled(x, torch.ones(4)), x)
    assert cnt.frame_count == 1


def test_a_reference_to_a_local_called_in_the_trace():
    def via_local(x):
        t = x + 1
        w = weakref.ref(t)
        return w() is t, w() * 2

    compiled_like_eager(via_local, torch.randn(3))


def test_a_returned_reference_is_cpythons_and_keeps_nothing_alive():
    def doubled(t):
        t = t * 2
        return weakref.ref(t), t

    compiled, cnt = _counted(doubled)
    before = tjc.stats()["graph_breaks"]
    wr, t = compiled(torch.randn(2, 2))
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)
    assert type(wr) is weakref.ReferenceType and wr() is t
    assert wr is weakref.ref(t), "a reference without a callback is the shared one, as in eager"
    del t
    assert wr() is None, "the reference keeps its referent alive"


def test_a_callback_survives_a_graph_break_and_fires_when_the_referent_dies():
    fired = []

    def with_callback(x):
        y = x + 1
        ref = weakref.ref(y, fired.append)
        print("break")
        return y, ref

    compiled, _ = _counted(with_callback)
    with contextlib.redirect_stdout(io.StringIO()):
        y, ref = compiled(torch.ones(3))
    assert ref() is y and not fired
    del y
    assert fired == [ref]


def test_a_reference_whose_referent_may_be_gone_breaks_and_matches_eager():
    def temporary(x):
        return weakref.ref(x * 2)() is None, x + 1

    compiled, _ = _counted(temporary)
    before = tjc.stats()["graph_breaks"]
    x = torch.randn(3)
    assert compiled(x)[0] == temporary(x)[0]
    assert tjc.stats()["graph_breaks"] - before >= 1


def test_a_referent_without_weak_references_raises_as_in_eager():
    def of_int(x):
        return weakref.ref(len(x.shape)), x

    compiled, _ = _counted(of_int)
    with pytest.raises(TypeError):
        of_int(torch.ones(2))
    with pytest.raises(TypeError):
        compiled(torch.ones(2))


# -- a reference read from the frame ----------------------------------------------------------
def _alive_or_not(x_weak, y):
    x = x_weak()
    if x is not None:
        return torch.sin(y) + x
    return torch.cos(y)


def test_calling_a_frame_reference_reads_its_referent_and_a_dead_one_recompiles():
    compiled, cnt = _counted(_alive_or_not)
    weight, y = torch.randn(4), torch.randn(4)
    x_weak = weakref.ref(weight)
    before = tjc.stats()["graph_breaks"]
    torch.testing.assert_close(compiled(x_weak, y), _alive_or_not(x_weak, y))
    other = torch.randn(4)   # another referent of the same kind: a graph input, no recompile
    torch.testing.assert_close(compiled(weakref.ref(other), y), _alive_or_not(weakref.ref(other), y))
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)
    del weight, other
    assert x_weak() is None, "the compiled entry keeps the referent alive"
    torch.testing.assert_close(compiled(x_weak, y), torch.cos(y))
    assert cnt.frame_count == 2


def test_a_frame_references_referent_compared_by_identity():
    def is_it(x_weak, weight, y):
        if x_weak() is not weight:
            return torch.sin(y)
        return torch.cos(y)

    compiled, _ = _counted(is_it)
    weight, y = torch.randn(4), torch.randn(4)
    x_weak = weakref.ref(weight)
    for args in ((x_weak, weight, y), (x_weak, torch.randn(4), y), (x_weak, weight, y)):
        torch.testing.assert_close(compiled(*args), is_it(*args))


def test_a_frame_reference_to_a_plain_object():
    class Holder:
        def __init__(self, scale):
            self.scale = scale

    def scaled(ref, x):
        return x * ref().scale

    compiled, cnt = _counted(scaled)
    a, b = Holder(2.0), Holder(3.0)
    for holder in (a, b, a):
        torch.testing.assert_close(compiled(weakref.ref(holder), torch.ones(2)), torch.ones(2) * holder.scale)
    dead = weakref.ref(a)
    del a, holder
    assert dead() is None, "the compiled entry keeps the referent alive"
