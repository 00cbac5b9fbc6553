"""HuggingFace objects in the trace, end to end: ModelOutputs built in the trace (read by field, item
and to_tuple(), returned as eager's: same class, keys in order, values, one object wherever reached),
ones passed in (attributes read in the graph), transformers' DynamicLayer, an HF-style LM that takes
its cache back over two steps, and the zoo's gpt2/llama/t5; the entry holds none of what is returned.
Each test skips itself where transformers is not installed. The ModelOutput contract case by case:
test_variables_model_output.py."""
import dataclasses
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import CompiledCalls, NewCache, same_exactly, same_object  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


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
            same_object(g, w)


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
        same_object(got[0], want[0])
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


def _reads_a_model_output_passed_in(x, out):
    h = out.last_hidden_state * 2 + x          # the instance __dict__: read and guarded there
    if out.hidden_states is not None:
        h = h + out.hidden_states[0]
    return h, out[0]                           # ModelOutput.__getitem__ traced: dict's items, its own order


def test_attributes_of_a_model_output_passed_in_are_read_in_the_graph():
    _model_outputs()
    x = torch.randn(3)
    calls = CompiledCalls(_reads_a_model_output_passed_in)
    for hidden in (None, (x * 3,), None):
        out = BaseModelOutputWithPast(last_hidden_state=x + 1, hidden_states=hidden)
        got, want = calls(x, out), _reads_a_model_output_passed_in(x, out)
        same_exactly(got[0], want[0])
        assert got[1] is out.last_hidden_state
    # One entry per None-ness, each hit by new objects: the tensor read as `out.last_hidden_state`
    # and as `dict.__getitem__(out, ...)` is one graph input, tied by an identity relation that
    # holds nothing (before: both pinned to that very tensor, so each new output recompiled).
    assert calls.cnt.frame_count == 2 and calls.delta("graph_breaks") == 0
    assert calls.delta("evictions") == 0 and calls.delta("hits") == 1


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
