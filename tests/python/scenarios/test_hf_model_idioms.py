"""HuggingFace model code idioms traced without a graph break, each mimicked by a synthetic class: a dict subclass whose Python `get` calls `super().get(str(model.__class__))`
(transformers' _CanRecordRegistry), `hasattr(tensor, name)`, os.environ reads. Each is compared
with eager and counted; a guard test changes what was read (recompile, eager's answer) and a
lifetime test drops what the cache saw."""
import collections.abc
import gc
import os
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402


def counts(fn, *args):
    rep = tjc.explain(fn)(*args)
    return rep.graph_count, rep.graph_break_count, len(rep.fallbacks)


# -- a dict subclass with Python methods (_CanRecordRegistry) --------------------------------------

class Registry(dict):
    def __setitem__(self, model, flags):
        super().__setitem__(str(model.__class__), flags)

    def get(self, model):
        return super().get(str(model.__class__)) or {}


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2


class Shift(torch.nn.Module):
    def forward(self, x):
        return x + 1


REGISTRY = Registry()
REGISTRY[Scale()] = {"hidden_states": 1, "attentions": 2}


def read_registry(x, model):
    flags = REGISTRY.get(model)
    keys = {f"output_{k}": True for k in flags}
    if "attentions" in flags:
        x = x + 10
    try:   # transformers reads it inside a try block (capture_outputs' wrapper)
        return model(x) + len(keys) + (str(model.__class__) in REGISTRY)
    finally:
        pass


def test_dict_subclass_get_through_super_is_traced():
    # Failed before: "call of Registry.get (a type the tracer does not model)".
    x = torch.ones(2)
    for model in (Scale(), Shift()):   # a key present, a key absent
        assert counts(read_registry, x, model) == (1, 0, 0)
        torch.testing.assert_close(tjc.compile(read_registry)(x, model), read_registry(x, model))


class Flags(dict):
    """dict's own get, [] and `in`, plus a Python method."""

    def scaled(self, key):
        return self[key] * 2


def test_dict_subclass_subscript_and_contains():
    reg = Flags({"a": 1.5, 7: 2})

    def f(x, r):
        return x * r["a"] + ("b" in r) + (7 in r) + r.get("z", 3) + r.get(7) + r.scaled("a")

    x = torch.ones(2)
    assert counts(f, x, reg) == (1, 0, 0)
    torch.testing.assert_close(tjc.compile(f)(x, reg), f(x, reg))


def test_changing_what_was_read_from_a_dict_subclass_recompiles():
    reg = Flags({"a": 1.5})

    def f(x, r):
        return x * (r.get("a") or 0) + ("b" in r)

    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x, reg), f(x, reg))
    torch.testing.assert_close(compiled(x, Flags({"a": 1.5})), f(x, reg))   # another, equal: a hit
    assert cnt.frame_count == 1
    reg["a"] = 4.0          # the value read
    torch.testing.assert_close(compiled(x, reg), f(x, reg))
    reg["b"] = 1            # a key found absent
    torch.testing.assert_close(compiled(x, reg), f(x, reg))
    del reg["a"]            # a key found present
    torch.testing.assert_close(compiled(x, reg), f(x, reg))
    assert cnt.frame_count == 4


def test_registry_of_a_model_class_recompiles_when_registered():
    reg = Registry()
    model = Shift()

    def f(x, m):
        return m(x) + len(reg.get(m))

    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x, model), f(x, model))
    reg[model] = {"k": 1, "j": 2}
    torch.testing.assert_close(compiled(x, model), f(x, model))
    assert cnt.frame_count == 2


def test_dict_subclass_and_its_class_freed_when_dropped(no_gc):
    class Local(Flags):
        pass

    reg = Local({"a": 2.0})

    def f(x, r):
        return x * r["a"] + ("a" in r)

    compiled = tjc.compile(f, backend="eager")
    torch.testing.assert_close(compiled(torch.ones(2), reg), f(torch.ones(2), reg))
    ref = weakref.ref(reg)
    del reg
    assert ref() is None   # the instance: by reference counting alone
    cls_ref = weakref.ref(Local)
    del Local, compiled, f
    gc.collect()   # a class's own cycles (its MRO, __dict__) are gc's by design
    assert cls_ref() is None


# -- hasattr on a tensor (transformers' is_jax_jitting: `if not hasattr(x, "jax")`) ---------------

def jax_free(x, mask):
    y = mask.float() * 2
    if not hasattr(x, "jax") and not hasattr(y, "jax") and hasattr(x, "view") and hasattr(x, "dtype"):
        return x + y
    return x - y


def test_hasattr_on_tensors_is_answered_from_type_and_instance_dict():
    # Failed before: "hasattr on TensorVariable".
    x, mask = torch.ones(2), torch.tensor([True, False])
    assert counts(jax_free, x, mask) == (1, 0, 0)
    torch.testing.assert_close(tjc.compile(jax_free)(x, mask), jax_free(x, mask))


def test_an_attribute_set_on_a_tensor_recompiles():
    cnt = CompileCounter()
    compiled = tjc.compile(jax_free, backend=cnt)
    x, mask = torch.ones(2), torch.tensor([True, False])
    torch.testing.assert_close(compiled(x, mask), jax_free(x, mask))
    x.jax = lambda: None      # the instance __dict__'s keys were guarded
    torch.testing.assert_close(compiled(x, mask), jax_free(x, mask))
    torch.testing.assert_close(compiled(torch.ones(2), mask), jax_free(torch.ones(2), mask))
    assert cnt.frame_count == 2


def test_tensor_asked_with_hasattr_freed_when_dropped(no_gc):
    compiled = tjc.compile(jax_free, backend="eager")
    x, mask = torch.ones(2), torch.tensor([True, False])
    compiled(x, mask)
    refs = [weakref.ref(x), weakref.ref(mask)]
    del x, mask
    assert [r() for r in refs] == [None, None]


# -- os.environ reads (transformers' sdpa_attention: TRANSFORMERS_SDPA_FORCE_GQA) -----------------

_VAR = "TJC_TEST_LEFTOVERS_FLAG"


def read_environ(x):
    if os.environ.get(_VAR, "0") == "1":
        x = x * 3
    if _VAR in os.environ and os.environ[_VAR] == "1":
        x = x + 1
    return x + len(os.getenv("TJC_TEST_SURELY_UNSET", ""))


@pytest.fixture
def unset_flag():
    os.environ.pop(_VAR, None)
    yield
    os.environ.pop(_VAR, None)


def test_environ_reads_are_constants(unset_flag):
    # Failed before: "a dict with keys other than str and int at <frozen os>" (6 breaks in llama).
    x = torch.ones(2)
    assert counts(read_environ, x) == (1, 0, 0)
    os.environ[_VAR] = "1"
    assert counts(read_environ, x) == (1, 0, 0)
    torch.testing.assert_close(tjc.compile(read_environ)(x), read_environ(x))


def test_changing_an_environment_variable_recompiles(unset_flag):
    cnt = CompileCounter()
    compiled = tjc.compile(read_environ, backend=cnt)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), read_environ(x))
    torch.testing.assert_close(compiled(x), read_environ(x))
    assert cnt.frame_count == 1
    os.environ[_VAR] = "1"     # set: its absence was guarded
    torch.testing.assert_close(compiled(x), read_environ(x))
    os.environ[_VAR] = "2"     # changed: its value was guarded
    torch.testing.assert_close(compiled(x), read_environ(x))
    del os.environ[_VAR]       # unset again: the first entry serves it
    torch.testing.assert_close(compiled(x), read_environ(x))
    assert cnt.frame_count == 3


def test_environ_reader_freed_when_dropped(no_gc, unset_flag):
    def reader(x):
        return x + (os.environ.get(_VAR) is None)

    compiled = tjc.compile(reader, backend="eager")
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x), reader(x))
    refs = [weakref.ref(reader), weakref.ref(x)]
    del reader, compiled, x
    assert [r() for r in refs] == [None, None]


# -- a loss module built in forward (T5ForConditionalGeneration: CrossEntropyLoss(ignore_index=-100)) --

def lm_loss(logits, labels):
    loss_fct = torch.nn.CrossEntropyLoss(ignore_index=-100)
    mse = torch.nn.MSELoss(reduction="sum")
    return loss_fct(logits.view(-1, logits.size(-1)), labels.view(-1)) + mse(logits, logits * 2)


def test_loss_module_built_in_forward_is_its_functional_form():
    # Failed before: "call to ClassVariable(CrossEntropyLoss)", and its resume function guarded the
    # new module by identity, so every call compiled again.
    logits = torch.randn(2, 3, 5, requires_grad=True)
    labels = torch.tensor([[1, -100, 4], [0, 2, -100]])
    assert counts(lm_loss, logits, labels) == (1, 0, 0)
    cnt = CompileCounter()
    compiled = tjc.compile(lm_loss, backend=cnt)
    got = compiled(logits, labels)
    torch.testing.assert_close(got, lm_loss(logits, labels))
    (g,) = torch.autograd.grad(got, logits)
    (e,) = torch.autograd.grad(lm_loss(logits, labels), logits)
    torch.testing.assert_close(g, e)
    compiled(logits, labels)
    assert cnt.frame_count == 1


# -- iteration over a collections.abc.Sequence built in the trace (_PerLayerConfigView) ------------

class LayerConfig:
    def __init__(self, n, scale):
        self.num_hidden_layers = n
        self.scale = scale


class PerLayerView(collections.abc.Sequence):
    """__getitem__ and __len__ only: Sequence's __iter__ asks [0], [1], ... until IndexError."""

    def __init__(self, config):
        self._config = config

    def __len__(self):
        return self._config.num_hidden_layers

    def __getitem__(self, i):
        if i < 0:
            i += len(self)
        if i < 0 or i >= len(self):
            raise IndexError("list index out of range")
        return self._config.scale * (i + 1)


def per_layer(x, config):
    kinds = []
    for scale in PerLayerView(config):
        x = x * scale
        kinds.append("big" if scale > 2 else "small")
    return x, kinds, list(PerLayerView(config))


def test_sequence_iteration_over_a_user_getitem():
    # Failed before: "iteration over NewObjectVariable(PerLayerView)".
    x, config = torch.ones(2), LayerConfig(3, 1.5)
    assert counts(per_layer, x, config) == (1, 0, 0)
    got, want = tjc.compile(per_layer)(x, config), per_layer(x, config)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]


def test_sequence_iteration_stops_at_index_error_not_at_len():
    class Short(PerLayerView):   # __len__ says 5, __getitem__ stops at 2: Python stops at 2
        def __len__(self):
            return 5

        def __getitem__(self, i):
            if i >= 2:
                raise IndexError(i)
            return i + 1

    def f(x):
        return x + sum(Short(None)), [v for v in Short(None)]

    assert counts(f, torch.ones(2)) == (1, 0, 0)
    got, want = tjc.compile(f)(torch.ones(2)), f(torch.ones(2))
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]


def test_changing_the_sequence_length_recompiles():
    cnt = CompileCounter()
    compiled = tjc.compile(per_layer, backend=cnt)
    x, config = torch.ones(2), LayerConfig(2, 1.5)
    for n in (2, 2, 4):
        config.num_hidden_layers = n   # read by __getitem__'s bound check: guarded
        got, want = compiled(x, config), per_layer(x, config)
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
    assert cnt.frame_count == 2


def test_sequence_config_freed_when_dropped(no_gc):
    compiled = tjc.compile(per_layer, backend="eager")
    config = LayerConfig(2, 3.0)
    compiled(torch.ones(2), config)
    ref = weakref.ref(config)
    del config
    assert ref() is None


# -- super() in the __init__ of an object built in the trace (DynamicCache(config=...)) -------------

class BaseCache:
    def __init__(self, n, scale=1.0):
        self.layers = [scale] * n


class DerivedCache(BaseCache):
    def __init__(self, n):
        super().__init__(n, scale=2.0)
        self.n = n


def build_cache(x):
    cache = DerivedCache(3)
    for s in cache.layers:
        x = x * s
    return x, cache.n


def test_super_in_init_of_an_object_built_in_the_trace():
    # Failed before: "super(DerivedCache, NewObjectVariable(DerivedCache)): not an instance with a source".
    x = torch.ones(2)
    assert counts(build_cache, x) == (1, 0, 0)
    got, want = tjc.compile(build_cache)(x), build_cache(x)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]


def test_replacing_the_base_init_recompiles():
    cnt = CompileCounter()
    compiled = tjc.compile(build_cache, backend=cnt)
    x = torch.ones(2)
    compiled(x)
    original = BaseCache.__init__

    def other(self, n, scale=1.0):
        self.layers = [scale + 1] * n

    BaseCache.__init__ = other   # read through DerivedCache.__mro__[1].__init__: guarded
    try:
        torch.testing.assert_close(compiled(x)[0], build_cache(x)[0])
    finally:
        BaseCache.__init__ = original
    assert cnt.frame_count == 2


def test_sequence_contains_index_count_and_reversed():
    class Short(PerLayerView):   # reversed() walks down from __len__, the rest up to IndexError
        def __len__(self):
            return 3

        def __getitem__(self, i):
            if i >= 3:
                raise IndexError(i)
            return (i + 1) % 3

    def f(x):
        s = Short(None)
        return (x + (2 in s) + (5 in s) + s.index(2) + s.count(1) + s.index(0, 1),
                list(reversed(s)))

    assert counts(f, torch.ones(2)) == (1, 0, 0)
    got, want = tjc.compile(f)(torch.ones(2)), f(torch.ones(2))
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]


# -- a legacy encoder-decoder config's decoder part (DynamicCache(config=...) in T5Stack) ----------

def decoder_config(x, config):
    # get_text_config deep-copies the config (its class writes __getattribute__ and __setattr__:
    # object_hooks.py), then reads the copy's to_dict() and renames its decoder keys.
    text = config.get_text_config(decoder=True)
    return x * text.num_hidden_layers * text.hidden_size, text.to_dict(), text


def test_the_decoder_config_of_a_t5_config_is_copied_in_the_graph():
    # Failed before: "copy.deepcopy of a T5Config: it defines its own __setattr__".
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(num_layers=2, num_decoder_layers=3, d_model=16)
    x = torch.ones(2)
    assert counts(decoder_config, x, config) == (1, 0, 0)
    compiled = tjc.compile(decoder_config)
    for _ in range(2):
        got, want = compiled(x, config), decoder_config(x, config)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1] and vars(got[2]) == vars(want[2]) and got[2] is not config
    config.d_model = 8                    # read through the config's __dict__: recompiles
    got, want = compiled(x, config), decoder_config(x, config)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]


def test_a_config_copied_in_the_graph_is_freed_when_dropped(no_gc):
    transformers = pytest.importorskip("transformers")
    config = transformers.T5Config(num_layers=2, d_model=16)
    compiled = tjc.compile(decoder_config)
    out = compiled(torch.ones(2), config)
    refs = [weakref.ref(config), weakref.ref(out[2])]
    del out, config
    assert [r() for r in refs] == [None, None]
