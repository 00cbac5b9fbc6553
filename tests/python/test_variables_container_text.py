"""tracer/variables/builtin_functions/container_text.py end to end: repr() and str() of lists,
tuples and dicts built in the trace, item by item as CPython writes them: a container inside itself
as `[...]`/`{...}`, a user object through its class's Python __repr__ (whose exception is raised in
the trace, where a try block catches it). Each case compares with eager and asserts one graph."""
import pytest

torch = pytest.importorskip("torch")

from context_helpers import CompiledCalls, same_exactly  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class Named:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Named({self.name!r})"


class Refused(Exception):
    pass


class Unprintable:
    def __repr__(self):
        raise Refused("no text")


def _texts(x):
    d = {"k": 1.5}
    d["self"] = d
    xs = [1, "a", (2,), Named("n"), None, {3}]
    xs.append(xs)
    try:
        repr([Unprintable()])
        caught = None
    except Refused as e:
        caught = str(e)
    return x + 1, repr(d), str(xs), repr((xs,)), repr(()), str({1: Named("v")}), caught


def test_repr_of_containers_with_user_objects_and_themselves_inside_is_one_graph():
    x = torch.zeros(2)
    calls = CompiledCalls(_texts)
    for _ in range(2):
        got, want = calls(x), _texts(x)
        same_exactly(got[0], want[0])
        assert got[1:] == want[1:]
    calls.check(graphs=1)


def _with_tensor(x):
    return repr([1, x.shape[0]]), repr([x])


def test_repr_of_a_list_holding_a_tensor_keeps_eager_value():
    x = torch.zeros(2)
    calls = CompiledCalls(_with_tensor)
    got, want = calls(x), _with_tensor(x)
    assert got == want and calls.delta("fallbacks") == 0
