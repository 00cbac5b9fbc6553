"""Objects built and mutated in the trace, as HuggingFace model code does (issue 11, "objects"):
stores to cache objects passed in while other objects of their type are reached (the aliasing
check, tracer/side_effects.py), mutation of the frame's own **kwargs dict, and objects the trace
constructs. Every test compares with eager and counts graphs and breaks."""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class _Calls:
    """A compiled function, its counter and the stats at its start: graphs, breaks, fallbacks."""

    def __init__(self, fn):
        self.cnt = CompileCounter()
        self.compiled = tjc.compile(fn, backend=self.cnt)
        self.before = tjc.stats()

    def __call__(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    def delta(self, key):
        return tjc.stats()[key] - self.before[key]

    def check(self, *, graphs, breaks=0):
        assert (self.cnt.frame_count, self.delta("graph_breaks"), self.delta("fallbacks")) == \
            (graphs, breaks, 0)


def _same(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=0)


# -- stores to objects passed in: aliasing checked name by name --------------------------------
class Layer:
    """transformers.cache_utils.DynamicLayer, reduced: lazily initialised, then updated."""

    def __init__(self):
        self.keys = None

    def update(self, k):
        if self.keys is None:
            self.keys = k
        else:
            self.keys = torch.cat([self.keys, k], dim=0)
        return self.keys


class Cache:
    def __init__(self, n=2):
        self.layers = [Layer() for _ in range(n)]


def _update_layer(x, cache, i: int):
    # One layer per frame, as in a decoder block: wrapping `layers` reaches every layer.
    return cache.layers[i].update(x) * 2


def test_a_cache_passed_in_is_updated_in_one_graph_while_its_other_layers_are_reached():
    x = torch.randn(2, 3)
    calls = _Calls(_update_layer)
    for _ in range(2):
        ec, cc = Cache(), Cache()
        _same(calls(x, cc, 0), _update_layer(x, ec, 0))
        for el, cl in zip(ec.layers, cc.layers):
            assert (cl.keys is None) == (el.keys is None)
        _same(cc.layers[0].keys, ec.layers[0].keys)
    calls.check(graphs=1)


def _update_layers(x, cache):
    a = cache.layers[0].update(x)
    b = cache.layers[1].update(x * 2)  # reads `keys` of another Layer after the first stored it
    return a.sum(0) + b.sum(0)


def test_a_cache_whose_layers_may_be_one_object_equals_eager():
    # layers[0] is layers[1] on some calls: the second update reads `keys` through another source
    # after the first stored it, so the trace refuses that read (a break), whatever the objects are.
    x = torch.randn(2, 3)
    calls = _Calls(_update_layers)
    for shared in (False, True, False, True):
        ec, cc = Cache(), Cache()
        if shared:
            ec.layers[1], cc.layers[1] = ec.layers[0], cc.layers[0]
        _same(calls(x, cc), _update_layers(x, ec))
        _same(cc.layers[0].keys, ec.layers[0].keys)
        _same(cc.layers[1].keys, ec.layers[1].keys)
    assert calls.delta("graph_breaks") == 1 and calls.delta("fallbacks") == 0


def _store_then_read_other(x, a, b):
    a.v = x + 1
    return b.v * 2


def test_a_read_after_a_store_through_another_object_of_that_type_is_refused():
    x = torch.randn(3)
    calls = _Calls(_store_then_read_other)
    for shared in (False, True, False):
        ea, ca = Layer(), Layer()
        ea.v, ca.v = x, x.clone()
        eb, cb = (ea, ca) if shared else (Layer(), Layer())
        if not shared:
            eb.v, cb.v = x * 3, x * 3
        _same(calls(x, ca, cb), _store_then_read_other(x, ea, eb))
        _same(ca.v, ea.v)
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1


def _store_then_read_own(x, a, b):
    y = b.v * 2                       # read before the store: the same whether a is b or not
    a.v = x + 1
    return y + a.v + b.w


def test_reads_before_the_store_and_of_other_names_stay_in_the_graph():
    x = torch.randn(3)
    calls = _Calls(_store_then_read_own)
    for shared in (False, True):
        ea, ca, eb, cb = Layer(), Layer(), Layer(), Layer()
        for o in (ea, ca, eb, cb):
            o.v, o.w = x * 3, x * 5
        if shared:
            eb, cb = ea, ca
        _same(calls(x, ca, cb), _store_then_read_own(x, ea, eb))
        _same(ca.v, ea.v)
        _same(cb.v, eb.v)
    calls.check(graphs=1)


# -- the frame's own **kwargs ------------------------------------------------------------------
def _pop_kwargs(x, opts, **kwargs):
    scale = kwargs.pop("scale", 1.0)
    kwargs.setdefault("shift", 0.0)
    kwargs["seen"] = True
    kwargs.update(extra=2)
    return x * scale + kwargs["shift"] + opts["bias"], kwargs


def test_the_frames_kwargs_dict_is_mutated_in_the_graph():
    # **kwargs is a new dict at every call: it cannot be the `opts` dict also read here.
    x = torch.randn(3)
    calls = _Calls(_pop_kwargs)
    for _ in range(2):
        got, gkw = calls(x, {"bias": 1.0}, scale=2.0, shift=0.5)
        want, wkw = _pop_kwargs(x, {"bias": 1.0}, scale=2.0, shift=0.5)
        _same(got, want)
        assert gkw == wkw and list(gkw) == list(wkw)
    calls.check(graphs=1)


def test_kwargs_passed_on_as_a_dict_is_still_a_copy():
    x = torch.randn(3)
    calls = _Calls(_pop_kwargs)
    d_e, d_c = {"scale": 2.0, "bias": 1.0}, {"scale": 2.0, "bias": 1.0}
    _same(calls(x, d_c, **d_c)[0], _pop_kwargs(x, d_e, **d_e)[0])
    assert d_c == d_e == {"scale": 2.0, "bias": 1.0}


def test_objects_mutated_by_the_trace_are_freed_when_dropped(no_gc):
    compiled = tjc.compile(_update_layer, backend="eager")
    cache = Cache()
    compiled(torch.randn(2, 3), cache, 0)
    refs = [weakref.ref(o) for o in (cache, cache.layers[0], cache.layers[1], cache.layers[0].keys)]
    del cache
    assert [r() for r in refs] == [None] * len(refs)
    del compiled
