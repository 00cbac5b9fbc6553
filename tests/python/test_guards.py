"""The guard tree from Python: _C.GuardManager (the root) and the nodes it hands out."""
import gc
import sys
import textwrap
import weakref

import pytest
from hypothesis import given, strategies as st

from torch_jit_cache import _C

GuardManager = _C.GuardManager


class Linear:
    pass


class Model:
    def __init__(self):
        self.fc = Linear()


# ---- building


def test_same_source_gives_the_same_python_object():
    g = GuardManager()
    x = g.local("x")
    assert g.local("x") is x
    assert g.local("self").attr("fc") is g.local("self").attr("fc")
    assert g.local("d").item("k") is g.local("d").item("k")
    assert g.local("x").type() is x.type()
    assert g.global_("x") is not x
    assert isinstance(x, _C.GuardNode) and isinstance(g, _C.GuardNode)


def test_sources_print_as_dynamo_does():
    g = GuardManager()
    assert g.local("x").source == "L['x']"
    assert g.global_("torch").source == "G['torch']"
    assert g.builtin("len").source == "B['len']"
    assert g.closure("n").source == "C['n']"
    assert g.local("self").attr("fc1").attr("weight").source == "L['self'].fc1.weight"
    assert g.local("d").item("k").source == "L['d']['k']"
    assert g.local("xs").item(2).source == "L['xs'][2]"
    assert g.local("x").type().source == "type(L['x'])"


def test_root_only_and_value_only_methods():
    g = GuardManager()
    x = g.local("x")
    assert not hasattr(x, "local") and not hasattr(x, "check")
    with pytest.raises(ValueError, match="the root has no value"):
        g.type_match(int)
    with pytest.raises(ValueError, match="call it on a source"):
        g.attr("x")


def test_printing_is_stable_text():
    g = GuardManager()
    x = g.local("x")
    x.type_match(int)
    x.equals_match(3)
    m = Model()
    g.local("self").attr("fc").id_match(m.fc)
    g.local("flag").bool_match(True)
    g.local("xs").length(2)
    g.local("opt").none_match()
    g.local("d").dict_keys(["a", "b"])
    g.global_("SCALE").equals_match(2)
    g.global_("Linear").id_match(Linear)
    g.local("t").type().id_match(Model)
    expected = textwrap.dedent("""\
        RootGuardManager
        +- L['x']
        |  | TYPE_MATCH: int
        |  | EQUALS_MATCH: 3
        +- L['self']
        |  +- L['self'].fc
        |  |  | ID_MATCH: <Linear object> (weak)
        +- L['flag']
        |  | BOOL_MATCH: True
        +- L['xs']
        |  | LENGTH: 2
        +- L['opt']
        |  | NONE_MATCH
        +- L['d']
        |  | DICT_KEYS: ['a', 'b']
        +- G['SCALE']
        |  | EQUALS_MATCH: 2
        +- G['Linear']
        |  | ID_MATCH: <class 'test_guards.Linear'> (weak)
        +- L['t']
        |  +- type(L['t'])
        |  |  | ID_MATCH: <class 'test_guards.Model'> (weak)""")
    assert str(g) == expected
    assert g.debug_string() == expected
    assert str(g.local("self")) == textwrap.dedent("""\
        L['self']
        +- L['self'].fc
        |  | ID_MATCH: <Linear object> (weak)""")
    assert g.num_guards() == 10
    assert repr(x) == "<GuardNode L['x']: 2 guards>"
    assert repr(g) == "<GuardManager: 10 guards>"


# ---- check and explain (mapping mode)


def test_check_and_explain_locals_globals_builtins():
    g = GuardManager()
    n = g.local("n")
    n.type_match(int)
    n.equals_match(3)
    g.global_("SCALE").equals_match(2)
    g.builtin("len").id_match(len)
    globs = {"SCALE": 2}
    assert g.check({"n": 3}, globs)
    assert g.explain({"n": 3}, globs) is None
    assert g.explain({"n": "3"}, globs) == "type(L['n']) is int failed: got str"
    assert not g.check({"n": 4}, globs)
    assert g.explain({"n": 4}, globs) == "L['n'] == 3 failed: got 4"
    # explain() follows the evaluation order, which the failure above changed (fail fast).
    assert g.explain({"n": "3"}, globs) == "L['n'] == 3 failed: got '3'"
    assert g.explain({}, globs) == "L['n']: missing"
    assert g.explain({"n": 3}, {"SCALE": 3}) == "G['SCALE'] == 2 failed: got 3"
    assert g.explain({"n": 3}) == "G['SCALE']: missing"
    fake_builtins = {"len": abs}
    assert not g.check({"n": 3}, {"SCALE": 2, "__builtins__": fake_builtins})
    assert g.check({"n": 3}, {"SCALE": 2, "__builtins__": __builtins__})


def test_check_accepts_a_frame():
    g = GuardManager()
    g.local("a").equals_match(1)
    g.global_("Linear").id_match(Linear)

    def f(a):
        return sys._getframe()

    assert g.check(f(1))
    assert g.explain(f(2)) == "L['a'] == 1 failed: got 2"


def test_closure_by_name_in_mapping_mode():
    g = GuardManager()
    g.closure("n").equals_match(5)
    assert g.check({"n": 5})
    assert g.explain({"n": 6}) == "C['n'] == 5 failed: got 6"


def test_attr_item_type_and_missing():
    g = GuardManager()
    m = Model()
    fc = g.local("self").attr("fc")
    fc.type_match(Linear)
    g.local("xs").item(1).equals_match("b")
    g.local("d").item("k").not_none()
    ok = {"self": m, "xs": ["a", "b"], "d": {"k": 0}}
    assert g.check(ok)
    reason = g.explain({**ok, "self": object()})
    assert reason.startswith("L['self'].fc: raised AttributeError: ")
    assert g.explain({**ok, "xs": ["a"]}) == "L['xs'][1]: missing"
    assert g.explain({**ok, "d": {"k": None}}) == "L['d']['k'] is not None failed: got None"
    assert g.explain({**ok, "d": {}}) == "L['d']['k']: missing"


def test_dict_keys_and_length():
    g = GuardManager()
    d = g.local("d")
    d.length(2)
    d.dict_keys(["a", "b"])
    assert g.check({"d": {"a": 1, "b": 2}})
    assert g.explain({"d": {"b": 2, "a": 1}}) == "L['d'].keys() == ['a', 'b'] failed: got ['b', 'a']"
    assert g.explain({"d": {"a": 1}}) == "len(L['d']) == 2 failed: got 1"


def test_set_items_pins_a_sets_items_in_iteration_order():
    a, b = set(), set()
    a.add(9), a.add(1)     # 9 and 1 share a slot: the one added first iterates first
    b.add(1), b.add(9)
    assert list(a) != list(b)
    g = GuardManager()
    g.local("s").set_items(tuple(a))
    assert g.check({"s": a}) and g.check({"s": frozenset(a)}) is (list(frozenset(a)) == list(a))
    assert g.explain({"s": b}) == f"list(L['s']) == {list(a)} failed: got {b!r}"
    assert not g.check({"s": {9}}) and not g.check({"s": [9, 1]}) and not g.check({"s": {9, 1.0}})


def test_set_items_walks_sets_own_iteration_and_holds_only_constants():
    class Odd(set):
        def __iter__(self):
            raise AssertionError("a guard must not run a subclass's __iter__")

    g = GuardManager()
    g.local("s").set_items(("a",))
    assert g.check({"s": Odd("a")})
    with pytest.raises(TypeError, match="SET_ITEMS holds its items"):
        GuardManager().local("s").set_items((Odd(),))
    with pytest.raises(TypeError, match="in order"):
        GuardManager().local("s").set_items({"a"})


# ---- raising guards


class RaisingEq:
    def __eq__(self, other):
        raise ValueError("boom")

    __hash__ = object.__hash__


class RaisingAttr:
    @property
    def attr(self):
        raise RuntimeError("nope")


def test_raising_guards_fail_without_leaking_the_error():
    g = GuardManager()
    g.local("t").equals_match((1,))
    g.local("y").attr("attr").not_none()
    assert not g.check({"t": (RaisingEq(),), "y": RaisingAttr()})
    assert sys.exc_info() == (None, None, None)
    assert g.explain({"t": (RaisingEq(),), "y": RaisingAttr()}) == "L['t'] == (1,) raised ValueError: boom"
    assert g.explain({"t": (1,), "y": RaisingAttr()}) == "L['y'].attr: raised RuntimeError: nope"


def test_fail_fast_moves_the_failing_source_first():
    g = GuardManager()
    for name in "abc":
        g.local(name).equals_match(1)
    assert g.check({"a": 1, "b": 1, "c": 1})
    assert str(g).splitlines()[1] == "+- L['a']"
    assert not g.check({"a": 1, "b": 1, "c": 2})
    assert str(g).splitlines()[1] == "+- L['c']"
    assert g.local("c").fail_count == 1


@given(st.one_of(st.integers(), st.text(), st.booleans(), st.floats(allow_nan=False)),
       st.one_of(st.integers(), st.text(), st.booleans(), st.floats(allow_nan=False)))
def test_equals_match_is_type_exact_equality(expected, value):
    g = GuardManager()
    g.local("v").equals_match(expected)
    assert g.check({"v": value}) == (type(value) is type(expected) and value == expected)


# ---- refusals


def test_id_match_refuses_non_weakrefable_objects():
    g = GuardManager()
    with pytest.raises(TypeError) as info:
        g.local("x").id_match(1000)
    assert str(info.value) == (
        "L['x']: ID_MATCH needs a weakrefable object, got int; "
        "guard by value (equals_match) or type (type_match) instead")
    g.local("x").id_match(None)  # singletons are fine
    assert g.num_guards() == 1


def test_dict_keys_and_items_by_static_types():
    # unittest's assert table: static types live for the process, and == on them is identity.
    g = GuardManager()
    d = g.local("d")
    d.dict_keys([dict, (int, str), None])
    d.item(dict).equals_match("dicts")
    assert g.check({"d": {dict: "dicts", (int, str): 1, None: 2}})
    assert not g.check({"d": {dict: "other", (int, str): 1, None: 2}})
    assert not g.check({"d": {list: "dicts", (int, str): 1, None: 2}})
    assert not g.check({"d": {dict: "dicts", (int, bytes): 1, None: 2}})
    Mine = type("Mine", (), {})   # a heap type: the guard would keep it alive
    with pytest.raises(TypeError, match="DICT_KEYS holds its keys"):
        g.local("d").dict_keys([Mine])
    with pytest.raises(TypeError, match="item\\(\\) keys"):
        g.local("d").item((int, Mine))


def test_dict_keys_and_items_by_objects_vouched_for_as_living_for_the_process():
    # huggingface_hub's table of validators: keys a guard may hold only once Python vouched for
    # them (torch_jit_cache.guard.process_lived); compared by identity.
    import collections.abc
    import typing
    g = GuardManager()
    if not _C.is_process_lived(typing.ClassVar):
        with pytest.raises(TypeError, match="DICT_KEYS holds its keys"):
            g.local("d").dict_keys([typing.ClassVar])
        with pytest.raises(TypeError, match="item\\(\\) keys"):
            g.local("d").item(typing.ClassVar)
    for key in (typing.ClassVar, collections.abc.Sized):
        _C.vouch_process_lived(key)
        assert _C.is_process_lived(key)
    d = g.local("d")
    d.dict_keys([typing.ClassVar, collections.abc.Sized, list])
    d.item(typing.ClassVar).equals_match("cv")
    assert g.check({"d": {typing.ClassVar: "cv", collections.abc.Sized: 1, list: 2}})
    assert not g.check({"d": {typing.ClassVar: "other", collections.abc.Sized: 1, list: 2}})
    assert not g.check({"d": {typing.Final: "cv", collections.abc.Sized: 1, list: 2}})
    assert not g.check({"d": {typing.ClassVar: "cv", collections.abc.Sequence: 1, list: 2}})
    assert not _C.is_process_lived(Linear())


def test_equals_match_and_dict_keys_refuse_what_they_would_keep_alive():
    g = GuardManager()
    with pytest.raises(TypeError, match="guard by identity"):
        g.local("x").equals_match([1, 2])
    with pytest.raises(TypeError, match="guard by identity"):
        g.local("x").equals_match(Linear())
    with pytest.raises(TypeError, match="DICT_KEYS holds its keys"):
        g.local("d").dict_keys([Linear()])
    with pytest.raises(TypeError, match="item\\(\\) keys"):
        g.local("d").item([1])
    with pytest.raises(TypeError, match="needs a type"):
        g.local("x").type_match(3)


def test_bind_freezes_and_refuses_non_arguments():
    def f(a, *, b=1):
        c = a
        return c

    g = GuardManager()
    g.local("a").type_match(int)
    g.local("c")
    with pytest.raises(ValueError, match="'c' is not an argument of .*f"):
        g.bind(f.__code__)
    assert not g.bound

    g = GuardManager()
    g.local("a").type_match(int)
    g.local("b").equals_match(1)
    g.bind(f.__code__)
    assert g.bound
    with pytest.raises(RuntimeError, match="guard tree is frozen: it belongs to a cache entry"):
        g.local("a").equals_match(1)
    with pytest.raises(RuntimeError, match="frozen"):
        g.local("new")
    assert g.local("a").num_guards() == 1
    assert g.check({"a": 1, "b": 1})  # mapping mode still works when bound


# ---- weak identity and lifetimes


def test_id_match_death_invalidates_and_frees_the_object():
    g = GuardManager()
    m = Model()
    g.local("self").attr("fc").id_match(m.fc)
    calls = []
    g.set_invalidation_callback(lambda: calls.append(1))
    assert g.check({"self": m})
    probe = weakref.ref(m.fc)
    del m.fc  # the last strong reference; no gc.collect()
    assert probe() is None
    assert g.invalidated
    assert calls == [1]
    assert not g.check({"self": m})
    assert g.explain({"self": m}) == "L['self'].fc: the guarded object is gone (it was deallocated)"
    assert str(g).startswith("RootGuardManager (invalidated: L['self'].fc died)")


def test_callback_set_after_death_runs_at_once():
    g = GuardManager()
    obj = Linear()
    g.local("o").id_match(obj)
    del obj
    assert g.invalidated
    calls = []
    g.set_invalidation_callback(lambda: calls.append(1))
    assert calls == [1]


def test_raising_invalidation_callback_is_reported_not_raised():
    g = GuardManager()
    obj = Linear()
    g.local("o").id_match(obj)
    seen = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = lambda info: seen.append(info.exc_type)
    try:
        g.set_invalidation_callback(lambda: 1 / 0)
        del obj
    finally:
        sys.unraisablehook = old_hook
    assert seen == [ZeroDivisionError]
    assert g.invalidated


def test_type_match_does_not_keep_a_user_class_alive():
    namespace = {}
    exec("class Temp:\n    pass\n", namespace)
    g = GuardManager()
    g.local("x").type_match(namespace["Temp"])
    probe = weakref.ref(namespace["Temp"])
    namespace.clear()
    gc.collect()  # a class is always in a cycle with its own MRO
    assert probe() is None
    assert g.invalidated


def test_child_wrapper_outlives_the_root():
    g = GuardManager()
    fc = g.local("self").attr("fc")
    fc.type_match(Linear)
    root_probe = weakref.ref(g) if hasattr(g, "__weakref__") else None
    del g
    assert root_probe is None or root_probe() is None
    fc.equals_match(1)  # still a working node (the tree was never frozen)
    assert fc.num_guards() == 2
    assert str(fc) == "L['self'].fc\n| TYPE_MATCH: test_guards.Linear (weak)\n| EQUALS_MATCH: 1"


def test_child_outliving_root_sees_a_death_without_calling_the_dropped_callback():
    calls = []
    g = GuardManager()
    obj = Linear()
    node = g.local("o")
    node.id_match(obj)
    g.set_invalidation_callback(lambda: calls.append(1))
    del g
    del obj
    assert calls == []
    assert node.num_guards() == 1


def test_building_and_dropping_trees_leaves_nothing_behind():
    m = Model()
    key = "k" * 40  # not interned by the compiler: its refcount is ours to watch
    values = [m, m.fc, Linear, key]

    def build():
        g = GuardManager()
        s = g.local("self")
        s.type_match(Model)
        s.id_match(m)
        s.attr("fc").id_match(m.fc)
        g.local("d").dict_keys([key])
        g.local("d").item(key).equals_match(key)
        g.global_("Linear").id_match(Linear)
        assert g.check({"self": m, "d": {key: key}}, {"Linear": Linear})
        return g

    build()
    gc.collect()
    refcounts = [sys.getrefcount(v) for v in values]
    objects = len(gc.get_objects())
    for _ in range(1000):
        build()
    assert [sys.getrefcount(v) for v in values] == refcounts
    assert weakref.getweakrefcount(m) == 0 and weakref.getweakrefcount(m.fc) == 0
    assert len(gc.get_objects()) - objects < 50  # flat: no per-tree garbage


def test_wrappers_are_shared_owners():
    g = GuardManager()
    x = g.local("x")
    x_id = id(x)
    del x
    # The node lives on in the tree; a new wrapper for it works the same.
    x = g.local("x")
    x.equals_match(1)
    assert g.check({"x": 1})
    assert isinstance(x_id, int)


# ---- torch leaves (need the torch backend)


@pytest.mark.torch
def test_tensor_match():
    import torch
    g = GuardManager()
    g.local("x").tensor_match(torch.zeros(8, 4))
    assert g.check({"x": torch.ones(8, 4)})
    assert not g.check({"x": torch.ones(16, 4)})
    assert g.explain({"x": torch.ones(16, 4)}) == "L['x'].size()[0]: expected 8, got 16"
    assert not g.check({"x": torch.ones(8, 4, dtype=torch.float64)})
    assert not g.check({"x": 3})
    assert "TENSOR_MATCH: " in str(g)
    with pytest.raises(TypeError):
        g.local("y").tensor_match(3)


@pytest.mark.torch
def test_global_state():
    import torch
    g = GuardManager()
    g.global_state()
    assert g.check({})
    assert str(g).splitlines()[1].startswith("| GLOBAL_STATE: ")
    with torch.no_grad():
        assert not g.check({})
        assert "grad" in g.explain({})
    assert g.check({})


def test_torch_leaves_report_a_missing_backend_clearly():
    # What matters is the tensor-guard backend (_C_torch), not whether torch imports: 3.12 and 3.13
    # have torch now, and a build without _C_torch must still fail clearly.
    if _C._torch_backend_status()[0]:
        pytest.skip("the tensor-guard backend is built here; this test runs where it is not")
    g = GuardManager()
    with pytest.raises(RuntimeError):
        g.global_state()
    with pytest.raises(RuntimeError):
        g.local("x").tensor_match(object())
    assert g.num_guards() == 0


# ---- call_method: a method called without arguments, under the value's TYPE_MATCH


class Counting:
    calls = 0

    def __reduce__(self):
        type(self).calls += 1
        return ("state",)


def test_call_method_reads_a_weakrefs_referent_without_holding_it():
    g = GuardManager()
    w = g.local("w")
    w.type_match(weakref.ReferenceType)
    w.call_method("__call__").none_match()
    assert str(w.call_method("__call__").source) == "L['w'].__call__()"

    class Obj:
        pass

    alive = Obj()
    ref = weakref.ref(alive)
    assert not g.check({"w": ref})
    del alive
    assert g.check({"w": ref})


def test_call_method_runs_only_after_the_values_type_guard_passed():
    g = GuardManager()
    it = g.local("it")
    it.type_match(type(iter(range(3))))
    it.call_method("__reduce__").length(3)
    assert g.check({"it": iter(range(3))})
    Counting.calls = 0
    assert not g.check({"it": Counting()})
    assert Counting.calls == 0, "the method ran on a value of another type"


# ---- dict_item: dict's own item, without the class's __getitem__


class Instantiating(dict):
    reads = 0

    def __getitem__(self, key):
        type(self).reads += 1
        return ("made", dict.__getitem__(self, key))


def test_dict_item_reads_dicts_own_item_without_the_classs_getitem():
    g = GuardManager()
    item = g.global_("ACT").dict_item("silu")
    item.equals_match(1)
    assert str(item.source) == "dict.__getitem__(G['ACT'], 'silu')"
    Instantiating.reads = 0
    assert g.check({}, {"ACT": Instantiating(silu=1)})
    assert not g.check({}, {"ACT": Instantiating(silu=2)})
    assert not g.check({}, {"ACT": Instantiating(gelu=1)}), "a missing key fails"
    assert not g.check({}, {"ACT": [1]}), "a value that is not a dict fails"
    assert Instantiating.reads == 0, "a guard ran the class's __getitem__"
    with pytest.raises(TypeError, match="dict_item\\(\\) keys"):
        g.global_("ACT").dict_item([1])


# ---- call: a callable called with constant arguments, under the value's ID_MATCH


def test_call_reads_a_callables_result_for_constant_arguments():
    calls = []

    def version_at_least(v, dev=False):
        calls.append((v, dev))
        return v <= "2.5"

    g = GuardManager()
    f = g.global_("f")
    f.id_match(version_at_least)
    result = f.call((("2.4",), (("dev", True),)))
    result.equals_match(True)
    assert str(result.source) == "call(G['f'], (('2.4',), (('dev', True),)))"
    assert g.check({}, {"f": version_at_least})
    assert calls == [("2.4", True)]
    assert not g.check({}, {"f": lambda v, dev=False: True})
    assert calls == [("2.4", True)], "the call ran on another callable"
    for bad in ((), ("2.4",), (("2.4",), ((1, True),)), (("2.4",), "dev")):
        with pytest.raises(TypeError, match="call\\(\\) needs"):
            f.call(bad)


# ---- apply: a builtin type applied to the value, under the value's TYPE_MATCH


def test_apply_reads_an_ordered_dicts_own_order():
    import collections

    g = GuardManager()
    od = g.local("od")
    od.type_match(collections.OrderedDict)
    order = od.apply(tuple)
    order.equals_match(("a", "b"))
    assert str(order.source) == "apply(L['od'], <class 'tuple'>)"
    d = collections.OrderedDict(a=1, b=2)
    assert g.check({"od": d})
    d.move_to_end("a")   # the dict part's order stays a, b: only the OrderedDict's changes
    assert list(dict.keys(d)) == ["a", "b"] and not g.check({"od": d})
    assert not g.check({"od": {"a": 1, "b": 2}}), "another type fails before apply runs"
    with pytest.raises(TypeError, match="apply\\(\\) needs a builtin type"):
        od.apply(len)
