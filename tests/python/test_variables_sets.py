"""tracer/variables/collections/sets.py through the public API: set and frozenset in traced code.

The contract: set literals, operations and membership are traced in the graph; a set built in the
trace is a fresh object per call; a frozenset argument is guarded, not trusted by value; what the
trace cannot keep exact (set.pop, sets of tensors) breaks. Each compares with eager and counts
graphs and breaks."""
import contextlib
import io
import sys
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import CompiledCalls, eager_and_compiled, explain_counts, leaves, runs_on_fresh_arguments  # noqa: E402


# -- sets -----------------------------------------------------------------------------------------

def _set_literal_and_ops(x):
    a = {1, 2, 3}
    b = set([2, 3, 4])
    c = {i * 2 for i in range(3)}
    alias = a
    alias |= {9}          # in place: `a` sees it
    a.add(5)
    a.discard(1)
    n = len(a & b) + len(a - b) + len(a ^ c) + (9 in a) + (1 not in a) + a.issuperset({2, 3})
    return x * n + sum(sorted(a))


def _frozenset_membership(x):
    keep = frozenset(["q", "k"])
    return x + ("q" in keep) + len(keep | {"v"})


@pytest.mark.parametrize("fn", [_set_literal_and_ops, _frozenset_membership])
def test_sets_are_traced(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3,)))
    assert (graphs, breaks) == (1, 0)


def test_a_set_built_in_the_trace_is_returned_fresh_per_call():
    def fn(x):
        s = {1, 2}
        s.add(3)
        return x + 1, s

    compiled = tjc.compile(fn)
    x = torch.randn(2)
    out1, s1 = compiled(x)
    s1.add(99)
    out2, s2 = compiled(x)
    assert s2 == {1, 2, 3} and s1 is not s2


def test_a_frozenset_argument_is_not_trusted_by_value():
    # A frozenset read from the frame is a constant guarded by its items in order (SET_ITEMS), so
    # a frozenset with other items recompiles rather than reusing the answer.
    def fn(x, names):
        return x + 1 if "a" in names else x - 1

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    x = torch.randn(2)
    ab, bc = frozenset("ab"), frozenset("bc")
    torch.testing.assert_close(compiled(x, ab), x + 1)
    torch.testing.assert_close(compiled(x, bc), x - 1)
    torch.testing.assert_close(compiled(x, ab), x + 1)
    assert cnt.frame_count == 2


NAMES = frozenset({"q", "k"})


class _Attention:
    skip = frozenset({"bias"})

    def __init__(self, own):
        self.own = own


def _frozen_attributes(x, m):
    if "q" in NAMES and "bias" in m.skip and "v" not in m.own:
        x = x * 2
    return x + len(m.own), sorted(m.skip | m.own)


@pytest.mark.parametrize("own", [frozenset({"w"}), frozenset()], ids=["own", "empty"])
def test_frozenset_attributes_and_globals_are_constants_in_one_graph(own):
    m = _Attention(own)
    x = torch.randn(3)
    assert explain_counts(_frozen_attributes, x, m) == (1, 0, [])
    cnt = CompileCounter()
    compiled = tjc.compile(_frozen_attributes, backend=cnt)
    assert compiled(x, m)[1] == _frozen_attributes(x, m)[1]
    m.own = frozenset({"v"})   # another frozenset: the guard fails, the branch is taken anew
    got, expected = compiled(x, m), _frozen_attributes(x, m)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1] and cnt.frame_count == 2


def test_set_pop_and_sets_of_tensors_break():
    def fn(x):
        s = {1, 2}
        s.pop()   # an arbitrary item: not followed
        return x + len(s)

    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))
    graphs, breaks, fallbacks = explain_counts(fn, x)
    # The set is both a local and pop's self at the break, rebuilt as one set (codegen builds it
    # once); the resume function reads it from the frame, a set of constants there: len() folds.
    assert (graphs, breaks, fallbacks) == (1, 1, [])

    def fn2(x):
        return x + len({x, x})   # hashing tensors: by identity in Python, not a constant here

    torch.testing.assert_close(tjc.compile(fn2)(x), fn2(x))


# -- sets read from the frame ---------------------------------------------------------------------
# A set of constants read from the frame is tracked: guarded by its type and its items in iteration
# order, its pure operations folded, its changes replayed on the very set after the graph.

def _ordered(*items):
    """A set whose iteration order is the order the items were added in (where hashes collide)."""
    s = set()
    for item in items:
        s.add(item)
    return s


def _run_both(fn, make_args, calls=2):
    """fn eagerly and compiled (`calls` times), each on fresh arguments from make_args(): the results
    and, for each set argument, its items in iteration order after the call, must agree."""
    cnt, made = runs_on_fresh_arguments(fn, make_args, calls)
    runs = [(out, [list(a) for a in args if isinstance(a, set)], args) for out, args in made]
    expected, state, _ = runs[0]
    for out, got_state, args in runs[1:]:
        if isinstance(expected, torch.Tensor):
            torch.testing.assert_close(out, expected)
        elif isinstance(expected, tuple) and expected and isinstance(expected[0], torch.Tensor):
            for o, e in zip(out, expected):
                torch.testing.assert_close(o, e) if isinstance(e, torch.Tensor) else None
        else:
            assert out == expected
        assert got_state == state
    return cnt, runs


def _pure_set_ops(x, s, t):
    n = len(s - t) + 2 * len(s & t) + 3 * len(s | t) + 5 * len(s ^ t)
    n += ("a" in s) + ("z" not in s) + s.isdisjoint(t) * 7 + (s <= t) * 11 + (s == t) * 13 + bool(s)
    n += len(s.difference(t)) + len(s.union(t, {"q"})) + s.issubset(s | t) + len(set(s)) + len(frozenset(s))
    for i, item in enumerate(s):   # unrolled in the set's own order
        x = x * (i + 2) + len(item)
    return x + n, sorted(s.copy())


def test_a_frame_set_of_constants_is_traced_in_one_graph():
    x = torch.randn(3)
    s, t = {"a", "bb", "ccc"}, {"bb", "dddd"}
    assert explain_counts(_pure_set_ops, x, s, t)[:2] == (1, 0)
    cnt, _ = _run_both(_pure_set_ops, lambda: (x.clone(), {"a", "bb", "ccc"}, {"bb", "dddd"}))
    assert cnt.frame_count == 1


def _weigh_in_order(x, s):
    for i, item in enumerate(s):
        x = x * 10 + item * (i + 1)
    return x


def test_iteration_follows_the_frames_order_and_a_new_order_recompiles():
    a, b = _ordered(9, 1), _ordered(1, 9)   # 9 and 1 share a slot: the first added comes first
    assert list(a) != list(b) and a == b
    cnt = CompileCounter()
    compiled = tjc.compile(_weigh_in_order, backend=cnt)
    x = torch.zeros(2)
    for s in (a, b, a, _ordered(9, 1), {1, 2}):
        torch.testing.assert_close(compiled(x, s), _weigh_in_order(x, s))
    assert cnt.frame_count == 3   # a's order, b's order, {1, 2}; an equal set in a's order hits


def _mutate(x, s):
    s.add(4)
    s.discard(1)
    s |= {7, 15}
    s -= {2}
    s.update([8, 16], (24,))
    s.remove(3)
    s.difference_update({15})
    s.symmetric_difference_update({7, 99})
    s ^= {100}
    s &= {4, 8, 16, 24, 99, 100, 5}
    s.intersection_update(range(200))
    return x + len(s), s


def test_mutations_of_a_frame_set_are_replayed_on_it_in_program_order():
    x = torch.randn(2)
    assert explain_counts(_mutate, x, {1, 2, 3, 5})[:2] == (1, 0)
    cnt, runs = _run_both(_mutate, lambda: (x, _ordered(3, 5, 2, 1)))
    assert cnt.frame_count == 1
    for out, _, args in runs:
        assert out[1] is args[1]   # the frame's own set comes back, not a copy


def _remove_missing(x, s):
    s.add(5)
    s.remove(42)
    return x + 1


def _remove_caught(x, s):
    s.add(5)
    try:
        s.remove(42)
    except KeyError as e:
        x = x + len(e.args)
    s.clear()
    return x + len(s)


@pytest.mark.parametrize("fn", [_remove_missing, _remove_caught])
def test_remove_of_a_missing_item_raises_keyerror_as_eager(fn):
    _run_both(fn, lambda: (torch.ones(2), {1, 2}))
    if fn is _remove_caught:   # raised and caught in the trace: one graph
        assert explain_counts(fn, torch.ones(2), {1, 2})[:2] == (1, 0)


def _iterate_after_change(x, s):
    s.add(17)
    for item in s:   # the order after a change is not modelled: a break, after the replay
        x = x * 3 + item
    return x


def test_iteration_after_a_change_breaks_after_the_replay():
    x = torch.zeros(1)
    _run_both(_iterate_after_change, lambda: (x, _ordered(9, 1)))
    assert explain_counts(_iterate_after_change, x, _ordered(9, 1))[1] >= 1


class _Holder:
    def __init__(self):
        self.names = {"w", "b"}
        self.count = 0


def _set_and_attribute_effects(x, h):
    h.count = len(h.names)
    h.names.add("g")
    h.count = h.count + 10
    return x + h.count


def test_set_changes_interleave_with_other_side_effects():
    x = torch.randn(2)
    assert explain_counts(_set_and_attribute_effects, x, _Holder())[:2] == (1, 0)
    compiled = tjc.compile(_set_and_attribute_effects)
    for _ in range(2):
        h, e = _Holder(), _Holder()
        torch.testing.assert_close(compiled(x, h), _set_and_attribute_effects(x, e))
        assert (h.count, list(h.names)) == (e.count, list(e.names))


def test_the_cache_holds_no_frame_set_alive():
    # A set takes no weak reference: its refcount must come back to what it was, and the guard
    # holds its items (key constants), never the set.
    s = {"a", "b"}
    assert explain_counts(_weigh_len, torch.randn(2), s)[:2] == (1, 0)
    before = sys.getrefcount(s)
    compiled = tjc.compile(_weigh_len)
    for _ in range(3):
        compiled(torch.randn(2), s)
    assert sys.getrefcount(s) == before
    holder = _Holder()
    ref = weakref.ref(holder)
    names = holder.names
    before = sys.getrefcount(names)
    by_attribute = tjc.compile(_weigh_holder)
    for _ in range(3):
        by_attribute(torch.randn(2), holder)
    del holder
    assert ref() is None and sys.getrefcount(names) == before - 1   # the holder's reference went


def _weigh_len(x, s):
    return x * len(s) + ("a" in s)


def _weigh_holder(x, h):
    h.names.add("z")
    return x * len(h.names)


def test_an_equal_frozenset_hits_and_frozenset_of_it_is_itself():
    def fn(x, names):
        same = frozenset(names) is names
        return (x + 1 if "a" in names else x - 1) * (2 if same else 3)

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    x = torch.randn(2)
    for names in (frozenset("ab"), frozenset("ab"), frozenset("bc")):
        torch.testing.assert_close(compiled(x, names), fn(x, names))
    assert cnt.frame_count == 2   # equal items in the same order: one entry


def test_a_set_of_tensors_stays_opaque_and_matches_eager():
    def fn(x, s):
        return x + len(s)

    x = torch.randn(2)
    s = {x}
    torch.testing.assert_close(tjc.compile(fn)(x, s), fn(x, s))


class _Names(set):
    pass


class _FrozenNames(frozenset):
    pass


def _subclass_ops(x, s):
    made = _Names(["p", "q"])
    frozen = _FrozenNames(made)
    again = _FrozenNames(frozen)
    s.add("r")
    n = len(s | made) + ("p" in frozen) + (frozen == again) * 3 + (frozen is again) * 5
    both = frozen | {"z"}
    return x + n, made, frozen, type(made | s).__name__, type(both).__name__, s


def test_subclasses_of_set_and_frozenset_are_read_and_built_in_the_trace():
    x = torch.randn(2)
    assert explain_counts(_subclass_ops, x, _Names("ab"))[:2] == (1, 0)
    cnt, runs = _run_both(_subclass_ops, lambda: (x, _Names("ab")))
    for out, _, args in runs:
        assert (type(out[1]), type(out[2])) == (_Names, _FrozenNames) and out[5] is args[1]
    assert cnt.frame_count == 1


def test_a_subclass_with_its_own_methods_stays_opaque():
    class Loud(set):
        def add(self, item):
            super().add(item.upper())

    def fn(x, s):
        s.add("a")
        return x + len(s)

    x = torch.randn(2)
    got, want = Loud(), Loud()
    torch.testing.assert_close(tjc.compile(fn)(x, got), fn(x, want))
    assert got == want == {"A"}


def _grow_while_iterating(x, s):
    try:
        for item in s:
            s.update([item + 100])
    except RuntimeError:   # Set changed size during iteration
        x = x + 1
    return x + len(s)


def _grow_built_while_iterating(x):
    return _grow_while_iterating(x, {1, 2, 3})


@pytest.mark.parametrize("fn,make", [(_grow_while_iterating, lambda: (torch.zeros(1), {1, 2, 3})),
                                     (_grow_built_while_iterating, lambda: (torch.zeros(1),))])
def test_a_set_changed_while_a_loop_iterates_over_it_raises_as_eager(fn, make):
    _run_both(fn, make)


def _held_at_a_break(x, s):
    s.add(3)
    s.discard(1)
    mine = _Names([7])
    print("break", len(s))   # a graph break: the set's changes are replayed before it
    s.add(4)
    return x + len(s), s, mine


def test_a_frame_set_held_at_a_break_is_the_frames_own_set_changed_by_the_replay():
    x = torch.randn(2)
    with contextlib.redirect_stdout(io.StringIO()):
        assert explain_counts(_held_at_a_break, x, {1, 2})[:2] == (1, 1)   # no tensor work before it
        _, runs = _run_both(_held_at_a_break, lambda: (x, _ordered(1, 2)))
    for out, _, args in runs:
        assert out[1] is args[1] and type(out[2]) is _Names and out[2] == {7}


def _sorted_after_change(x, s):
    s.add(7)
    s.discard(2)
    for v in sorted(s):   # sorted needs no order: no break after the change
        x = x * 2 + v
    return x


def test_sorted_of_a_changed_frame_set_needs_no_order():
    x = torch.zeros(1)
    assert explain_counts(_sorted_after_change, x, {1, 2, 3})[:2] == (1, 0)
    _run_both(_sorted_after_change, lambda: (x, _ordered(9, 1, 2)))


_made = [0]


def _counted_items():
    for v in (1, 2, 3):
        _made[0] += v
        yield v


def _isdisjoint_lazily(x):
    s = {2, 4, 5}
    return x + 1, s.isdisjoint(_counted_items()), s.isdisjoint(v for v in (7, 8)), s.isdisjoint(iter([9, 4])), _made[0]


def test_isdisjoint_takes_an_iterator_s_items_until_the_first_it_holds():
    # set.isdisjoint(generator) stops at the first item the set holds: the generator's later
    # items (and their effects) are never made, as in eager.
    _made[0] = 0
    expected = _isdisjoint_lazily(torch.ones(2))
    _made[0] = 0
    calls = CompiledCalls(_isdisjoint_lazily)
    got = calls(torch.ones(2))
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] and expected[-1] == 3
    calls.check(graphs=1)


def _update_from_iterators(x, s, items):
    s.update(map(int, items))
    made = set()
    made.update(v * 2 for v in (3, 4))
    s.difference_update(iter([1]))
    return x + len(s), sorted(made)


def test_set_methods_drain_iterators_the_trace_made():
    compiled = tjc.compile(_update_from_iterators, backend="eager")
    for items in ([1, 2, 1], [5.0, 7]):
        s_eager, s_compiled = set(), set()
        want = _update_from_iterators(torch.ones(1), s_eager, items)
        got = compiled(torch.ones(1), s_compiled, items)
        assert torch.equal(got[0], want[0]) and got[1] == want[1] and s_compiled == s_eager
    assert explain_counts(_update_from_iterators, torch.ones(1), set(), [1])[1] == 0


def test_an_iterator_yielding_an_unhashable_item_raises_as_in_eager():
    def fn(x, s):
        s.update(iter([1, [2]]))
        return x + 1
    for run in (fn, tjc.compile(fn, backend="eager")):
        s = set()
        with pytest.raises(TypeError):
            run(torch.ones(1), s)
        assert s == {1}   # the item before the unhashable one was added, as eager adds it


def _typing_forms(x, form):
    import types
    import typing
    unions = {typing.Union, types.UnionType}
    return x + 1, form in unions, typing.Any in unions, len(unions | {typing.Any})


def test_a_set_of_typing_forms_and_static_types_read_from_the_frame():
    """`get_origin(t) in {Union, types.UnionType}` (functools.singledispatch's union check): forms
    and static types that live for the process may be a set's items and the operand of `in`,
    pinned by identity where read; another form passed recompiles. Before: a break at BUILD_SET."""
    import typing
    calls = CompiledCalls(_typing_forms)
    for form in (typing.Union, typing.Union, typing.Any, 3):
        got, expected = calls(torch.ones(1), form), _typing_forms(torch.ones(1), form)
        assert got[1:] == expected[1:] and torch.equal(got[0], expected[0])
    calls.check(graphs=3, recompiles=2)


# -- complex numbers and NaN as a frame set's items (and a frame dict's keys) -----------------------------------------------

def _weigh_numbers(x, s):
    if "torch" in s and 1j in s:
        x = x + 1
    for i, item in enumerate(s):   # unrolled in the set's own order
        x = x * (i + 2) + (len(item) if isinstance(item, str) else abs(item))
    return x, 2j in s


def test_a_frame_set_holding_complex_numbers_is_traced_and_guarded_by_its_items():
    """A complex is an immutable builtin whose hash is the same in every process: a set of them
    read from the frame is guarded by its items (SET_ITEMS), so `in` and its iteration are traced
    in one graph, and a set with another complex recompiles. Before: the set stayed opaque and
    `in` broke the graph."""
    x = torch.zeros(2)
    assert explain_counts(_weigh_numbers, x, {"torch", 2.5, 1j, 3 + 4j})[:2] == (1, 0)
    cnt, _ = _run_both(_weigh_numbers, lambda: (x.clone(), {"torch", 2.5, 1j, 3 + 4j}))
    assert cnt.frame_count == 1
    calls = CompiledCalls(_weigh_numbers)
    for s in ({"torch", 1j}, {"torch", 1j}, {"torch", 2j}, {"torch", complex(1, 0)}):
        got, expected = calls(x, s), _weigh_numbers(x, s)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    calls.check(graphs=3, recompiles=2)


def _holds_torch(x, s):
    return x.sin() if "torch" in s else x.cos()


def test_a_frame_set_holding_nan_is_traced_and_a_changed_set_recompiles():
    """NaN equals only the very object: the SET_ITEMS guard holds the set's own NaN, so the same
    set hits and one with another NaN object recompiles (never a wrong hit)."""
    import math
    s = {"torch", 3.3, 1j, math.nan}
    x = torch.ones(2)
    assert explain_counts(_holds_torch, x, s)[:2] == (1, 0)
    calls = CompiledCalls(_holds_torch)
    for items in (s, s, {"torch", 3.3, 1j, float("nan")}, s - {"torch"}):
        torch.testing.assert_close(calls(x, items), _holds_torch(x, items))
    calls.check(graphs=3, recompiles=2)


def _weigh_items(x, d):
    for k, v in d.items():
        x = x * abs(k) + v
    return x, d[2j]


def test_a_frame_dict_keyed_by_complex_numbers_is_traced_and_guarded_by_its_keys():
    """The same rule for dict keys (DICT_KEYS): before, the frame ran uncompiled ("a dict with keys
    other than constants ...")."""
    x = torch.ones(2)
    assert explain_counts(_weigh_items, x, {1j: 1.0, 2j: 2.0, 3 + 4j: 3.0}) == (1, 0, [])
    calls = CompiledCalls(_weigh_items)
    for d in ({1j: 1.0, 2j: 2.0}, {1j: 1.0, 2j: 5.0}, {2j: 1.0, 1j: 2.0}, {1j: 1.0, 2j: 2.0}):
        got, expected = calls(x, d), _weigh_items(x, d)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]
    calls.check(graphs=3, recompiles=2)   # a new value of d[2j], then keys in another order


def _holds_exit(x, s):
    return x.sin() if torch.amp._exit_autocast in s else x.cos()


def test_a_frame_set_holding_pybind11_functions_is_traced_and_a_new_item_recompiles():
    """A pybind11 function (bound to its own function record, not to a module) that its module
    names lives for the process and hashes by identity: a set holding one is guarded by its
    items. Before: the set stayed opaque and `in` broke the graph."""
    s = {torch._C._set_grad_enabled, torch.amp._exit_autocast}
    x = torch.ones(2)
    calls = CompiledCalls(_holds_exit)
    torch.testing.assert_close(calls(x, s), _holds_exit(x, s))
    s.remove(torch.amp._exit_autocast)
    s.add(torch._C._set_autograd_fallback_mode)
    assert explain_counts(_holds_exit, x, s)[:2] == (1, 0)
    torch.testing.assert_close(calls(x, s), _holds_exit(x, s))
    calls.check(graphs=2, recompiles=1)
