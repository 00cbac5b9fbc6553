"""The attribute protocol of objects read from the frame (tracer/variables/python_objects/object_protocol.py): a
class's own Python __getattribute__, __getattr__, __setattr__ and __delattr__ traced, object's
hooks and super()'s inside them, user descriptors, property setters, __slots__ and obj.__dict__.

Each case runs eagerly on one object and compiled on an equal one (twice, the second call a cache
hit): outputs equal, the objects' states after the calls equal (their __dict__ or slots), and the
graph and break counts as stated. Guards: what the hooks read is guarded, so a changed object or
class recompiles to eager's answer. Objects the trace read are freed with their last reference.
"""
import copy
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def state(obj):
    """What an object holds: its __dict__ (read past its hooks) and its slots, recursively copied."""
    d = dict(object.__getattribute__(obj, "__dict__")) if hasattr(type(obj), "__dict__") and \
        "__dict__" in dir(type(obj)) else {}
    for klass in type(obj).__mro__:
        for slot in vars(klass).get("__slots__", ()):
            try:
                d[slot] = object.__getattribute__(obj, slot)
            except AttributeError:
                d[slot] = "<empty>"
    return copy.deepcopy(d)


def same(a, b):
    if isinstance(a, torch.Tensor):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b


def check(fn, make, x, *, graphs=1, breaks=0):
    """fn(obj, x) eagerly on make() and compiled on two more (each call a fresh object): equal
    outputs and equal states after, `graphs` graphs and `breaks` breaks, no frame uncompiled."""
    eager_obj = make()
    expected = fn(eager_obj, x)
    calls = CompiledCalls(fn)
    for _ in range(2):
        obj = make()
        same(calls(obj, x), expected)
        assert state(obj) == state(eager_obj)
    calls.check(graphs=graphs, breaks=breaks)
    return calls


# -- a class's own __getattribute__ and __setattr__, renaming through object's and super()'s ------

class Renaming:
    """Reads and stores of `alias` go to `scale`; every read is counted on the object."""
    def __init__(self):
        object.__setattr__(self, "scale", 2.0)
        object.__setattr__(self, "reads", 0)

    def __getattribute__(self, name):
        if name == "alias":
            name = "scale"
        if name != "reads":
            object.__setattr__(self, "reads", object.__getattribute__(self, "reads") + 1)
        return object.__getattribute__(self, name)

    def __setattr__(self, name, value):
        if name == "alias":
            name = "scale"
        super().__setattr__(name, value)

    def times(self, x):
        return x * self.scale


def test_own_getattribute_and_setattr_are_traced_and_their_stores_replayed_once():
    def fn(c, x):
        c.alias = c.alias * 3        # read through the hook, stored through super().__setattr__
        return c.times(x) + c.scale  # a method found by object's lookup inside the hook
    check(fn, Renaming, torch.ones(3))


# -- __getattr__ over an internal dict (diffusers' ConfigMixin, reduced) --------------------------

class ConfigHolder:
    def __init__(self, **config):
        self._internal_dict = dict(config)
        self.weight = 1.5

    def __getattr__(self, name):
        is_in_config = "_internal_dict" in self.__dict__ and name in self.__dict__["_internal_dict"]
        if is_in_config and name not in self.__dict__:
            return self.__dict__["_internal_dict"][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def test_getattr_over_an_internal_dict_is_traced_with_hasattr_and_getattr_defaults():
    def fn(m, x):
        y = x * m.hidden * m.weight               # __getattr__, then object's lookup
        if hasattr(m, "missing"):                 # __getattr__ raises: False
            y = y + 100
        return y + getattr(m, "other", 5) + getattr(m, "layers", 7)
    check(fn, lambda: ConfigHolder(hidden=3, layers=2), torch.ones(3))


class ItemsAsAttributes(dict):
    """A dict whose missing attributes are its items (an attribute-style config)."""
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def test_a_dict_subclass_whose_getattr_reads_its_items_is_traced():
    def fn(cfg, x):
        return x * cfg.scale + getattr(cfg, "shift", 0.5) + len(cfg)
    check(fn, lambda: ItemsAsAttributes(scale=3.0, other=1), torch.ones(3))
    compiled = CompiledCalls(fn)
    for cfg in (ItemsAsAttributes(scale=2.0), ItemsAsAttributes(scale=2.0, shift=4.0),
                ItemsAsAttributes(scale=-1.0, shift=4.0)):   # items change: recompiles, eager's answer
        same(compiled(cfg, torch.ones(2)), fn(cfg, torch.ones(2)))
    compiled.check(graphs=3, breaks=0)


class ItemsWithMissing(ItemsAsAttributes):
    def __missing__(self, key):   # a missing item is made, not a KeyError
        return 7.0


def test_a_dict_subclass_with_missing_answers_as_eager():
    def fn(cfg, x):
        return x * getattr(cfg, "shift", 0.5)
    cfg = ItemsWithMissing(scale=1.0)
    same(tjc.compile(fn, backend="eager")(cfg, torch.ones(2)), fn(cfg, torch.ones(2)))


def test_getattr_answers_follow_the_object_and_the_class_between_calls():
    def fn(m, x):
        return x * getattr(m, "hidden", 10)
    compiled = CompiledCalls(fn)
    x = torch.ones(2)
    a = ConfigHolder(hidden=3)
    same(compiled(a, x), fn(a, x))
    b = ConfigHolder(hidden=4)                    # another value in the internal dict
    same(compiled(b, x), fn(b, x))
    c = ConfigHolder(other=1)                     # no such key: the default
    same(compiled(c, x), fn(c, x))
    d = ConfigHolder(hidden=3)
    d.hidden = 6                                  # an instance attribute wins over __getattr__
    same(compiled(d, x), fn(d, x))

    class Sub(ConfigHolder):
        def __getattr__(self, name):              # the class's hook replaced
            return 9
    e = Sub(hidden=3)
    same(compiled(e, x), fn(e, x))
    # One graph per case that changed what the trace read (b's value, c's missing key, d's
    # instance attribute, e's class); none broke.
    compiled.check(graphs=5, breaks=0)


class CopyAnswering(ConfigHolder):
    def __getattr__(self, name):   # deepcopy asks for __deepcopy__, which only this answers
        if name == "__deepcopy__":
            return lambda memo: ("copied", self.hidden)
        return super().__getattr__(name)


def test_deepcopy_asks_getattr_for_deepcopy_as_python_does():
    def fn(m, x):
        return x * m.hidden, copy.deepcopy(m)
    m = CopyAnswering(hidden=2)
    compiled = tjc.compile(fn, backend="eager")
    same(compiled(m, torch.ones(2)), fn(m, torch.ones(2)))


class ModelMixinLike(torch.nn.Module):
    """diffusers' ModelMixin, reduced: config names through its own __getattr__, then nn.Module's."""
    def __init__(self):
        super().__init__()
        self._internal_dict = {"scale": 3, "sample_size": 4}
        self.proj = torch.nn.Linear(2, 2)

    def __getattr__(self, name):
        is_in_config = "_internal_dict" in self.__dict__ and name in self.__dict__["_internal_dict"]
        is_attribute = name in self.__dict__
        if is_in_config and not is_attribute:
            return self._internal_dict[name]
        return super().__getattr__(name)

    def forward(self, x):
        return self.proj(x) * self.scale + self.sample_size


def test_a_module_getattr_over_its_config_is_traced_before_nn_modules():
    model = ModelMixinLike()
    x = torch.randn(3, 2)
    calls = CompiledCalls(model)
    for _ in range(2):
        same(calls(x), model(x))
    calls.check(graphs=1, breaks=0)
    model._internal_dict["scale"] = 5          # a config value read through the hook: guarded
    same(calls(x), model(x))
    calls.check(graphs=2, breaks=0)


class CountingGetattr:
    """A __getattr__ with an effect: each call is counted on the class."""
    calls = 0

    def __init__(self, w):
        self.w = w

    def __getattr__(self, name):
        type(self).calls += 1
        return 10


def test_guards_never_run_a_getattr_hook():
    def fn(m, x):
        return x * m.w + m.missing
    compiled = tjc.compile(fn, backend="eager")
    makers = (lambda: CountingGetattr(2), lambda: CountingGetattr(3),
              lambda: CountingGetattr.__new__(CountingGetattr))
    for make in makers:
        CountingGetattr.calls = 0
        expected = fn(make(), torch.ones(2))
        eager_calls, CountingGetattr.calls = CountingGetattr.calls, 0
        same(compiled(make(), torch.ones(2)), expected)
        assert CountingGetattr.calls == eager_calls   # the last object has no `w`: a guard reading
                                                      # m.w would have asked __getattr__ too


# -- __setattr__ / __delattr__ written in Python ------------------------------------------------

class Validating:
    def __init__(self):
        self.__dict__["history"] = []
        self.__dict__["n"] = 1

    def __setattr__(self, name, value):
        if name == "n" and value < 0:
            raise ValueError("negative")
        self.__dict__[name] = value               # a store past the hook, into the __dict__

    def __delattr__(self, name):
        if name == "history":
            raise AttributeError("kept")
        object.__delattr__(self, name)


def test_setattr_and_delattr_hooks_are_traced():
    def fn(v, x):
        v.n = v.n + 2
        v.extra = 4
        del v.extra
        v.tmp = v.n * 2
        return x * v.n + v.tmp
    check(fn, Validating, torch.ones(3))


def test_stores_through_traced_hooks_are_replayed_before_a_break():
    def fn(v, c, x):
        v.n = v.n + 1
        c.alias = 7.0
        print("between")            # a break: the stores are replayed before it runs
        return x * v.n * c.scale
    eager_v, eager_c = Validating(), Renaming()
    expected = fn(eager_v, eager_c, torch.ones(2))
    calls = CompiledCalls(fn)
    for _ in range(2):
        v, c = Validating(), Renaming()
        same(calls(v, c, torch.ones(2)), expected)
        assert (state(v), state(c)) == (state(eager_v), state(eager_c))
    assert calls.delta("graph_breaks") == 1   # once: the second call hits both entries


def test_a_hook_that_raises_raises_as_in_eager():
    def fn(v, x):
        y = x + 1
        v.tmp = 2
        v.n = -1                     # Validating.__setattr__ raises ValueError
        return y
    eager_v, v = Validating(), Validating()
    with pytest.raises(ValueError):
        fn(eager_v, torch.ones(2))
    with pytest.raises(ValueError):
        tjc.compile(fn, backend="eager")(v, torch.ones(2))
    assert state(v) == state(eager_v)   # the store before the raise happened, as in eager


# -- descriptors and properties -----------------------------------------------------------------

class Clamped:
    """A data descriptor: stores clamp and land under a private name in the instance __dict__."""
    def __set_name__(self, owner, name):
        self.private = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        return obj.__dict__.get(self.private, 0.0)

    def __set__(self, obj, value):
        obj.__dict__[self.private] = min(max(value, 0.0), 1.0)


class Doubled:
    """A non-data descriptor (only __get__): an instance attribute of the same name wins."""
    def __get__(self, obj, owner=None):
        return 2 * obj.base


class WithDescriptors:
    p = Clamped()
    twice = Doubled()

    def __init__(self):
        self.base = 3
        self._width = 1.0

    @property
    def width(self):
        return self._width

    @width.setter
    def width(self, value):
        self._width = value * 10


def test_user_descriptors_and_property_setters_are_traced():
    def fn(o, x):
        o.p = 5.0                  # Clamped.__set__: 1.0 in o.__dict__['_p']
        o.width = 2                # the property's setter
        return x * o.p + o.twice + o.width
    check(fn, WithDescriptors, torch.ones(3))


def test_a_non_data_descriptor_loses_to_the_instance_dict_and_recompiles():
    def fn(o, x):
        return x * o.twice
    compiled = CompiledCalls(fn)
    x = torch.ones(2)
    a = WithDescriptors()
    same(compiled(a, x), fn(a, x))
    b = WithDescriptors()
    b.__dict__["twice"] = 100      # the instance __dict__ now wins over the non-data descriptor
    same(compiled(b, x), fn(b, x))
    compiled.check(graphs=2, breaks=0, recompiles=1)


class Accumulating:
    """A data descriptor with only __set__: a read finds the instance's value, else the descriptor."""
    def __set__(self, obj, value):
        obj.__dict__["total"] += value


class WithSetOnly:
    total = Accumulating()


def test_a_set_only_descriptor_reads_the_instance_value_or_itself():
    def store_and_read(o, x):
        o.total = 4                            # Accumulating.__set__
        return x + o.total                     # the instance's value

    def with_value():
        o = WithSetOnly()
        o.__dict__["total"] = 10
        return o
    check(store_and_read, with_value, torch.ones(2))

    def read(o, x):
        return x + 1, o.total is WithSetOnly.total   # no instance value: the descriptor itself
    check(read, WithSetOnly, torch.ones(2))


# -- __slots__ -----------------------------------------------------------------------------------

class Slotted:
    __slots__ = ("a", "b")

    def __init__(self):
        self.a = 2


def test_slots_are_read_and_stored():
    def fn(s, x):
        s.b = s.a + 1
        object.__setattr__(s, "a", 5)
        return x * s.a * s.b
    check(fn, Slotted, torch.ones(3))


def test_hasattr_on_a_slotted_object_compiles_once():
    def fn(s, x):
        return x * (2 if hasattr(s, "missing") else 3) * getattr(s, "other", 4)
    calls = check(fn, Slotted, torch.ones(3))
    assert calls.delta("recompiles") == 0


# -- transformers' PretrainedConfig --------------------------------------------------------------

transformers = pytest.importorskip("transformers")


def test_pretrained_config_reads_renamed_names_and_deepcopy_whole():
    def fn(config, x):
        c = copy.deepcopy(config)
        return x * config.hidden_size + c.num_attention_heads + c.num_labels
    check(fn, transformers.BertConfig, torch.ones(3))


def test_pretrained_config_store_in_a_compiled_function_equals_eager():
    # `config.problem_type = ...` as a SequenceClassification loss does: PretrainedConfig's
    # __setattr__ (huggingface_hub's @strict validator, then the attribute_map renaming and
    # object's store) is traced whole. The validator reads a dict keyed by typing forms
    # (huggingface_hub.dataclasses._BASIC_TYPE_VALIDATORS), keys that live for the process
    # (guard/process_lived.py); the store is replayed after the graph, and the state after is eager's.
    def fn(config, x):
        y = x * config.hidden_size
        if config.problem_type is None:
            config.problem_type = "single_label_classification"
        return y + 1
    eager_config = transformers.BertConfig()
    expected = fn(eager_config, torch.ones(3))
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        config = transformers.BertConfig()
        same(compiled(config, torch.ones(3)), expected)
        assert config.to_dict() == eager_config.to_dict()
        assert config.problem_type == "single_label_classification"
    stats = tjc.stats()
    assert stats["graph_breaks"] == 0 and stats["fallbacks"] == 0, stats


# -- memory, and what still breaks ------------------------------------------------------------------

def test_objects_read_through_traced_hooks_are_freed():
    def fn(m, c, x):
        c.alias = 3.0
        return x * m.hidden * c.scale
    compiled = tjc.compile(fn, backend="eager")
    m, c = ConfigHolder(hidden=2), Renaming()
    compiled(m, c, torch.ones(2))
    refs = [weakref.ref(m), weakref.ref(c)]
    del m, c
    assert [r() for r in refs] == [None, None]


class CGetattr:
    __getattr__ = dict.get   # a hook written in C other than object's: not followed


def test_a_hook_written_in_c_breaks_with_eager_result():
    def fn(o, x):
        y = x + 1
        return y * (o.anything is None)
    calls = CompiledCalls(fn)
    o = CGetattr.__new__(CGetattr)
    with pytest.raises(TypeError):
        fn(o, torch.ones(2))         # dict.get on a non-dict: eager raises, and so must the compile
    with pytest.raises(TypeError):
        calls(o, torch.ones(2))


# -- a name the trace deleted -------------------------------------------------------------------

class Pair:
    def __init__(self):
        self.a, self.b = 1.0, 2.0


class PairWithDefault(Pair):
    a = 5.0   # a class attribute answers once the instance's is deleted


def _delete_then_ask(obj, x):
    del obj.a
    obj.tmp = x + 1
    del obj.tmp
    return x + obj.b, hasattr(obj, "a"), getattr(obj, "tmp", 7.0), getattr(obj, "a", -1.0)


def _delete_then_read(obj, x):
    del obj.a
    try:
        return obj.a
    except AttributeError:
        return x * obj.b


def test_a_name_the_trace_deleted_is_missing_for_the_rest_of_the_trace():
    # hasattr False, getattr's default, AttributeError caught, as in eager: before, any read of
    # a deleted name was a graph break. A class attribute of that name still answers (a class
    # that has one is another type: the guard recompiles, and the read there breaks as before).
    x = torch.randn(3)
    check(_delete_then_ask, Pair, x)
    check(_delete_then_read, Pair, x)
    calls = CompiledCalls(_delete_then_ask)
    for make in (Pair, PairWithDefault):
        eager_obj, obj = make(), make()
        same(calls(obj, x), _delete_then_ask(eager_obj, x))
        assert state(obj) == state(eager_obj)


class _SlotsOnly:
    __slots__ = ("cost",)

    def __init__(self):
        self.cost = 1


def _dict_of_a_slots_object(x, obj):
    # As functools.cached_property asks before it caches: no __dict__ is an AttributeError.
    try:
        d = obj.__dict__
        found = sorted(d)
    except AttributeError as e:
        found = str(e)
    return x * obj.cost, found, hasattr(obj, "__dict__")


def test_dict_of_a_slots_object_read_from_the_frame_is_the_attribute_error():
    """Before: an internal error (the view of a __dict__ the object does not have) and the frame
    ran uncompiled."""
    calls = CompiledCalls(_dict_of_a_slots_object)
    for _ in range(2):
        got = calls(torch.ones(2), _SlotsOnly())
        expected = _dict_of_a_slots_object(torch.ones(2), _SlotsOnly())
        assert got[1:] == expected[1:] and torch.equal(got[0], expected[0])
    calls.check(graphs=1)
