"""tjc.reset() restores a fresh process's state (torch_jit_cache/runtime/process_state.py): the same programs
compiled in rounds separated by reset() make the same counters, graphs and guards in every round
and in a fresh process, with the disk cache off and on; every counter starts from zero; and every
mutable container of the package is, after a compile and reset(), as a fresh process has it, or
listed as kept. About 30 s on 2 cores (two child processes of three rounds).
"""
import json
import os
import subprocess
import sys
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.runtime import process_state  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture(autouse=True)
def _reset_after():
    yield
    tjc.reset()   # counters and entries of these tests do not reach the next file's


def _child_rounds(rounds, *args, env=None) -> list:
    env = dict(os.environ if env is None else env, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, os.path.join(HERE, "reset_rounds.py"), str(rounds), *args],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line[len("ROUND "):]) for line in out.stdout.splitlines() if line.startswith("ROUND ")]


def _differences(a: dict, b: dict) -> list:
    return [k for k in a if a[k] != b[k]]


def test_rounds_after_reset_make_what_a_fresh_process_makes():
    # The child's first round is a fresh process's; each later one follows reset() with the last
    # round's compiled models still alive (they share a compiler with the new ones until reset()
    # forgets it). Before reset() walked process_state.RESET, round 2 had two more entries of a
    # block and round 3 three more graphs, two more breaks and three fewer hits.
    rounds = _child_rounds(3)
    assert len(rounds) == 3
    fresh = rounds[0]
    assert fresh["stats"]["graph_breaks"] > 0 and fresh["stats"]["recompiles"] > 0, fresh["stats"]
    for i, later in enumerate(rounds[1:], 2):
        assert later == fresh, f"round {i} differs from a fresh process in {_differences(later, fresh)}"
    # This process, after whatever ran in it before, makes the same after reset().
    import reset_rounds

    here = reset_rounds.run_rounds(1)[0]
    assert here == fresh, f"this process differs from a fresh one in {_differences(here, fresh)}"


def test_a_round_that_loads_from_disk_ends_in_the_entries_of_a_round_that_traces(tmp_path):
    # The first round traces and stores; the later ones load. A loaded symbolic entry once served
    # the first size too, where a trace makes a static entry first: one entry fewer (entries.py
    # now tries static entries first).
    env = {k: v for k, v in os.environ.items() if not k.startswith("TJC_")}
    env["TJC_CACHE_DIR"] = str(tmp_path / "cache")
    rounds = _child_rounds(3, "eager", env=env)
    traced, loaded = rounds[0], rounds[1:]
    assert traced["stats"]["disk_cache_stores"] > 0, traced["stats"]
    for i, later in enumerate(loaded, 2):
        assert later["stats"]["disk_cache_hits"] > 0, later["stats"]
        assert later["entries"] == traced["entries"], f"round {i}: the loaded entries differ from the traced ones"
        # Every counter but those that say where entries came from agrees: a loaded entry counts
        # the graph and the break its trace counted (before, a round that loaded had 0 graphs
        # and 0 breaks, so the README's snippet printed another line after its first run).
        assert later["stats"]["graphs_traced"] == 0, later["stats"]
        origin = {"graphs_traced", "disk_cache_hits", "disk_cache_stores", "disk_cache_skips"}
        decided = sorted(set(traced["stats"]) - origin)
        assert {k: later["stats"][k] for k in decided} == {k: traced["stats"][k] for k in decided}, later["stats"]
        assert traced["stats"]["graphs"] > 0 and traced["stats"]["graph_breaks"] > 0, traced["stats"]


def test_every_counter_starts_from_zero_after_reset():
    @tjc.compile
    def f(x):
        y = x + 1
        print("", end="")   # a graph break
        return y * 2

    f(torch.randn(3))
    f(torch.randn(5))
    assert any(tjc.stats().values())
    tjc.reset()
    assert set(tjc.stats().values()) == {0}, tjc.stats()


def test_reset_makes_a_live_compiler_forget_its_automatic_dynamic_sizes():
    # A compiled function kept across reset() traces static again first, as in a fresh process.
    def g(x):
        return x * 2

    f = tjc.compile(g)
    f(torch.randn(3))
    f(torch.randn(4))   # a size changed: the next compile is symbolic
    tjc.reset()
    f(torch.randn(5))
    entries = tjc.cache_entries(f)
    assert len(entries) == 1 and "size=[5]" in str(entries[0].guards), str(entries[0].guards)
    x = torch.randn(5)
    torch.testing.assert_close(f(x), g(x))


def test_modules_compiled_after_reset_get_a_new_compiler():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x)

    first = tjc.compile(Block())
    x = torch.randn(2, 4)
    first(x)
    tjc.reset()
    second = tjc.compile(Block())
    torch.testing.assert_close(second(x), second.lin(x))
    assert tjc.stats()["compiles"] == 1 and len(tjc.cache_entries(second)) == 1
    assert tjc.cache_entries(first) == [], "the first model's compiler owns no entry of the second's"
    dead = weakref.ref(first)
    del first
    assert dead() is None, "freed without gc"


def _containers() -> dict:
    """(module, attribute) -> size, for every dict, set, list and weak container at module level in
    the package's imported modules."""
    out = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("torch_jit_cache.") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, (dict, set, list, weakref.WeakKeyDictionary, weakref.WeakValueDictionary,
                                  weakref.WeakSet)) and not attr.startswith("__"):
                out[(name[len("torch_jit_cache."):], attr)] = len(value)
    return out


def test_every_container_a_compile_fills_is_emptied_by_reset_or_listed_as_kept():
    # A fresh process imports every module a compile uses (a child, so that nothing this process
    # ran before counts), then compiles, resets, and compares.
    code = (
        "import json, sys, torch, torch_jit_cache as tjc\n"
        f"sys.path.insert(0, {HERE!r})\n"
        "import reset_rounds, test_process_state as t\n"
        "tjc.reset()\n"
        "fresh = t._containers()\n"
        "reset_rounds.run_rounds(1)\n"
        "tjc.reset()\n"
        "after = t._containers()\n"
        "print(json.dumps([[m, a, fresh.get((m, a)), n] for (m, a), n in after.items()]))\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    kept = {(p.module, p.state) for p in process_state.KEPT}
    left = [(m, a, before, after) for m, a, before, after in json.loads(out.stdout.splitlines()[-1])
            if before is not None and before != after and (m, a) not in kept]
    assert not left, f"state a compile leaves behind after reset(), not in process_state.KEPT: {left}"
