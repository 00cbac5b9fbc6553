"""Objects built and mutated in the trace, as HuggingFace model code does:
stores to cache objects passed in while other objects of their type are reached (the aliasing
check, tracer/side_effects.py), mutation of the frame's own **kwargs dict, and objects the trace
constructs. Every test compares with eager and counts graphs and breaks."""
import abc
import copy
import dataclasses
import gc
import typing
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import CompiledCalls, same_exactly  # noqa: E402

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


# -- objects the trace constructs (new_object.py) ----------------------------------------------
class NewLayer:
    def __init__(self):
        self.keys = None
        self.is_initialized = False

    def lazy_init(self, k):
        self.dtype = k.dtype
        self.keys = torch.zeros(0, *k.shape[1:], dtype=k.dtype)
        self.is_initialized = True

    def update(self, k):
        if not self.is_initialized:
            self.lazy_init(k)
        self.keys = torch.cat([self.keys, k], dim=0)
        return self.keys


class NewCache:
    """transformers' DynamicCache, reduced: built in forward, a list of layers, __len__."""
    default_layers = 2

    def __init__(self, n=None):
        self.layers = [NewLayer() for _ in range(n or self.default_layers)]

    def __len__(self):
        return len(self.layers)

    def update(self, k, i):
        return self.layers[i].update(k)

    def seq_len(self):
        return self.layers[0].keys.shape[0] if self.layers[0].is_initialized else 0


@dataclasses.dataclass
class Record:
    hidden: torch.Tensor
    cache: typing.Optional[NewCache] = None
    extra: typing.Optional[torch.Tensor] = None

    def __post_init__(self):
        self.steps = len(self.cache) if self.cache is not None else 0


def _build_and_return(x):
    cache = NewCache()
    h = x
    for i in range(len(cache)):
        h = h + cache.update(h * 2, i).sum(0)
    out = Record(h, cache=cache)
    return out, out.hidden + cache.seq_len(), isinstance(out, Record)


def _same_object(got, want):
    """Same class, same instance __dict__ (keys in order, values compared), recursively."""
    assert type(got) is type(want)
    if isinstance(want, torch.Tensor):
        same_exactly(got, want)
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same_object(g, w)
    elif hasattr(want, "__dict__") and not isinstance(want, type):
        assert list(vars(got)) == list(vars(want))
        for g, w in zip(vars(got).values(), vars(want).values()):
            _same_object(g, w)
    else:
        assert got == want


def test_objects_built_in_the_trace_are_read_and_returned_as_eager_builds_them():
    x = torch.randn(3, 4)
    calls = CompiledCalls(_build_and_return)
    for _ in range(2):
        got, want = calls(x), _build_and_return(x)
        _same_object(got[0], want[0])
        same_exactly(got[1], want[1])
        assert got[2] is True
        assert got[0].cache.layers[0] is not got[0].cache.layers[1]
    calls.check(graphs=1)


class Holder:
    pass


def _store_new_object(x, holder):
    c = NewCache(1)
    holder.cache = c                 # replayed after the graph: the rebuilt object, final state
    c.update(x, 0)
    return c.update(x + 1, 0) * 2


def test_an_object_built_in_the_trace_and_stored_on_an_argument_has_its_final_state():
    x = torch.randn(2, 3)
    calls = CompiledCalls(_store_new_object)
    for _ in range(2):
        eh, ch = Holder(), Holder()
        same_exactly(calls(x, ch), _store_new_object(x, eh))
        _same_object(ch.cache, eh.cache)
    calls.check(graphs=1)


def _returned_twice(x):
    c = NewCache(1)
    c.update(x, 0)
    return c, [c]


def test_an_object_reached_twice_after_the_graph_stays_one_object():
    x = torch.randn(2, 3)
    calls = CompiledCalls(_returned_twice)
    for _ in range(2):
        c, cs = calls(x)
        assert cs[0] is c
        _same_object(c, _returned_twice(x)[0])


def _break_with_object_live(x):
    c = NewCache(1)
    c.update(x, 0)
    print("", end="")                # a graph break: c is rebuilt for the rest of the frame
    c.update(x * 2, 0)
    return c, c.seq_len()


def test_an_object_live_at_a_graph_break_is_rebuilt_once_for_the_rest_of_the_frame():
    x = torch.randn(2, 3)
    calls = CompiledCalls(_break_with_object_live)
    for _ in range(2):
        got, want = calls(x), _break_with_object_live(x)
        _same_object(got[0], want[0])
        assert got[1] == want[1] == 4
    assert calls.delta("graph_breaks") == 1 and calls.delta("fallbacks") == 0


class Slotted:
    __slots__ = ("v",)

    def __init__(self):
        self.v = 1


class Finalised:
    def __init__(self):
        self.v = 1

    def __del__(self):
        pass


@pytest.mark.parametrize("cls", [Slotted, Finalised])   # a Python __setattr__: test_variables_object_hooks.py
def test_classes_that_rebuilding_would_change_stay_a_graph_break(cls):
    def fn(x):
        o = cls()
        return x * o.v, o
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    got, want = calls(x), fn(x)
    same_exactly(got[0], want[0])
    assert type(got[1]) is cls and got[1].v == want[1].v
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1


def test_objects_built_in_the_trace_are_not_held_by_the_entry(no_gc):
    cnt = CompileCounter()
    compiled = tjc.compile(_build_and_return, backend=cnt)
    x = torch.randn(3, 4)
    out = compiled(x)
    refs = [weakref.ref(o) for o in (out[0], out[0].cache, *out[0].cache.layers, out[0].hidden)]
    del out
    assert [r() for r in refs] == [None] * len(refs)
    out = compiled(x)                # a cache hit builds new ones
    assert cnt.frame_count == 1 and type(out[0]) is Record
    del out


def test_a_class_built_from_in_the_trace_dies_with_its_code():
    # Classes are cyclic (cls.__mro__ holds cls): gc.collect() is needed for any class. The entry
    # must hold the class weakly, by its identity guard and its source only.
    def make():
        class Local:
            def __init__(self, x):
                self.x = x * 2

        def fn(x):
            return Local(x).x + 1
        return Local, fn
    cls, fn = make()
    compiled = tjc.compile(fn, backend="eager")
    same_exactly(compiled(torch.ones(2)), torch.full((2,), 3.0))
    ref = weakref.ref(cls)
    del cls, fn, compiled
    gc.collect()
    assert ref() is None


# -- HuggingFace ModelOutput (model_output.py) -------------------------------------------------
try:
    from transformers.cache_utils import DynamicLayer
    from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
except ImportError:   # the tests below skip themselves
    BaseModelOutputWithPast = CausalLMOutputWithPast = DynamicLayer = None


def _model_outputs():
    if BaseModelOutputWithPast is None:
        pytest.skip("transformers is not installed")
    return BaseModelOutputWithPast, CausalLMOutputWithPast


def _same_model_output(got, want):
    assert type(got) is type(want)
    assert list(got.keys()) == list(want.keys())
    for f in dataclasses.fields(want):
        g, w = getattr(got, f.name), getattr(want, f.name)
        assert (g is None) == (w is None), f.name
        if isinstance(w, tuple):
            for a, b in zip(g, w):
                same_exactly(a, b)
        elif w is not None and not isinstance(w, NewCache):
            same_exactly(g, w)
        elif w is not None:
            _same_object(g, w)


def _hf_like(x):
    Base, Causal = BaseModelOutputWithPast, CausalLMOutputWithPast
    cache = NewCache(1)
    cache.update(x, 0)
    inner = Base(last_hidden_state=x * 2, past_key_values=cache, hidden_states=(x, x + 1))
    h = inner[0] + inner.last_hidden_state + inner["last_hidden_state"] + inner[2][1]
    first, *rest = inner.to_tuple()
    logits = h * 3 + first
    out = Causal(loss=logits.sum(), logits=logits, past_key_values=inner.past_key_values)
    out["hidden_states"] = inner.hidden_states
    return out, len(rest), list(inner.keys()), "attentions" in inner.keys(), 1 if inner else 0


def test_model_outputs_built_in_the_trace_are_read_and_returned_like_eager():
    _model_outputs()
    x = torch.randn(2, 3)
    calls = CompiledCalls(_hf_like)
    for _ in range(2):
        got, want = calls(x), _hf_like(x)
        _same_model_output(got[0], want[0])
        assert got[1:] == want[1:]
    calls.check(graphs=1)


def _out_of_order(x):
    out = CausalLMOutputWithPast(logits=x * 2)
    out["loss"] = x.sum()            # items now logits, loss: not what Causal(...) would make
    return out


def _none_first_field(x):
    out = BaseModelOutputWithPast(last_hidden_state=None, hidden_states=(x,))
    return out, x + 1


@pytest.mark.parametrize("fn", [_out_of_order, _none_first_field])
def test_model_outputs_a_call_would_not_rebuild_stay_correct(fn):
    _model_outputs()
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    for _ in range(2):
        got, want = calls(x), fn(x)
        got, want = (got, want) if not isinstance(got, tuple) else (got[0], want[0])
        _same_model_output(got, want)


def test_a_returned_model_output_is_not_held_by_the_entry(no_gc):
    _model_outputs()
    compiled = tjc.compile(_hf_like, backend="eager")
    x = torch.randn(2, 3)
    out = compiled(x)[0]
    refs = [weakref.ref(o) for o in (out, out.past_key_values, out.logits)]
    del out
    assert [r() for r in refs] == [None] * len(refs)


# -- the zoo's HuggingFace models --------------------------------------------------------------
# Reasons the tracer no longer gives for objects: none may be left in a zoo model's breaks or fallbacks.
_OBJECT_REASONS = ("while the trace also reads", "construction of",
                   "call to ConstantVariable(<class 'transformers.", "UserObjectVariable(DynamicCache", "UserObjectVariable(EncoderDecoderCache")


@pytest.mark.parametrize("name", ["gpt2", "llama", "t5"])
def test_zoo_models_with_caches_and_model_outputs_match_eager(name):
    from torch_jit_cache.testing import models as zoo
    if not zoo.available(name):
        pytest.skip(f"{name} needs transformers")
    model, inp = zoo.build(name)
    model.eval()
    want = model(*inp.args, **inp.kwargs)
    rep = tjc.explain(model)(*inp.args, **inp.kwargs)
    assert not [r for r in rep.break_reasons + rep.fallbacks if any(s in r for s in _OBJECT_REASONS)]
    compiled = tjc.compile(model, backend="eager")
    for _ in range(2):
        got = compiled(*inp.args, **inp.kwargs)
        assert type(got) is type(want) and list(got.keys()) == list(want.keys())
        assert type(got.past_key_values) is type(want.past_key_values)
        for g, w in zip(zoo.tensors(got), zoo.tensors(want), strict=True):
            torch.testing.assert_close(g, w)
    model.train()
    grads = []
    for fn in (model, compiled):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(0)
        zoo.loss_of(fn(*inp.args, **inp.kwargs)).backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        torch.testing.assert_close(grads[1][n], grads[0][n], msg=n)


def test_a_class_returned_by_the_trace_is_not_held_by_the_entry():
    # The class is a global of fn's module; the user deletes it while the compiled function lives.
    namespace = {}
    exec("class Local:\n    pass\n\ndef fn(x):\n    return x + 1, Local\n", namespace)
    compiled = tjc.compile(namespace["fn"], backend="eager")
    assert compiled(torch.ones(2))[1] is namespace["Local"]
    ref = weakref.ref(namespace.pop("Local"))
    gc.collect()
    assert ref() is None
    del compiled


def _shared_at_a_break(x, holder):
    c = NewCache(1)
    holder.cache = c
    c.update(x, 0)
    pair = [c]                       # a list the trace built: refused if reached twice, so once
    print("", end="")                # a break: c is a local, an item of `pair`, and stored on holder
    c.update(x * 2, 0)
    return c, pair, c.seq_len()


def test_an_object_reached_several_times_at_a_break_stays_one_object():
    x = torch.randn(2, 3)
    calls = CompiledCalls(_shared_at_a_break)
    for _ in range(2):
        ch, eh = Holder(), Holder()
        got, want = calls(x, ch), _shared_at_a_break(x, eh)
        assert got[1][0] is got[0] and ch.cache is got[0]
        _same_object(got[0], want[0])
        assert got[2] == want[2] == 4
    assert calls.delta("graph_breaks") == 1 and calls.delta("fallbacks") == 0


def _returned_in_two_places(x):
    Base = BaseModelOutputWithPast
    c = NewCache(1)
    c.update(x, 0)
    return Base(last_hidden_state=x + 1, past_key_values=c), c


def test_an_object_returned_in_two_places_stays_one_object():
    _model_outputs()
    x = torch.randn(2, 3)
    calls = CompiledCalls(_returned_in_two_places)
    for _ in range(2):
        out, c = calls(x)
        assert out.past_key_values is c and out["past_key_values"] is c
    calls.check(graphs=1)


def _none_over_an_item(x):
    out = BaseModelOutputWithPast(last_hidden_state=x, hidden_states=(x,))
    out.hidden_states = None         # the attribute is None, the item keeps (x,)
    return out["hidden_states"], out.hidden_states is None, x * 2


def test_a_field_set_to_none_keeps_its_item_as_in_eager():
    _model_outputs()
    x = torch.randn(3)
    calls = CompiledCalls(_none_over_an_item)
    for _ in range(2):
        got, want = calls(x), _none_over_an_item(x)
        assert isinstance(got[0], tuple) and len(got[0]) == 1
        same_exactly(got[0][0], want[0][0])
        assert got[1] == want[1] is True


class Sized:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n


def _lengths(x, passed):
    made = NewCache(3)
    made.__len__ = lambda: 99        # an instance attribute: len() looks on the type, never here
    return x * len(passed) + len(made)


def test_len_of_user_objects_runs_their_types_len():
    x = torch.randn(3)
    calls = CompiledCalls(_lengths)
    for n in (2, 2, 5):
        same_exactly(calls(x, Sized(n)), _lengths(x, Sized(n)))
    calls.check(graphs=2)            # n is read by the inlined __len__ and guarded: 5 recompiles


class AbstractLayer(abc.ABC):
    @abc.abstractmethod
    def update(self, k): ...


class ConcreteLayer(AbstractLayer):
    def __init__(self):
        self.keys = None

    def update(self, k):
        self.keys = k if self.keys is None else torch.cat([self.keys, k])
        return self.keys


def _abc_layers(x):
    layer = ConcreteLayer()          # an ABC with nothing abstract left: built in the trace
    layer.update(x)
    return layer, layer.update(x + 1) * 2


def _abstract(x):
    y = x * 2
    AbstractLayer()                  # TypeError in eager: refused in the trace, raised when run
    return y


def test_abc_subclasses_are_built_and_abstract_classes_still_raise():
    x = torch.randn(2, 3)
    calls = CompiledCalls(_abc_layers)
    for _ in range(2):
        got, want = calls(x), _abc_layers(x)
        _same_object(got[0], want[0])
        same_exactly(got[1], want[1])
    calls.check(graphs=1)
    abstract = CompiledCalls(_abstract)
    for _ in range(2):
        with pytest.raises(TypeError, match="abstract"):
            abstract(x)


def test_a_transformers_cache_layer_is_built_updated_and_returned_in_one_graph():
    pytest.importorskip("transformers")
    from transformers.cache_utils import DynamicLayer

    def fn(k, v):
        layer = DynamicLayer()
        layer.update(k, v)
        keys, values = layer.update(k * 2, v * 2)
        return layer, keys.sum() + values.sum(), layer.get_seq_length()
    k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
    calls = CompiledCalls(fn)
    for _ in range(2):
        got, want = calls(k, v), fn(k, v)
        _same_object(got[0], want[0])
        same_exactly(got[1], want[1])
        assert got[2] == want[2] == 6
    calls.check(graphs=1)


class TinyDecoder(torch.nn.Module):
    """A module whose forward builds a cache and a model output, as a HuggingFace model does."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 3)

    def forward(self, x):
        cache = NewCache(1)
        h = self.proj(x)
        cache.update(h, 0)
        return BaseModelOutputWithPast(last_hidden_state=h * 2, past_key_values=cache)


def test_a_module_whose_forward_builds_objects_is_freed_when_dropped(no_gc):
    _model_outputs()
    model = TinyDecoder()
    cnt = CompileCounter()
    compiled = tjc.compile(model, backend=cnt)
    x = torch.randn(2, 3)
    out = compiled(x)
    want = model(x)
    _same_model_output(out, want)
    assert cnt.frame_count == 1 and tjc.stats()["graph_breaks"] == 0
    refs = [weakref.ref(o) for o in (model, model.proj.weight, out, out.past_key_values)]
    del model, compiled, out, want
    assert [r() for r in refs] == [None] * len(refs)


def _plain_model_output(x):
    return BaseModelOutputWithPast(last_hidden_state=x * 2)


def test_remaking_a_model_output_runs_no_frame_through_the_callback():
    # Its __init__/__post_init__ frames ran through the eval-frame callback on every call before
    # (17 misses and 26 skips per call), which made a compiled forward slower than eager.
    _model_outputs()
    compiled = tjc.compile(_plain_model_output, backend="eager")
    x = torch.randn(2)
    for _ in range(3):
        _same_model_output(compiled(x), _plain_model_output(x))
    stats = tjc.stats()
    assert (stats["misses"], stats["hits"], stats["skips"], stats["fallbacks"]) == (1, 2, 0, 0)


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


def _reads_a_model_output_passed_in(x, out):
    h = out.last_hidden_state * 2 + x          # the instance __dict__: read and guarded there
    if out.hidden_states is not None:
        h = h + out.hidden_states[0]
    return h, out[0]                           # ModelOutput.__getitem__: not followed, a break


def test_attributes_of_a_model_output_passed_in_are_read_in_the_graph():
    _model_outputs()
    x = torch.randn(3)
    calls = CompiledCalls(_reads_a_model_output_passed_in)
    for hidden in (None, (x * 3,), None):
        out = BaseModelOutputWithPast(last_hidden_state=x + 1, hidden_states=hidden)
        got, want = calls(x, out), _reads_a_model_output_passed_in(x, out)
        same_exactly(got[0], want[0])
        assert got[1] is out.last_hidden_state
    assert calls.cnt.frame_count == 2 and calls.delta("graph_breaks") == 2   # one per None-ness


# -- an HF-style language model over two generation steps ----------------------------------------
class _LayerCache:
    """transformers' DynamicCache, reduced to its layer list (its real __init__ calls super())."""

    def __init__(self, n):
        self.layers = [DynamicLayer() for _ in range(n)]

    def update(self, k, v, i):
        return self.layers[i].update(k, v)


class _Attn(torch.nn.Module):
    def __init__(self, i):
        super().__init__()
        self.i = i
        self.q = torch.nn.Linear(8, 8)

    def forward(self, h, past_key_values=None):
        q = self.q(h).view(1, 1, -1, 8)
        k, v = past_key_values.update(q, q, self.i) if past_key_values is not None else (q, q)
        return torch.nn.functional.scaled_dot_product_attention(q, k, v).view(1, -1, 8)


class _LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([_Attn(i) for i in range(2)])
        self.head = torch.nn.Linear(8, 4)

    def body(self, h, past_key_values):
        if past_key_values is None:
            past_key_values = _LayerCache(len(self.layers))
        for layer in self.layers:
            h = h + layer(h, past_key_values=past_key_values)
        return BaseModelOutputWithPast(last_hidden_state=h, past_key_values=past_key_values)

    def forward(self, h, past_key_values=None):
        out = self.body(h, past_key_values)
        return CausalLMOutputWithPast(logits=self.head(out.last_hidden_state),
                                      past_key_values=out.past_key_values)


@torch.no_grad()
def test_an_hf_style_lm_builds_its_cache_in_one_graph_and_takes_it_back_equal_to_eager():
    _model_outputs()
    torch.manual_seed(0)
    model = _LM()
    cnt = CompileCounter()
    compiled = tjc.compile(model, backend=cnt)
    h1, h2 = torch.randn(1, 3, 8), torch.randn(1, 1, 8)
    want, got = model(h1), compiled(h1)
    same_exactly(got.logits, want.logits)
    assert (cnt.frame_count, tjc.stats()["graph_breaks"]) == (1, 0)   # step 1: one graph
    # Step 2 takes the cache back: layer 1 reads `keys` after layer 0 stored it, through another
    # DynamicLayer; the trace pins the two distinct (OBJECT_ALIASING) and stays equal.
    want2, got2 = model(h2, want.past_key_values), compiled(h2, got.past_key_values)
    same_exactly(got2.logits, want2.logits)
    for gl, wl in zip(got2.past_key_values.layers, want2.past_key_values.layers):
        same_exactly(gl.keys, wl.keys)
        assert gl.get_seq_length() == wl.get_seq_length() == 4


# -- copy.deepcopy in the trace (tracer/variables/copying.py) ----------------------------------
class Settings:
    """A config-like record: constants, a nested dict and list, read and copied in forward."""

    def __init__(self, n=2):
        self.num_layers = n
        self.names = {0: "a", 1: "b"}
        self.sizes = [3, 4]
        self.scale = 0.5


def _copy_and_edit(x, settings):
    x = x + 1                        # graph work first: a break at the copy would count
    mine = copy.deepcopy(settings)
    mine.num_layers += 1
    mine.names[2] = "c"
    mine.sizes.append(5)
    table = copy.deepcopy({"k": [1, 2], "s": settings.scale})
    table["k"].append(3)
    return x * mine.num_layers * len(mine.names) * sum(table["k"]), mine, table


def test_deepcopy_of_an_argument_and_a_dict_is_built_in_the_graph_and_leaves_the_originals():
    x = torch.randn(3)
    calls = CompiledCalls(_copy_and_edit)
    for _ in range(2):
        es, cs = Settings(), Settings()
        got, want = calls(x, cs), _copy_and_edit(x, es)
        same_exactly(got[0], want[0])
        _same_object(got[1], want[1])
        assert got[2] == want[2]
        _same_object(cs, Settings())                  # the argument is unchanged
        assert got[1].names is not cs.names and got[1].sizes is not cs.sizes
    calls.check(graphs=1)


def test_deepcopy_recompiles_when_what_was_copied_changes():
    x = torch.randn(3)
    calls = CompiledCalls(_copy_and_edit)
    calls(x, Settings())
    changed = Settings(3)
    same_exactly(calls(x, changed)[0], _copy_and_edit(x, Settings(3))[0])
    changed.extra = 1                                 # an attribute more: the copy has it too
    got, want = calls(x, changed), _copy_and_edit(x, changed)
    _same_object(got[1], want[1])
    calls.check(graphs=3)


def _copy_shared(x, settings):
    x = x + 1
    mine = copy.deepcopy(settings)
    mine.sizes.append(9)
    return x * len(mine.other), mine


@pytest.mark.parametrize("shared", [True, False])
def test_deepcopy_keeps_one_object_reached_twice_one_copy(shared):
    x = torch.randn(3)
    calls = CompiledCalls(_copy_shared)
    for share in (shared, not shared):
        es, cs = Settings(), Settings()
        es.other = es.sizes if share else list(es.sizes)
        cs.other = cs.sizes if share else list(cs.sizes)
        got, want = calls(x, cs), _copy_shared(x, es)
        same_exactly(got[0], want[0])   # len(mine.other) after mine.sizes.append: 3 if shared
        assert got[1].other == want[1].other and got[1].sizes == want[1].sizes
    calls.check(graphs=2)            # the aliasing recompiles


def _copy_new_object(x):
    c = NewCache(1)
    c.update(x, 0)
    d = copy.deepcopy(c)
    return d.seq_len(), c is d


def test_deepcopy_of_an_object_built_in_the_trace_without_tensors():
    # NewCache's layers start with keys=None: a copy before any tensor is stored is constants only.
    def fn(x):
        x = x + 1
        c = NewCache(2)
        d = copy.deepcopy(c)
        d.layers.append(NewLayer())
        return x + len(c.layers), d, c
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    for _ in range(2):
        got, want = calls(x), fn(x)
        same_exactly(got[0], want[0])
        _same_object(got[1], want[1])
        _same_object(got[2], want[2])
        assert got[1].layers[0] is not got[2].layers[0]
    calls.check(graphs=1)


class OwnDeepcopy:
    def __init__(self):
        self.v = 1

    def __deepcopy__(self, memo):
        o = OwnDeepcopy()
        o.v = self.v + 1
        return o


class OwnGetattribute:
    def __init__(self):
        self.v = 1

    def __getattribute__(self, name):
        return object.__getattribute__(self, name)


# (A Python __setattr__ is followed: test_variables_object_hooks.py.)
@pytest.mark.parametrize("make", [lambda x: OwnDeepcopy(), lambda x: OwnGetattribute(),
                                  lambda x: Slotted(), lambda x: Finalised(), lambda x: [x]],
                         ids=["__deepcopy__", "__getattribute__", "__slots__", "__del__", "tensor"])
def test_deepcopy_the_trace_cannot_follow_stays_a_graph_break(make):
    def fn(x, obj):
        y = x * 2                    # a graph before the copy: the cut there counts as a break
        c = copy.deepcopy(obj)
        return y + 1, c
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    obj = make(x)
    got, want = calls(x, obj), fn(x, obj)
    same_exactly(got[0], want[0])
    assert type(got[1]) is type(want[1])
    if isinstance(want[1], list):
        same_exactly(got[1][0], want[1][0])
        assert got[1][0] is not x
    else:
        assert got[1].v == want[1].v
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1


def test_deepcopy_of_a_tensor_built_copy_is_refused_in_the_copy_of_a_new_object():
    calls = CompiledCalls(_copy_new_object)
    x = torch.randn(2, 3)
    got, want = calls(x), _copy_new_object(x)
    assert got == want
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1


def test_copies_made_in_the_trace_and_their_originals_are_freed_when_dropped(no_gc):
    cnt = CompileCounter()
    compiled = tjc.compile(_copy_and_edit, backend=cnt)
    x = torch.randn(3)
    settings = Settings()
    settings.sub = Holder()          # copied too: a second object built in the trace
    out = compiled(x, settings)
    assert type(out[1].sub) is Holder and out[1].sub is not settings.sub
    refs = [weakref.ref(o) for o in (settings, settings.sub, out[1], out[1].sub)]
    del out, settings
    assert [r() for r in refs] == [None] * len(refs)
    settings = Settings()
    settings.sub = Holder()
    out = compiled(x, settings)      # a cache hit builds new ones
    assert cnt.frame_count == 1 and type(out[1]) is Settings
    del out
