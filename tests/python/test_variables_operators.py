"""tracer/variables/builtin_functions/operators.py through the public API: Python's operators in traced code.

The contract: operators on Python constants fold while tracing (eager's answer, no graph op); any
tensor operand makes a graph node; sequences concatenate and repeat as Python's do; identity and
membership tests answer from what the trace knows; and an operator the trace cannot follow is a
graph break, never a guess. Each case compares the compiled call with eager's and counts graphs
and breaks.
"""
import functools
import operator

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from context_helpers import CompiledCalls, assert_same, compiled_like_eager  # noqa: E402


def _binary_on_tensors(x, y):
    return x + y, x - y, x * y, x / (y.abs() + 1), x // 2, x % 3, x ** 2, x @ y, -x, +x


def _inplace_on_tensors(x, y):
    z = x.clone()
    z += y
    z *= 2
    z -= 1
    return z


def _comparisons(x, y):
    return x < y, x <= y, x == y, x != y, x > 0.5, 3 < 4 <= 4


def _sequences(x, a, b):
    ab = a + b
    return x * len(ab), ab, a * 2, (1,) + tuple(b), ab[1:3], ab[::-1]


def _identity_and_membership(x, opt, keys):
    y = x if opt is None else x * opt
    y = y + 1 if "a" in keys else y - 1
    return y * 2 if "z" not in keys else y, opt is not None


def _bitwise_and_shifts(x, n):
    return x.to(torch.int64) & 6, x.to(torch.int64) | 1, ~x.to(torch.bool), n << 2, n ^ 5, n >> 1


def _operator_module(x, n):
    # On constants the operator module folds as the operators do.
    return x * operator.add(n, 1), operator.mul(n, 2), operator.neg(n), operator.getitem([n, 5], 1)


@pytest.mark.parametrize("fn, args", [
    (_binary_on_tensors, lambda: (torch.randn(3, 3), torch.randn(3, 3))),
    (_inplace_on_tensors, lambda: (torch.randn(3), torch.randn(3))),
    (_comparisons, lambda: (torch.randn(4), torch.randn(4))),
    (_sequences, lambda: (torch.randn(2), [1, 2], [3, 4])),
    (_identity_and_membership, lambda: (torch.randn(2), None, {"a": 1})),
    (_identity_and_membership, lambda: (torch.randn(2), 3.0, ("b", "z"))),
    (_bitwise_and_shifts, lambda: (torch.arange(4.0), 9)),
    (_operator_module, lambda: (torch.randn(2), 3)),
], ids=["binary", "inplace", "compare", "sequences", "identity-none", "identity-value", "bitwise",
        "operator-module"])
def test_operators_are_traced_in_one_graph(fn, args):
    compiled_like_eager(fn, *args())


def test_operators_on_constants_fold_to_one_constant():
    def folded(x):
        return x + ((3 * 4 - 2) // 3 + (2 ** 3) % 5 + (1 << 3) - (True and 7))

    out = tjc.explain(folded)(torch.zeros(2))
    assert out.ops_per_graph == [["add"]]


def test_tensor_operands_become_graph_ops_in_program_order():
    def ops(x, y):
        return (x * y - x) / 2

    out = tjc.explain(ops)(torch.randn(2), torch.randn(2))
    assert out.ops_per_graph == [["mul", "sub", "truediv"]]


def test_an_in_place_operator_on_an_input_mutates_it_as_eager_does():
    def bump(x):
        x += 1
        return x * 2

    eager_x, compiled_x = torch.zeros(3), torch.zeros(3)
    expected = bump(eager_x)
    got = tjc.compile(bump, backend="eager")(compiled_x)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(compiled_x, eager_x)


def test_a_constant_operator_that_raises_raises_eagers_error():
    def divides(x, n):
        return x * (1 // n)

    compiled = tjc.compile(divides, backend="eager")
    with pytest.raises(ZeroDivisionError):
        compiled(torch.ones(2), 0)
    torch.testing.assert_close(compiled(torch.ones(2), 1), torch.ones(2))


def test_membership_in_an_argument_list_is_guarded():
    def gate(x, names):
        return x + 1 if "bias" in names else x - 1

    compiled = tjc.compile(gate, backend="eager")
    x = torch.zeros(2)
    assert compiled(x, ["bias"]).tolist() == [1.0, 1.0]
    assert compiled(x, ["weight"]).tolist() == [-1.0, -1.0], "another list is a miss, not the old answer"


# -- the operator module on non-constant arguments -------------------------------------------------
def _operator_functions(x, y):
    xs = [x, 2]
    ys = [1, 2]
    operator.setitem(ys, 0, y)
    operator.iadd(ys, [x])
    return (functools.reduce(operator.add, [x, x, y]), operator.getitem(xs, 1), operator.getitem(x, 0),
            operator.mul(x, y), operator.neg(x), operator.lt(x, y), operator.contains({"a": x}, "a"),
            operator.is_(xs, None), operator.is_not(ys, None), operator.not_(xs), ys)


def test_operator_functions_on_tensors_and_containers_run_as_their_operators():
    compiled_like_eager(_operator_functions, torch.randn(3), torch.randn(3))


def test_operator_functions_the_trace_cannot_follow_stay_a_graph_break():
    def f(x, obj):
        return operator.getitem(obj, 0) + x

    class Opaque:
        def __getitem__(self, k):   # a user __getitem__: inlined
            return k + 1

    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(f, backend="eager")(x, Opaque()), f(x, Opaque()))
    with pytest.raises(TypeError):
        tjc.compile(f, backend="eager")(x, object())


def test_a_tuple_times_one_or_plus_an_empty_tuple_is_the_tuple_itself():
    # Python returns an exact tuple itself for `t * 1`, `t + ()` and `() + t`; `is` and id() see it.
    def fn(x, t):
        return x + 1, t * 1, t + (), () + t, t * 2

    t = (1, 2, 3)
    x = torch.ones(2)
    got = tjc.compile(fn, backend="eager")(x, t)
    assert got[1] is t and got[2] is t and got[3] is t
    assert got[4] == t * 2

    def made_in_the_trace(x):
        s = tuple(range(3))
        return x + 1, id(s) == id(s * 1), s * 1 is s

    assert tjc.compile(made_in_the_trace, backend="eager")(x)[1:] == made_in_the_trace(x)[1:] == (True, True)


def _operator_functions_change_constant_containers(x, arg_list, arg_dict):
    a = [4, 3, 2, 1]
    deleted = operator.delitem(a, 1)
    b = [1, 2]
    operator.setitem(b, 0, 9)
    operator.iadd(b, [7])
    d = {"k": 1}
    operator.setitem(d, "j", 2)
    operator.delitem(d, "k")
    operator.setitem(arg_list, 0, "first")
    operator.delitem(arg_list, -1)
    operator.imul(arg_list, 2)
    operator.setitem(arg_dict, "new", 3)
    return x + 1, deleted, a, b, d


def test_operator_functions_change_lists_and_dicts_of_constants_as_eager():
    # setitem, delitem and the in-place operators change the list or dict they are given: folded
    # on a copy of its constants, the change was lost (a list of constants is a constant too).
    import copy

    args = (torch.ones(2), [1, 2, 3], {"a": 1})
    eager_args, compiled_args = copy.deepcopy(args), copy.deepcopy(args)
    expected = _operator_functions_change_constant_containers(*eager_args)
    got = tjc.compile(_operator_functions_change_constant_containers, backend="eager")(*compiled_args)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:]
    assert compiled_args[1:] == eager_args[1:]
    assert tjc.stats()["graph_breaks"] == 0 and tjc.stats()["fallbacks"] == 0


def _fresh_operator_module():
    from test.support import import_helper

    return import_helper.import_fresh_module("operator", fresh=["_operator"])


def _fresh_operator_calls(x, op, items):
    a = [4, 3, 2, 1]
    op.delitem(a, 1)
    op.setitem(items, 0, "first")
    b = [1]
    op.iconcat(b, [2])
    return x + 1, a, b


def test_a_fresh_copy_of_the_operator_module_changes_containers_as_eager():
    # CPython's own tests call a fresh import of `_operator`: its functions are other objects than
    # operator's, with the same names and the same effects.
    import copy

    op = _fresh_operator_module()
    assert op.delitem is not operator.delitem
    args = (torch.ones(2), op, [1, 2])
    eager_args, compiled_args = (args[0], op, copy.deepcopy(args[2])), (args[0], op, copy.deepcopy(args[2]))
    expected = _fresh_operator_calls(*eager_args)
    got = tjc.compile(_fresh_operator_calls, backend="eager")(*compiled_args)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] and compiled_args[2] == eager_args[2]


def _subscripts_out_of_range(x, s, d):
    seen = []
    for make in (lambda: s[10], lambda: (1, 2)[5], lambda: d["missing"]):
        try:
            make()
        except LookupError as e:
            seen.append(type(e).__name__)
    return x + len(seen), seen


def test_a_subscript_of_constants_out_of_range_raises_in_the_trace():
    # Before: the IndexError of "abc"[10] escaped the tracer as an internal error, and the frame
    # ran uncompiled (re's parser reads past its string's end and catches the IndexError).
    x = torch.ones(1)
    d = {"a": 1}
    got = tjc.compile(_subscripts_out_of_range)(x, "abc", d)
    assert got[1] == _subscripts_out_of_range(x, "abc", d)[1] == ["IndexError", "IndexError", "KeyError"]
    assert tjc.stats()["fallbacks"] == 0 and tjc.stats()["graph_breaks"] == 0


def _identities(x, xs, d):
    a, b = [], []
    e = {}
    c = a
    return x + 1, [a is b, a is not b, a is c, a is xs, xs is a, e is d, e is {}, d is d, [] is not []]


def test_a_list_or_dict_made_in_the_trace_is_no_other_object():
    # Before: `[] is not []` and `a is b` between two new lists were graph breaks.
    x, xs, d = torch.ones(1), [1], {"k": 1}
    got = tjc.compile(_identities)(x, xs, d)
    assert got[1] == _identities(x, xs, d)[1]
    assert tjc.stats()["graph_breaks"] == 0 and tjc.stats()["fallbacks"] == 0


def _scaled(*args, **kwargs):
    return args, kwargs


class _Valued:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return isinstance(other, _Valued) and self.v == other.v


def _compares_containers(x):
    p = functools.partial(_scaled, 1, a=10)
    state = (p.func, p.args, p.keywords, {"attr": []})
    return (x + 1, state == (_scaled, (1,), {"a": 10}, {"attr": []}),
            state != (_scaled, (1,), {"a": 11}, {"attr": []}), [_scaled, 1] == [_scaled, 2],
            {"f": _scaled} == {"f": _scaled}, {"f": _scaled} == {"g": _scaled}, (_scaled, x) == (_scaled, x),
            (_Valued(1), 2) == (_Valued(1), 2), [_Valued(1)] != [_Valued(2)], (x,) == (x, x))


def test_containers_of_trackers_compare_item_by_item_as_cpython():
    """Tuples, lists and dicts holding functions, tensors or user objects: lengths (keys), then each
    pair one object or equal by its own ==, without a break."""
    compiled_like_eager(_compares_containers, torch.randn(2))


def _compares_tensor_items(x, y):
    return x + 1, [x] == [y]


def test_a_container_pair_of_distinct_tensors_compares_by_their_values_at_a_break():
    compiled = tjc.compile(_compares_tensor_items, backend="eager")
    for y in (torch.ones(1), torch.zeros(1)):
        got, expected = compiled(torch.ones(1), y), _compares_tensor_items(torch.ones(1), y)
        assert got[1] == expected[1] and torch.equal(got[0], expected[0])


def _membership(x, xs, ys):
    y = x * 2
    return x in xs, y in [y, 1], x in (x, 3), "k" in ["j", "k"], 2 in (1, 2.0)


def test_membership_in_a_sequence_of_non_constants_is_decided_by_identity_first():
    # `x in []` holds nothing; an item that is the very tensor is found before any `==` would
    # run. Before: any tensor in a list was a graph break. A list that grows recompiles (its
    # length is guarded), and a tensor compared with another item by `==` stays a break.
    cnt_before = tjc.stats()["graph_breaks"]
    compiled = tjc.compile(_membership)
    x = torch.ones(2)
    for xs in ([], [], [x]):
        assert compiled(x, xs, ()) == _membership(x, xs, ())
    assert tjc.stats()["graph_breaks"] == cnt_before and tjc.stats()["fallbacks"] == 0
    other = torch.zeros(2)
    with pytest.raises(RuntimeError):
        _membership(x, [other], ())           # eager: bool() of a 2-item tensor
    with pytest.raises(RuntimeError):
        compiled(x, [other], ())


# -- comparisons of sequences holding user objects, item by item as CPython (sequence_order.py) ----
class _Rank:
    def __init__(self, r):
        self.r = r

    def __lt__(self, other):
        return self.r < other.r

    def __eq__(self, other):
        return isinstance(other, _Rank) and self.r == other.r


class _Emptier:
    """Its comparisons empty the list they are given and answer NotImplemented."""

    def __init__(self, victim):
        self.victim = victim

    def __lt__(self, other):
        other.clear()
        return NotImplemented

    def __eq__(self, other):
        self.victim.clear()
        return NotImplemented


def _orders(x):
    p, q = [_Rank(1), _Rank(2)], [_Rank(1), _Rank(3)]
    nested = [[_Emptier([])]]
    try:
        nested[0] < nested
        refused = None
    except TypeError as e:
        refused = str(e)
    left, right = [], []
    left.append(_Emptier(right))
    right.append(_Emptier(left))
    both_emptied = left == right   # each __eq__ empties the other list: equal lengths, 0 == 0
    return (x + 1, p < q, p > q, (_Rank(1),) <= (_Rank(1),), [_Rank(1)] < [_Rank(1), 2], refused,
            len(nested[0]), both_emptied, len(left), len(right))


def test_order_of_sequences_of_user_objects_and_changes_made_while_comparing_are_eager():
    x = torch.zeros(2)
    calls = CompiledCalls(_orders)
    for _ in range(2):
        got, want = calls(x), _orders(x)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:]
    calls.check(graphs=1)


def _emptied_while_equal(x):
    left, right = [], []
    left.append(_Emptier(right))
    right.append(_Emptier(left))
    return x + 1, left == right, left, right


def test_lists_emptied_by_their_items_eq_compare_their_new_lengths_as_eager():
    x = torch.zeros(2)
    calls = CompiledCalls(_emptied_while_equal)
    got, want = calls(x), _emptied_while_equal(x)
    assert got[1] is want[1] is True and got[2] == want[2] == [] and got[3] == want[3] == []


_SENTINEL = object()


class _Token:
    __slots__ = ()   # no __weakref__: an identity guard could not hold it weakly


def _same_objects(x, a, b, fn):
    # `default is _SENTINEL` as functools.reduce asks it: the default read through the function,
    # the sentinel through its globals.
    return (x + 1, a is b, a is not b, a == b, a != b,
            fn.__defaults__[0] is _SENTINEL, fn.__defaults__[0] == a)


def _takes_default(x, initial=_SENTINEL):
    return initial


def test_identity_of_two_objects_read_from_the_frame_is_guarded_by_their_relation():
    """Two objects without weak references read from the frame (an `object()` sentinel, a
    __slots__ object): `is`, `is not`, object's `==` and `!=` answer from whether both sources
    reach one object, pinned by an alias (or distinct) guard: a later call that passes two objects
    where one was passed recompiles. Before: a graph break."""
    compiled = tjc.compile(_same_objects)
    other, token = object(), _Token()
    cases = [(_SENTINEL, _SENTINEL), (_SENTINEL, other), (token, token), (token, _Token())]
    for a, b in cases + cases:
        got, expected = compiled(torch.ones(1), a, b, _takes_default), _same_objects(torch.ones(1), a, b, _takes_default)
        assert got[1:] == expected[1:] and torch.equal(got[0], expected[0])
    assert tjc.stats()["graph_breaks"] == 0 and tjc.stats()["fallbacks"] == 0


class _LeftEq:
    def __eq__(self, other):
        return type(other) is _LeftEq


class _RightEq(_LeftEq):
    def __eq__(self, other):
        return "right"


class _PlainRight(_LeftEq):
    pass


def _compare_with_subclass(x, a, b):
    return x + 1, a == b, a != b


def test_a_subclass_on_the_right_is_asked_first_where_it_has_its_own_eq():
    """Python runs the right operand's reflected method first where its class is a subclass of the
    left's: the trace breaks there (or follows that order) rather than asking the left first."""
    compiled = tjc.compile(_compare_with_subclass)
    for a, b in ((_LeftEq(), _RightEq()), (_LeftEq(), _PlainRight()), (_SENTINEL, _Token())):
        got, expected = compiled(torch.ones(1), a, b), _compare_with_subclass(torch.ones(1), a, b)
        assert got[1:] == expected[1:]


def test_a_list_plus_equals_any_iterable_extends_it_in_place():
    # list.__iadd__ takes any iterable (a tuple, a torch.Size, a range); `l + t` of a list and a
    # tuple still raises eager's TypeError.
    def grows(x, shape):
        out = [x + 1]
        alias = out
        out += (x - 1, x * 2)
        out += shape
        out += range(2)
        return out, alias is out, len(alias)

    compiled_like_eager(grows, torch.randn(2), torch.Size([3, 4]))

    def concatenates(x):
        try:
            return [x] + (x,)
        except TypeError as e:
            return x - 1, str(e)

    compiled_like_eager(concatenates, torch.randn(2))


def test_a_tensor_made_from_constants_indexes_a_sequence_by_its_value():
    # `seq[t]` reads operator.index(t); a tensor made from constants alone has a value the trace
    # knows, so the item is known too; the constants are guarded (another n recompiles).
    def by_tensor_index(x, n):
        dim = x.shape[torch.tensor(n)]
        names = ("a", "b", "c")[torch.tensor([n])]
        return x.reshape(-1, dim), names

    calls = CompiledCalls(by_tensor_index)
    x = torch.randn(2, 3, 4)
    for n in (1, 2, 1):
        assert_same(calls(x, n), by_tensor_index(x, n))
    calls.check(graphs=2, breaks=0)

    def float_index(x):
        try:
            return (1, 2)[torch.tensor(1.0)]
        except TypeError as e:
            return x + 1, str(e)

    compiled_like_eager(float_index, torch.randn(2))


def test_a_tensor_of_unknown_value_as_a_sequence_index_breaks():
    def by_argument(x, i):
        return x * (4, 5, 6)[i]

    x, i = torch.randn(2), torch.tensor(2)
    calls = CompiledCalls(by_argument)
    assert_same(calls(x, i), by_argument(x, i))
    assert calls.delta("graph_breaks") == 1


class _Echo(list):
    def __getitem__(self, i):
        return type(i).__name__


def test_a_list_subclass_with_its_own_getitem_is_given_the_tensor_index_itself():
    def echo(x):
        return x + 1, _Echo([1, 2])[torch.tensor(1)]

    x = torch.randn(2)
    got, want = tjc.compile(echo)(x), echo(x)
    assert_same(got, want)
    assert got[1] == "Tensor"
