"""Side effects replayed: attribute stores on user objects and modules,
global stores, and mutation of lists and dicts read from the frame are recorded by the tracer and
replayed by the transformed code after the graph, in program order (tracer/side_effects.py).
Every test compares with eager, counts graphs, and checks that no frame fell back whole."""
import contextlib
import io
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

nn = torch.nn
from context_helpers import CompiledCalls, same_exactly  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]






# -- attributes --------------------------------------------------------------------------------
class State:
    def __init__(self):
        self.scale = 2.0


def _user_object_store(x, s):
    y = x * s.scale
    s.last = y                       # stored, then read back in the same frame
    s.scale = 3.0
    del s.tmp
    return s.last + s.scale * x


def test_attribute_store_on_a_user_object_is_read_back_and_replayed():
    x = torch.randn(4)
    calls = CompiledCalls(_user_object_store)
    for _ in range(3):               # a fresh object each call: the entry is hit
        eager, compiled = State(), State()
        eager.tmp = compiled.tmp = 1
        same_exactly(calls(x, compiled), _user_object_store(x, eager))
        same_exactly(compiled.last, eager.last)
        assert compiled.scale == eager.scale == 3.0 and not hasattr(compiled, "tmp")
    calls.check(graphs=1, recompiles=0)
    # The same object again: its scale is now 3.0, which the guard on it sees (a recompile).
    compiled.tmp = eager.tmp = 1
    same_exactly(calls(x, compiled), _user_object_store(x, eager))
    calls.check(graphs=2, recompiles=1)


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.calls = 0

    def forward(self, x):
        m = (x > 0).float()
        self.mask = m
        self.calls += 1
        return self.lin(x) * self.mask + self.calls


def test_attribute_store_and_counter_on_a_module():
    torch.manual_seed(0)
    eager = Masked()
    module = Masked()
    module.load_state_dict(eager.state_dict())
    calls = CompiledCalls(module)
    for _ in range(3):
        x = torch.randn(2, 4)
        same_exactly(calls(x), eager(x))
        same_exactly(module.mask, eager.mask)
        assert module.calls == eager.calls
    # `calls` is a Python int the graph adds: each call's new value fails the guard on the last.
    calls.check(graphs=3, recompiles=2)
    assert "mask" in vars(module) and "mask" not in module._buffers


class RunningMean(nn.Module):
    """BatchNorm-like running statistics done by hand: the buffer is replaced by a new tensor."""

    def __init__(self):
        super().__init__()
        self.register_buffer("running", torch.zeros(4))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.running = self.running * 0.9 + x.mean(0) * 0.1
        self.steps = self.steps + 1
        return x - self.running


def test_buffer_replaced_by_assignment_equals_eager_after_several_calls():
    eager, module = RunningMean(), RunningMean()
    calls = CompiledCalls(module)
    for _ in range(5):
        x = torch.randn(3, 4)
        same_exactly(calls(x), eager(x))
    for name in ("running", "steps"):
        same_exactly(getattr(module, name), getattr(eager, name))
    assert sorted(module._buffers) == ["running", "steps"] and "running" not in vars(module)
    assert sorted(module.state_dict()) == ["running", "steps"]
    calls.check(graphs=1, recompiles=0)


# -- globals -----------------------------------------------------------------------------------
LAST = None
COUNT = 0


def _global_store(x):
    global LAST, COUNT
    LAST = x * 2
    COUNT = 7
    return LAST + COUNT


def test_global_store_is_read_back_and_replayed():
    global LAST, COUNT
    calls = CompiledCalls(_global_store)
    for _ in range(2):
        x = torch.randn(3)
        LAST, COUNT = None, 0
        expected = _global_store(x)
        eager_last = LAST
        LAST, COUNT = None, 0
        same_exactly(calls(x), expected)
        same_exactly(LAST, eager_last)
        assert COUNT == 7
    calls.check(graphs=1, recompiles=0)


# -- containers read from the frame ------------------------------------------------------------
def _append_and_setitem(x, xs, d):
    xs.append(x * 2)
    d["y"] = x + 1
    return xs, d


def test_list_append_and_dict_setitem_on_arguments_then_returned():
    x = torch.randn(3)
    calls = CompiledCalls(_append_and_setitem)
    for _ in range(2):   # fresh containers of the same length and keys: the entry is hit
        exs, ed, cxs, cd = [x], {"a": 1}, [x], {"a": 1}
        eout = _append_and_setitem(x, exs, ed)
        cout = calls(x, cxs, cd)
        assert cout[0] is cxs and cout[1] is cd      # the very objects, mutated
        assert len(cxs) == len(exs) == 2 and list(cd) == list(ed) == ["a", "y"]
        same_exactly(cxs[1], exs[1])
        same_exactly(cd["y"], ed["y"])
    calls.check(graphs=1, recompiles=0)
    # The same list again: its length guard describes the state at frame entry, so it fails now.
    calls(x, cxs, {"a": 1})
    _append_and_setitem(x, exs, {"a": 1})
    assert len(cxs) == len(exs) == 3
    same_exactly(cxs[2], exs[2])
    calls.check(graphs=2, recompiles=1)


def _container_ops(x, xs, d):
    xs.insert(0, x + 1)
    xs[1] = x * 3
    last = xs.pop()
    xs.extend([x, x - 1])
    d.update({"b": x * 2})
    first = d.pop("a")
    del d["c"]
    d["z"] = len(xs)
    return last + first + xs[0]


def test_more_list_and_dict_mutations_in_program_order():
    x = torch.randn(3)
    calls = CompiledCalls(_container_ops)
    for _ in range(2):
        exs, ed = [x, x * 2, x * 5], {"a": x, "c": 3}
        cxs, cd = [x, x * 2, x * 5], {"a": x, "c": 3}
        same_exactly(calls(x, cxs, cd), _container_ops(x, exs, ed))
        assert len(cxs) == len(exs)
        for a, b in zip(cxs, exs):
            same_exactly(a, b)
        assert list(cd) == list(ed) == ["b", "z"] and cd["z"] == ed["z"]
        same_exactly(cd["b"], ed["b"])
    calls.check(graphs=1, recompiles=0)


def _mutate_then_print(x, xs, s):
    xs.append(x + 1)
    s.seen = len(xs)
    print(len(xs), s)                  # runs as bytecode at the break: sees the replayed state
    return x * len(xs) + xs[-1]


class Shows:
    def __repr__(self):
        return f"Shows(seen={self.seen})"


def test_mutation_is_replayed_before_a_graph_break():
    x = torch.randn(3)
    calls = CompiledCalls(_mutate_then_print)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        expected = _mutate_then_print(x, [torch.ones(3)], Shows())
        got = [calls(x, [torch.ones(3)], Shows()) for _ in range(2)]
    assert out.getvalue().splitlines() == ["2 Shows(seen=2)"] * 3
    for g in got:
        same_exactly(g, expected)
    calls.check(graphs=2, breaks=1)


# -- refused: still correct -------------------------------------------------------------------
class WithProperty:
    def __init__(self):
        self._v = 1.0

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value * 2


class Slotted:
    __slots__ = ("a",)

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value + 1)


def _property_store(x, o):
    y = x + 1
    o.v = 3.0
    return y * o.v


def _slots_store(x, o):
    y = x + 1
    o.a = 3.0
    return y * o.a


def _tensor_attr_store(x):
    y = x.detach() * 2
    y.requires_grad = True
    return y * 3


@pytest.mark.parametrize("fn, make", [(_property_store, WithProperty), (_slots_store, Slotted)])
def test_stores_through_a_property_setter_or_a_slot_hook_are_traced_and_replayed(fn, make):
    # The setter and the class's __setattr__ are traced (object_protocol.py); what they store
    # through object's is replayed once, after the graph.
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    for _ in range(2):
        eo, co = make(), make()
        expected, got = fn(x, eo), calls(x, co)
        attr = "_v" if make is WithProperty else "a"
        assert getattr(co, attr) == getattr(eo, attr)
        same_exactly(got, expected)
    calls.check(graphs=1, breaks=0)


@pytest.mark.parametrize("fn, make", [(_tensor_attr_store, None)])
def test_stores_that_cannot_be_replayed_are_refused_and_still_correct(fn, make):
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    for _ in range(2):
        if make is None:
            expected, got = fn(x), calls(x)
            assert got.requires_grad == expected.requires_grad
        else:
            eo, co = make(), make()
            expected, got = fn(x, eo), calls(x, co)
            attr = "_v" if make is WithProperty else "a"
            assert getattr(co, attr) == getattr(eo, attr)
        same_exactly(got, expected)
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1   # refused, one way or the other


def _aliased(x, a, b):
    a.append(1)
    return x * len(b)


def test_a_mutated_list_and_another_list_that_may_be_the_same_object():
    # Guards see types and lengths, not whether two arguments are one list: the trace refuses the
    # mutation while another list is read (the append runs as bytecode at a graph break).
    x = torch.randn(3)
    calls = CompiledCalls(_aliased)
    for share in (False, True, False):
        ea = [0]
        eb = ea if share else [0]
        ca = [0]
        cb = ca if share else [0]
        same_exactly(calls(x, ca, cb), _aliased(x, ea, eb))
        assert ca == ea and cb == eb


# -- lifetimes ---------------------------------------------------------------------------------
def test_objects_touched_by_replay_are_freed_when_dropped(no_gc):
    module, state = Masked(), State()
    state.tmp = 0
    compiled_module = tjc.compile(module, backend="eager")
    compiled_fn = tjc.compile(_user_object_store, backend="eager")
    x = torch.randn(2, 4)
    compiled_module(x)
    compiled_fn(x, state)
    xs = [x]
    compiled_append = tjc.compile(_append_and_setitem, backend="eager")
    compiled_append(x, xs, {})
    refs = [weakref.ref(o) for o in (module, module.mask, module.lin.weight, state, state.last,
                                      x, xs[1])]
    del module, state, compiled_module, compiled_fn, compiled_append, x, xs
    assert [r() for r in refs] == [None] * len(refs)


# -- replay order ------------------------------------------------------------------------------
def _swap_and_redirect(x, o):
    o.a, o.b = o.b, o.a              # each value is loaded before any store is replayed
    ys = o.items
    o.items = o.spare                # the path L['o'].items now leads elsewhere...
    ys.append(x + 1)                 # ...but the append goes to the list read before
    setattr(o, "k", x * 3)
    return o.k + o.a


def test_replay_loads_every_target_and_value_before_applying_any():
    x = torch.randn(3)
    calls = CompiledCalls(_swap_and_redirect)

    def make():
        o = State()
        o.a, o.b, o.items, o.spare = x, x * 2, [x], ()   # a tuple: not a list that may alias
        return o
    for _ in range(2):
        eo, co = make(), make()
        eitems, citems = eo.items, co.items
        same_exactly(calls(x, co), _swap_and_redirect(x, eo))
        same_exactly(co.a, eo.a)
        same_exactly(co.b, eo.b)
        assert co.items is co.spare and len(citems) == len(eitems) == 2
        same_exactly(citems[1], eitems[1])
    calls.check(graphs=1, recompiles=0)
