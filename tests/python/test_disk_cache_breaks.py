"""The on-disk cache with what real models make: graph breaks and their resume functions, side
effects, HuggingFace-style wrappers returning ModelOutputs, several entries per code
(torch_jit_cache/pipeline/disk_cache/output_codec.py).

A cold child process compiles a list of scenarios and stores their entries; a warm one, sharing
the cache folder, must load them all without a trace and give eager's results, and a warm one
called with other inputs (or in another order) must reject the entries that do not apply. Each
child prints, per scenario, whether the results (and the state the side effects left) equal
eager's, and the counters the scenario moved.
"""
import types

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import graph_break  # noqa: E402
from torch_jit_cache.pipeline.disk_cache import keys  # noqa: E402

from test_disk_cache import run  # noqa: E402

CHILD = '''
import dataclasses, functools, json, os
import torch
import torch_jit_cache as tjc

OTHER = bool(os.environ.get("OTHER"))


def breaks_at_print(x):
    a = x.sin() + 1
    print("between")
    return a * 2


def breaks_if(x, flag):
    a = x.cos()
    if flag:
        print("flag")   # a break only where the flag is set
    return a + 1


def breaks_at_item(x):
    a = x.sin()
    v = a.sum().item()
    return a * v


def branches(x):   # a jump on a tensor: a resume function per target
    a = x.cos() - 0.5
    if a.sum() > 0:
        return a + 1
    return a - 1


def breaks_in_blocks(x):   # the resume function enters both blocks again (EnteredContext)
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = x @ x.T
            print("inside")
            b = a @ x
    return b.float() + x


def breaks_in_loop(x):   # a chain of resume functions, one per iteration
    for k in (1, 2, 3):
        x = x * k
        print("iteration", k)
    return x


class Box:
    pass


class OtherBox:
    pass


LOG = []
STATE = None


def effects(x, box):
    global STATE
    STATE = "set"
    LOG.append(len(LOG))
    box.seen = True
    return x * 2


def effects_and_break(x, box):
    box.before = 1
    y = x + 1
    print("between")
    box.after = [y.shape[0]]
    return y * 3


class Marks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.mode = "new"

    def forward(self, x):
        self.mode = "ran"
        return self.lin(x).relu()


class Collector:
    pass


COLLECTOR = Collector()


def returns_output(func):   # as transformers' can_return_tuple and its output collector
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        COLLECTOR.compiling = True
        out = func(self, *args, **kwargs)
        COLLECTOR.compiling = False
        return out
    return wrapper


if "hf" in os.environ["SCENARIOS"]:
    from transformers.utils.generic import ModelOutput

    @dataclasses.dataclass
    class Out(ModelOutput):
        last: torch.Tensor = None
        extra: torch.Tensor = None

    class HFStyle(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        @returns_output
        def forward(self, x):
            h = self.lin(x)
            print("inside")
            return Out(last=h.relu(), extra=None)


class Dropper(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.nn.functional.dropout(self.lin(x), 0.5, self.training)


def state():
    return STATE, list(LOG)


def reset():
    global STATE
    STATE = None
    LOG.clear()


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.requires_grad == b.requires_grad \
            and torch.allclose(a, b)
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(p, q) for p, q in zip(a, b))
    return a == b


def compare(fn, make_args, extra=lambda args: None):
    """fn compiled against fn eager, from the same starting state: results and the state left."""
    reset()
    args = make_args()
    got = tjc.compile(fn)(*args)
    got_state = (state(), extra(args))
    reset()
    args = make_args()
    want = fn(*args)
    return same(got, want) and got_state == (state(), extra(args))


def scenario(name):
    torch.manual_seed(0)
    x = torch.randn(4)
    if name == "print":
        return compare(breaks_at_print, lambda: (x,))
    if name == "flag":
        return compare(breaks_if, lambda: (x, not OTHER))
    if name == "item":
        return compare(breaks_at_item, lambda: (x,))
    if name == "blocks":
        return compare(breaks_in_blocks, lambda: (torch.ones(2, 2, requires_grad=True),))
    if name == "loop":
        return compare(breaks_in_loop, lambda: (x,))
    if name == "branch":
        # The frame's entry applies to both; the other branch's resume function is another code.
        return compare(branches, lambda: (torch.full((4,), 3.0 if OTHER else 0.0),))
    if name == "effects":
        if OTHER:
            LOG.append("old")   # another length: the stored entry does not apply
        box = OtherBox if OTHER else Box
        return compare(effects, lambda: (x, box()), lambda args: vars(args[1]))
    if name == "effects_break":
        return compare(effects_and_break, lambda: (x, Box()), lambda args: vars(args[1]))
    if name == "module":
        def make():
            torch.manual_seed(1)
            return Marks(), torch.ones(2, 4)
        reset()
        m, inp = make()
        got = tjc.compile(m)(inp)
        m2, inp = make()
        want = m2(inp)
        return same(got, want) and m.mode == m2.mode == "ran"
    if name == "hf":
        torch.manual_seed(2)
        m = HFStyle().eval()
        inp = torch.ones(2, 4)
        with torch.no_grad():
            got = tjc.compile(m)(inp)
            want = m(inp)
        return type(got) is type(want) and list(got.keys()) == list(want.keys()) and \\
            torch.equal(got.last, want.last) and got.extra is None and vars(COLLECTOR) == {"compiling": False}
    if name == "shapes":   # two entries for one code: two dtypes, then a module in train and eval
        c = tjc.compile(breaks_at_print)
        ok = all(same(c(x.to(dt)), breaks_at_print(x.to(dt))) for dt in (torch.float32, torch.float64))
        torch.manual_seed(3)
        drop = Dropper()
        cd = tjc.compile(drop)
        for training in (True, False):
            drop.train(training)
            torch.manual_seed(4)
            got = cd(torch.ones(2, 4))
            torch.manual_seed(4)
            ok = ok and same(got, drop(torch.ones(2, 4)))
        return ok
    raise ValueError(name)


names = os.environ["SCENARIOS"].split(",")
if os.environ.get("REVERSED"):
    names = names[::-1]
results = {}
for name in names:
    before = tjc.stats()
    ok = scenario(name)
    after = tjc.stats()
    results[name] = {"ok": bool(ok), **{k: after[k] - before[k] for k in
                                        ("graphs", "graphs_traced", "disk_cache_hits", "disk_cache_stores", "graph_breaks")}}
print("RESULT " + json.dumps({"ok": all(r["ok"] for r in results.values()), "scenarios": results}))
'''


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "child.py"
    path.write_text(CHILD)
    return path


def _pair(script, cache, scenarios, **env):
    """The cold and the warm run's per-scenario counters."""
    cold, _ = run(script, cache, SCENARIOS=",".join(scenarios), **env)
    warm, err = run(script, cache, SCENARIOS=",".join(scenarios), REVERSED=1, **env)
    assert "ignoring cache file" not in err, err
    return cold["scenarios"], warm["scenarios"], err


# (scenario, entries stored: the frame and each resume function that has a graph)
BREAKS = {"print": 2, "item": 2, "branch": 2, "flag": 2, "blocks": 2, "loop": 3}


def test_graph_breaks_load_with_their_resume_functions(script, tmp_path):
    cache = tmp_path / "cache"
    cold, warm, err = _pair(script, cache, list(BREAKS))
    for name, stored in BREAKS.items():
        assert cold[name]["graph_breaks"] >= 1, (name, cold[name])
        assert (cold[name]["disk_cache_stores"], cold[name]["graphs_traced"]) == (stored, stored), (name, cold[name])
        # The warm process traces nothing: the frame's entry and its resume function's, each
        # found under its own code's key.
        assert (warm[name]["graphs_traced"], warm[name]["disk_cache_hits"]) == (0, stored), (name, warm[name], err)


def test_a_warm_process_with_other_inputs_rejects_what_it_did_not_see(script, tmp_path):
    cache = tmp_path / "cache"
    names = ["flag", "branch", "effects"]
    run(script, cache, SCENARIOS=",".join(names))
    other, err = run(script, cache, SCENARIOS=",".join(names), OTHER=1)
    for name in names:   # the child compared each with eager: right results, and all traced again
        assert other["scenarios"][name]["graphs_traced"] >= 1, (name, other["scenarios"][name], err)
    # branch: the frame's entry applies (same tensor facts), the other target's resume code is
    # another code with nothing stored.
    assert (other["scenarios"]["branch"]["graphs_traced"], other["scenarios"]["branch"]["disk_cache_hits"]) == (1, 1)
    # flag False: no break, one entry, stored beside the flag-True ones; each input loads its own.
    both, err = run(script, cache, SCENARIOS="flag", OTHER=1)
    assert (both["scenarios"]["flag"]["graphs_traced"], both["scenarios"]["flag"]["disk_cache_hits"]) == (0, 1), err
    again, err = run(script, cache, SCENARIOS="flag")
    assert (again["scenarios"]["flag"]["graphs_traced"], again["scenarios"]["flag"]["disk_cache_hits"]) == (0, 2), err


def test_side_effects_are_replayed_by_loaded_entries(script, tmp_path):
    # A global write, a list append, setattr on a plain object and on a module, and effects on
    # both sides of a graph break: the child compares results and the state left with eager's
    # (the module's attribute too).
    cache = tmp_path / "cache"
    cold, warm, err = _pair(script, cache, ["effects", "effects_break", "module"])
    assert (cold["effects"]["disk_cache_stores"], warm["effects"]["disk_cache_hits"]) == (1, 1), err
    assert (cold["effects_break"]["disk_cache_stores"], warm["effects_break"]["disk_cache_hits"]) == (2, 2), err
    assert warm["effects"]["graphs_traced"] == warm["effects_break"]["graphs_traced"] == 0, warm
    # A store to a module pins it by identity (tracer/variables/modules/nn_module.py), which no stored
    # entry holds: stored where that is lifted, traced again (and right) where not.
    assert warm["module"]["disk_cache_hits"] == cold["module"]["disk_cache_stores"], warm
    assert warm["module"]["graphs_traced"] == 1 - cold["module"]["disk_cache_stores"], warm


def test_a_decorated_forward_returning_a_model_output_loads(script, tmp_path):
    # The HuggingFace shape: a functools.wraps wrapper that sets attributes of a global object
    # around the call of the decorated forward (named through __wrapped__), which breaks and
    # returns a ModelOutput; the wrapper's entry has no graph, a side effect and a break.
    pytest.importorskip("transformers")
    cache = tmp_path / "cache"
    cold, warm, err = _pair(script, cache, ["hf"])
    assert cold["hf"]["disk_cache_stores"] == cold["hf"]["graphs_traced"] + 1 >= 2, cold   # + the wrapper's entry
    assert (warm["hf"]["graphs_traced"], warm["hf"]["disk_cache_hits"]) == (0, cold["hf"]["disk_cache_stores"]), err


def test_several_entries_of_one_code_each_load(script, tmp_path):
    cache = tmp_path / "cache"
    cold, warm, err = _pair(script, cache, ["shapes"])
    # breaks_at_print for two dtypes (2 entries for the frame, 2 for its resume code), the
    # Sequential in train and eval mode.
    assert cold["shapes"]["disk_cache_stores"] == 6, cold
    assert (warm["shapes"]["graphs_traced"], warm["shapes"]["disk_cache_hits"]) == (0, 6), err


def _two_on_one_line(x):
    x = x + 1; print("one"); x = x * 2; print("two"); return x - 3  # noqa: E702


def _two_on_one_line_too(x):
    x = x + 1; print("one"); x = x * 2; print("two"); return x - 3  # noqa: E702


@pytest.mark.usefixtures("fresh_caches")
def test_resume_codes_of_other_parents_or_offsets_have_other_keys():
    # Two breaks on one line of one function, and the same line in another function: the resume
    # codes' names and first lines may agree, their bytecode (the prologue's jump) or their
    # qualname tell them apart.
    compiled = [tjc.compile(fn) for fn in (_two_on_one_line, _two_on_one_line_too)]   # alive: their entries too
    for c, fn in zip(compiled, (_two_on_one_line, _two_on_one_line_too)):
        assert torch.equal(c(torch.ones(2)), fn(torch.ones(2)))
    codes = [c for c in list(graph_break.resume._RESUME_CODES.keys()) if "_two_on_one_line" in c.co_qualname]
    assert len(codes) >= 4, [c.co_qualname for c in codes]
    compiler = types.SimpleNamespace(backend="eager", backend_patches=(), dynamic=None)
    found = {keys.key(compiler, c) for c in codes}
    assert len(found) == len({id(c) for c in codes}), [c.co_qualname for c in codes]
    # The same code made again gives the same key (what a second process relies on).
    for c in codes:
        assert keys.key(compiler, c.replace()) == keys.key(compiler, c)


@pytest.mark.usefixtures("fresh_caches")
def test_a_loaded_resume_entry_dies_with_its_parent(disk_cache_on, tmp_path, monkeypatch):
    # In one process: compile (stores), reset, call again: both entries load; dropping the
    # compiled function frees the loaded graphs by reference counting.
    import weakref
    from torch_jit_cache.pipeline.disk_cache import entries
    x = torch.randn(3)
    tjc.compile(_two_on_one_line)(x)
    assert tjc.stats()["disk_cache_stores"] == 3
    tjc.reset()
    compiled = tjc.compile(_two_on_one_line)
    assert torch.equal(compiled(x), _two_on_one_line(x))
    stats = tjc.stats()
    assert (stats["graphs_traced"], stats["disk_cache_hits"]) == (0, 3)
    graph = entries.last_loaded   # the last resume function's graph
    resumes = [weakref.ref(c) for c in list(graph_break.resume._RESUME_CODES.keys())
               if "_two_on_one_line" in c.co_qualname]
    assert graph() is not None and resumes
    del compiled
    tjc.reset()
    assert graph() is None and all(r() is None for r in resumes)


def _doubled(x):
    return x.sin() * 2


@pytest.mark.usefixtures("fresh_caches")
def test_a_full_key_keeps_the_most_recently_used_entries(disk_cache_on, tmp_path, monkeypatch):
    # One code serves every model it is called for (transformers' output wrappers): a full key
    # drops its least recently used entry for a new one, and a load counts as a use.
    from torch_jit_cache.pipeline.disk_cache import entries
    monkeypatch.setattr(entries, "MAX_ENTRIES", 2)
    inputs = {dt: torch.ones(3, dtype=dt) for dt in (torch.float32, torch.float64, torch.float16)}

    def call(*dtypes):
        tjc.reset()
        c = tjc.compile(_doubled)
        for dt in dtypes:
            assert torch.equal(c(inputs[dt]), _doubled(inputs[dt]))
        return tjc.stats()

    assert call(torch.float32, torch.float64)["disk_cache_stores"] == 2
    assert call(torch.float32)["disk_cache_hits"] == 1   # float32 used last, float64 least
    stats = call(torch.float16)
    assert (stats["disk_cache_stores"], len(list(tmp_path.rglob("*.entry")))) == (1, 2)
    stats = call(torch.float32, torch.float16, torch.float64)
    assert (stats["disk_cache_hits"], stats["graphs_traced"]) == (2, 1)   # float64 was the one removed
