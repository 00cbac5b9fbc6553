"""tracer/variables/collections/list_subclasses.py end to end: objects of plain subclasses of list
(nothing of their own but methods and __getitem__) built in the trace are list trackers of their
class, from a class read from the frame (made again as that class after the graph) or from a class
statement in the traced code (kept in the trace); what list's own code makes of them is a plain
list; `tuple + list` raises eager's TypeError in the trace. Each case compares with eager and
asserts the graphs and breaks."""
import weakref

import pytest

torch = pytest.importorskip("torch")

from context_helpers import CompiledCalls  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class Row(list):
    pass


class Labelled(list):
    def labels(self):
        return [self[i] for i in range(len(self))]

    def __getitem__(self, i):
        return f"#{i}"


def _same(got, want):
    assert type(got) is type(want), (got, want)
    if isinstance(want, torch.Tensor):
        torch.testing.assert_close(got, want)
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got == want


def _twice_in_one_graph(fn):
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    for _ in range(2):
        _same(calls(x), fn(x))
    calls.check(graphs=1)
    return calls


def _row(x):
    r = Row([x, 1])
    r.append(x * 2)
    r += [3]
    return (r, type(r) is Row, isinstance(r, list), r == [r[0], 1, r[2], 3], r[1:], r + [4], r * 2,
            r.copy(), r is not r * 1, len(r), bool(Row()))


def test_a_plain_list_subclass_from_the_frame_is_one_graph_and_made_again_as_its_class():
    _twice_in_one_graph(_row)


def test_the_made_again_list_is_freed_with_its_last_reference():
    calls = CompiledCalls(_row)
    r = calls(torch.randn(3))[0]
    ref = weakref.ref(r)
    del r
    assert ref() is None


def _labelled(x):
    r = Labelled([1, 2, 3])
    first = next(iter(r))          # list's own iteration: never the class's __getitem__
    a, b, c = r
    return x * first, r[0], r.labels(), (a, b, c), r[0:2], sorted(r), 2 in r, r.__getitem__(7)


def test_its_own_getitem_runs_for_subscripts_only_and_its_methods_are_traced():
    _twice_in_one_graph(_labelled)


def _made_in_the_trace(x):
    class Pairs(list):
        pass

    class Shouting(list):
        def __getitem__(self, i):
            return str(i) + "!"

    p = Pairs([0, 1])
    same = p == p * 1 and p is not p * 1 and type(p * 1) is list and type(p) is Pairs
    try:
        (3,) + p
        refused = None
    except TypeError as e:
        refused = str(e)
    try:
        [3] + (1,)
    except TypeError as e:
        refused2 = str(e)
    s = Shouting((1, 2))
    return x + len(p), same, refused, refused2, next(iter(s)), s[5]


def test_a_class_statement_deriving_from_list_is_traced_and_tuple_plus_list_raises_in_the_trace():
    _twice_in_one_graph(_made_in_the_trace)


def _leaves(x):
    class Kept(list):
        pass

    return x + 1, Kept([1])


def test_an_object_of_a_class_made_in_the_trace_that_leaves_it_stays_right():
    x = torch.randn(3)
    calls = CompiledCalls(_leaves)
    got, want = calls(x), _leaves(x)
    torch.testing.assert_close(got[0], want[0])
    assert list(got[1]) == [1] and type(got[1]).__name__ == "Kept"


class WithLen(list):
    def __len__(self):
        return 7


def _own_len(x):
    w = WithLen([1])
    return x * len(w), w


def test_a_subclass_with_another_special_method_stays_right():
    x = torch.randn(3)
    calls = CompiledCalls(_own_len)
    for _ in range(2):
        _same(calls(x), _own_len(x))


def test_a_method_replaced_on_the_class_recompiles():
    x = torch.randn(3)
    calls = CompiledCalls(_labelled)
    _same(calls(x), _labelled(x))
    original = Labelled.labels
    try:
        Labelled.labels = lambda self: ["replaced"]
        _same(calls(x), _labelled(x))
    finally:
        Labelled.labels = original
    assert calls.cnt.frame_count == 2
