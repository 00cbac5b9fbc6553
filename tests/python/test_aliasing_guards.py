"""Identity-relation guards (OBJECT_ALIASING, csrc/guards/identity_relation.h): where a trace read
one source after a store through another that may be the same object, the tracer pins how the two
alias (GuardKind.DISTINCT_FROM / ALIAS_OF) instead of breaking; a call where they alias otherwise
recompiles, and every call equals eager (tracer/side_effects.py)."""
import itertools
import logging
import weakref

import pytest

from torch_jit_cache import _C

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.config import config  # noqa: E402
from torch_jit_cache.guard.tree import build_guards  # noqa: E402
from torch_jit_cache.guard.sources import AttrSource, LocalSource  # noqa: E402
from torch_jit_cache.guard.trace_result import GuardKind, GuardSpec  # noqa: E402

from context_helpers import CompiledCalls, same_exactly  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]






class Layer:
    pass


class Holder:
    def __init__(self, layer):
        self.layer = layer


# -- programs whose sources alias at a later call ---------------------------------------------
def _store_then_read_other(x, a, b):
    a.v = x + 1
    return b.v * 2


def test_a_read_after_a_store_through_another_source_recompiles_when_they_alias():
    x = torch.randn(3)
    calls = CompiledCalls(_store_then_read_other)
    for shared in (False, True, False, True):
        ea, ca = Layer(), Layer()
        ea.v, ca.v = x, x.clone()
        eb, cb = (ea, ca) if shared else (Layer(), Layer())
        if not shared:
            eb.v, cb.v = x * 3, x * 3
        same_exactly(calls(x, ca, cb), _store_then_read_other(x, ea, eb))
        same_exactly(ca.v, ea.v)
    # One graph per relation (distinct, same), no break: calls 3 and 4 hit the cache.
    assert calls.cnt.frame_count == 2
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0
    assert calls.delta("recompiles") == 1


def _update_nested(x, p, q):
    p.layer.keys = x * 2
    q.layer.keys = q.layer.keys + 1      # reads through q after a store through p
    return p.layer.keys + q.layer.keys


def test_nested_sources_alias_through_different_holders():
    x = torch.randn(3)
    calls = CompiledCalls(_update_nested)
    for shared in (False, True, False, True):
        el, cl = Layer(), Layer()
        el.keys, cl.keys = x, x.clone()
        el2, cl2 = (el, cl) if shared else (Layer(), Layer())
        if not shared:
            el2.keys, cl2.keys = x * 5, x * 5
        ep, eq, cp, cq = Holder(el), Holder(el2), Holder(cl), Holder(cl2)
        same_exactly(calls(x, cp, cq), _update_nested(x, ep, eq))
        same_exactly(cl.keys, el.keys)
        same_exactly(cl2.keys, el2.keys)
    assert calls.cnt.frame_count == 2
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0


def _three_stores(x, a, b, c):
    a.v = x
    b.v = x * 2
    return c.v + 1                       # which store c sees depends on c is a / c is b


@pytest.mark.parametrize("order", [("a", "b", "c"), ("a", "b", "a"), ("a", "b", "b"),
                                   ("a", "a", "a"), ("a", "a", "c")])
def test_a_read_pins_its_relation_to_every_store_of_the_name(order):
    x = torch.randn(3)
    calls = CompiledCalls(_three_stores)
    patterns = [("a", "b", "c"), order, ("a", "b", "c"), order]
    for pattern in patterns:
        (ea, eb, ec), (ca, cb, cc) = _objects(pattern, x)
        same_exactly(calls(x, ca, cb, cc), _three_stores(x, ea, eb, ec))
        same_exactly(ca.v, ea.v)
    # c distinct from both in the first pattern: the same relations (and graph) when a is b too.
    assert calls.cnt.frame_count == (1 if order[2] == "c" else 2)
    assert calls.delta("graph_breaks") == 0 and calls.delta("fallbacks") == 0


def _objects(pattern, x):
    """Two fresh sets of Layers (compiled, eager) aliased as `pattern` says."""
    out = []
    for _ in range(2):
        made = {}
        for name in pattern:
            if name not in made:
                made[name] = Layer()
                made[name].v = x * 7
        out.append(tuple(made[name] for name in pattern))
    return out


def _append_then_len(x, a, b):
    a.append(1)
    return x * len(b)


def test_a_mutated_list_and_another_list_recompile_when_they_become_one():
    x = torch.randn(3)
    calls = CompiledCalls(_append_then_len)
    for share in (False, False, True, False):
        ea = [0]
        eb = ea if share else [0]
        ca = [0]
        cb = ca if share else [0]
        same_exactly(calls(x, ca, cb), _append_then_len(x, ea, eb))
        assert ca == ea and cb == eb
    # Distinct lists: one graph, reused by the last call. One list through two sources: refused
    # (its two trackers would disagree after the append; here the frame runs uncompiled), equal.
    assert calls.cnt.frame_count == 1
    assert calls.delta("fallbacks") + calls.delta("graph_breaks") == 1


class Registry:
    def __init__(self):
        self._mapping = {"k": 1}


REG = Registry()


def _dict_mutation_then_global_dict(x, d):
    d["n"] = 2
    return x * REG._mapping["k"] * len(d)


def test_a_mutated_dict_and_a_global_dict_are_pinned_distinct():
    x = torch.randn(3)
    calls = CompiledCalls(_dict_mutation_then_global_dict)
    ed, cd = {"a": 1}, {"a": 1}
    same_exactly(calls(x, cd), _dict_mutation_then_global_dict(x, ed))
    assert cd == ed
    assert calls.cnt.frame_count == 1 and calls.delta("graph_breaks") == 0
    # The global's dict passed in as d: the relation fails, the new trace refuses the mutation.
    saved = dict(REG._mapping)
    try:
        same_exactly(calls(x, REG._mapping), x * 1 * 2)
        assert REG._mapping == {"k": 1, "n": 2}
    finally:
        REG._mapping = saved
    assert calls.delta("fallbacks") + calls.delta("graph_breaks") >= 1


# -- the guard: explain text, Python reference, lifetime ---------------------------------------
def test_recompile_log_says_which_sources_now_alias(caplog, monkeypatch):
    monkeypatch.setattr(config, "log", frozenset({"recompiles"}))
    caplog.set_level(logging.INFO, logger="torch_jit_cache")
    calls = CompiledCalls(_store_then_read_other)
    x = torch.randn(3)
    a, b = Layer(), Layer()
    a.v, b.v = x.clone(), x.clone()
    calls(x, a, b)
    calls(x, a, a)
    assert "L['a'] is L['b'], which were distinct objects when compiled" in caplog.text


def test_build_guards_and_debug_string():
    a, b = LocalSource("a"), LocalSource("b")
    ax, bx = AttrSource(a, "x"), AttrSource(b, "x")
    root = build_guards([GuardSpec(ax, GuardKind.DISTINCT_FROM, bx),
                         GuardSpec(a, GuardKind.ALIAS_OF, b)], global_state=False)
    assert "| OBJECT_ALIASING: L['a'].x is not L['b'].x" in root.debug_string()
    assert "| OBJECT_ALIASING: L['a'] is L['b']" in root.debug_string()
    h = Holder(None)
    h.x, one = Layer(), Layer()
    assert root.explain({"a": h, "b": h}) == "L['a'].x is L['b'].x, which were distinct objects when compiled"
    h2 = Holder(None)
    h2.x = one
    assert root.check({"a": h, "b": h2}) is False
    assert root.explain({"a": h, "b": h2}) == "L['a'] is not L['b'], which were the same object when compiled"


def _canonical(labels):
    first = {}
    return [first.setdefault(label, i) for i, label in enumerate(labels)]


def _reference(classes, values):
    """Python's word for OBJECT_ALIASING: same now exactly where the same when compiled."""
    n = len(values)
    return all((values[i] is values[j]) == (classes[i] == classes[j])
               for i in range(n) for j in range(i))


@pytest.mark.parametrize("n", [2, 3, 4])
def test_the_cpp_guard_equals_the_python_reference_exhaustively(n):
    names = [f"s{i}" for i in range(n)]
    pool = [Layer() for _ in range(n)]
    partitions = {tuple(_canonical(p)) for p in itertools.product(range(n), repeat=n)}
    checked = 0
    for classes in partitions:
        g = _C.GuardManager()
        g.identity_relation([g.local(name) for name in names], list(classes))
        for pick in itertools.product(range(n), repeat=n):
            values = [pool[k] for k in pick]
            frame = dict(zip(names, values))
            want = _reference(classes, values)
            assert g.check(frame) is want, (classes, pick)
            assert (g.explain(frame) is None) is want
            checked += 1
    assert checked == len(partitions) * n ** n


def test_bad_relations_are_refused():
    g = _C.GuardManager()
    a, b = g.local("a"), g.local("b")
    with pytest.raises(ValueError):
        g.identity_relation([a, b], [1, 0])
    with pytest.raises(ValueError):
        g.identity_relation([a, _C.GuardManager().local("a")], [0, 1])


def test_compiled_relations_keep_no_object_alive(no_gc):
    x = torch.randn(3)
    compiled = tjc.compile(_store_then_read_other, backend="eager")
    a, b = Layer(), Layer()
    a.v, b.v = x, x * 2
    compiled(x, a, b)
    compiled(x, a, a)             # the ALIAS_OF entry too
    refs = [weakref.ref(a), weakref.ref(b)]
    del a, b
    assert [r() for r in refs] == [None, None]
    c, d = Layer(), Layer()
    c.v, d.v = x, x
    same_exactly(compiled(x, c, d), d.v * 2)


def test_an_identity_test_between_two_distinct_frame_tensors_is_pinned():
    # `a[0] is not w` answered False-for-same at one call must not serve a call where they are one.
    def pick(a, w, y):
        if a[0] is not w:
            return torch.sin(y)
        return torch.cos(y)

    compiled = tjc.compile(pick, backend="eager")
    w, y = torch.randn(4), torch.randn(4)
    for args in (([w], w, y), ([torch.randn(4)], w, y), ([w], w, y), ([torch.randn(4)], w, y)):
        torch.testing.assert_close(compiled(*args), pick(*args))
