"""OrderedDict built in the trace (tracer/variables/collections/dict_subclasses.py, BuiltDictSubclassVariable):
its own methods that move keys (move_to_end, popitem(last=)), copy, and == that compares order,
captured in one graph and equal to eager; what the trace cannot follow breaks cleanly."""
import collections

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


def _same(got, expected):
    assert type(got) is type(expected), (got, expected)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(got, expected)
    elif isinstance(expected, (list, tuple)):
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e)
    elif isinstance(expected, dict):
        assert list(got) == list(expected), (got, expected)
        for k in expected:
            _same(got[k], expected[k])
    else:
        assert got == expected


def check(fn, *args, graphs=1, breaks=0):
    expected = fn(*args)
    report = tjc.explain(fn)(*args)
    assert (report.graph_count, report.graph_break_count, report.fallbacks) == (graphs, breaks, []), \
        report.break_reasons
    _same(tjc.compile(fn, backend="eager")(*args), expected)


def move_to_end_both_ways(x):
    d = collections.OrderedDict(a=x, b=x + 1, c=x + 2)
    d.move_to_end("a")
    d.move_to_end("c", last=False)
    d.move_to_end("b", False)
    return list(d), list(d.values()), d


def popitem_last_and_first(x):
    d = collections.OrderedDict(a=x, b=x * 2, c=x * 3)
    k1, v1 = d.popitem()
    k2, v2 = d.popitem(last=False)
    return k1, v1, k2, v2, d, list(d.items())


def plain_dict_popitem(x):
    d = {"a": x, "b": x + 1}
    k, v = d.popitem()
    return k, v, d


def views_after_reorder(x):
    d = collections.OrderedDict()
    d["w"] = x
    d["v"] = x + 1
    keys = d.keys()
    d.move_to_end("w")
    return list(keys), [k for k, _ in d.items()], sum(d.values())


def copy_is_independent(x):
    d = collections.OrderedDict(a=x, b=x + 1)
    e = d.copy()
    e.move_to_end("a")
    e["c"] = x * 2
    return d, e, type(e).__name__


def order_sensitive_equality(x):
    d = collections.OrderedDict(a=1, b=2)
    e = collections.OrderedDict(b=2, a=1)
    plain = {"b": 2, "a": 1}
    d2 = d.copy()
    e.move_to_end("b")
    return x + 1, d == e, d != collections.OrderedDict(b=2, a=1), d == plain, d2 == d, d == {"a": 1}


@pytest.mark.parametrize("fn", [move_to_end_both_ways, popitem_last_and_first, plain_dict_popitem,
                                views_after_reorder, copy_is_independent, order_sensitive_equality],
                         ids=lambda f: f.__name__)
def test_ordered_dict_methods_are_traced(fn):
    check(fn, torch.randn(3))


def move_to_end_missing_key(x):
    d = collections.OrderedDict(a=x)
    try:
        d.move_to_end("zz")
    except KeyError:
        return x - 1
    return x


def equality_of_tensor_values(x):
    d = collections.OrderedDict(a=x)
    return d == collections.OrderedDict(a=x + 0)   # eager: bool of a 3-element tensor raises


def test_what_the_trace_cannot_follow_runs_as_eager():
    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(move_to_end_missing_key, backend="eager")(x), x - 1)
    with pytest.raises(RuntimeError, match="ambiguous"):
        equality_of_tensor_values(x)
    with pytest.raises(RuntimeError, match="ambiguous"):
        tjc.compile(equality_of_tensor_values, backend="eager")(x)


def reorder_in_a_loop_over_it(x):
    d = collections.OrderedDict(a=x, b=x)
    for k in d:
        d.move_to_end(k)   # eager: RuntimeError, OrderedDict mutated during iteration
    return d


def test_reorder_during_iteration_raises_as_eager():
    x = torch.randn(2)
    with pytest.raises(RuntimeError, match="mutated during iteration"):
        reorder_in_a_loop_over_it(x)
    with pytest.raises(RuntimeError, match="mutated during iteration"):
        tjc.compile(reorder_in_a_loop_over_it, backend="eager")(x)


def pops_from_the_callers_dict(x, d):
    k, v = d.popitem()
    return x + v, k


def test_popitem_on_an_input_dict_is_replayed_on_it():
    x = torch.randn(3)
    expected_d, got_d = {"a": 1.0, "b": 2.0}, {"a": 1.0, "b": 2.0}
    expected = pops_from_the_callers_dict(x, expected_d)
    assert explain_counts_of(pops_from_the_callers_dict, x, {"a": 1.0, "b": 2.0}) == (1, 0)
    got = tjc.compile(pops_from_the_callers_dict, backend="eager")(x, got_d)
    _same(got, expected)
    assert got_d == expected_d == {"a": 1.0}


def reads_an_input_ordered_dict(x, d):
    return x + d["a"], list(d)


def test_an_input_ordered_dict_stays_opaque_and_right():
    # No guard reads an OrderedDict's order (the keys guard reads the underlying dict's), so the
    # tracer does not model one it receives: a break where it is read, eager's result.
    x = torch.randn(3)
    d = collections.OrderedDict(a=1.0, b=2.0)
    compiled = tjc.compile(reads_an_input_ordered_dict, backend="eager")
    _same(compiled(x, d), reads_an_input_ordered_dict(x, d))
    d.move_to_end("a")
    _same(compiled(x, d), reads_an_input_ordered_dict(x, d))


def explain_counts_of(fn, *args):
    report = tjc.explain(fn)(*args)
    return report.graph_count, report.graph_break_count
