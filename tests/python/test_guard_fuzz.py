"""Guard trees against a plain-Python reference evaluator, on random trees and random values.

Random guard trees (local / attr / item / type nodes; type_match, equals_match, none_match,
not_none, length, dict_keys, bool_match leaves) are built with runtime.GuardManager over a random
template of nested values (ints, strs, bools, None, tuples, lists, dicts, small objects with
attributes, some of whose attributes or __eq__ raise), then checked against random inputs, most
of them the template or the template with one value replaced. `g.check(mapping)` must agree
with the reference, `g.explain(mapping)` must be None exactly when the check passes, and
nothing may crash or leave an exception set. Torch-free: runs on 3.11, 3.12 and 3.13.
"""
import sys

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from torch_jit_cache import runtime  # noqa: E402

# Hypothesis draws new examples on every run, so memory use differs run to run by design: the
# hunt-leaks loop runs this module once (its leak-freedom is covered by the runtime tests).
pytestmark = pytest.mark.no_refleaks


NAMES = ("x", "y", "z")
ATTRS = ("a", "b", "c", "boom")


class Obj:
    """A small user object whose attributes are given; `boom` is a property that raises."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)

    @property
    def boom(self):
        raise RuntimeError("attribute raised")

    def __repr__(self):
        return f"Obj({self.__dict__!r})"


class RaisingEq(Obj):
    """Compares by raising: an equality guard on a tuple holding one must fail, not raise."""

    def __eq__(self, other):
        raise ValueError("eq raised")

    __hash__ = object.__hash__


class ListSub(list):
    """Not an exact list: item() and length() take the generic paths."""


class DictSub(dict):
    pass


# --- values ---

# 0, 1, True and False are equal across types: the values that test type-exact equality
scalars = (st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from([0, 1, True, False])
           | st.text(alphabet="ab", max_size=2))
keys = st.integers(-3, 3) | st.text(alphabet="abc", max_size=2) | st.sampled_from([True, None, (1, "a")])


def _containers(children):
    return (
        st.lists(children, max_size=3).map(tuple)
        | st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(ListSub)
        | st.dictionaries(keys, children, max_size=3)
        | st.dictionaries(keys, children, max_size=3).map(DictSub)
        | st.dictionaries(st.sampled_from(ATTRS[:3]), children, max_size=3).map(lambda d: Obj(**d))
        | st.dictionaries(st.sampled_from(ATTRS[:3]), children, max_size=2).map(lambda d: RaisingEq(**d))
    )


values = st.recursive(scalars, _containers, max_leaves=8)
local_values = st.dictionaries(st.sampled_from(NAMES), values, max_size=3)


def immutable(v):
    """What equals_match, dict_keys and item() may hold: immutable builtins and tuples of them."""
    if v is None or type(v) in (bool, int, float, str, bytes):
        return True
    return type(v) is tuple and all(immutable(e) for e in v)


immutables = st.recursive(scalars, lambda c: st.lists(c, max_size=2).map(tuple), max_leaves=4)


# --- the reference evaluator ---

MISSING = object()


def ref_fetch(parent, acc, mapping):
    kind = acc[0]
    if kind == "local":
        return mapping.get(acc[1], MISSING)
    if kind == "type":
        return type(parent)
    if kind == "attr":
        try:
            return getattr(parent, acc[1])
        except Exception:
            return MISSING
    key = acc[1]  # item
    if type(parent) is dict:
        return parent.get(key, MISSING)
    if type(key) is int and type(parent) in (list, tuple):
        return parent[key] if -len(parent) <= key < len(parent) else MISSING
    try:
        return parent[key]
    except Exception:
        return MISSING


def ref_equal(value, expected):
    if value is expected:
        return True
    if type(value) is not type(expected):
        return False
    try:
        return bool(value == expected)
    except Exception:
        return False


def ref_leaf(value, leaf):
    kind, arg = leaf
    if kind == "type_match":
        return type(value) is arg
    if kind == "equals_match":
        return ref_equal(value, arg)
    if kind == "none_match":
        return value is None
    if kind == "not_none":
        return value is not None
    if kind == "bool_match":
        return value is arg
    if kind == "length":
        try:
            return len(value) == arg
        except Exception:
            return False
    if kind == "dict_keys":
        if not isinstance(value, dict) or len(value) != len(arg):
            return False
        return all(ref_equal(k, e) for k, e in zip(list(value), arg))
    raise AssertionError(kind)


def ref_node(value, node, mapping):
    return all(ref_leaf(value, leaf) for leaf in node["leaves"]) and all(
        ref_child(value, child, mapping) for child in node["children"])


def ref_child(parent, node, mapping):
    value = ref_fetch(parent, node["acc"], mapping)
    return value is not MISSING and ref_node(value, node, mapping)


def ref_check(tree, mapping):
    return all(ref_child(None, child, mapping) for child in tree)


# --- random trees, shaped by a template so that they pass often ---

def applicable(template):
    """The leaf kinds that can pass on the template."""
    kinds = ["type_match", "none_match" if template is None else "not_none"]
    if immutable(template):
        kinds += ["equals_match", "equals_match"]  # the leaf with the subtlest rules, drawn more
    try:
        len(template)
        kinds.append("length")
    except Exception:
        pass
    if isinstance(template, dict) and all(immutable(k) for k in template):
        kinds.append("dict_keys")
    if type(template) is bool:
        kinds.append("bool_match")
    return kinds


ALL_KINDS = ["type_match", "equals_match", "none_match", "not_none", "length", "dict_keys", "bool_match"]


def draw_leaves(draw, template):
    """Leaves mostly right about the template (so trees pass often), sometimes anything."""
    leaves = []
    for _ in range(draw(st.integers(0, 2))):
        right = draw(st.integers(0, 9)) < 8
        kind = draw(st.sampled_from(applicable(template) if right else ALL_KINDS))
        if kind == "type_match":
            arg = type(template) if right else draw(
                st.sampled_from([int, str, bool, tuple, list, dict, Obj, ListSub, DictSub, type(None)]))
        elif kind == "equals_match":
            arg = template if right else draw(immutables)
        elif kind == "length":
            arg = len(template) if right else draw(st.integers(0, 3))
        elif kind == "dict_keys":
            arg = list(template) if right else draw(st.lists(keys, max_size=3, unique_by=lambda k: (type(k), k)))
        elif kind == "bool_match":
            arg = template if right else draw(st.booleans())
        else:
            arg = None
        leaves.append((kind, arg))
    return leaves


def draw_children(draw, template, depth):
    children = []
    if depth >= 3:
        return children
    for _ in range(draw(st.integers(0, 2))):
        right = draw(st.integers(0, 9)) < 8
        if right and isinstance(template, Obj) and vars(template):
            choice = draw(st.sampled_from(["attr", "attr", "attr", "attr", "type"]))
        elif right and isinstance(template, (dict, list, tuple)) and template:
            choice = draw(st.sampled_from(["item", "item", "item", "item", "type"]))
        elif right or isinstance(template, type):
            continue  # a scalar: its leaves say it all (and type(type(...)) chains say little)
        else:
            choice = draw(st.sampled_from(["attr", "item", "type"]))
        if choice == "attr":
            own = list(vars(template)) if isinstance(template, Obj) else []
            name = draw(st.sampled_from(own)) if own and right else draw(
                st.sampled_from(ATTRS))
            acc = ("attr", name)
        elif choice == "item":
            if isinstance(template, dict) and template and right:
                key = draw(st.sampled_from(list(template)))
            elif isinstance(template, (list, tuple)) and template and right:
                key = draw(st.integers(-len(template), len(template) - 1))
            else:
                key = draw(keys)
            acc = ("item", key)
        else:
            acc = ("type",)
        value = _template_fetch(template, acc)
        sub = None if value is MISSING else value
        children.append({"acc": acc, "leaves": draw_leaves(draw, sub),
                         "children": draw_children(draw, sub, depth + 1)})
    return children


def _template_fetch(template, acc):
    """ref_fetch for shaping trees (kept apart so that a broken evaluator cannot shape its own tests)."""
    if acc[0] == "type":
        return type(template)
    if acc[0] == "attr":
        return vars(template).get(acc[1], MISSING) if isinstance(template, Obj) else MISSING
    try:
        return template[acc[1]]
    except Exception:
        return MISSING


@st.composite
def trees(draw, template):
    tree = []
    right = template and draw(st.integers(0, 9)) < 8
    for name in draw(st.lists(st.sampled_from(sorted(template) if right else NAMES), min_size=1, max_size=3)):
        sub = template.get(name)
        tree.append({"acc": ("local", name), "leaves": draw_leaves(draw, sub),
                     "children": draw_children(draw, sub, 1)})
    return tree


def single_leaf_trees(tree):
    """Every leaf of tree on its own, with the path that reaches it: one failing leaf can hide
    another in a whole tree, so each is also compared alone."""
    def walk(node, path):
        for leaf in node["leaves"]:
            sub = {"acc": node["acc"], "leaves": [leaf], "children": []}
            for acc in reversed(path):
                sub = {"acc": acc, "leaves": [], "children": [sub]}
            yield [sub]
        for child in node["children"]:
            yield from walk(child, path + [node["acc"]])

    for node in tree:
        yield from walk(node, [])


def build(tree):
    g = runtime.GuardManager()

    def fill(node, spec):
        for kind, arg in spec["leaves"]:
            method = getattr(node, kind)
            method() if arg is None and kind in ("none_match", "not_none") else method(arg)
        for child in spec["children"]:
            acc = child["acc"]
            sub = node.attr(acc[1]) if acc[0] == "attr" else node.item(acc[1]) if acc[0] == "item" else node.type()
            fill(sub, child)

    for spec in tree:
        fill(g.local(spec["acc"][1]), spec)
    return g


def lookalike(v, rnd):
    """v with some parts swapped for equal-but-different values: True for 1, a list for a tuple,
    a subclass for a list or dict, a dict's keys in another order. Guards are type-exact and
    order-sensitive, so these are the inputs that tell a right guard from a loose one."""
    change = rnd.random() < 0.5
    if type(v) is bool:
        return int(v) if change else v
    if type(v) is int and v in (0, 1):
        return bool(v) if change else v
    if type(v) in (tuple, list, ListSub):
        items = [lookalike(e, rnd) for e in v]
        if not change:
            return type(v)(items)
        return rnd.choice([tuple, list, ListSub])(items)
    if type(v) in (dict, DictSub):
        items = [(k, lookalike(e, rnd)) for k, e in v.items()]
        if change:
            items = items[::-1] if rnd.random() < 0.5 else items
            return rnd.choice([dict, DictSub])(items)
        return type(v)(items)
    if isinstance(v, Obj):
        return type(v)(**{k: lookalike(e, rnd) for k, e in vars(v).items()})
    return v


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_guard_trees_agree_with_the_reference(data):
    template = data.draw(local_values, label="template")
    tree = data.draw(trees(template), label="tree")
    g = build(tree)
    inputs = [template]
    for _ in range(data.draw(st.integers(1, 4))):
        how = data.draw(st.sampled_from(["fresh", "replace one", "drop one", "lookalike", "lookalike"]))
        if how == "lookalike":
            rnd = data.draw(st.randoms(use_true_random=False))
            inputs.append({k: lookalike(v, rnd) for k, v in template.items()})
        elif how == "fresh":
            inputs.append(data.draw(local_values))
        elif how == "replace one":
            inputs.append({**template, data.draw(st.sampled_from(NAMES)): data.draw(values)})
        elif how == "drop one":
            dropped = data.draw(st.sampled_from(NAMES))
            inputs.append({k: v for k, v in template.items() if k != dropped})
    for mapping in inputs:  # one tree, many checks: fail-fast reordering must not change answers
        expected = ref_check(tree, mapping)
        got = g.check(mapping)
        assert sys.exc_info() == (None, None, None)
        assert got is expected, (str(g), mapping)
        reason = g.explain(mapping)
        assert sys.exc_info() == (None, None, None)
        assert (reason is None) is expected, (reason, str(g), mapping)
        assert g.check(mapping) is expected, "explain() changed nothing"
    for sub in single_leaf_trees(tree):
        one = build(sub)
        for mapping in inputs:
            assert one.check(mapping) is ref_check(sub, mapping), (str(one), mapping)
            assert sys.exc_info() == (None, None, None)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(template=local_values, other=local_values)
def test_a_tree_built_from_a_value_passes_on_it_and_on_equal_copies(template, other):
    """The tree a JIT would build (type and, where allowed, value of every reachable part)."""
    g = runtime.GuardManager()

    def guard(node, value, depth):
        node.type_match(type(value))
        if immutable(value):
            node.equals_match(value)
        if value is None:
            node.none_match()
        else:
            node.not_none()
        if type(value) is bool:
            node.bool_match(value)
        if isinstance(value, (list, tuple, dict)):
            node.length(len(value))
        if isinstance(value, dict) and all(immutable(k) for k in value):
            node.dict_keys(list(value))
        if depth < 3 and isinstance(value, dict):
            for k, v in value.items():
                if immutable(k):
                    guard(node.item(k), v, depth + 1)
        elif depth < 3 and isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                guard(node.item(i), v, depth + 1)
        elif depth < 3 and isinstance(value, Obj):
            for k, v in vars(value).items():
                guard(node.attr(k), v, depth + 1)

    for name, value in template.items():
        guard(g.local(name), value, 0)
    assert g.check(template)
    assert g.explain(template) is None
    expected = ref_check_by_rebuild(template, other)
    assert g.check(other) is expected
    assert sys.exc_info() == (None, None, None)


def ref_check_by_rebuild(template, other):
    """Does `other` pass the full tree built from `template`? Equal structure, exact types."""
    def same(a, b, depth):
        if type(a) is not type(b):
            return False
        if immutable(a) and not ref_equal(b, a):
            return False
        if isinstance(a, (list, tuple, dict)) and len(a) != len(b):
            return False
        if isinstance(a, dict):
            if all(immutable(k) for k in a) and not all(ref_equal(x, y) for x, y in zip(list(b), list(a))):
                return False
            if depth < 3:
                for k, v in a.items():
                    if immutable(k):
                        w = ref_fetch(b, ("item", k), {})
                        if w is MISSING or not same(v, w, depth + 1):
                            return False
        elif depth < 3 and isinstance(a, (list, tuple)):
            return all(same(v, w, depth + 1) for v, w in zip(a, b))
        elif depth < 3 and isinstance(a, Obj):
            for k, v in vars(a).items():
                w = ref_fetch(b, ("attr", k), {})
                if w is MISSING or not same(v, w, depth + 1):
                    return False
        return True

    return all(name in other and same(v, other[name], 0) for name, v in template.items())
