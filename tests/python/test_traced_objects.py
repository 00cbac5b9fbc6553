"""Objects passed in and mutated by the trace, as HuggingFace model code does: stores to cache
objects passed in while other objects of their type are reached (the aliasing check,
tracer/side_effects.py), the same rule exhaustively over short programs through two objects that may
be one, and mutation of the frame's own **kwargs dict. Every test compares with eager and counts
graphs and breaks. Objects the trace constructs: test_variables_new_object.py; HuggingFace objects:
test_traced_model_outputs.py; copy.deepcopy: test_variables_copying.py."""
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls, Holder, same_exactly  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


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
    calls = CompiledCalls(_update_layer)
    for _ in range(2):
        ec, cc = Cache(), Cache()
        same_exactly(calls(x, cc, 0), _update_layer(x, ec, 0))
        for el, cl in zip(ec.layers, cc.layers):
            assert (cl.keys is None) == (el.keys is None)
        same_exactly(cc.layers[0].keys, ec.layers[0].keys)
    calls.check(graphs=1)


def _update_layers(x, cache):
    a = cache.layers[0].update(x)
    b = cache.layers[1].update(x * 2)  # reads `keys` of another Layer after the first stored it
    return a.sum(0) + b.sum(0)


def test_a_cache_whose_layers_may_be_one_object_equals_eager():
    # layers[0] is layers[1] on some calls: the second update reads `keys` through another source
    # after the first stored it. What it reads depends on whether they are one object, so the
    # trace pins that (OBJECT_ALIASING): one graph per relation, no break, and a call where the
    # relation changes recompiles instead of reading a stale `keys` (test_aliasing_guards.py).
    x = torch.randn(2, 3)
    calls = CompiledCalls(_update_layers)
    for shared in (False, True, False, True):
        ec, cc = Cache(), Cache()
        if shared:
            ec.layers[1], cc.layers[1] = ec.layers[0], cc.layers[0]
        same_exactly(calls(x, cc), _update_layers(x, ec))
        same_exactly(cc.layers[0].keys, ec.layers[0].keys)
        same_exactly(cc.layers[1].keys, ec.layers[1].keys)
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0
    assert calls.cnt.frame_count == 2 and calls.delta("recompiles") == 1


def _store_then_read_own(x, a, b):
    y = b.v * 2                       # read before the store: the same whether a is b or not
    a.v = x + 1
    return y + a.v + b.w


def test_reads_before_the_store_and_of_other_names_stay_in_the_graph():
    x = torch.randn(3)
    calls = CompiledCalls(_store_then_read_own)
    for shared in (False, True):
        ea, ca, eb, cb = Layer(), Layer(), Layer(), Layer()
        for o in (ea, ca, eb, cb):
            o.v, o.w = x * 3, x * 5
        if shared:
            eb, cb = ea, ca
        same_exactly(calls(x, ca, cb), _store_then_read_own(x, ea, eb))
        same_exactly(ca.v, ea.v)
        same_exactly(cb.v, eb.v)
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
    calls = CompiledCalls(_pop_kwargs)
    for _ in range(2):
        got, gkw = calls(x, {"bias": 1.0}, scale=2.0, shift=0.5)
        want, wkw = _pop_kwargs(x, {"bias": 1.0}, scale=2.0, shift=0.5)
        same_exactly(got, want)
        assert gkw == wkw and list(gkw) == list(wkw)
    calls.check(graphs=1)


def test_kwargs_passed_on_as_a_dict_is_still_a_copy():
    x = torch.randn(3)
    calls = CompiledCalls(_pop_kwargs)
    d_e, d_c = {"scale": 2.0, "bias": 1.0}, {"scale": 2.0, "bias": 1.0}
    same_exactly(calls(x, d_c, **d_c)[0], _pop_kwargs(x, d_e, **d_e)[0])
    assert d_c == d_e == {"scale": 2.0, "bias": 1.0}


def test_objects_mutated_by_the_trace_are_freed_when_dropped(no_gc):
    compiled = tjc.compile(_update_layer, backend="eager")
    cache = Cache()
    compiled(torch.randn(2, 3), cache, 0)
    refs = [weakref.ref(o) for o in (cache, cache.layers[0], cache.layers[1], cache.layers[0].keys)]
    del cache
    assert [r() for r in refs] == [None] * len(refs)
    del compiled


# -- the aliasing rule, exhaustively over short programs --------------------------------------
_ALIAS_OPS = ("a.v = x + 1", "b.v = x * 2", "r = r + a.v", "r = r + b.v", "b.w = a.v", "r = r + b.w")


# Every program of three ops that starts with a store (a read first sees the same either way).
@pytest.mark.parametrize("ops", [(i, j, k) for i in (0, 1, 4) for j in range(6) for k in range(6)])
def test_stores_and_reads_through_two_objects_equal_eager_whether_or_not_they_are_one(ops):
    body = "\n".join(f"    {_ALIAS_OPS[i]}" for i in ops)
    namespace = {}
    exec(f"def fn(x, a, b):\n    r = x\n{body}\n    return r\n", namespace)
    fn = namespace["fn"]
    compiled = tjc.compile(fn, backend="eager")
    x = torch.randn(3)
    for shared in (False, True, False, True):
        def make():
            a = Holder()
            a.v, a.w = x * 5, x * 7
            if shared:
                return a, a
            b = Holder()
            b.v, b.w = x * 11, x * 13
            return a, b
        (ea, eb), (ca, cb) = make(), make()
        same_exactly(compiled(x, ca, cb), fn(x, ea, eb))
        for e, c in ((ea, ca), (eb, cb)):
            assert vars(e).keys() == vars(c).keys()
            for k in vars(e):
                same_exactly(getattr(c, k), getattr(e, k))
