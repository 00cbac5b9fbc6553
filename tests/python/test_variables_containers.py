"""Containers in the trace behave as Python's (tracer/variables/collections/containers.py).

Dict views are live: `d.keys()`, `d.values()`, `d.items()` taken before `d[k] = v` see the new key,
whether the dict came in or was built in the trace, and a dict changed while a loop runs over
its view raises RuntimeError as eager does. Lazy iterators (map, filter, zip, enumerate, reversed,
iter(list)) run in eager's order. isinstance of iterator types answers as eager does. Each case
compares with eager and, where the trace can follow it, asserts that a graph was made."""
import collections
import collections.abc
import copy
import re
import typing

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import assert_same, explain_counts  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def run_both(fn, *args, graphs=True):
    """fn eagerly and compiled on deep copies of args: results and the arguments after the call
    match; with `graphs`, the compiled call made a graph and ran nothing uncompiled."""
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    eager_args, compiled_args = copy.deepcopy(args), copy.deepcopy(args)
    expected = fn(*eager_args)
    got = compiled(*compiled_args)
    assert_same(got, expected)
    assert_same(list(compiled_args), list(eager_args))
    if graphs:
        assert cnt.frame_count >= 1 and tjc.stats()["fallbacks"] == 0, tjc.stats()
    return got


# -- dict views are live ------------------------------------------------------------------------

def keys_len_after_store(x, d):
    k = d.keys()
    d["b"] = 2
    return x + len(k)


def keys_len_after_store_built(x):
    d = {"a": 1}
    k = d.keys()
    d["b"] = 2
    return x + len(k)


def values_sum_after_store(x, d):
    v = d.values()
    d["b"] = x * 3
    return sum(v)


def items_loop_after_store(x, d):
    it = d.items()
    d["c"] = x - 1
    out = []
    for k, v in it:
        out.append(v * len(k))
    return out


def keys_iter_after_delete(x, d):
    k = d.keys()
    del d["a"]
    return [x + len(name) for name in k]


def keys_in_after_store(x, d):
    k = d.keys()
    d["b"] = 1
    return x + ("b" in k) + 2 * ("a" not in k)


def keys_set_ops_after_store(x, d):
    k = d.keys()
    d["b"] = 1
    return x + len(k & {"a", "b", "z"}) + 10 * len(k - {"a"}) + 100 * len(k | {"q"}) + 1000 * len(k ^ {"a"})


def view_truth_after_clear(x, d):
    k = d.values()
    d.clear()
    return x + 1 if k else x - 1


def views_to_list_after_update(x, d):
    k, v, i = d.keys(), d.values(), d.items()
    d.update(e=x)
    d.pop("a")
    return list(k), list(v), list(i), tuple(k), sorted(k), x + 1


@pytest.mark.parametrize("fn", [keys_len_after_store, values_sum_after_store, items_loop_after_store,
                                keys_iter_after_delete, keys_in_after_store, keys_set_ops_after_store,
                                view_truth_after_clear, views_to_list_after_update],
                         ids=lambda f: f.__name__)
def test_a_view_of_a_dict_passed_in_sees_later_stores(fn):
    run_both(fn, torch.ones(2), {"a": torch.ones(2), "bb": torch.zeros(2)})


def test_a_view_of_a_dict_built_in_the_trace_sees_later_stores():
    run_both(keys_len_after_store_built, torch.ones(2))


def return_view(x, d):
    return x + 1, d.keys(), d.items()


def test_a_returned_view_is_a_view_of_the_callers_dict():
    d = {"a": 1}
    compiled = tjc.compile(return_view, backend=CompileCounter())
    _, keys, items = compiled(torch.ones(1), d)
    d["late"] = 2
    assert type(keys) is type({}.keys()) and list(keys) == ["a", "late"]
    assert type(items) is type({}.items()) and list(items) == [("a", 1), ("late", 2)]


def return_view_of_built(x):
    d = {"a": x}
    k = d.keys()
    d["b"] = 1
    return k, d


def test_a_returned_view_of_a_built_dict_is_a_view_of_the_returned_dict():
    keys, d = tjc.compile(return_view_of_built, backend=CompileCounter())(torch.ones(1))
    assert list(keys) == ["a", "b"]
    d["c"] = 3
    assert list(keys) == ["a", "b", "c"]


def store_while_iterating_view(x, d):
    for k in d.keys():
        d[k + "x"] = x
    return x


def store_while_iterating_items(x, d):
    for k, v in d.items():
        d.pop(k)
    return x


@pytest.mark.parametrize("fn", [store_while_iterating_view, store_while_iterating_items],
                         ids=lambda f: f.__name__)
def test_a_dict_changed_while_iterating_its_view_raises_as_eager(fn):
    with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
        fn(torch.ones(1), {"a": 1})
    with pytest.raises(RuntimeError, match="dictionary changed size during iteration"):
        tjc.compile(fn, backend=CompileCounter())(torch.ones(1), {"a": 1})


def test_a_view_holds_no_reference_past_the_call():
    import gc
    import weakref

    class Value:
        pass

    compiled = tjc.compile(keys_len_after_store, backend=CompileCounter())
    d = {"a": Value()}
    probe = weakref.ref(d["a"])
    compiled(torch.ones(1), d)
    gc.disable()
    try:
        del d
        assert probe() is None
    finally:
        gc.enable()


def loop_over_view_with_break(x, d):
    for k, v in d.items():
        x = x + v
        print("", end="")   # a graph break inside the loop: the rest iterates the live view
    return x


def test_a_loop_over_a_view_resumes_after_a_graph_break():
    run_both(loop_over_view_with_break, torch.ones(2), {"a": torch.ones(2), "b": torch.full((2,), 3.0)},
             graphs=False)
    assert tjc.stats()["graph_breaks"] >= 1


# -- lazy iterators run in eager's order ------------------------------------------------------------

def _stop_at(l, n):
    def scale(v):
        if len(l) >= n:   # ends list.extend's loop, which takes StopIteration as the end
            raise StopIteration
        return v * 10
    return scale


def extend_with_map_over_itself(x):
    l = [1, 2]
    l.extend(map(_stop_at(l, 6), l))   # the map sees the items extend appends
    return x + sum(l)


def extend_with_generator_over_itself(x):
    l = [1, 2]
    l.extend(v for v in l if len(l) < 5)
    return x + len(l), l


def iadd_generator_over_itself(x):
    l = [1, 2]
    l += (v * 3 for v in l if len(l) < 4)
    return x + len(l), l


def iter_then_append(x, l):
    it = iter(l)
    first = next(it)
    l.append(7)
    return x + first + sum(it)


def iter_exhausted_then_append(x):
    l = [1]
    it = iter(l)
    rest = list(it)
    l.append(2)
    return x + len(rest) + len(list(it))


def loop_appending_to_its_list(x):
    l = [1, 2]
    for v in l:
        if v < 4:
            l.append(v + 2)
        x = x + v
    return x


def map_made_before_append(x, l):
    it = map(lambda v: v * 2, l)
    l.append(5)
    return x + sum(it)


def map_part_consumed_before_append(x, l):
    it = map(lambda v: v + 1, l)
    a = next(it)
    l.append(5)
    return x + sum(it) + a


def filter_made_before_append(x, l):
    it = filter(lambda v: v > 1, l)
    l.append(5)
    return x + sum(it)


def enumerate_made_before_append(x, l):
    it = enumerate(l)
    l.append(5)
    return x + sum(i * v for i, v in it)


def zip_made_before_append(x, l):
    it = zip(l, [10, 20, 30, 40])
    l.append(5)
    return x + sum(a * b for a, b in it)


def reversed_made_before_store(x, l):
    it = reversed(l)
    l[0] = 100
    l.append(5)
    return x + sum(v * (i + 1) for i, v in enumerate(it))


def map_calls_its_function_when_consumed(x):
    log = []

    def f(v):
        log.append(v)
        return v * 2

    m = map(f, [1, 2, 3])
    log.append(0)
    a = next(m)
    log.append(-1)
    return x + sum(m) + a, log


# Each with whether the compiled call makes a graph. Not: a StopIteration raised to end
# list.extend's loop (a raise the trace does not follow; the frame runs as written). Every one
# gives eager's result.
LAZY = [(extend_with_map_over_itself, False), (extend_with_generator_over_itself, True),
        (iadd_generator_over_itself, True), (iter_exhausted_then_append, True),
        (loop_appending_to_its_list, True), (map_calls_its_function_when_consumed, True)]
LAZY_OVER_ARG = [(iter_then_append, True), (map_made_before_append, True), (map_part_consumed_before_append, True),
                 (filter_made_before_append, True), (enumerate_made_before_append, True),
                 (zip_made_before_append, True), (reversed_made_before_store, True)]


@pytest.mark.parametrize("fn,compiles", LAZY, ids=lambda f: getattr(f, "__name__", ""))
def test_lazy_iterators_over_a_list_built_in_the_trace(fn, compiles):
    run_both(fn, torch.zeros(1), graphs=compiles)


@pytest.mark.parametrize("fn,compiles", LAZY_OVER_ARG, ids=lambda f: getattr(f, "__name__", ""))
def test_lazy_iterators_over_a_list_passed_in(fn, compiles):
    run_both(fn, torch.zeros(1), [1, 2, 3], graphs=compiles)


def test_a_list_iterator_is_live_without_a_graph_break():
    run_both(iter_then_append, torch.zeros(1), [1, 2, 3])
    run_both(loop_appending_to_its_list, torch.zeros(1))
    assert tjc.stats()["graph_breaks"] == 0


# -- isinstance and type() of iterators and torch.Size answer as eager ----------------------------

def isinstance_of_iterator_types(x):
    return x + isinstance(iter(range(0)), type(iter(range(0)))) + 2 * isinstance(iter([]), type(iter([]))) \
        + 4 * isinstance(iter({}), type(iter({}))) + 8 * isinstance(iter(()), type(iter([]))) \
        + 16 * (type(iter({}.items())) is type(iter({"a": 1}.items())))


def isinstance_of_abc_iterator(x, l):
    it, g = iter(l), (v for v in l)
    return x + isinstance(it, collections.abc.Iterator) + 2 * isinstance(it, collections.abc.Iterable) \
        + 4 * isinstance(l, collections.abc.Iterator) + 8 * isinstance(g, collections.abc.Iterator) \
        + 16 * isinstance(map(abs, l), collections.abc.Iterator) + 32 * isinstance(map(abs, l), map) \
        + 64 * (type(filter(None, l)) is filter) + 128 * isinstance(g, type(x for x in ()))


def isinstance_of_builtin_iterators(x):
    return x + isinstance(enumerate([1]), enumerate) + 2 * isinstance(zip([1]), zip) \
        + 4 * isinstance(reversed([1]), type(reversed([]))) + 8 * isinstance({}.keys(), collections.abc.KeysView) \
        + 16 * isinstance(reversed((1,)), type(reversed([])))


def isinstance_of_size(x, s):
    return x + isinstance(s, torch.Size) + 2 * isinstance(s, tuple) + 4 * (type(s) is torch.Size) \
        + 8 * (type(x.shape) is type(s)) + 16 * isinstance((1, 2), torch.Size)


@pytest.mark.parametrize("fn,args", [(isinstance_of_iterator_types, ()), (isinstance_of_abc_iterator, ([1, -2],)),
                                     (isinstance_of_builtin_iterators, ()),
                                     (isinstance_of_size, (torch.Size([2, 3]),))],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_isinstance_answers_as_eager_in_one_graph(fn, args):
    run_both(fn, torch.zeros(1), *args)
    assert tjc.stats()["graph_breaks"] == 0


def iterator_kept_across_break(x):
    e = enumerate([1, 2])
    print("", end="")   # a graph break while `e` is a local
    return x + isinstance(e, enumerate) + 2 * (type(e) is enumerate) + sum(i for i, _ in e)


def test_an_iterator_kept_across_a_graph_break_keeps_its_type():
    run_both(iterator_kept_across_break, torch.zeros(1), graphs=False)


def zip_shares_one_iterator(x, l):
    it = iter(l)
    pairs = list(zip(it, it))
    return x + sum(a * b for a, b in pairs) + len(list(it))


def enumerate_over_an_iterator_consumed_meanwhile(x, l):
    it = iter(l)
    e = enumerate(it, 5)
    first = next(it)
    return x + first + sum(i * v for i, v in e)


def zip_consumes_one_more_of_the_earlier_inputs(x, l):
    a = iter(l)
    z = list(zip(a, [1]))
    return x + len(z) + sum(a)


def loop_over_enumerate_with_a_break(x, l):
    for i, v in enumerate(l):
        x = x + i * v
        print("", end="")   # a graph break inside the loop: the rest is rebuilt
    return x


@pytest.mark.parametrize("fn", [zip_shares_one_iterator, enumerate_over_an_iterator_consumed_meanwhile,
                                zip_consumes_one_more_of_the_earlier_inputs, loop_over_enumerate_with_a_break],
                         ids=lambda f: f.__name__)
def test_iterators_share_their_inputs_as_in_python(fn):
    run_both(fn, torch.zeros(1), [1, 2, 3, 4, 5])


# -- OrderedDict and defaultdict built in the trace ----------------------------------------------

def _ordered(x):
    d = collections.OrderedDict()
    d["b"] = x + 1
    d["a"] = x * 2
    d.update(c=x - 1)
    total = sum(v for _, v in d.items())
    for k in d:
        total = total + d[k]
    return total, d, isinstance(d, collections.OrderedDict), list(d.keys())


def _default(x):
    groups = collections.defaultdict(list)
    groups["a"].append(x)
    groups["a"].append(x + 1)
    groups["b"] = [x * 2]
    counts = collections.defaultdict(int)
    counts["n"] += 3
    return sum(groups["a"]) + groups["b"][0] * counts["n"], groups, counts, "z" in groups, groups.get("z")


def _move_to_end(x):
    d = collections.OrderedDict(a=x, b=x + 1)
    d.move_to_end("a")   # OrderedDict's own method, traced as a reorder (test_ordered_dict.py)
    return list(d), d["a"] + d["b"]


@pytest.mark.parametrize("fn, breaks", [(_ordered, 0), (_default, 0), (_move_to_end, 0)],
                         ids=["OrderedDict", "defaultdict", "move_to_end"])
def test_ordered_and_default_dicts_built_in_the_trace(fn, breaks):
    x = torch.randn(3)
    expected = fn(x)
    report = tjc.explain(fn)(x)
    assert (report.graph_break_count, report.fallbacks) == (breaks, [])
    got = tjc.compile(fn, backend="eager")(x)
    for g, e in zip(got, expected):
        assert type(g) is type(e)
        if isinstance(e, collections.defaultdict):
            assert g.default_factory is e.default_factory
        assert_same(g, e)


def _dict_classes(x, d, dd):
    return (x + 1, isinstance(d, collections.OrderedDict), type(d) is collections.OrderedDict,
            isinstance(dd, collections.defaultdict), issubclass(collections.OrderedDict, dict), d["a"],
            collections.OrderedDict.__name__)


def test_ordered_dict_and_defaultdict_classes_stay_classes():
    # Their calls are handled as builtins; isinstance, `is`, __name__ read them as classes still.
    args = (torch.randn(2), collections.OrderedDict(a=1), collections.defaultdict(list))
    report = tjc.explain(_dict_classes)(*args)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    assert tjc.compile(_dict_classes, backend="eager")(*args)[1:] == _dict_classes(*args)[1:]


# -- list.sort ---------------------------------------------------------------------------------------
def _sort_in_place(x, passed):
    items = [("b", 2), ("a", 3), ("c", 1), ("d", 2)]
    items.sort(key=lambda kv: kv[1])                  # stable: b before d
    by_name = [3, 1, 2]
    by_name.sort(reverse=True)
    passed.sort(key=lambda v: -v, reverse=False)      # the caller's list, sorted in place
    seen = []
    seen.sort(key=lambda v: v)
    return [x * v for _, v in items], by_name, [x + v for v in passed], seen


def test_list_sort_with_key_and_reverse_runs_in_the_graph_and_mutates_the_callers_list():
    from context_helpers import compiled_like_eager
    x = torch.randn(3)
    eager_list, compiled_list = [4, 9, 1], [4, 9, 1]
    expected = _sort_in_place(x, eager_list)
    out = tjc.explain(_sort_in_place)(x, [4, 9, 1])
    assert (out.graph_count, out.graph_break_count) == (1, 0)
    got = tjc.compile(_sort_in_place, backend="eager")(x, compiled_list)
    assert_same(got, expected)
    assert compiled_list == eager_list == [9, 4, 1]
    compiled_like_eager(_sort_in_place, x, [5, 6])


def test_a_key_function_sees_the_list_empty_while_it_sorts():
    def f(x):
        xs = [3, 1, 2]
        xs.sort(key=lambda v: v * (len(xs) + 1))
        return x * xs[0], xs

    x = torch.randn(2)
    assert_same(tjc.compile(f, backend="eager")(x), f(x))


def test_sorting_by_a_changed_argument_recompiles():
    def f(x, xs):
        xs.sort()
        return x * xs[0]

    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    x = torch.randn(2)
    for values in ([3, 1, 2], [3, 1, 2], [0, 5, 4]):
        torch.testing.assert_close(compiled(x, list(values)), f(x, list(values)))
    assert cnt.frame_count == 2


def test_sorting_by_tensor_keys_is_a_graph_break_with_eager_result():
    def f(x):
        rows = [x[0], x[1], x[2]]
        rows.sort(key=lambda t: t.sum().item())
        return torch.stack(rows)

    x = torch.randn(3, 2)
    torch.testing.assert_close(tjc.compile(f, backend="eager")(x), f(x))


# -- namedtuples constructed in the trace ------------------------------------------------------------
Pair = collections.namedtuple("Pair", ["a", "b"], defaults=[5])


class Typed(typing.NamedTuple):
    a: torch.Tensor
    b: int = 2


def _namedtuples(x):
    p = Pair(x, b=x * 2)
    r = p._replace(a=x * 0)
    n = Typed(x)
    return p.a + p.b, r, Pair(x), n, n.b * x, r.a, isinstance(p, tuple), len(p)


def test_namedtuples_built_in_the_trace_are_tuples_of_their_class():
    from context_helpers import compiled_like_eager
    got = compiled_like_eager(_namedtuples, torch.randn(3))
    assert type(got[1]) is Pair and type(got[3]) is Typed


def test_a_namedtuple_default_changed_after_compiling_recompiles():
    def f(x):
        return Pair(x + 1)

    saved = Pair.__new__.__defaults__
    cnt = CompileCounter()
    compiled = tjc.compile(f, backend=cnt)
    x = torch.randn(2)
    try:
        assert_same(compiled(x), f(x))
        Pair.__new__.__defaults__ = (7,)
        assert_same(compiled(x), f(x))
        assert compiled(x).b == 7
    finally:
        Pair.__new__.__defaults__ = saved
    assert cnt.frame_count == 2


def test_bad_namedtuple_calls_raise_as_eager():
    def f(x):
        return Pair(x, c=1)

    def g(x):
        return Pair(x)._replace(c=1)

    # _replace with an unknown field: ValueError up to 3.12, TypeError from 3.13, as eager raises.
    for fn in (f, g):
        with pytest.raises((TypeError, ValueError)) as eager:
            fn(torch.randn(2))
        with pytest.raises(type(eager.value), match=re.escape(str(eager.value))):
            tjc.compile(fn, backend="eager")(torch.randn(2))


def _namedtuple_made_in_the_trace(x):
    Point = collections.namedtuple("Point", "x y", defaults=[1])
    p = Point(x, y=x * 2)
    q = type(p)(x)
    return p.x + p.y, p._replace(x=x * 0).x, q.y * x, Point.__name__, isinstance(p, tuple)


def test_a_namedtuple_class_made_in_the_trace_builds_tuples_read_in_the_graph():
    from context_helpers import compiled_like_eager
    compiled_like_eager(_namedtuple_made_in_the_trace, torch.randn(3))


def test_a_namedtuple_class_made_in_the_trace_or_its_tuples_leaving_it_stay_eager():
    def returns_tuple(x):
        Point = collections.namedtuple("Point", ["x", "y"])
        return Point(x, x + 1)

    def returns_class(x):
        Point = collections.namedtuple("Point", ["x", "y"])
        return x + 1, type(Point(x, x))

    x = torch.randn(2)
    compiled = tjc.compile(returns_tuple, backend="eager")
    a, b = compiled(x), compiled(x)
    assert type(a).__name__ == "Point" and type(a) is not type(b) and a._fields == ("x", "y")
    assert_same(tuple(a), tuple(returns_tuple(x)))
    compiled = tjc.compile(returns_class, backend="eager")
    (_, c1), (_, c2) = compiled(x), compiled(x)
    assert c1 is not c2 and c1.__module__ == __name__


# -- namedtuple classes that override tuple's own protocol ------------------------------------------
class _Indexed(typing.NamedTuple):
    """A field is read through its descriptor (tuple's slot); indexing, len and iteration go to
    the class's own methods."""
    a: torch.Tensor
    b: torch.Tensor

    def __getitem__(self, index):
        return ("item", index)

    def __len__(self):
        return 7


def test_a_namedtuple_argument_that_overrides_getitem_reads_its_fields_as_eager_does():
    def fn(t):
        return t.a + 1, t.b * 2, t[1], len(t)

    t = _Indexed(torch.ones(2), torch.zeros(2))
    expected = fn(t)
    for _ in range(2):
        assert_same(tjc.compile(fn, backend="eager")(t), expected)


def test_a_namedtuple_built_in_the_trace_that_overrides_getitem_answers_as_eager_does():
    def fn(x):
        t = _Indexed(x, x + 1)
        return t.b * 2, t[0], len(t)

    x = torch.ones(2)
    expected = fn(x)
    assert_same(tjc.compile(fn, backend="eager")(x), expected)
    # not a tuple to the tracer: the class's own methods decide, so the trace stops where it is built
    assert any("overrides tuple" in r for r in tjc.explain(fn)(x).break_reasons)


class _EqualToAll:
    def __eq__(self, other):
        return True

    __hash__ = object.__hash__


def test_count_and_index_compare_items_that_are_not_constants_as_eager_does():
    # list.count and list.index compare each item with `==`; an object whose __eq__ says yes counts.
    def fn(x, anything):
        items = [anything, 1, anything]
        return x + 1, items.count(1), [0, anything].index(5), (anything, 2).count(2)

    x, anything = torch.ones(2), _EqualToAll()
    expected = fn(x, anything)
    got = tjc.compile(fn, backend="eager")(x, anything)
    assert got[1:] == expected[1:] == (3, 1, 2)


# -- what a tuple's class answers: namedtuple's _fields, hasattr -----------------------------------
Triple = collections.namedtuple("Triple", "a b c")


class TripleWithDict(Triple):   # no __slots__: its instances have a __dict__
    pass


def _fields_and_hasattr(packed):
    a, b, c = packed
    if hasattr(packed, "b"):
        b = packed.b + 1
    return a + b + packed[2] + len(packed._fields) + hasattr(packed, "missing") + hasattr(packed, "_asdict")


def test_a_namedtuples_fields_and_hasattr_are_answered_from_its_class():
    packed = Triple(torch.ones(2), torch.ones(2) * 2, torch.ones(2) * 3)
    cnt = CompileCounter()
    compiled = tjc.compile(_fields_and_hasattr, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    torch.testing.assert_close(compiled(packed), _fields_and_hasattr(packed))
    assert (cnt.frame_count, tjc.stats()["graph_breaks"] - before) == (1, 0)
    built_in_trace = tjc.compile(lambda x: _fields_and_hasattr(Triple(x, x, x)), backend=CompileCounter())
    torch.testing.assert_close(built_in_trace(torch.ones(2)), _fields_and_hasattr(Triple(*[torch.ones(2)] * 3)))


def test_hasattr_on_a_tuple_whose_instances_have_a_dict_matches_eager():
    packed = TripleWithDict(torch.ones(2), torch.ones(2), torch.ones(2))
    packed.missing = 1   # an attribute of its own: hasattr answers True in eager
    torch.testing.assert_close(tjc.compile(_fields_and_hasattr)(packed), _fields_and_hasattr(packed))


Couple = collections.namedtuple("Couple", ["first", "second"])


@pytest.mark.parametrize("value, star", [
    ((torch.zeros(2), torch.ones(2)), False),
    ([torch.zeros(2), torch.ones(2)], False),
    (Couple(torch.zeros(2), torch.ones(2)), True),
])
def test_the_class_of_a_container_rebuilds_one_of_its_kind(value, star):
    # `x.__class__(...)` makes a new container of x's own type (a namedtuple class called with
    # its fields), as eager does, in one graph.
    def fn(x):
        items = [v + 1 for v in x]
        return x.__class__(*items) if star else x.__class__(items)

    got = run_both(fn, value)
    assert type(got) is type(value)
    assert tjc.explain(fn)(value).graph_break_count == 0


def test_the_class_of_a_container_follows_the_argument_type():
    # The class read through `__class__` is the argument's, guarded: another type recompiles.
    cnt = CompileCounter()

    def fn(x):
        return x.__class__, x[0] * 2

    compiled = tjc.compile(fn, backend=cnt)
    for value in [(torch.ones(1),), [torch.ones(1)], Couple(torch.ones(1), 2), (torch.ones(1),)]:
        got, want = compiled(value), fn(value)
        assert got[0] is want[0]
        torch.testing.assert_close(got[1], want[1])
    assert cnt.frame_count == 3


def test_the_class_of_a_dict_is_dict():
    def fn(d):
        return d.__class__(a=d["a"] + 1), d.__class__ is dict

    run_both(fn, {"a": torch.ones(2)})
    assert tjc.explain(fn)({"a": torch.ones(2)}).graph_break_count == 0


# -- attributes stored on instances of a namedtuple's subclass (which have a __dict__) -------------
class _Pair(typing.NamedTuple):
    a: object
    b: object


class _TaggedPair(_Pair):
    pass


def _tag_frame_pair(pair, x):
    pair.note = x * 2
    return pair, pair.note + 1, hasattr(pair, "note")


def _tag_built_pair(x):
    pair = _TaggedPair(x, x + 1)
    pair.note = x - 1
    return pair


def test_an_attribute_stored_on_a_namedtuple_subclass_instance_is_replayed():
    x = torch.randn(2)
    pair = _TaggedPair(torch.ones(1), 2)
    assert explain_counts(_tag_frame_pair, pair, x) == (1, 0, [])
    pair = _TaggedPair(torch.ones(1), 2)
    got, plus, has = tjc.compile(_tag_frame_pair, backend="eager")(pair, x)
    assert got is pair and has
    torch.testing.assert_close(pair.note, x * 2)
    torch.testing.assert_close(plus, x * 2 + 1)
    assert explain_counts(_tag_built_pair, x) == (1, 0, [])
    built = tjc.compile(_tag_built_pair, backend="eager")(x)
    assert type(built) is _TaggedPair
    torch.testing.assert_close(built.note, x - 1)
    torch.testing.assert_close(built.b, x + 1)


def test_a_store_to_a_namedtuple_field_raises_as_in_eager():
    def set_field(pair):
        pair.a = 1
        return pair
    with pytest.raises(AttributeError):
        set_field(_TaggedPair(1, 2))
    with pytest.raises(AttributeError):
        tjc.compile(set_field, backend="eager")(_TaggedPair(1, 2))


def test_a_symbolic_shape_read_as_a_constant_is_a_torch_size():
    def fn(x):
        return x + 1, str(x.shape), repr(x.shape), x.shape == torch.Size([4]), len(str(x.shape))
    compiled = tjc.compile(fn, backend="eager")
    for n in (3, 4, 5):   # the second call's shape is dynamic
        assert_same(compiled(torch.ones(n)), fn(torch.ones(n)))


# -- a dict or set whose size changes while a loop runs over it: RuntimeError in the trace --------

def grow_while_iterating(x):
    d = {1: 1}
    try:
        for k in d:
            d[k + 1] = x
    except RuntimeError as e:
        return x + len(d), str(e)
    return x, ""


def shrink_frame_dict_over_values(x, d):
    try:
        for v in d.values():
            del d["a"]
    except RuntimeError as e:
        return x + v, str(e)
    return x, ""


def grow_set_while_iterating(x, s):
    try:
        for v in s:
            s.add(v + 100)
    except RuntimeError as e:
        return x + 1, str(e)
    return x, ""


def keeps_raising(x, d):
    it = iter(d)
    next(it)
    d["new"] = 1
    messages = []
    for _ in range(2):
        try:
            next(it)
        except RuntimeError as e:
            messages.append(str(e))
        d.pop("new", None)   # the size is back, but Python's iterator stays broken
    return x + len(messages), messages


def exhausted_then_changed(x, d):
    it = iter(d.items())
    first = list(it)
    d["z"] = 3           # an exhausted iterator no longer reads the dict
    return x + 1, first, next(it, "end"), list(it)


@pytest.mark.parametrize("fn,args", [
    (grow_while_iterating, ()),
    (shrink_frame_dict_over_values, ({"a": 1, "b": 2},)),
    (grow_set_while_iterating, ({1, 2},)),
    (keeps_raising, ({"a": 1},)),
    (exhausted_then_changed, ({"a": 1},)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_size_change_while_iterating_raises_in_the_trace_as_eager(fn, args):
    run_both(fn, torch.ones(1), *args)
    assert tjc.stats()["graph_breaks"] == 0


def test_a_size_change_while_iterating_a_frame_dict_recompiles_for_other_keys():
    cnt = CompileCounter()
    compiled = tjc.compile(shrink_frame_dict_over_values, backend=cnt)
    for d in ({"a": 1, "b": 2}, {"a": 1, "c": 2}):
        got, want = compiled(torch.ones(1), dict(d)), shrink_frame_dict_over_values(torch.ones(1), dict(d))
        assert_same(got, want)
    assert cnt.frame_count == 2


def test_a_change_keeping_the_size_still_runs_as_eager():
    def fn(x, d):
        try:
            for k in d:
                del d[k]
                d[k] = 0
        except RuntimeError as e:
            return x, str(e), d
        return x + 1, "", d
    run_both(fn, torch.ones(1), {"a": 1, "b": 2}, graphs=False)


def test_a_list_that_holds_itself_is_one_tracker_pinned_as_one_object():
    # before, wrapping its items recursed without end: an internal error, the frame uncompiled
    cycle = []
    cycle[:] = [cycle, 2.0, cycle]

    def read(x):
        inner = cycle[0]
        inner[2].append(x)   # appends to `cycle` itself while it holds itself
        return inner is cycle, inner[2] is cycle, cycle[1] * x, len(inner), inner

    x = torch.ones(2)
    assert tjc.explain(read)(x).graph_break_count == 0
    assert cycle.pop() is x
    cnt = CompileCounter()
    compiled = tjc.compile(read, backend=cnt)
    for step in range(3):
        if step == 2:
            cycle[0] = [cycle, 3.0, []]   # no longer itself: the alias guard fails, a recompile
        want = read(x)
        appended = cycle[0][2].pop()
        got = compiled(x)
        assert got[:2] == want[:2] and got[3] == want[3] and got[4] is cycle[0]
        torch.testing.assert_close(got[2], want[2])
        assert appended is x and cycle[0][2][-1] is x
        cycle[0][2].pop()
    assert cnt.frame_count == 2
