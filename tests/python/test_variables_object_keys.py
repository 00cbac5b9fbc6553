"""tracer/variables/collections/object_keys.py: objects made in the trace as keys of a dict the trace
made, looked up as CPython's dict does: the key's class's __hash__ traced once per lookup (its
exception raised in the trace), the same object found without a comparison, another with the same
hash compared by the stored key's __eq__ (traced). Compared with eager, counting the calls of each
hook; what the trace does not model (several keys sharing a hash, such a dict leaving the trace)
runs as written with eager's results."""
import copy
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls  # noqa: E402


class Failing(Exception):
    pass


class Counted:
    """Hashes to its `h`, equal to another Counted of the same `v`; counts both hooks."""
    calls = []

    def __init__(self, v, h=7, fail=False):
        self.v, self.h, self.fail = v, h, fail

    def __hash__(self):
        Counted.calls.append(("hash", self.v))
        if self.fail:
            raise Failing(self.v)
        return self.h

    def __eq__(self, other):
        Counted.calls.append(("eq", self.v))
        return isinstance(other, Counted) and other.v == self.v or other == self.v


def lookups(x):
    d = {"a": 1}
    k = Counted(1)
    d[k] = 10
    out = [d[k], k in d, d.get(k), d[Counted(1)], Counted(1) in d, Counted(2) in d, d.get(Counted(2), -1),
           7 in d, d.get(1), len(d)]
    d[Counted(1)] = 11        # an equal key: the value replaced, the first key kept
    out.append([d[k], len(d)])
    out.append(d.setdefault(Counted(3, h=8), 30))
    out.append(d.pop(Counted(1)))
    k.fail = True
    for op in (lambda: d[k], lambda: d.pop(k), lambda: d.setdefault(k, 0), lambda: d.__setitem__(k, 0)):
        try:
            op()
        except Failing:
            out.append("failed")
    try:
        d[Counted(9)]
    except KeyError:
        out.append("missing")
    out.append([type(key).__name__ for key in d])
    k.fail = False
    literal = {k: 1, "b": 2, Counted(1): 3}   # BUILD_MAP stores its pairs one by one
    out.append([len(literal), literal[k], literal["b"]])
    return x + 1, out


def test_objects_of_the_trace_as_dict_keys_look_up_as_eager():
    x = torch.ones(2)
    Counted.calls.clear()
    expected = lookups(x)
    eager_calls = list(Counted.calls)
    Counted.calls.clear()
    calls = CompiledCalls(lookups)
    got = calls(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1]
    assert Counted.calls == eager_calls   # each __hash__ and __eq__ call, in eager's order
    calls.check(graphs=1)


def identity_keys(x):
    class Plain:
        pass

    a, b = Plain(), Plain()
    d = {}
    d[a], d[b] = 1, 2
    del d[a]
    return x + 1, d[b], a in d, b in d, len(d)


def test_objects_hashed_by_identity_are_keys_too():
    x = torch.ones(2)
    calls = CompiledCalls(identity_keys)
    got, expected = calls(x), identity_keys(x)
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:]
    calls.check(graphs=1)


def shared_hash(x):
    d = {}
    d[Counted(1)], d[Counted(2)] = 1, 2   # two keys with one hash: Python's probe order decides
    return x + 1, d[Counted(2)]


def returns_the_dict(x):
    d = {}
    d[Counted(1)] = 1
    return x + 1, len(d), d


def test_what_is_not_modelled_runs_as_written_with_eager_results():
    x = torch.ones(2)
    for fn in (shared_hash, returns_the_dict):
        Counted.calls.clear()
        expected = fn(x)
        eager_calls = list(Counted.calls)
        Counted.calls.clear()
        got = tjc.compile(fn, backend="eager")(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1] and Counted.calls == eager_calls


class Rehash:
    def __init__(self, v):
        self.v = v

    def __hash__(self):
        return 3

    def __eq__(self, other):
        return other == 3


def rehashed(x):
    d = {}
    d[Rehash(1)] = 1
    d[3] = 2    # an int of the same hash: compared with the stored object, which says equal
    return x + 1, len(d)


def test_a_changed_hash_method_recompiles():
    x = torch.ones(2)
    calls = CompiledCalls(rehashed)
    assert calls(x)[1] == rehashed(x)[1] == 1
    original = Rehash.__hash__
    try:
        Rehash.__hash__ = lambda self: 4   # no longer the hash of 3: two entries
        assert calls(x)[1] == rehashed(x)[1] == 2
    finally:
        Rehash.__hash__ = original
    assert calls(x)[1] == rehashed(x)[1] == 1
    calls.check(graphs=2)


def returns_a_key(x):
    k = Rehash(5)
    d = {}
    d[k] = 1
    return x + d[k], k


def test_a_key_object_the_call_returns_is_freed_with_its_last_reference():
    got = tjc.compile(returns_a_key, backend="eager")(torch.ones(2))
    ref = weakref.ref(got[1])
    torch.testing.assert_close(got[0], torch.full((2,), 2.0))
    del got
    assert ref() is None


class Named:
    def __init__(self, v):
        self.v = v

    def __hash__(self):
        return hash(self.v)

    def __eq__(self, other):
        return isinstance(other, Named) and other.v == self.v

    def __repr__(self):
        return f"Named({self.v})"


def printed(x):
    d = {}
    d[Named(1)] = "one"
    return x + 1, repr(d), str(d)


def compared(x):
    a, b = {}, {}
    a[Named(1)], b[Named(1)] = 1, 1   # equal keys, distinct objects: eager's == finds them equal
    return x + 1, a == b


def deep_copied(x):
    d = {}
    k = Named(1)
    d[k] = 1
    e = copy.deepcopy(d)
    return x + 1, [key is k for key in e]


def test_repr_equality_and_copies_of_such_dicts_match_eager():
    x = torch.ones(2)
    got = tjc.compile(printed, backend="eager")(x)
    assert got[1:] == printed(x)[1:] == ("{Named(1): 'one'}",) * 2
    for fn in (compared, deep_copied):
        expected = fn(x)
        got = tjc.compile(fn, backend="eager")(x)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] == expected[1]


def frame_key_lookup(x, from_frame):
    d = {}
    d[Counted(1)] = 1
    return x + 1, from_frame in d, d.get(from_frame)


def test_a_lookup_by_an_object_of_the_frame_runs_as_written():
    x = torch.ones(2)
    expected = frame_key_lookup(x, Counted(1))
    got = tjc.compile(frame_key_lookup, backend="eager")(x, Counted(1))
    torch.testing.assert_close(got[0], expected[0])
    assert got[1:] == expected[1:] == (True, 1)
