"""Reading user objects and classes as HuggingFace model code does: a
config whose class has a trusted __getattribute__ (transformers' PreTrainedConfig), properties,
hasattr/getattr with a default, Mapping-style registries (`key in ALL_ATTENTION_FUNCTIONS`, `.get`),
super(), classmethods and staticmethods, `type(self).forward`, and a function's __code__ and names.
Each is compared with eager and counted; guards and lifetimes are checked where they apply."""
import collections.abc
import functools
import gc
import inspect
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402


def counts(fn, *args):
    rep = tjc.explain(fn)(*args)
    return rep.graph_count, rep.graph_break_count


# -- a config with a trusted __getattribute__ ---------------------------------------------------

transformers = pytest.importorskip("transformers")


class TinyConfig(transformers.PretrainedConfig):
    model_type = "tiny-test"
    attribute_map = {"n_embd": "hidden_size"}

    def __init__(self, hidden_size=4, scale=2.0, use_bias=True, **kwargs):
        self.hidden_size = hidden_size
        self.scale = scale
        self.use_bias = use_bias
        super().__init__(**kwargs)


class ConfigModel(torch.nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.lin = torch.nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, x):
        y = self.lin(x) * self.config.scale            # a plain attribute
        if self.config.n_embd == 4:                     # renamed by attribute_map
            y = y + 1
        if getattr(self.config, "use_bias", False) and hasattr(self.config, "hidden_size"):
            y = y - 0.5
        if getattr(self.config, "missing_name", None) is None:
            y = y * 3
        if self.config._attn_implementation in (None, "eager", "sdpa"):  # a property
            y = y.relu()
        return y


def test_config_attributes_are_traced_in_one_graph():
    # Failed before: "attribute 'scale' of a TinyConfig (a type the tracer does not model)".
    model = ConfigModel(TinyConfig())
    x = torch.randn(2, 4)
    assert counts(model, x) == (1, 0)
    torch.testing.assert_close(tjc.compile(model)(x), model(x))


def test_changing_a_config_attribute_recompiles():
    model = ConfigModel(TinyConfig())
    x = torch.randn(2, 4)
    cnt = CompileCounter()
    compiled = tjc.compile(model, backend=cnt)
    torch.testing.assert_close(compiled(x), model(x))
    model.config.scale = 5.0
    torch.testing.assert_close(compiled(x), model(x))
    model.config.use_bias = False
    torch.testing.assert_close(compiled(x), model(x))
    model.config.missing_name = 1          # hasattr/getattr's False answer was guarded
    torch.testing.assert_close(compiled(x), model(x))
    assert cnt.frame_count == 4


class Untrusted:
    def __init__(self):
        self.scale = 2.0

    def __getattribute__(self, name):   # not a trusted renaming: traced as Python
        return object.__getattribute__(self, name)


def test_untrusted_getattribute_is_traced():
    obj = Untrusted()

    def f(x, o):
        return (x + 1) * o.scale + 1

    x = torch.randn(3)
    graphs, breaks = counts(f, x, obj)
    assert (graphs, breaks) == (1, 0)
    torch.testing.assert_close(tjc.compile(f)(x, obj), f(x, obj))


# -- functions: __code__, names ----------------------------------------------------------------

def with_config_defaults(func):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        if "scale" in func.__code__.co_varnames:
            index = func.__code__.co_varnames.index("scale") - 1
            if len(args) <= index and kwargs.get("scale") is None:
                kwargs["scale"] = 3.0
        tag = 1.0 if func.__name__ == "forward" and func.__qualname__.endswith(".forward") else 2.0
        return func(self, *args, **kwargs) + tag * func.__code__.co_argcount
    return wrapper


class Decorated(torch.nn.Module):
    @with_config_defaults
    def forward(self, x, scale=None):
        return x * scale


def test_function_code_and_names_are_read():
    # Failed before: "attribute '__code__' of function forward".
    m, x = Decorated(), torch.randn(3)
    assert counts(m, x) == (1, 0)
    torch.testing.assert_close(tjc.compile(m)(x), m(x))


# -- Mapping registries (transformers' AttentionInterface) ---------------------------------------

class Registry(collections.abc.MutableMapping):
    _global_mapping = {"double": lambda t: t * 2}

    def __init__(self):
        self._local_mapping = {}

    def __getitem__(self, key):
        if key in self._local_mapping:
            return self._local_mapping[key]
        return self._global_mapping[key]

    def __setitem__(self, key, value):
        self._local_mapping.update({key: value})

    def __delitem__(self, key):
        del self._local_mapping[key]

    def __iter__(self):
        return iter({**self._global_mapping, **self._local_mapping})

    def __len__(self):
        return len(self._global_mapping.keys() | self._local_mapping.keys())

    def pick(self, name, default):
        if name != "plain" and name not in self:
            raise KeyError(name)
        return super().get(name, default)


REGISTRY = Registry()


def use_registry(x, name):
    fn = REGISTRY.pick(name, lambda t: t + 100)
    if "triple" in REGISTRY:
        x = REGISTRY["triple"](x)
    return fn(x) + (1 if REGISTRY.get("absent") is None else 0)


def test_mapping_membership_get_and_subscript():
    # Failed before: "membership test in UserObjectVariable(Registry ...)".
    x = torch.randn(3)
    assert counts(use_registry, x, "double") == (1, 0)
    assert counts(use_registry, x, "plain") == (1, 0)   # .get's default
    compiled = tjc.compile(use_registry)
    torch.testing.assert_close(compiled(x, "double"), use_registry(x, "double"))
    REGISTRY["triple"] = lambda t: t * 3          # a key added later: guarded, recompiles
    try:
        torch.testing.assert_close(compiled(x, "double"), use_registry(x, "double"))
        torch.testing.assert_close(compiled(x, "plain"), use_registry(x, "plain"))
    finally:
        del REGISTRY["triple"]


class CatchingGetitem(collections.abc.Mapping):
    """A __getitem__ that catches its own KeyError: `in` must not read that KeyError as absent."""

    def __init__(self):
        self.d = {}

    def __getitem__(self, key):
        try:
            return self.d[key]
        except KeyError:
            return 0

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


def test_keyerror_caught_inside_getitem_is_not_absence():
    obj = CatchingGetitem()

    def f(x, o):
        return x + (1 if "k" in o else 2)

    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(f)(x, obj), f(x, obj))   # eager: "k" in o is True


# -- super(), classmethods, staticmethods, Class.forward -----------------------------------------

class Base(torch.nn.Module):
    offset = 1.0

    def forward(self, x):
        return x + self.offset

    @classmethod
    def factor(cls):
        return cls.offset * 2

    @staticmethod
    def square(t):
        return t * t


class Child(Base):
    offset = 3.0

    def forward(self, x):
        y = super().forward(x) + super(Child, self).forward(x)
        y = y * self.factor() + Child.factor() + self.square(x) + Base.square(x)
        if type(self).forward is Child.forward:
            y = Base.forward(self, y)
        return y


def test_super_classmethods_staticmethods_and_class_forward():
    # Failed before: "call to ConstantVariable(<class 'super'>)".
    m, x = Child(), torch.randn(3)
    assert counts(m, x) == (1, 0)
    torch.testing.assert_close(tjc.compile(m)(x), m(x))


class NoGradHelper(torch.nn.Module):
    @torch.no_grad()
    def stats(self, x):
        return x.mean()

    def forward(self, x):
        return x * self.stats(x)


def test_no_grad_method():
    m, x = NoGradHelper(), torch.randn(3, requires_grad=True)
    got, expected = tjc.compile(m)(x), m(x)
    torch.testing.assert_close(got, expected)
    got.sum().backward()
    g1 = x.grad.clone()
    x.grad = None
    expected.sum().backward()
    torch.testing.assert_close(g1, x.grad)


# -- lifetimes ---------------------------------------------------------------------------------

def test_model_and_config_freed_when_dropped(no_gc):
    model = ConfigModel(TinyConfig())
    compiled = tjc.compile(model, backend="eager")
    x = torch.randn(2, 4)
    compiled(x)
    refs = [weakref.ref(model), weakref.ref(model.config), weakref.ref(model.lin.weight)]
    del model, compiled
    assert [r() for r in refs] == [None] * len(refs)


def test_registry_and_class_freed_when_dropped(no_gc):
    # A class and an instance made here, read through super() and `in`: nothing keeps them.
    class Local(Registry):
        def pick(self, name, default):
            return super().pick(name, default)

    reg = Local()

    def f(x, r):
        return r.pick("double", None)(x) + ("double" in r)

    compiled = tjc.compile(f, backend="eager")
    torch.testing.assert_close(compiled(torch.ones(2), reg), f(torch.ones(2), reg))
    refs = [weakref.ref(reg), weakref.ref(Local)]
    del reg, Local, compiled, f
    gc.collect()   # the class's own cycles (its MRO, __dict__) are gc's by design, not ours
    assert [r() for r in refs] == [None, None]


# -- nested functions made with annotations (transformers' padding_mask_function) -----------------

def make_mask_function(x):
    y = x * 2

    def inner(b: int, *, scale: float = 1.0) -> torch.Tensor:
        return y[b] * scale
    return inner, y + 1


def test_nested_function_with_annotations_is_returned():
    # Failed before: "NestedFunctionVariable(inner): made with annotations, it cannot be made again".
    x = torch.randn(2, 3)
    assert counts(make_mask_function, x) == (1, 0)
    (got_fn, got), (exp_fn, exp) = tjc.compile(make_mask_function)(x), make_mask_function(x)
    assert got_fn.__annotations__ == exp_fn.__annotations__
    assert got_fn.__kwdefaults__ == exp_fn.__kwdefaults__ == {"scale": 1.0}
    torch.testing.assert_close(got_fn(1, scale=3.0), exp_fn(1, scale=3.0))
    torch.testing.assert_close(got, exp)


def test_returned_nested_function_freed_when_dropped(no_gc):
    compiled = tjc.compile(make_mask_function, backend="eager")
    fn, out = compiled(torch.randn(2, 3))
    closed_over = fn.__closure__[0].cell_contents
    refs = [weakref.ref(fn), weakref.ref(out), weakref.ref(closed_over)]
    del fn, out, closed_over
    assert [r() for r in refs] == [None] * len(refs)


class CallsThroughSuper(torch.nn.Module):
    """A layer whose own __call__ adjusts its arguments and ends in super().__call__."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def __call__(self, x, *args, **kwargs):
        return super().__call__(x * 2, *args, **kwargs)

    def forward(self, x, bias=0.0):
        return self.lin(x) + bias


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = CallsThroughSuper()

    def forward(self, x):
        return self.layer(x, bias=1.0).relu()


def test_module_call_override_ending_in_super_call():
    # Failed before: "module CallsThroughSuper overrides __call__".
    m, x = Outer(), torch.randn(2, 3)
    assert counts(m, x) == (1, 0)
    torch.testing.assert_close(tjc.compile(m)(x), m(x))


def test_class_attribute_from_a_metaclass_descriptor_is_not_taken_from_a_base():
    # type's __annotations__ getset reads only the class's own __dict__: B has none of its own
    # (Python gives it a new empty dict), although its base A has one. Read from the MRO, the
    # trace would answer A's.
    class A:
        x: int = 1

    class B(A):
        pass

    def f(t, cls):
        return t + len(cls.__annotations__)

    got = tjc.compile(f)(torch.zeros(1), B)      # compiled first: B gets its dict from Python
    torch.testing.assert_close(got, torch.zeros(1))
    torch.testing.assert_close(got, f(torch.zeros(1), B))


class Plain:
    kind = "a"

    def __init__(self):
        self.v = 2.0

    @property
    def double(self):
        return self.v * 2


class PlainChild(Plain):
    pass


def introspect(x, o):
    y = x
    if issubclass(type(o), Plain) and isinstance(o, (Plain, int)):
        y = y + 1
    if hasattr(o, "double") and not hasattr(o, "nope"):
        y = y * o.double
    if getattr(PlainChild, "kind", None) == "a" and getattr(type(o), "missing", 3) == 3:
        y = y - 1
    if o.__class__.__name__ == "PlainChild" and type(o).__qualname__.endswith("Child") and \
            introspect.__module__ == __name__:
        y = y * 10
    return y


def test_issubclass_isinstance_hasattr_getattr_and_class_names():
    # Failed before: "call of a builtin_function_or_method" (issubclass) and class attributes.
    x, o = torch.randn(3), PlainChild()
    assert counts(introspect, x, o) == (1, 0)
    cnt = CompileCounter()
    compiled = tjc.compile(introspect, backend=cnt)
    torch.testing.assert_close(compiled(x, o), introspect(x, o))
    PlainChild.kind = "b"          # a class attribute read through the class: guarded
    try:
        torch.testing.assert_close(compiled(x, o), introspect(x, o))
    finally:
        del PlainChild.kind
    o.v = 5.0                      # read by the inlined property
    torch.testing.assert_close(compiled(x, o), introspect(x, o))
    assert cnt.frame_count == 3


def test_compiled_hf_model_and_config_freed_when_dropped():
    # A HuggingFace model holds cycles of its own (eager, it too needs the collector): after one
    # gc.collect() the compiled model and its config, read through the trusted __getattribute__,
    # are gone, so nothing of ours holds them.
    from torch_jit_cache.testing import models as zoo
    model, inp = zoo.build("bert")
    refs = [weakref.ref(model), weakref.ref(model.config)]
    compiled = tjc.compile(model, backend="eager")
    for _ in range(2):
        compiled(*inp.args, **inp.kwargs)
    del model, compiled, inp
    gc.collect()
    assert [r() for r in refs] == [None, None]


class ObjectMethodThroughSuper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 3.0

    def forward(self, x):
        y = x + 1
        names = super().__dir__()   # object's: not followed, a break
        return y * self.scale * len(names)


def test_super_of_a_member_not_followed_breaks_and_is_made_again():
    # 3.11 holds super() on the stack at the break: it is made again as super(cls, self). Before
    # (with super() traced but not rebuilt) the frame ran uncompiled.
    m, x = ObjectMethodThroughSuper(), torch.randn(3)
    before = tjc.stats()["fallbacks"]
    graphs, breaks = counts(m, x)
    # 3.11: one break at LOAD_METHOD, one at the call of the method read there (opaque in the
    # resume function); 3.12+: one at LOAD_SUPER_ATTR (then the call is a plain opaque call).
    assert graphs == 2 and 1 <= breaks <= 2
    torch.testing.assert_close(tjc.compile(m)(x), m(x))
    assert tjc.stats()["fallbacks"] == before


# -- inspect.signature(f).parameters (transformers' apply_chunking_to_forward) ----------------------

def apply_chunked(forward_fn, *tensors):
    params = inspect.signature(forward_fn).parameters
    if len(params) != len(tensors) or "b" in params and list(params)[0] != "a":
        return tensors[0] * 0
    return forward_fn(*tensors)


class Chunked(torch.nn.Module):
    def chunk(self, a, b):
        return a * b + 1

    def forward(self, x, y):
        return apply_chunked(self.chunk, x, y) + apply_chunked(lambda a: a - 1, x)


def test_inspect_signature_parameters_of_functions_and_methods():
    # Failed before: inspect's own code was inlined, "call to ConstantVariable(partial)".
    m, x, y = Chunked(), torch.randn(3), torch.randn(3)
    assert counts(m, x, y) == (1, 0)
    torch.testing.assert_close(tjc.compile(m)(x, y), m(x, y))


def accepted_kwargs(processor, kwargs):
    names = set(inspect.signature(processor.__call__).parameters.keys())
    return {k: v for k, v in kwargs.items() if k in names}


class Processor:
    def __call__(self, x, scale=1.0):
        return x * scale


class AttentionLike(torch.nn.Module):
    """diffusers' Attention.forward: the processor's keyword arguments filtered by its signature."""

    def __init__(self):
        super().__init__()
        self.processor = Processor()

    def forward(self, x, **kwargs):
        return self.processor(x, **accepted_kwargs(self.processor, kwargs))


def test_inspect_signature_parameters_keys():
    # Failed before: "attribute 'keys' of ParameterNamesVariable", the frame run as written.
    m, x = AttentionLike(), torch.randn(3)
    rep = tjc.explain(m)(x)
    assert (rep.graph_count, rep.graph_break_count, rep.fallbacks) == (1, 0, []), str(rep)
    kwargs = dict(scale=3.0, unknown=1)
    torch.testing.assert_close(tjc.compile(m)(x, **kwargs), m(x, **kwargs))


def test_inspect_signature_follows_wrapped_set_later():
    def two(a, b):
        return a + b

    def one(a):
        return a

    def f(x, fn):
        return x * len(inspect.signature(fn).parameters)

    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    x = torch.ones(2)
    torch.testing.assert_close(compiled(x, two), f(x, two))
    two.__wrapped__ = one          # inspect.signature now reports one's parameters: guarded
    torch.testing.assert_close(compiled(x, two), f(x, two))
    torch.testing.assert_close(f(x, two), x)
