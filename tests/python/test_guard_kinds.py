"""Guard kinds as data: the Python table (guards.GUARD_KINDS) and the C++ one (_C.LEAF_KINDS,
csrc/guards/leaf_kinds.h) agree, and the one binding GuardNode.add_leaf adds every leaf kind by
name, refusing an unknown kind with a Python exception."""
import pytest

from torch_jit_cache import _C, runtime
from torch_jit_cache.guard import tree as guards
from torch_jit_cache.guard.sources import LocalSource
from torch_jit_cache.guard.trace_result import GuardKind, GuardSpec

# An operand each leaf kind accepts, and a value of `x` that passes it (tensor_match needs torch).
OPERANDS = {
    "type_match": (int, 3),
    "id_match": (None, None),
    "equals_match": (3, 3),
    "none_match": (None, None),
    "not_none": (None, 3),
    "bool_match": (True, True),
    "length": (2, [1, 2]),
    "dict_keys": (("a",), {"a": 1}),
    "set_items": (("a",), {"a"}),
}


def python_leaves():
    return {rule.leaf for rule in guards.GUARD_KINDS.values() if rule.leaf is not None}


def test_every_guard_kind_has_a_row():
    assert set(guards.GUARD_KINDS) == set(GuardKind)
    for kind, rule in guards.GUARD_KINDS.items():
        assert (rule.leaf is None) != (rule.add is None), kind


def test_the_python_and_cpp_leaf_tables_agree():
    assert python_leaves() == set(_C.LEAF_KINDS)


@pytest.mark.parametrize("name", sorted(OPERANDS))
def test_add_leaf_accepts_every_leaf_kind_of_the_python_table(name):
    assert name in python_leaves()
    operand, passing = OPERANDS[name]
    rule = next(r for r in guards.GUARD_KINDS.values() if r.leaf == name)
    g = runtime.GuardManager()
    if rule.takes_value:
        g.local("x").add_leaf(name, operand)
    else:
        g.local("x").add_leaf(name)
    assert g.num_guards() == 1
    assert g.check({"x": passing})


def test_add_leaf_and_the_named_builder_make_the_same_guard():
    by_name, by_method = runtime.GuardManager(), runtime.GuardManager()
    by_name.local("x").add_leaf("equals_match", 3)
    by_method.local("x").equals_match(3)
    assert str(by_name) == str(by_method)


def test_tensor_match_by_kind():
    torch = pytest.importorskip("torch")
    g = runtime.GuardManager()
    g.local("x").add_leaf("tensor_match", torch.zeros(2, 3), dynamic_sizes=[0])
    assert g.check({"x": torch.zeros(5, 3)})
    assert not g.check({"x": torch.zeros(5, 4)})


def test_an_unknown_kind_raises_a_value_error_naming_the_kinds():
    g = runtime.GuardManager()
    with pytest.raises(ValueError, match="unknown leaf kind 'shape_match'.*type_match"):
        g.local("x").add_leaf("shape_match", 1)
    assert g.num_guards() == 0


def test_wrong_operands_and_options_raise():
    node = runtime.GuardManager().local("x")
    with pytest.raises(TypeError, match="length needs an int"):
        node.add_leaf("length", "two")
    with pytest.raises(ValueError, match="takes no value"):
        node.add_leaf("none_match", 1)
    with pytest.raises(ValueError, match="strong=True is for id_match"):
        node.add_leaf("equals_match", 1, strong=True)
    with pytest.raises(ValueError, match="for tensor_match"):
        node.add_leaf("type_match", int, dynamic_sizes=[0])


def test_the_root_refuses_a_leaf_with_the_builder_call_in_the_message():
    with pytest.raises(ValueError, match=r"call type_match\(cls\) on a source"):
        runtime.GuardManager().add_leaf("type_match", int)


def test_the_builder_adds_each_leaf_kind_through_the_table():
    root = guards.build_guards([GuardSpec(LocalSource("n"), GuardKind.EQUALS_MATCH, 4),
                                GuardSpec(LocalSource("n"), GuardKind.EQUALS_MATCH, 4),
                                GuardSpec(LocalSource("n"), GuardKind.TYPE_MATCH, int),
                                GuardSpec(LocalSource("s"), GuardKind.NONE_MATCH)], global_state=False)
    assert root.num_guards() == 3   # the repeated spec is one guard
    assert root.check({"n": 4, "s": None})
    assert not root.check({"n": 5, "s": None})
