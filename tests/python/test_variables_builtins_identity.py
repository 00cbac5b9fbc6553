"""tracer/variables/builtin_functions/builtins_identity.py end to end: id() of a class, of a module and of a plain
object of the frame is a constant of the graph, guarded by identity (another object recompiles and
gets its own id); id() of a frame list or dict is guarded by the number itself; id() of a tensor or
an object built in the trace breaks and keeps eager's value. The entry holds none of the objects.
Each case compares with eager."""
import weakref

import pytest

torch = pytest.importorskip("torch")

from context_helpers import CompiledCalls, same_exactly  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class Box:
    pass


class Other:
    pass


def _ids(x, obj, cls, seen):
    key = id(obj)
    hit = key in seen
    return x + 1, key, id(cls), hit


def test_id_of_frame_objects_is_a_guarded_constant():
    x = torch.zeros(2)
    calls = CompiledCalls(_ids)
    a, b = Box(), Box()
    seen = {id(a): True}
    for obj, cls in ((a, Box), (a, Box), (b, Box), (a, Other)):
        got, want = calls(x, obj, cls, seen), _ids(x, obj, cls, seen)
        same_exactly(got[0], want[0])
        assert got[1:] == want[1:]
    calls.check(graphs=3)
    assert calls.delta("compiles") == 3


class Layer(torch.nn.Module):
    def forward(self, x, memo):
        memo[id(self)] = True
        return x * 2


def test_id_of_a_module_guards_it_by_identity():
    x = torch.ones(2)
    m1, m2 = Layer(), Layer()
    calls = CompiledCalls(lambda m, x, memo: m(x, memo))
    for m in (m1, m1, m2):
        got_memo, want_memo = {}, {}
        same_exactly(calls(m, x, got_memo), m(x, want_memo))
        assert got_memo == want_memo
    calls.check(graphs=2)


def _not_guardable(x, xs):
    built = Box()
    return x + 1, id(xs), id(x), id(built) == id(built)


def test_id_of_a_list_a_tensor_or_a_new_object_keeps_eager_value():
    x, xs = torch.zeros(2), [1]
    calls = CompiledCalls(_not_guardable)
    got, want = calls(x, xs), _not_guardable(x, xs)
    same_exactly(got[0], want[0])
    assert got[1:] == want[1:]


def test_the_entry_holds_no_object_whose_id_it_read():
    x = torch.zeros(2)
    calls = CompiledCalls(_ids)
    obj = Box()
    calls(x, obj, Box, {})
    ref = weakref.ref(obj)
    del obj
    assert ref() is None


class _Holder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.second = torch.ones(2), torch.zeros(2)   # plain tensor attributes

    def forward(self, x, wanted):
        return x * (self.first if wanted == id(self.first) else self.second), id(x) == wanted


def test_id_of_a_frame_tensor_is_a_constant_guarded_by_identity():
    m, x = _Holder(), torch.ones(2)
    calls = CompiledCalls(m.forward)
    for wanted in (id(m.first), id(m.second), id(x), id(m.first)):
        got, want = calls(x, wanted), m.forward(x, wanted)
        same_exactly(got[0], want[0])
        assert got[1] == want[1]
    m.first = torch.full((2,), 3.0)   # another tensor at the source: the identity guard fails
    got, want = calls(x, id(m.first)), m.forward(x, id(m.first))
    same_exactly(got[0], want[0])
    calls.check(graphs=calls.cnt.frame_count, breaks=0)   # no break, nothing run uncompiled
    ref = weakref.ref(m.first)
    m.first = None
    assert ref() is None   # held weakly by the guard


def _tokens(x):
    xs, other = [1, 2], [1, 2]
    before, d, s, t = id(xs), {"a": 1}, {1}, (1, 2)
    xs *= 3
    xs += [4]
    alias = xs
    same_after_change = id(xs) == before and id(alias) == before
    distinct = id(xs) != id(other) and id(d) != id(s) and not id(xs) == id(d)
    kept = id(t) == id(t * 1)
    return x + len(xs), same_after_change, distinct, kept


def test_ids_of_containers_built_in_the_trace_compare_as_identities_in_one_graph():
    x = torch.zeros(2)
    calls = CompiledCalls(_tokens)
    for _ in range(2):
        got, want = calls(x), _tokens(x)
        same_exactly(got[0], want[0])
        assert got[1:] == want[1:] == (True, True, True)
    calls.check(graphs=1)


def _token_used_as_a_number(x):
    xs = [1]
    return x + 1, id(xs) > 0, id(xs) != id([]), id(xs), xs


def test_an_id_of_a_container_built_in_the_trace_used_otherwise_keeps_eager_value():
    x = torch.zeros(2)
    calls = CompiledCalls(_token_used_as_a_number)
    got, want = calls(x), _token_used_as_a_number(x)
    same_exactly(got[0], want[0])
    assert got[1:3] == want[1:3] and got[3] == id(got[4]) and got[4] == [1]
    assert calls.delta("fallbacks") == 0


def _constant_tuples(x):
    a = (1,)
    return x + 1, id(a) == id((1,)), id((2, 3)) == id((2, 3))


def test_ids_of_tuple_constants_keep_eager_answers():
    # Two tuple constants may be one object (CPython merges a code's equal constants): never guessed.
    x = torch.zeros(2)
    calls = CompiledCalls(_constant_tuples)
    got, want = calls(x), _constant_tuples(x)
    same_exactly(got[0], want[0])
    assert got[1:] == want[1:]


def _memo_by_id(x, rows, table):
    memo = {id(rows): "rows"}
    memo[id(table)] = "table"
    return x + len(memo), memo[id(rows)], id(table) in memo, id(rows)


def test_id_of_a_frame_list_or_dict_is_its_number_read_at_each_call():
    # A list or dict cannot be weakly referenced, so no identity guard may hold it: the guard reads
    # id(obj) at each call and compares the number (apply(source, ObjectId)). Another list
    # recompiles; the entry keeps neither object alive.
    import sys
    x = torch.zeros(2)
    rows, table = [1, 2], {"a": 1}
    refs = sys.getrefcount(rows), sys.getrefcount(table)
    calls = CompiledCalls(_memo_by_id)
    for r in (rows, rows, [3]):
        got, want = calls(x, r, table), _memo_by_id(x, r, table)
        same_exactly(got[0], want[0])
        assert got[1:] == want[1:]
    calls.check(graphs=2)
    assert (sys.getrefcount(rows), sys.getrefcount(table)) == refs
