"""tracer/variables/builtin_functions/copying.py through the public API: copy.deepcopy in traced code.

The contract: a deepcopy of lists, dicts and plain objects is built in the trace as new objects
(mutating the copy leaves the original alone, as in eager); values deepcopy returns as they are
(ints, strs, classes) stay what was copied; Python's memo is followed (an object reached twice is
copied once); a change to what was copied recompiles; what the trace cannot copy as deepcopy would
(a tensor, a class with its own __deepcopy__ or __getattribute__, __slots__, __del__) is a graph
break, never a shallow guess; copies and originals are freed when dropped. Each case compares with
eager and counts.
"""
import copy
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402
from context_helpers import (CompiledCalls, Finalised, Holder, NewCache, NewLayer, Slotted,  # noqa: E402
                             compiled_like_eager, same_exactly, same_object)


class Config:
    def __init__(self):
        self.hidden = 4
        self.names = ["q", "k"]
        self.extra = {"scale": 2}


def _copy_and_mutate(x, cfg):
    c = copy.deepcopy(cfg)
    c.hidden += 1
    c.names.append("v")
    c.extra["scale"] = 3
    return x * c.hidden * c.extra["scale"] + len(c.names), cfg.hidden, len(cfg.names), cfg.extra["scale"]


def _copy_of_containers(x, d):
    c = copy.deepcopy(d)
    c["a"].append(9)
    return x + len(c["a"]), len(d["a"]), c


def _memo_keeps_sharing(x):
    shared = [1, 2]
    pair = copy.deepcopy([shared, shared])
    pair[0].append(3)
    return x * len(pair[1]), pair[0] is pair[1]


@pytest.mark.parametrize("fn, args", [
    (_copy_and_mutate, lambda: (torch.randn(2), Config())),
    (_copy_of_containers, lambda: (torch.randn(2), {"a": [1, 2], "b": (3, "s")})),
    (_memo_keeps_sharing, lambda: (torch.randn(2),)),
], ids=["object", "containers", "memo"])
def test_deepcopy_is_built_in_the_trace_in_one_graph(fn, args):
    compiled_like_eager(fn, *args())


def test_the_original_is_untouched_after_the_compiled_call():
    cfg = Config()
    tjc.compile(_copy_and_mutate, backend="eager")(torch.ones(1), cfg)
    assert (cfg.hidden, cfg.names, cfg.extra) == (4, ["q", "k"], {"scale": 2})


class OwnCopy:
    def __init__(self):
        self.n = 2

    def __deepcopy__(self, memo):
        new = OwnCopy()
        new.n = self.n * 10
        return new


@pytest.mark.parametrize("make, reason", [(lambda: torch.ones(2), "deepcopy"), (OwnCopy, "deepcopy")],
                         ids=["tensor", "own-protocol"])
def test_what_the_trace_cannot_copy_breaks_and_runs_eagers_copy(make, reason):
    def copies(x, obj):
        c = copy.deepcopy(obj)
        return x + 1, getattr(c, "n", 0)

    x = torch.ones(2)
    calls = CompiledCalls(copies)
    got, expected = calls(x, make()), copies(x, make())
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1]
    out = tjc.explain(copies)(x, make())
    assert out.graph_break_count == 1 and reason in out.break_reasons[0]


# -- copies of config-like arguments and of objects the trace built; what stays a break; lifetimes ---
class Settings:
    """A config-like record: constants, a nested dict and list, read and copied in forward."""

    def __init__(self, n=2):
        self.num_layers = n
        self.names = {0: "a", 1: "b"}
        self.sizes = [3, 4]
        self.scale = 0.5


def _copy_and_edit(x, settings):
    x = x + 1                        # graph work first: a break at the copy would count
    mine = copy.deepcopy(settings)
    mine.num_layers += 1
    mine.names[2] = "c"
    mine.sizes.append(5)
    table = copy.deepcopy({"k": [1, 2], "s": settings.scale})
    table["k"].append(3)
    return x * mine.num_layers * len(mine.names) * sum(table["k"]), mine, table


def test_deepcopy_of_an_argument_and_a_dict_is_built_in_the_graph_and_leaves_the_originals():
    x = torch.randn(3)
    calls = CompiledCalls(_copy_and_edit)
    for _ in range(2):
        es, cs = Settings(), Settings()
        got, want = calls(x, cs), _copy_and_edit(x, es)
        same_exactly(got[0], want[0])
        same_object(got[1], want[1])
        assert got[2] == want[2]
        same_object(cs, Settings())                  # the argument is unchanged
        assert got[1].names is not cs.names and got[1].sizes is not cs.sizes
    calls.check(graphs=1)


def test_deepcopy_recompiles_when_what_was_copied_changes():
    x = torch.randn(3)
    calls = CompiledCalls(_copy_and_edit)
    calls(x, Settings())
    changed = Settings(3)
    same_exactly(calls(x, changed)[0], _copy_and_edit(x, Settings(3))[0])
    changed.extra = 1                                 # an attribute more: the copy has it too
    got, want = calls(x, changed), _copy_and_edit(x, changed)
    same_object(got[1], want[1])
    calls.check(graphs=3)


def _copy_shared(x, settings):
    x = x + 1
    mine = copy.deepcopy(settings)
    mine.sizes.append(9)
    return x * len(mine.other), mine


@pytest.mark.parametrize("shared", [True, False])
def test_deepcopy_keeps_one_object_reached_twice_one_copy(shared):
    x = torch.randn(3)
    calls = CompiledCalls(_copy_shared)
    for share in (shared, not shared):
        es, cs = Settings(), Settings()
        es.other = es.sizes if share else list(es.sizes)
        cs.other = cs.sizes if share else list(cs.sizes)
        got, want = calls(x, cs), _copy_shared(x, es)
        same_exactly(got[0], want[0])   # len(mine.other) after mine.sizes.append: 3 if shared
        assert got[1].other == want[1].other and got[1].sizes == want[1].sizes
    calls.check(graphs=2)            # the aliasing recompiles


def _copy_new_object(x):
    c = NewCache(1)
    c.update(x, 0)
    d = copy.deepcopy(c)
    return d.seq_len(), c is d


def _twice_as_eager(fn, holds):
    """fn(x) returns (a tensor, an object, its copy): two compiled calls match eager's, `holds(got)`
    each time, in one graph."""
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    for _ in range(2):
        got, want = calls(x), fn(x)
        same_exactly(got[0], want[0])
        same_object(got[1], want[1])
        same_object(got[2], want[2])
        assert holds(got)
    calls.check(graphs=1)


def test_deepcopy_of_an_object_built_in_the_trace_without_tensors():
    # NewCache's layers start with keys=None: a copy before any tensor is stored is constants only.
    def fn(x):
        x = x + 1
        c = NewCache(2)
        d = copy.deepcopy(c)
        d.layers.append(NewLayer())
        return x + len(c.layers), d, c
    _twice_as_eager(fn, lambda got: got[1].layers[0] is not got[2].layers[0])


class OwnDeepcopy:
    def __init__(self):
        self.v = 1

    def __deepcopy__(self, memo):
        o = OwnDeepcopy()
        o.v = self.v + 1
        return o


class OwnGetattribute:
    def __init__(self):
        self.v = 1

    def __getattribute__(self, name):
        return object.__getattribute__(self, name)


# (A Python __setattr__ is followed: test_variables_object_hooks.py.)
@pytest.mark.parametrize("make", [lambda x: OwnDeepcopy(), lambda x: OwnGetattribute(),
                                  lambda x: Slotted(), lambda x: Finalised(), lambda x: [x]],
                         ids=["__deepcopy__", "__getattribute__", "__slots__", "__del__", "tensor"])
def test_deepcopy_the_trace_cannot_follow_stays_a_graph_break(make):
    def fn(x, obj):
        y = x * 2                    # a graph before the copy: the cut there counts as a break
        c = copy.deepcopy(obj)
        return y + 1, c
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    obj = make(x)
    got, want = calls(x, obj), fn(x, obj)
    same_exactly(got[0], want[0])
    assert type(got[1]) is type(want[1])
    if isinstance(want[1], list):
        same_exactly(got[1][0], want[1][0])
        assert got[1][0] is not x
    else:
        assert got[1].v == want[1].v
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1


class Renamed:
    """PreTrainedConfig's pattern: its own __getattribute__ renames the names in attribute_map,
    then asks object's."""
    attribute_map = {"width": "hidden"}

    def __init__(self, hidden):
        self.hidden = hidden
        self.names = ["a"]

    def __getattribute__(self, name):
        if name != "attribute_map" and name in super().__getattribute__("attribute_map"):
            name = super().__getattribute__("attribute_map")[name]
        return super().__getattribute__(name)


class RenamesDeepcopy(Renamed):
    """A hook that answers __deepcopy__ with a method of its own: deepcopy calls that."""
    attribute_map = {"width": "hidden", "__deepcopy__": "_own_copy"}

    def _own_copy(self, memo):
        return RenamesDeepcopy(self.hidden * 10)


def _copy_built_hooked(cls):
    def fn(x):
        x = x + 1
        c = cls(3)
        d = copy.deepcopy(c)     # Whisper: a config the trace made, copied again
        d.names.append("b")
        d.hidden = d.width + 2
        return x * c.width + d.width, c, d
    return fn


def test_deepcopy_of_a_built_object_with_its_own_getattribute_follows_the_hook():
    _twice_as_eager(_copy_built_hooked(Renamed), lambda got: got[1].names == ["a"] and got[2].names == ["a", "b"])


def test_deepcopy_of_a_built_object_whose_hook_answers_deepcopy_breaks_as_eager():
    fn = _copy_built_hooked(RenamesDeepcopy)
    x = torch.randn(3)
    calls = CompiledCalls(fn)
    got, want = calls(x), fn(x)
    same_exactly(got[0], want[0])
    same_object(got[2], want[2])
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1
    assert "answers __deepcopy__" in " ".join(tjc.explain(fn)(x).break_reasons)


def test_copies_of_built_hooked_objects_are_freed_when_dropped(no_gc):
    fn = _copy_built_hooked(Renamed)
    compiled = tjc.compile(fn, backend="eager")
    _, c, d = compiled(torch.randn(3))
    refs = [weakref.ref(c), weakref.ref(d)]
    del c, d
    assert [r() for r in refs] == [None, None]


def test_deepcopy_of_a_tensor_built_copy_is_refused_in_the_copy_of_a_new_object():
    calls = CompiledCalls(_copy_new_object)
    x = torch.randn(2, 3)
    got, want = calls(x), _copy_new_object(x)
    assert got == want
    assert calls.delta("graph_breaks") + calls.delta("fallbacks") >= 1


def test_copies_made_in_the_trace_and_their_originals_are_freed_when_dropped(no_gc):
    cnt = CompileCounter()
    compiled = tjc.compile(_copy_and_edit, backend=cnt)
    x = torch.randn(3)
    settings = Settings()
    settings.sub = Holder()          # copied too: a second object built in the trace
    out = compiled(x, settings)
    assert type(out[1].sub) is Holder and out[1].sub is not settings.sub
    refs = [weakref.ref(o) for o in (settings, settings.sub, out[1], out[1].sub)]
    del out, settings
    assert [r() for r in refs] == [None] * len(refs)
    settings = Settings()
    settings.sub = Holder()
    out = compiled(x, settings)      # a cache hit builds new ones
    assert cnt.frame_count == 1 and type(out[1]) is Settings
    del out
