"""tracer/variables/collections/sets.py: what sets do besides their algebra, through the public API.

The contract: Python's own errors of set operations (an operand a set refuses, an item that is not
iterable or hashable, a wrong number of arguments) are raised in the trace, so a `try` or an
`assertRaises` of the frame catches them there, with eager's message and with the set left as
eager leaves it; `s.__init__(...)` refills a set; a frozenset constant's methods fold; a plain
subclass of frozenset read from the frame is traced as set's are, and its C methods answer
`__name__` as eager. Each compares with eager (results and the sets' items in order) and counts
graphs and breaks."""
import copy
import operator
import sys
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import explain_counts, runs_on_fresh_arguments  # noqa: E402


def _run_both(fn, make_args, calls=2):
    """fn eagerly and compiled (`calls` times), each on fresh arguments: results (an exception as
    its type and args) and every set argument's items in iteration order must agree."""
    cnt, made = runs_on_fresh_arguments(fn, make_args, calls)
    runs = []
    for out, args in made:
        if isinstance(out, torch.Tensor):
            out = out.tolist()
        elif isinstance(out, tuple) and out and isinstance(out[0], torch.Tensor):
            out = (out[0].tolist(), *out[1:])
        runs.append((out, [list(a) for a in args if isinstance(a, (set, frozenset))]))
    for got in runs[1:]:
        assert got == runs[0]
    return cnt


def _one_graph(fn, *args):
    assert explain_counts(fn, *args)[:3] == (1, 0, [])


# -- errors raised in the trace ---------------------------------------------------------------------

def _operators_refused(x, s, other):
    caught = []
    for attempt in (lambda: s | other, lambda: other & s, lambda: s - other, lambda: s < other,
                    lambda: other >= s):
        try:
            attempt()
        except TypeError as e:
            caught.append(str(e))
    return x + len(caught), caught, s == other, s != other


def _in_place_refused(x, s, other):
    try:
        s |= other
    except TypeError as e:
        x = x + 1
        message = str(e)
    s ^= {7}
    return x, message


def _methods_refused(x, s, other):
    messages = []
    for name in ("union", "update", "intersection_update", "isdisjoint"):
        try:
            getattr(s, name)(other)
        except TypeError as e:
            messages.append(str(e))
    return x + len(messages), messages


@pytest.mark.parametrize("other", [19, operator.add, {1: 2}, (2, 4)], ids=["int", "builtin", "dict", "tuple"])
@pytest.mark.parametrize("fn", [_operators_refused, _in_place_refused, _methods_refused])
def test_a_set_operation_python_refuses_raises_in_the_trace(fn, other):
    cnt = _run_both(fn, lambda: (torch.ones(2), {1, 2, 3}, other))
    _one_graph(fn, torch.ones(2), {1, 2, 3}, other)
    assert cnt.frame_count == 1


def _function_operand(x, s):
    def helper():
        return 1
    try:
        s -= helper
    except TypeError:
        x = x * 2
    return x, s - {1}, s == helper


def test_an_operand_known_only_by_its_type_is_refused_by_it():
    # A function made in the trace has no constant value; `s -= f` still raises TypeError.
    _run_both(_function_operand, lambda: (torch.ones(2), {1, 2}))
    _one_graph(_function_operand, torch.ones(2), {1, 2})


def _update_stops_part_way(x, s):
    try:
        s.update([5, [6]])   # adds 5, then fails on the list: eager's set keeps the 5
    except TypeError:
        x = x + 1
    return x, sorted(s)


def test_an_update_that_raises_part_way_leaves_the_set_as_eager():
    _run_both(_update_stops_part_way, lambda: (torch.ones(2), {1, 2}))


def _unhashable_member(x, s):
    try:
        s.__contains__([[]])
    except TypeError:
        x = x + 1
    return x


def test_an_unhashable_item_raises_typeerror_in_the_trace():
    _run_both(_unhashable_member, lambda: (torch.ones(2), {1}))
    _one_graph(_unhashable_member, torch.ones(2), {1})


# -- __init__ ---------------------------------------------------------------------------------------

def _refill(x, s):
    s.__init__("abc")
    n = len(s)
    try:
        s.__init__(s, 2)     # too many arguments: nothing changes
    except TypeError:
        n += 10
    try:
        s.__init__(5)        # emptied first, then 5 is not iterable
    except TypeError:
        n += 100
    return x + n, sorted(s)


def _refill_built(x):
    s = set()
    s.__init__([3, 4])
    return x + len(s), sorted(s)


class _Tags(set):
    pass


def test_init_refills_a_set_as_eager():
    for make in (lambda: (torch.ones(2), {1, 2}), lambda: (torch.ones(2), _Tags([1]))):
        _run_both(_refill, make)
        _one_graph(_refill, *make())
    _run_both(_refill_built, lambda: (torch.ones(2),))


def _init_name(x, s):
    return x + 1, s.__init__.__name__, s.union.__qualname__


def test_c_method_attributes_of_a_plain_subclass_answer_as_eager():
    _run_both(_init_name, lambda: (torch.ones(2), _Tags([1])))
    _one_graph(_init_name, torch.ones(2), _Tags([1]))


# -- frozensets ---------------------------------------------------------------------------------------

class _Frozen(frozenset):
    pass


def _frozen_methods(x, f):
    n = len(f.intersection("abc")) + len(f.union("xy")) + f.__contains__("a") + len(f.copy())
    n += f.issubset("abcdef") + f.isdisjoint({"q"}) + len(f.difference({"a"}) ^ {"z"})
    f.__init__("zzz")   # object's __init__: nothing changes
    return x + n, f == frozenset("abcd"), f != {"a"}, len(f), "b" in f, sorted(f)


@pytest.mark.parametrize("cls", [frozenset, _Frozen], ids=["frozenset", "subclass"])
def test_frozenset_methods_fold(cls):
    cnt = _run_both(_frozen_methods, lambda: (torch.ones(2), cls("abcd")))
    _one_graph(_frozen_methods, torch.ones(2), cls("abcd"))
    assert cnt.frame_count == 1


def _frozen_weigh(x, f):
    return x * len(f) + ("a" in f)


def test_a_frozenset_subclass_is_guarded_by_its_class_and_items():
    cnt = CompileCounter()
    compiled = tjc.compile(_frozen_weigh, backend=cnt)
    x = torch.ones(2)
    for f in (_Frozen("ab"), _Frozen("bcd"), frozenset("ab"), _Frozen("ab")):
        torch.testing.assert_close(compiled(x, f), _frozen_weigh(x, f))
    assert cnt.frame_count == 3


def test_the_cache_holds_no_frozenset_subclass_alive():
    f = _Frozen("ab")
    ref = weakref.ref(f)
    compiled = tjc.compile(_frozen_weigh)
    for _ in range(3):
        compiled(torch.ones(2), f)
    before = sys.getrefcount(f)
    compiled(torch.ones(2), f)
    assert sys.getrefcount(f) == before
    del f
    assert ref() is None


# -- sets holding a library's functions ----------------------------------------------------------------

def _weigh_functions(x, s):
    n = 0
    for item in s:   # in the set's own order, which follows the functions' hashes
        n = n * 3 + (1 if callable(item) else 2)
    if torch.sin in s:
        x = x.sin()
    both = s | {operator.add}
    return x + n + len(both) + (operator.add in s), s - {1}, both


def test_a_set_of_library_functions_is_traced_and_guarded_by_its_items():
    x = torch.ones(2)
    first = {1, torch.sin, operator.add, "a"}
    _one_graph(_weigh_functions, x, set(first))
    cnt = _run_both(_weigh_functions, lambda: (x, set(first)))
    assert cnt.frame_count == 1
    cnt = CompileCounter()
    compiled = tjc.compile(_weigh_functions, backend=cnt)
    for s in (set(first), {1, torch.cos, "a"}, set(first), {torch.cos, 1, "a", operator.add}):
        got, want = compiled(x, set(s)), _weigh_functions(x, set(s))
        torch.testing.assert_close(got[0], want[0])
        assert got[1:] == want[1:]
    assert cnt.frame_count == 3   # another function, or another order, compiles again


def _user_function():
    return 1


def test_a_set_of_user_functions_stays_opaque_and_matches_eager():
    # A user's function may die (a guard must not hold it) and its hash is its address: the set
    # stays opaque and breaks where used.
    def fn(x, s):
        return x + (_user_function in s)
    _run_both(fn, lambda: (torch.ones(2), {_user_function, 2}))
    assert explain_counts(fn, torch.ones(2), {_user_function, 2})[1] >= 1


def test_a_dict_keyed_by_library_c_functions_is_traced():
    table = {operator.add: 1, len: 2, torch.sin: 3}

    def fn(x, d):
        return x * sum(d.values()) + d[operator.add], list(d)

    _one_graph(fn, torch.ones(2), dict(table))
    cnt = _run_both(fn, lambda: (torch.ones(2), dict(table)))
    assert cnt.frame_count == 1
    compiled = tjc.compile(fn)
    other = {operator.mul: 5, operator.add: 7}
    got, want = compiled(torch.ones(2), other), fn(torch.ones(2), other)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]


# -- deepcopy and pop ------------------------------------------------------------------------------------

def _deep_copied(x, s):
    dup = copy.deepcopy(s)
    dup.add("new")
    return x + len(dup), list(dup), dup is s


@pytest.mark.parametrize("make", [lambda: {"a", 1, (2, "b"), None}, lambda: set(), lambda: {operator.add, 0}],
                         ids=["constants", "empty", "library-function"])
def test_deepcopy_of_a_set_is_a_new_set_in_eagers_order(make):
    cnt = _run_both(_deep_copied, lambda: (torch.ones(2), make()))
    _one_graph(_deep_copied, torch.ones(2), make())
    assert cnt.frame_count == 1


def _deep_copy_after_change(x, s):
    s.add(99)
    return x + len(copy.deepcopy(s))


def test_deepcopy_of_a_set_the_trace_changed_breaks_and_matches_eager():
    _run_both(_deep_copy_after_change, lambda: (torch.ones(2), {1, 9}))
    assert explain_counts(_deep_copy_after_change, torch.ones(2), {1, 9})[1] == 1


def _pop_single(x, s):
    got = s.pop()
    t = {1, 1.0, True}      # one item, the first written
    first = t.pop()
    try:
        s.pop()
    except KeyError as e:
        x = x + len(e.args)
    return x + 1, got, type(first), s


def test_pop_of_a_set_of_one_item_is_traced_and_replayed():
    cnt = _run_both(_pop_single, lambda: (torch.ones(2), {"only"}))
    _one_graph(_pop_single, torch.ones(2), {"only"})
    assert cnt.frame_count == 1


def _pop_many(x, s):
    return x + len(str(s.pop())), s


def test_pop_of_a_set_of_several_items_breaks_and_matches_eager():
    _run_both(_pop_many, lambda: (torch.ones(2), {"a", "bb", "ccc"}))
    assert explain_counts(_pop_many, torch.ones(2), {"a", "bb", "ccc"})[1] == 1


def _gen():
    yield 1


def _compare_with_generator(x, s, g):
    n = (s == g) + 2 * (g != s)
    try:
        s <= g
    except TypeError:
        n += 4
    try:
        s ^= g
    except TypeError:
        n += 8
    return x + n


def test_a_generator_from_the_frame_is_refused_by_its_type_without_being_started():
    cnt = _run_both(_compare_with_generator, lambda: (torch.ones(2), {1, 2}, _gen()))
    _one_graph(_compare_with_generator, torch.ones(2), {1, 2}, _gen())
    assert cnt.frame_count == 1
    g = _gen()
    tjc.compile(_compare_with_generator)(torch.ones(2), {1}, g)
    assert next(g) == 1   # never started by the trace


# -- the order of a frame set the trace changed ------------------------------------------------------

def _text_after_growth(x, s):
    s.update((9, 17))      # items that share slots: where each lands depends on the table's
    s.update((25, 33))     # size and history, which the trace does not model
    s.update((41, 49))
    return x + 1, repr(s), str(s - {9})


def test_the_text_of_a_frame_set_after_a_change_is_eagers():
    # Before, repr() folded a copy of the items, whose order is the copy's table's: wrong.
    _run_both(_text_after_growth, lambda: (torch.ones(2), set()))
    assert explain_counts(_text_after_growth, torch.ones(2), set())[1] >= 1


def _counts_after_change(x, s, t):
    s.add(40)
    both = s | t
    n = len(both) + (40 in both) + (s <= both) * 2 + (s == both) * 4 + len(s.difference(t)) + s.issubset(both)
    return x + n, sorted(both)


def test_counts_and_comparisons_need_no_order_after_a_change():
    cnt = _run_both(_counts_after_change, lambda: (torch.ones(2), {1, 9, 17}, {2, 33}))
    _one_graph(_counts_after_change, torch.ones(2), {1, 9, 17}, {2, 33})
    assert cnt.frame_count == 1


def _iterate_derived(x, s):
    s.discard(1)
    for item in s | {100}:   # its order follows s's table: a break
        x = x * 2 + item
    return x


def test_iterating_a_set_made_from_a_changed_frame_set_breaks_and_matches_eager():
    # Before, the derived set was rebuilt at the break in the trace's order, not eager's: wrong.
    _run_both(_iterate_derived, lambda: (torch.zeros(1), {1, 9, 17, 25}))
    _, breaks, fallbacks = explain_counts(_iterate_derived, torch.zeros(1), {1, 9, 17, 25})
    assert breaks >= 1 or fallbacks


class _Copied(set):
    pass


class _FrozenCopied(frozenset):
    pass


def test_a_subclass_copied_before_is_still_plain():
    # copy and pickle cache `__slotnames__` in the class's __dict__; it adds no behaviour.
    copy.deepcopy(_Copied([1]))
    copy.copy(_FrozenCopied([1]))
    assert "__slotnames__" in vars(_Copied) and "__slotnames__" in vars(_FrozenCopied)
    cnt = _run_both(_init_name, lambda: (torch.ones(2), _Copied([1])))
    _one_graph(_init_name, torch.ones(2), _Copied([1]))
    _one_graph(_frozen_methods, torch.ones(2), _FrozenCopied("abcd"))
    assert cnt.frame_count == 1


def _grown_in_trace(x):
    s = {2}
    s.update((41, 49))     # 41, 49 and 33 share slots with each other: where each lands depends
    s = s | {1}            # on the table's history, kept by changing the set in place
    s.difference_update((1,))
    s.update((33, 41))
    order = []
    for item in s:
        order.append(item)
        x = x * 2 + item
    return x, order


def test_a_set_built_in_the_trace_iterates_in_eagers_order_after_updates():
    # Before, each update replaced the tracker's set by an updated copy, whose table (so order)
    # was the copy's: the loop ran in another order than eager's.
    cnt = _run_both(_grown_in_trace, lambda: (torch.zeros(1),))
    _one_graph(_grown_in_trace, torch.zeros(1))
    assert cnt.frame_count == 1


def _texts_in_own_order(x, items):
    s = set(items)
    s.update((41, 49))
    t = s | {1}
    t.discard(2)
    return x + 1, repr(s), str(t), list(t)


def test_the_text_of_a_set_follows_its_own_order():
    # Before, repr() was folded on a copy of the items, and `s | {1}` was kept as a copy of the
    # result: with colliding items both could come out in another order than eager's.
    cnt = _run_both(_texts_in_own_order, lambda: (torch.ones(1), (9, 17, 2, 33)))
    _one_graph(_texts_in_own_order, torch.ones(1), (9, 17, 2, 33))
    assert cnt.frame_count == 1
