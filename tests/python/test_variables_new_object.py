"""tracer/variables/python_objects/new_object.py end to end: objects the trace constructs (plain classes, a
dataclass, ABC subclasses, a class made in the function) are read in the graph and rebuilt after it
as eager builds them: same class, same instance __dict__ in order, one object wherever it is reached
(returned twice, stored on an argument, live at a graph break). What rebuilding would change
(__del__) stays a graph break, __slots__ members are set through their slots, an abstract class still raises, len() runs the type's
__len__, and the entry holds none of the objects or classes. Each case compares with eager."""
import abc
import dataclasses
import gc
import typing
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import (CompiledCalls, Finalised, Holder, NewCache, Slotted,  # noqa: E402
                             assert_same, same_exactly, same_object)

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


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


def test_objects_built_in_the_trace_are_read_and_returned_as_eager_builds_them():
    x = torch.randn(3, 4)
    calls = CompiledCalls(_build_and_return)
    for _ in range(2):
        got, want = calls(x), _build_and_return(x)
        same_object(got[0], want[0])
        same_exactly(got[1], want[1])
        assert got[2] is True
        assert got[0].cache.layers[0] is not got[0].cache.layers[1]
    calls.check(graphs=1)


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
        same_object(ch.cache, eh.cache)
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
        same_object(c, _returned_twice(x)[0])


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
        same_object(got[0], want[0])
        assert got[1] == want[1] == 4
    assert calls.delta("graph_breaks") == 1 and calls.delta("fallbacks") == 0


@pytest.mark.parametrize("cls", [Finalised])   # a Python __setattr__: test_variables_object_hooks.py
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
        same_object(got[0], want[0])
        assert got[2] == want[2] == 4
    assert calls.delta("graph_breaks") == 1 and calls.delta("fallbacks") == 0


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
        same_object(got[0], want[0])
        same_exactly(got[1], want[1])
    calls.check(graphs=1)
    abstract = CompiledCalls(_abstract)
    for _ in range(2):
        with pytest.raises(TypeError, match="abstract"):
            abstract(x)


class Documented(abc.ABC):
    """Read through type(self)."""

    scale = 3.0

    def doc_length(self):
        return len(type(self).__doc__) * type(self).scale


def test_type_of_an_object_the_trace_built_reads_its_class():
    # type() of such an object is its class tracker, with the class's source (before: a class
    # without one, which refused contextlib's `type(self).__doc__` in @contextmanager objects,
    # test_variables_contexts.py; a class like this one was answered before too).
    def fn(x):
        return x * Documented().doc_length()

    x = torch.randn(3)
    compiled = CompiledCalls(fn)
    torch.testing.assert_close(compiled(x), fn(x))
    compiled.check(graphs=1, breaks=0)
    Documented.scale = 5.0          # read through the class: guarded, recompiles
    try:
        torch.testing.assert_close(compiled(x), fn(x))
    finally:
        Documented.scale = 3.0


class Scaler:
    def __init__(self, k):
        self.k = k

    def __call__(self, x, bias=0):
        return x * self.k + bias


class NotCallable:
    pass


def _call_objects(x, outer):
    inner = Scaler(3)
    return inner(x) + outer(x, bias=1)


def test_calling_an_object_runs_its_classs_call_inlined():
    x = torch.randn(3)
    out = tjc.explain(_call_objects)(x, Scaler(2))
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    outer = Scaler(2)
    calls = CompiledCalls(_call_objects)
    torch.testing.assert_close(calls(x, outer), _call_objects(x, outer))
    outer.k = 5                       # an attribute the call read: guarded
    torch.testing.assert_close(calls(x, outer), _call_objects(x, outer))


def test_replacing_call_on_the_class_after_compiling_recompiles():
    class Local(Scaler):
        pass

    def f(x):
        return Local(2)(x)

    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), f(x))
    Local.__call__ = lambda self, x, bias=0: x - self.k
    torch.testing.assert_close(compiled(x), f(x))
    assert cnt.frame_count == 2


def test_calling_an_object_without_call_raises_as_eager():
    def f(x, o):
        return o(x)

    for o in (NotCallable(),):
        with pytest.raises(TypeError, match="not callable"):
            tjc.compile(f, backend="eager")(torch.randn(2), o)

    def g(x):
        return NotCallable()(x)

    with pytest.raises(TypeError, match="not callable"):
        tjc.compile(g, backend="eager")(torch.randn(2))


# -- dataclasses.fields --------------------------------------------------------------------------
@dataclasses.dataclass
class Output:
    logits: torch.Tensor
    aux: float = 0.5
    note: typing.ClassVar[int] = 3     # a pseudo-field: not in fields()


def _fields_of(x, passed):
    out = Output(logits=x * 2)
    names = [f.name for f in dataclasses.fields(out)]
    from_class = dataclasses.fields(Output)
    return out.logits + out.aux, names, from_class[1].default, dataclasses.fields(passed)[0], \
        len(dataclasses.fields(passed))


def test_dataclasses_fields_of_built_and_passed_objects_and_classes():
    from context_helpers import compiled_like_eager
    x = torch.randn(3)
    got = compiled_like_eager(_fields_of, x, Output(x))
    assert got[3] is dataclasses.fields(Output)[0]   # the very Field object


def test_a_field_changed_after_compiling_recompiles():
    @dataclasses.dataclass
    class Local:
        a: int = 1
        b: int = 2

    def f(x):
        return x * len(dataclasses.fields(Local)), [fl.name for fl in dataclasses.fields(Local)]

    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    x = torch.randn(2)
    for change in (None, lambda: setattr(Local.__dataclass_fields__["a"], "name", "z"),
                   lambda: Local.__dataclass_fields__.pop("b")):
        if change is not None:
            change()
        got, expected = compiled(x), f(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    assert cnt.frame_count == 3


def test_fields_of_a_non_dataclass_raises_as_eager():
    def f(x, o):
        return x * len(dataclasses.fields(o))

    with pytest.raises(TypeError):
        tjc.compile(f, backend="eager")(torch.randn(2), Scaler(1))


# -- __slots__: members tracked apart from the __dict__, set through their slots by the rebuild ----
class Bound:
    """Binds a function to leading arguments, in slots (with a __dict__ and weak references too),
    made by its own Python __new__ through super().__new__, as the stdlib's Python partial is."""
    __slots__ = ("fn", "bound", "__dict__", "__weakref__")

    def __new__(cls, fn, *bound):
        if isinstance(fn, Bound):   # flattened, so a Bound of a Bound calls the inner function
            bound = fn.bound + bound
            fn = fn.fn
        self = super().__new__(cls)
        self.fn = fn
        self.bound = bound
        return self

    def __call__(self, *args):
        return self.fn(*self.bound, *args)


class BoundWithDict(Bound):
    pass


def _scale(a, b, x):
    return x * a + b


def _bound_calls(x):
    inner = Bound(_scale, 2)
    outer = BoundWithDict(inner, 3)
    outer.note = "n"
    return inner(1, x), outer(x), outer.bound, outer.fn is _scale, hasattr(inner, "fn"), outer.note


def test_an_object_with_slots_is_built_read_and_called_in_the_trace():
    x = torch.randn(3)
    calls = CompiledCalls(_bound_calls)
    for _ in range(2):
        assert_same(calls(x), _bound_calls(x))
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0


def test_an_object_with_slots_leaving_the_trace_is_rebuilt_through_its_slots():
    def make(x):
        b = BoundWithDict(_scale, x + 1)
        b.note = "kept"
        return b

    calls = CompiledCalls(make)
    x = torch.randn(3)
    got, want = calls(x), make(x)
    assert type(got) is BoundWithDict and vars(got) == {"note": "kept"}
    assert_same(got.bound, want.bound)
    assert got.fn is _scale and calls.delta("graph_breaks") == 0
    torch.testing.assert_close(got(2, x), want(2, x))
    ref = weakref.ref(got)
    del got
    assert ref() is None, "the entry keeps the rebuilt object alive"


def test_a_slot_never_set_raises_attribute_error_as_in_eager():
    def unset(x):
        s = Slotted.__new__(Slotted)
        return x + 1, hasattr(s, "v"), getattr(s, "v", "none")

    calls = CompiledCalls(unset)
    assert_same(calls(torch.ones(2)), unset(torch.ones(2)))
    assert calls.delta("graph_breaks") == 0


def test_a_store_outside_the_slots_of_a_class_without_dict_raises_as_in_eager():
    def store(x):
        s = Slotted()
        s.other = 1
        return x

    with pytest.raises(AttributeError):
        store(torch.ones(1))
    with pytest.raises(AttributeError):
        CompiledCalls(store)(torch.ones(1))


def test_the_stdlibs_python_partial_and_a_subclass_of_it():
    from test.support import import_helper
    py_functools = import_helper.import_fresh_module("functools", blocked=["_functools"])

    class Sub(py_functools.partial):
        pass

    def capture(*args, **kw):
        return args, kw

    def use(x):
        p = py_functools.partial(capture, 1, a=10, b=20)
        q = Sub(p, 2, b=30)
        return x + 1, p(3, c=40), q(4), q.args, q.keywords, q.func is capture, type(q) is Sub

    calls = CompiledCalls(use)
    for _ in range(2):
        assert_same(calls(torch.ones(2)), use(torch.ones(2)))
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0


class _CachedCost:
    base = 1

    def compute(self):
        self.base += 1
        return self.base

    cost = __import__("functools").cached_property(compute)   # a non-data descriptor in Python


def _reads_a_cached_property(x):
    item = _CachedCost()
    first = item.cost          # computed by the descriptor's __get__, kept in item.__dict__
    recomputed = item.compute()
    again = item.cost          # the instance __dict__ wins over a non-data descriptor
    return x + first, recomputed, again, item


def test_a_python_non_data_descriptor_on_an_object_built_in_the_trace_runs_its_get():
    import sys
    x = torch.randn(2)
    expected = _reads_a_cached_property(x)
    calls = CompiledCalls(_reads_a_cached_property)
    for _ in range(2):
        got = calls(x)
        assert torch.equal(got[0], expected[0]) and got[1:3] == expected[1:3]
        assert vars(got[3]) == vars(expected[3])
    if sys.version_info >= (3, 12):   # 3.11's cached_property takes a lock (a C context manager): a break
        calls.check(graphs=1, breaks=0)
    original = _CachedCost.__dict__["cost"]
    try:   # another descriptor in its place: what the trace read of the first is guarded
        replaced = __import__("functools").cached_property(lambda self: 100)
        replaced.__set_name__(_CachedCost, "cost")
        _CachedCost.cost = replaced
        got, expected = calls(x), _reads_a_cached_property(x)
        assert torch.equal(got[0], expected[0]) and got[1:3] == expected[1:3]
    finally:
        _CachedCost.cost = original
    ref = weakref.ref(got[3])
    del got
    assert ref() is None


class _Stateful:
    __slots__ = ("tag", "__dict__")

    def __init__(self):
        self.tag = "t"

    def load(self, namespace):
        # as functools.partial.__setstate__ gives the object its state
        self.__dict__ = namespace


def _given_a_dict(x):
    obj = _Stateful()
    obj.before = 1
    state = {"scale": 2}
    obj.load(state)
    state["bias"] = x            # a store through the dict is an attribute of the object
    obj.extra = 3                # and a store to the object is an item of the dict
    return x * obj.scale + obj.bias, obj, state, sorted(state), hasattr(obj, "before"), obj.tag


def test_an_object_given_a_new_dict_shares_it_with_the_trace_and_after_the_graph():
    """`obj.__dict__ = d` for an object and a dict the trace made: one dict, seen through both in
    the trace, and after the graph `state` is the rebuilt object's very __dict__. Before: a break
    at the store."""
    expected = _given_a_dict(torch.ones(2))
    calls = CompiledCalls(_given_a_dict)
    for _ in range(2):
        got = calls(torch.ones(2))
        assert torch.equal(got[0], expected[0]) and got[3:] == expected[3:]
        assert got[2] is vars(got[1]) and got[2].keys() == expected[2].keys() and got[1].tag == "t"
    calls.check(graphs=1)


def _old_dict_escapes(x):
    obj = _Stateful()
    old = obj.__dict__
    old["a"] = 1
    obj.load({"b": 2})
    return x + 1, old, obj


def test_a_dict_read_before_the_object_was_given_another_stays_the_old_one():
    """The old __dict__ is no longer the object's: it is never rebuilt as the object's __dict__
    (a break, where it leaves the trace), so it keeps its own items as in eager."""
    got = tjc.compile(_old_dict_escapes)(torch.ones(1))
    expected = _old_dict_escapes(torch.ones(1))
    assert got[1] == expected[1] == {"a": 1} and vars(got[2]) == vars(expected[2]) == {"b": 2}
    assert got[1] is not vars(got[2])
