"""sequence_checks.py: a list or tuple method given arguments it does not take raises Python's own
error in the trace (read from the same call on a stand-in of the same length), the item dunders
called through bound methods (`xs.__setitem__`) are the item operations, and index/count/remove
compare items of any kind as Python does (a user class's __eq__ traced)."""
import copy

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402


def _state(value):
    """What a result or argument holds: containers item by item, a user object by its __dict__."""
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [_state(v) for v in value]
    if isinstance(value, torch.Tensor):
        return "tensor", value.tolist()
    if hasattr(value, "__dict__"):
        return type(value).__name__, {k: _state(v) for k, v in vars(value).items()}
    return value


def _run(fn, *args):
    """fn(*args) under tjc and eagerly, on copies: the same results, the same state of the
    arguments after, and no graph break or fallback."""
    eager_args, compiled_args = copy.deepcopy(args), copy.deepcopy(args)
    expected = fn(*eager_args)
    before = tjc.stats()
    got = tjc.compile(fn)(*compiled_args)
    after = tjc.stats()
    assert _state(got) == _state(expected)
    assert _state(compiled_args) == _state(eager_args)
    assert (after["graph_breaks"], after["fallbacks"]) == (before["graph_breaks"], before["fallbacks"])
    return got


def _bad_subscripts(x, xs):
    seen = []
    for step in range(6):
        try:
            if step == 0:
                xs["k"]
            elif step == 1:
                xs["k"] = 1
            elif step == 2:
                del xs["k"]
            elif step == 3:
                xs[::0]
            elif step == 4:
                xs[1:4:0] = [1]
            else:
                del xs[::0]
        except (TypeError, ValueError) as e:
            seen.append((type(e).__name__, str(e)))
    return x + 1, seen


@pytest.mark.parametrize("n", [0, 3])
def test_bad_subscripts_raise_pythons_errors_in_the_trace(n):
    # Before: each was a graph break (or, inside a try block, a fallback of the whole frame).
    got = _run(_bad_subscripts, torch.ones(2), list(range(n)))
    assert [kind for kind, _ in got[1]] == ["TypeError"] * 3 + ["ValueError"] * 3


def _item_dunders(x, xs):
    seen = []
    xs.__setitem__(1, "one")
    xs.__delitem__(0)
    calls = [lambda: xs.__setitem__(slice(0, 6, 0), [1]), lambda: xs.__setitem__(slice(0, 2), 7),
             lambda: xs.__setitem__(slice(0, 6, 2), [1]), lambda: xs.__getitem__("k", 2),
             lambda: xs.__setitem__(), lambda: xs.__delitem__(40), lambda: xs.__getitem__(40)]
    for call in calls:
        try:
            call()
            seen.append("no error")
        except (TypeError, ValueError, IndexError) as e:
            seen.append((type(e).__name__, str(e)))
    xs.__setitem__(slice(0, 2), (8, 9))
    return x * 2, seen, xs.__getitem__(slice(1, 3))


def test_item_dunders_through_bound_methods_change_the_frames_list():
    got = _run(_item_dunders, torch.ones(2), list(range(6)))
    assert got[1][-2][0] == "IndexError" and got[1][0][0] == "ValueError"


def test_a_length_change_recompiles_and_still_raises_as_eager():
    compiled = tjc.compile(_item_dunders)
    for n in (6, 6, 9):
        xs, ys = list(range(n)), list(range(n))
        got, expected = compiled(torch.ones(2), xs), _item_dunders(torch.ones(2), ys)
        assert _state(got) == _state(expected) and xs == ys
    assert tjc.stats()["recompiles"] == 1


def _searching(x, xs):
    seen = [xs.index(3, 1), xs.index(3, -3, 100), xs.count(3), xs.index(2, 0, 3)]
    calls = [lambda: xs.index(3, 6, 8), lambda: xs.index(99), lambda: xs.count(), lambda: xs.index(1, "a"),
             lambda: xs.remove(99), lambda: xs.pop("a"), lambda: xs.insert("a", 1), lambda: xs.index(),
             lambda: tuple(xs).index(99), lambda: xs.index(3, start=1)]
    for call in calls:
        try:
            seen.append(call())
        except (TypeError, ValueError) as e:
            seen.append((type(e).__name__, str(e)))
    return x - 1, seen


def test_index_count_remove_with_bounds_and_their_errors():
    _run(_searching, torch.ones(2), [3, 1, 2, 3, 4, 3, 5])


class AlwaysEqual:
    def __eq__(self, other):
        return True


class NeverEqual:
    def __init__(self):
        self.asked = 0

    def __eq__(self, other):
        self.asked += 1
        return False


def _with_user_items(x, xs, always, never):
    nevers = [never, never]
    return (x + 1, xs.count(always), [always, always].count(1), [always, always].count(never),
            nevers.count(always), xs.index(always, 2), nevers.index(never), never.asked)


def test_user_items_are_compared_by_their_own_eq():
    # Before: a break at each call ("list.count over an item that is not a constant").
    got = _run(_with_user_items, torch.ones(2), [0, 1, 2] * 3, AlwaysEqual(), NeverEqual())
    assert got[1:7] == (9, 2, 2, 0, 2, 0)


def _remove_user_item(x, xs, target):
    xs.remove(target)
    return x + len(xs)


def test_remove_by_a_user_eq_changes_the_frames_list():
    xs = [5, 6, 7]
    got = tjc.compile(_remove_user_item)(torch.zeros(1), xs, AlwaysEqual())
    assert xs == [6, 7] and torch.equal(got, torch.full((1,), 2.0))
    assert tjc.stats()["graph_breaks"] == 0


class Shrinks:
    """Equal to nothing; comparing it empties the list it is asked about."""

    def __init__(self, victim):
        self.victim = victim

    def __eq__(self, other):
        self.victim.clear()
        return False

    def __repr__(self):
        return "Shrinks()"


def _search_a_list_that_shrinks(x, xs):
    seen = []
    for name in ("count", "remove"):
        xs[:] = [1, 2, 3]
        try:
            seen.append(getattr(xs, name)(Shrinks(xs)))
        except ValueError as e:
            seen.append(str(e))
        seen.append(len(xs))
    return x + 1, seen


def test_an_eq_that_shrinks_the_list_ends_the_search_as_in_python():
    # Before the loop re-read the length, the trace indexed past the end: an internal error.
    got = _run(_search_a_list_that_shrinks, torch.ones(1), [])
    assert got[1] == [0, 0, "list.remove(x): x not in list", 0]


def _dict_errors(x, d):
    seen = []
    d.update([("p", 1), ("q", 2)])
    d.update((("r", 3),), s=4)
    calls = [lambda: {}.popitem(), lambda: d.popitem(42), lambda: d.update({}, {}), lambda: d.pop(),
             lambda: d.pop("missing"), lambda: d.setdefault()]
    for call in calls:
        try:
            seen.append(call())
        except (TypeError, KeyError) as e:
            seen.append((type(e).__name__, str(e)))
    return x + len(d), seen


def test_dict_methods_raise_pythons_errors_and_update_from_pairs():
    # Before: `update` from pairs, `popitem()` of an empty dict and `popitem(42)` were breaks.
    got = _run(_dict_errors, torch.ones(1), {"a": 0})
    assert got[1][0] == ("KeyError", "'popitem(): dictionary is empty'")
