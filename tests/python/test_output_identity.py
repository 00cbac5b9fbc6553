"""Object identity after the graph (guard/trace_result.py, "Identity is the identity of spec objects"):
an object the trace built and the frame reaches twice (returned twice, stored by a side effect
and returned, two locals or a local and a stack slot at a graph break) is one object after the
compiled call, as in eager, and a mutation through one place shows through the other; two objects
with equal contents stay two. Each scenario runs eagerly and compiled (the compiling call and a
cache hit) and compares which results are the same object (`shape`), then checks `is` and a
mutation after the call explicitly. How the transformed code makes them:
test_output_identity_codegen.py."""
import contextlib
import io

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from context_helpers import CompiledCalls  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class Box:
    pass


_DICT_VIEWS = (type({}.keys()), type({}.values()), type({}.items()))


def shape(value):
    """`value` with every list, dict, set, tuple, function and Box numbered by its first appearance,
    a second appearance of the same object written as ("same", n): equal shapes alias alike."""
    numbers = {}

    def walk(v):
        if isinstance(v, torch.Tensor):
            return ("tensor", v.tolist())
        if isinstance(v, _DICT_VIEWS):   # dict_values compare by identity: compare their items
            return (type(v).__name__, [walk(i) for i in v])
        if not isinstance(v, (list, dict, set, tuple, Box)) and not callable(v):
            return v
        if id(v) in numbers:
            return ("same", numbers[id(v)])
        numbers[id(v)] = n = len(numbers)
        if isinstance(v, dict):
            return (n, "dict", [(k, walk(i)) for k, i in v.items()])
        if isinstance(v, (list, tuple)):
            return (n, type(v).__name__, [walk(i) for i in v])
        if isinstance(v, set):
            return (n, "set", sorted(v))
        if isinstance(v, Box):
            return (n, "Box", [(k, walk(i)) for k, i in vars(v).items()])
        return (n, "function")

    return walk(value)


# -- the scenarios: (function, its arguments, check(result, arguments)) ---------------------------
# Each check asserts the identities eager has, then mutates through one place and looks through
# the other.

def _list_returned_twice(x):
    a = [x + 1]
    return a, a


def _check_list_returned_twice(r, args):
    assert r[0] is r[1]
    r[0].append(3)
    assert r[1][-1] == 3


def _dict_returned_twice(x):
    d = {"k": x + 1}
    return d, d


def _check_dict_returned_twice(r, args):
    assert r[0] is r[1]
    r[0]["new"] = 1
    assert r[1]["new"] == 1


def _dict_stored_and_returned(x, o):
    d = {"k": x + 1}
    o.d = d
    return d


def _check_dict_stored_and_returned(r, args):
    o = args[1]
    assert r is o.d
    r["new"] = 1
    assert o.d["new"] == 1


def _list_appended_to_a_list(x):
    a = [x + 1]
    b = []
    b.append(a)
    return a, b


def _check_list_appended_to_a_list(r, args):
    assert r[0] is r[1][0]
    r[0].append(3)
    assert r[1][0][-1] == 3


def _list_appended_to_an_argument(x, xs):
    a = [x + 1]
    xs.append(a)
    return a


def _check_list_appended_to_an_argument(r, args):
    xs = args[1]
    assert r is xs[-1]
    r.append(3)
    assert xs[-1][-1] == 3


def _tuple_of_one_list_twice(x):
    a = [x + 1]
    return (a, a)


def _check_tuple_of_one_list_twice(r, args):
    assert r[0] is r[1]
    r[1].append(3)
    assert r[0][-1] == 3


def _tuple_returned_twice(x):
    t = (x + 1, [x * 2])
    return t, t


def _check_tuple_returned_twice(r, args):
    assert r[0] is r[1]
    r[0][1].append(3)
    assert r[1][1][-1] == 3


def _new_list_stored_into_two_attributes(x, o):
    a = [x + 1]
    o.p = a
    o.q = a
    return x * 2


def _check_new_list_stored_into_two_attributes(r, args):
    o = args[1]
    assert o.p is o.q
    o.p.append(3)
    assert o.q[-1] == 3


def _object_holding_a_list_also_returned(x):
    a = [x + 1]
    b = Box()
    b.items = a
    return b, a


def _check_object_holding_a_list_also_returned(r, args):
    assert r[0].items is r[1]
    r[1].append(3)
    assert r[0].items[-1] == 3


def _set_returned_twice(x):
    s = {1, 2}
    return x + 1, s, s


def _check_set_returned_twice(r, args):
    assert r[1] is r[2]
    r[1].add(3)
    assert 3 in r[2]


def _function_returned_twice(x):
    def g():
        return 1
    return x + 1, g, g


def _check_function_returned_twice(r, args):
    assert r[1] is r[2]
    r[1].tag = "t"
    assert r[2].tag == "t"


# At a graph break (print): the state is rebuilt for the resume function.
def _same_list_in_two_locals_at_a_break(x):
    a = [x + 1]
    b = a
    print("break")
    return a, b


def _check_same_list_in_two_locals(r, args):
    assert r[0] is r[1]
    r[0].append(3)
    assert r[1][-1] == 3


def _same_list_mutated_after_a_break(x):
    a = [x + 1]
    b = a
    print("break")
    b.append(x * 2)
    return a


def _check_same_list_mutated_after_a_break(r, args):
    assert len(r) == 2   # the append through b shows through a


def _list_in_a_local_and_a_stack_slot(x):
    a = [x + 1]
    return (a, print("break"), a)


def _check_list_in_a_local_and_a_stack_slot(r, args):
    assert r[0] is r[2]
    r[0].append(3)
    assert r[2][-1] == 3


def _dict_in_a_local_and_a_list_at_a_break(x):
    d = {"k": x + 1}
    holder = [d]
    print("break")
    d["later"] = x * 2
    return holder


def _check_dict_in_a_local_and_a_list(r, args):
    assert set(r[0]) == {"k", "later"}


def _stored_and_live_at_a_break(x, o):
    a = [x + 1]
    o.a = a
    print("break")
    return a


def _check_stored_and_live_at_a_break(r, args):
    o = args[1]
    assert r is o.a
    r.append(3)
    assert o.a[-1] == 3


# The inverse: equal contents, two objects.
def _equal_lists_stay_distinct(x):
    y = x + 1
    a = [y]
    b = [y]
    return a, b


def _check_equal_lists_stay_distinct(r, args):
    assert r[0] is not r[1] and r[0][0] is r[1][0]
    r[0].append(3)
    assert len(r[1]) == 1


def _equal_dicts_stay_distinct_at_a_break(x):
    a = {"k": x + 1}
    b = {"k": a["k"]}
    print("break")
    return a, b


def _check_equal_dicts_stay_distinct(r, args):
    assert r[0] is not r[1]
    r[0]["new"] = 1
    assert "new" not in r[1]


# The caller's own containers: a list or dict read from the frame and returned (or stored in what
# is returned) is that very object, mutated in place first where the trace changed it.
def _input_containers_returned(x, d, l):
    return x + 1, d, l


def _check_input_containers_returned(r, args):
    d, l = args[1], args[2]
    assert r[1] is d and r[2] is l
    r[1]["new"] = 1
    r[2].append(3)
    assert d["new"] == 1 and l[-1] == 3


def _nested_list_of_an_input_dict(x, cfg):
    return {"out": x + 1, "cfg": cfg["k"]}


def _check_nested_list_of_an_input_dict(r, args):
    cfg = args[1]
    assert r["cfg"] is cfg["k"]
    r["cfg"].append(3)
    assert cfg["k"][-1] == 3


def _input_list_inside_a_new_list(x, l):
    return [l, x + 1]


def _check_input_list_inside_a_new_list(r, args):
    assert r[0] is args[1]


def _input_list_appended_and_returned(x, l):
    l.append(x + 1)
    return l


def _check_input_list_appended_and_returned(r, args):
    l = args[1]
    assert r is l and len(l) == 2
    r.append(3)
    assert l[-1] == 3


def _input_dict_set_and_returned(x, d):
    d["k"] = x + 1
    return x * 2, d


def _check_input_dict_set_and_returned(r, args):
    d = args[1]
    assert r[1] is d and set(d) == {"a", "k"}


def _input_dict_views_returned(x, d):
    return x + 1, d.keys(), d.items(), d.values()


def _check_input_dict_views_returned(r, args):
    d = args[1]
    d["later"] = 5
    assert list(r[1]) == list(d) and list(r[2]) == list(d.items()) and list(r[3])[-1] == 5


def _input_list_returned_after_a_break(x, l):
    y = x + 1
    print("break")
    return y * 2, l


def _check_input_list_returned_after_a_break(r, args):
    assert r[1] is args[1]


def _input_list_appended_after_a_break(x, l):
    y = x + 1
    print("break")
    l.append(y * 2)
    return l


def _check_input_list_appended_after_a_break(r, args):
    assert r is args[1] and len(r) == 2


def _same_list_passed_twice(x, a, b):
    return x + 1, a, b


def _check_same_list_passed_twice(r, args):
    assert r[1] is r[2] is args[1]


def _with_dict_and_list():
    return torch.ones(2), {"a": 1}, [1, 2]


def _with_cfg():
    return torch.ones(2), {"k": [1, 2]}


def _with_dict():
    return torch.ones(2), {"a": 1}


def _with_one_list_twice():
    shared = [1, 2]
    return torch.ones(2), shared, shared


def _with_box():
    return torch.ones(2), Box()


def _with_list():
    return torch.ones(2), [0]


SCENARIOS = [
    # (function, make arguments, check, graphs, graph breaks)
    (_list_returned_twice, lambda: (torch.ones(2),), _check_list_returned_twice, 1, 0),
    (_dict_returned_twice, lambda: (torch.ones(2),), _check_dict_returned_twice, 1, 0),
    (_dict_stored_and_returned, _with_box, _check_dict_stored_and_returned, 1, 0),
    (_list_appended_to_a_list, lambda: (torch.ones(2),), _check_list_appended_to_a_list, 1, 0),
    (_list_appended_to_an_argument, _with_list, _check_list_appended_to_an_argument, 1, 0),
    (_tuple_of_one_list_twice, lambda: (torch.ones(2),), _check_tuple_of_one_list_twice, 1, 0),
    (_tuple_returned_twice, lambda: (torch.ones(2),), _check_tuple_returned_twice, 1, 0),
    (_new_list_stored_into_two_attributes, _with_box, _check_new_list_stored_into_two_attributes, 1, 0),
    (_object_holding_a_list_also_returned, lambda: (torch.ones(2),),
     _check_object_holding_a_list_also_returned, 1, 0),
    (_set_returned_twice, lambda: (torch.ones(2),), _check_set_returned_twice, 1, 0),
    (_function_returned_twice, lambda: (torch.ones(2),), _check_function_returned_twice, 1, 0),
    (_same_list_in_two_locals_at_a_break, lambda: (torch.ones(2),), _check_same_list_in_two_locals, 1, 1),
    # The resume function gets the list twice and appends through one: it runs uncompiled (a
    # mutated list reached through two sources), with eager's result.
    (_same_list_mutated_after_a_break, lambda: (torch.ones(2),), _check_same_list_mutated_after_a_break,
     1, 1),
    (_list_in_a_local_and_a_stack_slot, lambda: (torch.ones(2),), _check_list_in_a_local_and_a_stack_slot,
     1, 1),
    (_dict_in_a_local_and_a_list_at_a_break, lambda: (torch.ones(2),), _check_dict_in_a_local_and_a_list,
     1, 1),   # the resume function, likewise
    (_stored_and_live_at_a_break, _with_box, _check_stored_and_live_at_a_break, 1, 1),
    (_equal_lists_stay_distinct, lambda: (torch.ones(2),), _check_equal_lists_stay_distinct, 1, 0),
    (_equal_dicts_stay_distinct_at_a_break, lambda: (torch.ones(2),), _check_equal_dicts_stay_distinct,
     1, 1),
    (_input_containers_returned, _with_dict_and_list, _check_input_containers_returned, 1, 0),
    (_nested_list_of_an_input_dict, _with_cfg, _check_nested_list_of_an_input_dict, 1, 0),
    (_input_list_inside_a_new_list, _with_list, _check_input_list_inside_a_new_list, 1, 0),
    (_input_list_appended_and_returned, _with_list, _check_input_list_appended_and_returned, 1, 0),
    (_input_dict_set_and_returned, _with_dict, _check_input_dict_set_and_returned, 1, 0),
    (_input_dict_views_returned, _with_dict, _check_input_dict_views_returned, 1, 0),
    (_input_list_returned_after_a_break, _with_list, _check_input_list_returned_after_a_break, 2, 1),
    (_input_list_appended_after_a_break, _with_list, _check_input_list_appended_after_a_break, 2, 1),
    (_same_list_passed_twice, _with_one_list_twice, _check_same_list_passed_twice, 1, 0),
]


def _shape_of_call(fn, args):
    with contextlib.redirect_stdout(io.StringIO()):
        result = fn(*args)
    return shape((result, args[1:])), result


@pytest.mark.parametrize("fn, make_args, check, graphs, breaks", SCENARIOS,
                         ids=[s[0].__name__.strip("_") for s in SCENARIOS])
def test_an_object_reached_twice_is_one_object(fn, make_args, check, graphs, breaks):
    args = make_args()
    expected, result = _shape_of_call(fn, args)
    check(result, args)
    compiled = CompiledCalls(fn)
    for _ in range(2):   # the compiling call, then a cache hit
        args = make_args()
        got, result = _shape_of_call(compiled, args)
        assert got == expected
        check(result, args)
    assert compiled.cnt.frame_count == graphs
    assert compiled.delta("graph_breaks") == breaks


def test_a_list_that_holds_itself_is_eagers():
    def fn(x):
        a = [x + 1]
        a.append(a)
        return a

    r = tjc.compile(fn)(torch.ones(2))
    assert r[1] is r
    torch.testing.assert_close(r[0], torch.ones(2) + 1)


def test_the_callers_list_is_returned_whatever_aliases_it_had_when_compiled():
    # Loaded again by its source, each argument is the caller's object at every call: no guard on
    # how the arguments alias, so two distinct lists after one passed twice hit the cache.
    compiled = CompiledCalls(_same_list_passed_twice)
    shared = [1, 2]
    r = compiled(torch.ones(2), shared, shared)
    assert r[1] is r[2] is shared
    a, b = [1, 2], [1, 2]
    r = compiled(torch.ones(2), a, b)
    assert r[1] is a and r[2] is b
    compiled.check(graphs=1, recompiles=0)


def _returns_a_copy(x, l):
    return [l[:], x + 1]


def test_returning_the_callers_list_needs_no_guard_that_copying_it_does_not():
    args = (torch.ones(2), [1, 2])
    returned = tjc.explain(_input_list_inside_a_new_list)(*args).guards
    copied = tjc.explain(_returns_a_copy)(*args).guards
    assert returned == copied


GLOBAL_LIST = [1, 2]


def _global_and_attribute_containers(x, o):
    return x + 1, GLOBAL_LIST, o.items, o.table


def test_a_global_and_an_attribute_container_are_the_very_objects():
    o = Box()
    o.items, o.table = [3], {"k": 4}
    compiled = CompiledCalls(_global_and_attribute_containers)
    for _ in range(2):
        r = compiled(torch.ones(2), o)
        assert r[1] is GLOBAL_LIST and r[2] is o.items and r[3] is o.table
    compiled.check(graphs=1)


def test_a_returned_tuple_of_the_callers_lists_holds_them():
    def fn(x, t):
        return x + 1, t

    a, b = [1], {"k": 2}
    r = tjc.compile(fn)(torch.ones(2), (a, b))
    assert r[1][0] is a and r[1][1] is b
