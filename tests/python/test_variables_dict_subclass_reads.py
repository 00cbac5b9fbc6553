"""dict_subclass_reads.py: dict's own keys/values/items, len, bool and `in` on a dict subclass
object the frame receives, read from its guarded keys and values instead of a graph break."""
import collections
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402


class Plain(dict):
    pass


class OwnGetitem(dict):
    def __getitem__(self, key):
        return dict.__getitem__(self, key) * 10


class OwnKeys(dict):
    def keys(self):
        return ["fixed"]


def _reads(x, d):
    for value in d.values():
        x = x * value
    for key in d.keys():
        x = x + key
    for k, v in d.items():
        x = x - k * v
    if 3 in d:
        x = x * 2
    if d:
        x = x + len(d)
    return x, d.keys(), d.items(), d.values()


def _as_lists(result):
    return [result[0].tolist()] + [list(view) for view in result[1:]]


def test_views_len_bool_and_membership_without_a_break():
    compiled = tjc.compile(_reads)
    x = torch.ones(2)
    d = Plain({1: 2.0, 3: 4.0})
    assert _as_lists(compiled(x, d)) == _as_lists(_reads(x, d))
    stats = tjc.stats()
    assert (stats["graph_breaks"], stats["fallbacks"], stats["graphs"]) == (0, 0, 1)


def test_returned_views_are_live_views_of_the_very_object():
    d = Plain({1: 2.0})
    _, keys, items, values = tjc.compile(_reads)(torch.ones(1), d)
    d[5] = 6.0
    assert list(keys) == [1, 5] and list(items) == [(1, 2.0), (5, 6.0)] and list(values) == [2.0, 6.0]


def test_a_changed_key_or_value_recompiles():
    compiled = tjc.compile(_reads)
    x = torch.ones(2)
    d = Plain({1: 2.0, 3: 4.0})
    for change in (None, ("value", 1, 7.0), ("key", 9, 1.0), ("del", 3, None), ("del", 1, None), ("del", 9, None)):
        if change is not None:
            kind, k, v = change
            if kind == "del":
                del d[k]
            else:
                d[k] = v
        assert _as_lists(compiled(x, d)) == _as_lists(_reads(x, d))
    assert tjc.stats()["recompiles"] == 5 and tjc.stats()["graph_breaks"] == 0


def _membership(x, d):
    return x + (1 if "a" in d else 0) + (2 if "z" in d else 0)


def test_membership_in_a_class_with_its_own_getitem_reads_keys_only():
    compiled = tjc.compile(_membership)
    x = torch.zeros(1)
    d = OwnGetitem(a=1)
    assert torch.equal(compiled(x, d), _membership(x, d))
    d["z"] = 2
    assert torch.equal(compiled(x, d), _membership(x, d))
    assert tjc.stats()["graph_breaks"] == 0 and tjc.stats()["recompiles"] == 1


def _values_sum(x, d):
    return x + sum(d.values())


def test_values_of_a_class_with_its_own_getitem_are_dicts_own_items():
    # dict.values() of such a class reads dict's items (its __getitem__ is not what values() runs);
    # the guard reads them through dict's own item too (`dict.__getitem__(L['d'], 'a')`).
    compiled = tjc.compile(_values_sum)
    d = OwnGetitem(a=1, b=2)
    assert torch.equal(compiled(torch.zeros(1), d), _values_sum(torch.zeros(1), d))
    dict.__setitem__(d, "b", 5)
    assert torch.equal(compiled(torch.zeros(1), d), _values_sum(torch.zeros(1), d))
    stats = tjc.stats()
    assert (stats["graph_breaks"], stats["fallbacks"], stats["recompiles"]) == (0, 0, 1)


class Output(collections.OrderedDict):
    """transformers' ModelOutput in small: an OrderedDict subclass whose own __getitem__ takes an
    index too, and whose __setitem__ keeps an attribute beside each item."""

    def __getitem__(self, k):
        return self.to_tuple()[k] if isinstance(k, int) else dict(self.items())[k]

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        object.__setattr__(self, key, value)

    def to_tuple(self):
        return tuple(self[k] for k in self.keys())


def _output_reads(x, out):
    return x * out[0] + out["b"], list(out.keys()), [v * 2 for v in out.values()], len(out)


def test_an_ordered_dict_subclass_is_read_in_its_own_order():
    compiled = tjc.compile(_output_reads)
    out = Output()
    out["a"], out["b"] = torch.ones(2), torch.full((2,), 3.0)
    for change in (None, "move", "value"):
        if change == "move":
            out.move_to_end("a")      # the OrderedDict's order only: its dict part keeps a, b
        elif change == "value":
            out["b"] = torch.zeros(2)
        got, want = compiled(torch.ones(2), out), _output_reads(torch.ones(2), out)
        assert torch.equal(got[0], want[0]) and got[1] == want[1] and got[3] == want[3]
        assert all(torch.equal(g, w) for g, w in zip(got[2], want[2]))
    stats = tjc.stats()
    assert (stats["graph_breaks"], stats["fallbacks"], stats["recompiles"]) == (0, 0, 1)


def _keys_list(x, d):
    return x, list(d.keys())


def test_an_overridden_keys_is_the_classs_own():
    d = OwnKeys(a=1)
    assert tjc.compile(_keys_list)(torch.zeros(1), d)[1] == ["fixed"]


def test_the_entry_does_not_keep_the_object_alive(no_gc):
    compiled = tjc.compile(_reads)
    d = Plain({1: 2.0})
    compiled(torch.ones(1), d)
    ref = weakref.ref(d)
    del d
    assert ref() is None
