"""tracer/variables/collections/dict_subclasses.py end to end: instances of plain subclasses of dict and
OrderedDict (plain_dict_subclass: nothing of their own but Python methods) built in the trace are dict
trackers of their class, their own methods traced as Python, made again after the graph as their
class with their items in order; a class with more of its own still breaks and stays correct.
Also: collections.UserDict's Python __setitem__/__delitem__ run for `u[k] = v` / `del u[k]` on an
object built in the trace (new_object.py), and a dict or list method called with the wrong number of
arguments raises eager's TypeError inside the trace, where a try block can catch it (containers.py).
Each case compares with eager and asserts the graphs and breaks."""
import collections
import dataclasses
import weakref

import pytest

torch = pytest.importorskip("torch")

from context_helpers import CompiledCalls  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class SimpleDict(dict):
    pass


class MethodDict(dict):
    def scaled(self, x):
        return x * self["x"]


class OrderedWithMethod(collections.OrderedDict):
    def first(self):
        return next(iter(self))


class SetItemDict(dict):   # its own __setitem__, reaching dict's through super()
    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2)


INIT_CALLS = []


class ScaledDict(dict):   # its own __init__, __getitem__, __delitem__ and attributes
    def __init__(self, *args, scale=1, **kwargs):
        INIT_CALLS.append(scale)
        super().__init__(*args, **kwargs)
        self.scale = scale

    def __getitem__(self, key):
        return super().__getitem__(key) * self.scale

    def __delitem__(self, key):
        self.deleted = key
        super().__delitem__(key)


class LenDict(dict):   # a special method the dict model would skip: still a break
    def __len__(self):
        return 7


class DoublingOrdered(collections.OrderedDict):   # OrderedDict's update and copy call this one
    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2)


def _same(got, want):
    assert type(got) is type(want), (got, want)
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    elif isinstance(want, dict):
        assert list(got) == list(want), (got, want)
        for k in want:
            _same(got[k], want[k])
        if hasattr(want, "__dict__"):
            assert list(vars(got)) == list(vars(want))
            for k in vars(want):
                _same(vars(got)[k], vars(want)[k])
    else:
        assert got == want


def _plain_subclass(x):
    sd = SimpleDict(x=5, y=x)
    z = sd["x"] * x
    sd["x"] = 10
    del sd["y"]
    sd.update(w=2)
    return z * sd["x"], sd, isinstance(sd, SimpleDict), type(sd) is SimpleDict, sd.copy(), list(sd.values())


def _twice_in_one_graph(fn):
    """Two compiled calls of fn(x) match eager's (values, types, state), from one graph."""
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    for _ in range(2):
        _same(calls(x), fn(x))
    calls.check(graphs=1)


def test_a_plain_dict_subclass_built_in_the_trace_is_one_graph_and_made_again_as_its_class():
    _twice_in_one_graph(_plain_subclass)


def _own_method(x):
    d = MethodDict(x=3)
    d["x"] = 4
    return d.scaled(x), d


def test_its_own_python_method_is_traced_and_a_replaced_method_recompiles():
    x = torch.randn(3)
    calls = CompiledCalls(_own_method)
    _same(calls(x), _own_method(x))
    calls.check(graphs=1)
    original = MethodDict.scaled
    try:
        MethodDict.scaled = lambda self, x: x + self["x"]
        _same(calls(x), _own_method(x))
    finally:
        MethodDict.scaled = original
    assert calls.cnt.frame_count == 2


def _ordered_subclass(x):
    o = OrderedWithMethod([("b", 1), ("a", 2)])
    o.move_to_end("b")
    same_order = o == collections.OrderedDict([("a", 2), ("b", 1)])
    return o.first(), o, o.copy(), o["a"] * x, same_order, o == {"b": 1, "a": 2}


def test_an_ordered_dict_subclass_keeps_its_class_order_and_order_sensitive_equality():
    x = torch.randn(3)
    calls = CompiledCalls(_ordered_subclass)
    for _ in range(2):
        got, want = calls(x), _ordered_subclass(x)
        _same(got, want)
        assert got[4] is True and got[5] is True
    calls.check(graphs=1)


def _break_while_held(x):
    d = MethodDict(x=2)
    print("", end="")   # a graph break: d is made again for the rest of the frame
    d["y"] = 1
    return d.scaled(x), d


def test_an_instance_live_at_a_graph_break_is_made_again_as_its_class():
    x = torch.randn(3)
    calls = CompiledCalls(_break_while_held)
    for _ in range(2):
        _same(calls(x), _break_while_held(x))
    assert calls.delta("graph_breaks") >= 1 and calls.delta("fallbacks") == 0


def test_the_made_again_instance_is_freed_with_its_last_reference():
    calls = CompiledCalls(_own_method)
    _, d = calls(torch.randn(3))
    ref = weakref.ref(d)
    del d
    assert ref() is None


def _own_setitem(x):
    d = SetItemDict()
    d["a"] = 3
    return x * d["a"], d


def test_its_own_setitem_runs_and_reaches_dict_through_super():
    _twice_in_one_graph(_own_setitem)


def _own_init_and_getitem(x):
    d = ScaledDict([("a", x)], scale=3, b=2)
    d["c"] = 1
    del d["b"]
    d.note = "kept"
    return d["a"] + d["c"], d, d.scale


def test_its_own_init_getitem_and_attributes_are_traced_and_made_again_without_init():
    x = torch.randn(3)
    calls = CompiledCalls(_own_init_and_getitem)
    for _ in range(2):
        del INIT_CALLS[:]
        want = _own_init_and_getitem(x)
        assert INIT_CALLS == [3]
        del INIT_CALLS[:]
        got = calls(x)
        _same(got, want)
        assert vars(got[1]) == {"scale": 3, "deleted": "b", "note": "kept"}
        # __init__'s effect once per call, as eager: the made-again object is not initialised again.
        assert INIT_CALLS == [3]
    calls.check(graphs=1)


def _own_len(x):
    d = LenDict(a=1)
    return x * len(d), d


def test_a_subclass_with_another_special_method_stays_right():
    x = torch.randn(3)
    calls = CompiledCalls(_own_len)
    for _ in range(2):
        _same(calls(x), _own_len(x))


def _ordered_own_setitem(x):
    d = DoublingOrdered(a=1)
    d.update(b=2)
    return x * d["a"], d, d.copy(), d.pop("b")


def test_an_ordered_dict_subclass_with_its_own_setitem_stays_right():
    x = torch.randn(3)
    calls = CompiledCalls(_ordered_own_setitem)
    for _ in range(2):
        _same(calls(x), _ordered_own_setitem(x))


def _user_dict(x):
    u = collections.UserDict(a=1, b=x)
    u["c"] = 3
    del u["a"]
    return u["b"] * u["c"], u


def test_user_dict_item_assignment_and_deletion_run_its_python_methods():
    x = torch.randn(3)
    calls = CompiledCalls(_user_dict)
    for _ in range(2):
        got, want = calls(x), _user_dict(x)
        _same(got[0], want[0])
        assert type(got[1]) is collections.UserDict and list(got[1].data) == list(want[1].data)
        torch.testing.assert_close(got[1]["b"], want[1]["b"])
        assert got[1]["c"] == want[1]["c"]
    calls.check(graphs=1)


def _wrong_arity(x):
    d, items = {"a": 1}, [1]
    messages = []
    for call in (lambda: d.get(None, None, None), lambda: d.copy(None), lambda: d.get(),
                 lambda: d.pop("a", 1, 2), lambda: items.append(1, 2)):
        try:
            call()
        except TypeError as error:
            messages.append(str(error))
    return x + d["a"], messages, d, items


def test_a_method_called_with_the_wrong_arguments_raises_eager_type_error_in_the_trace():
    _twice_in_one_graph(_wrong_arity)


def _missing_key(x):
    d = {"a": 1}
    caught = []
    for call in (lambda: d.pop("b"), lambda: d.__delitem__("c"), lambda: d.pop(2)):
        try:
            call()
        except KeyError as error:
            caught.append(error.args)
    try:
        del d["z"]
    except KeyError as error:
        caught.append(error.args)
    return x + d.pop("a"), caught, d


def test_pop_and_del_of_a_missing_key_raise_eager_key_error_in_the_trace():
    _twice_in_one_graph(_missing_key)


# -- classes with their own __setattr__, OrderedDict item methods, dataclass members -------------
class Record(collections.OrderedDict):
    """A record both mapping and object, as model-output classes are: items mirror the non-None
    attributes; class-time hooks and a copy protocol of its own that no instance path calls."""

    def __init_subclass__(cls):
        super().__init_subclass__()

    def __post_init__(self):
        for f in dataclasses.fields(self):
            if getattr(self, f.name) is not None:
                self[f.name] = getattr(self, f.name)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __getitem__(self, key):
        if isinstance(key, str):
            return dict(self.items())[key]
        return self.as_tuple()[key]

    def __reduce__(self):
        return super().__reduce__()

    def as_tuple(self):
        return tuple(self[k] for k in self.keys())


@dataclasses.dataclass
class Pair(Record):
    first: object = None
    second: object = None
    third: object = None


def _record(x):
    p = Pair(first=x + 1)
    p.second = x * 2            # an attribute only: "second" is no item yet
    p["third"] = x - 1          # an item and an attribute
    p.first = x * 3             # both: "first" is an item
    found = getattr(p, "missing", None) is None
    return p[0] + p["third"], p, found, isinstance(p, Record), p.as_tuple()


def test_a_record_class_with_its_own_setattr_and_item_methods_is_one_graph_made_again_as_eager():
    x = torch.randn(3)
    calls = CompiledCalls(_record)
    for _ in range(2):
        got, want = calls(x), _record(x)
        _same(got, want)
        assert list(got[1]) == ["first", "third"] and list(vars(got[1])) == ["first", "second", "third"]
    calls.check(graphs=1)


def test_the_made_again_record_is_freed_with_its_last_reference():
    calls = CompiledCalls(_record)
    p = calls(torch.randn(3))[1]
    ref = weakref.ref(p)
    del p
    assert ref() is None


def _record_compared(x):
    a, b = Pair(first=1), Pair(first=1)
    return x + 1, a == b, a != Pair(first=2)


def test_a_dataclass_eq_on_a_dict_subclass_stays_right():
    # The dataclass's own __eq__ is what == runs (dict's would compare items): never the model's.
    x = torch.randn(3)
    calls = CompiledCalls(_record_compared)
    for _ in range(2):
        _same(calls(x), _record_compared(x))
    assert calls.delta("fallbacks") == 0


class CountingOrdered(collections.OrderedDict):
    """OrderedDict's C code calls a subclass's own item methods (init, update, setdefault, copy,
    and `dict(od)`'s keys-and-items merge); pop, popitem and the views do not."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)

    def __getitem__(self, key):
        return super().__getitem__(key) + 100

    def __setitem__(self, key, value):
        super().__setitem__(key, value * 2)


def _ordered_item_methods(x):
    d = CountingOrdered([("a", 1)], b=2)
    d.update(c=3)
    got = d.setdefault("a", 0), d.setdefault("z", 5)
    c = d.copy()
    merged = dict(d)
    spread = {**d}
    raw = list(d.values())
    return x * d["a"], d, c, got, merged, spread, raw, d.pop("b"), d.popitem()


def test_an_ordered_dict_subclass_own_item_methods_run_where_ordered_dict_calls_them():
    _twice_in_one_graph(_ordered_item_methods)


class Scaled(dict):
    factor = 2

    def scale(self, x):
        return x * self.factor


def _class_attribute(x):
    d = Scaled(a=1)
    return d.scale(x), d


def test_a_class_attribute_is_read_through_the_class_and_a_change_recompiles():
    x = torch.randn(3)
    calls = CompiledCalls(_class_attribute)
    _same(calls(x), _class_attribute(x))
    calls.check(graphs=1)
    try:
        Scaled.factor = 5
        _same(calls(x), _class_attribute(x))
    finally:
        Scaled.factor = 2
    assert calls.cnt.frame_count == 2


class OwnKeys(dict):
    def keys(self):
        return ["a"]   # dict's merge never calls it while __iter__ is dict's own

    def __getitem__(self, key):
        return 99      # nor this: it reads the items as stored


def merged(x):
    d = OwnKeys([("a", 1), ("b", 2)])
    into = {"z": 0}
    into.update(d)
    return x + 1, dict(d), {**d}, into, d.keys()


def test_merging_a_subclass_that_keeps_dicts_iter_reads_its_items_as_stored():
    x = torch.ones(2)
    expected = merged(x)
    calls = CompiledCalls(merged)
    got = calls(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] and list(got[1]) == list(expected[1])
    calls.check(graphs=1)
