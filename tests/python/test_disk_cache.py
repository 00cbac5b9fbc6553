"""The on-disk cache (torch_jit_cache/pipeline/disk_cache/): one process stores, a later one loads untraced.

Each test runs child processes on one script (the key includes the script's path and code) with
TJC_CACHE_DIR in the test's temporary folder; conftest.py keeps the cache off everywhere else.
The children print tjc.stats() and whether the result equals eager's, as JSON.
"""
import hashlib
import json
import os
import pickle
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.pipeline.disk_cache import entries  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = '''
import json, os, sys
import torch
import torch_jit_cache as tjc

if os.environ.get("STALE_VERSION"):
    import torch_jit_cache.pipeline.disk_cache.keys as dc
    dc.__version__ = "0.0.0-stale"

SCALE = float(os.environ.get("SCALE", "2"))

def helper(t):
    return torch.cos(t) * SCALE

def f(x, y):
    return torch.sin(x) + helper(y), x.shape[0]

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
    def forward(self, x):
        return torch.relu(self.lin(x))

backend = os.environ.get("BACKEND", "eager")
n = int(os.environ.get("N", "3"))
dtype = getattr(torch, os.environ.get("DTYPE", "float32"))
x, y = torch.arange(n, dtype=dtype), torch.ones(n, dtype=dtype)
out = tjc.compile(f, backend=backend)(x, y)
want = f(x, y)
ok = torch.equal(out[0], want[0]) and out[1] == want[1]
if os.environ.get("MODULE"):
    torch.manual_seed(int(os.environ.get("SEED", "0")))
    m = Block()
    m.train(not os.environ.get("EVAL"))
    ok = ok and torch.equal(tjc.compile(m, backend=backend)(torch.ones(2, 4)), m(torch.ones(2, 4)))
print("RESULT " + json.dumps({"ok": bool(ok), **tjc.stats()}))
'''


def _run(script, cache, **env):
    full = dict(os.environ)
    full.pop("TJC_DISABLE_DISK_CACHE", None)
    full.update({"TJC_CACHE_DIR": str(cache), "PYTHONPATH": ROOT, **{k: str(v) for k, v in env.items()}})
    return subprocess.Popen([sys.executable, str(script)], env=full, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _result(proc):
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    line = next(l for l in out.splitlines() if l.startswith("RESULT "))
    stats = json.loads(line[len("RESULT "):])
    assert stats["ok"], (out, err)
    return stats, err


def run(script, cache, **env):
    return _result(_run(script, cache, **env))


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "child.py"
    path.write_text(CHILD)
    return path


def _entries(cache):
    return sorted(p for p in cache.rglob("*.entry"))


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_second_process_loads_without_tracing(script, tmp_path, backend):
    cache = tmp_path / "cache"
    first, _ = run(script, cache, BACKEND=backend)
    assert (first["graphs_traced"], first["disk_cache_stores"], first["disk_cache_hits"]) == (1, 1, 0)
    assert len(_entries(cache)) == 1
    second, err = run(script, cache, BACKEND=backend)
    assert (second["graphs_traced"], second["disk_cache_stores"], second["disk_cache_hits"]) == (0, 0, 1), err
    assert "ignoring cache file" not in err


def test_a_module_is_stored_and_loaded_with_other_weights(script, tmp_path):
    # A module is guarded by type and the values its trace read, its parameters graph inputs
    # (docs/cache.md): a later process with other weights loads the entry and computes with them
    # (the child compares with eager); one in eval mode fails the `training` guard and compiles.
    cache = tmp_path / "cache"
    first, _ = run(script, cache, MODULE=1)
    assert (first["graphs_traced"], first["disk_cache_stores"]) == (2, 2)
    second, _ = run(script, cache, MODULE=1, SEED=1)
    assert (second["graphs_traced"], second["disk_cache_hits"]) == (0, 2)
    evaluating, _ = run(script, cache, MODULE=1, EVAL=1)
    assert (evaluating["graphs_traced"], evaluating["disk_cache_hits"], evaluating["disk_cache_stores"]) == (1, 1, 1)


@pytest.mark.parametrize("change", [{"N": 5}, {"DTYPE": "float64"}, {"SCALE": 3}])
def test_failing_guard_recompiles(script, tmp_path, change):
    cache = tmp_path / "cache"
    run(script, cache)
    changed, _ = run(script, cache, **change)   # the child checks its result against eager
    assert (changed["graphs_traced"], changed["disk_cache_hits"], changed["disk_cache_stores"]) == (1, 0, 1)
    assert len(_entries(cache)) == 2
    again, _ = run(script, cache, **change)
    assert (again["graphs_traced"], again["disk_cache_hits"]) == (0, 1)


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage"])
def test_corrupt_file_warns_once_and_recompiles(script, tmp_path, damage):
    cache = tmp_path / "cache"
    run(script, cache)
    (entry,) = _entries(cache)
    data = entry.read_bytes()
    if damage == "flip":
        data = data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:]
    elif damage == "truncate":
        data = data[:len(data) // 2]
    else:
        data = b"not a cache file"
    entry.write_bytes(data)
    second, err = run(script, cache)
    assert (second["graphs_traced"], second["disk_cache_hits"]) == (1, 0)
    assert err.count("ignoring cache file") == 1, err
    if damage == "flip":   # the bad file was removed and a good one stored: the next run loads
        third, err = run(script, cache)
        assert (third["graphs_traced"], third["disk_cache_hits"]) == (0, 1) and "ignoring" not in err, err


def _rewrite_entry(path, change):
    data = path.read_bytes()
    head = len(entries.MAGIC) + 32
    entry = pickle.loads(data[head:])
    change(entry)
    payload = pickle.dumps(entry)
    path.write_bytes(entries.MAGIC + hashlib.sha256(payload).digest() + payload)


def test_stale_version_in_file_is_ignored(script, tmp_path):
    cache = tmp_path / "cache"
    run(script, cache)
    (entry,) = _entries(cache)
    _rewrite_entry(entry, lambda e: e.update(versions=(*e["versions"][:3], "0.0.0-old", e["versions"][4])))
    second, err = run(script, cache)
    assert (second["graphs_traced"], second["disk_cache_hits"]) == (1, 0)
    assert err.count("ignoring cache file") == 1 and "stale" in err, err


def test_other_package_version_does_not_find_entries(script, tmp_path):
    cache = tmp_path / "cache"
    run(script, cache)
    second, err = run(script, cache, STALE_VERSION=1)
    assert (second["graphs_traced"], second["disk_cache_hits"], second["disk_cache_stores"]) == (1, 0, 1)


def test_edited_source_file_makes_entry_stale(script, tmp_path):
    # The file's code objects are unchanged (a comment added), but an inlined helper could have
    # changed: the file's digest is part of the entry.
    cache = tmp_path / "cache"
    run(script, cache)
    script.write_text(CHILD + "\n# edited\n")
    second, err = run(script, cache)
    assert (second["graphs_traced"], second["disk_cache_hits"]) == (1, 0)
    assert "changed since it was stored" in err


def test_concurrent_writers(script, tmp_path):
    cache = tmp_path / "cache"
    procs = [_run(script, cache) for _ in range(2)]
    for p in procs:
        stats, err = _result(p)
        assert stats["graphs_traced"] + stats["disk_cache_hits"] == 1
    assert not list(cache.rglob(".tmp-*"))
    third, err = run(script, cache)
    assert (third["graphs_traced"], third["disk_cache_hits"]) == (0, 1)
    assert "ignoring cache file" not in err


def test_disabled_by_env_writes_nothing(script, tmp_path):
    cache = tmp_path / "cache"
    stats, _ = run(script, cache, TJC_DISABLE_DISK_CACHE=1)
    assert (stats["graphs_traced"], stats["disk_cache_stores"]) == (1, 0)
    assert not cache.exists()


def test_config_defaults(monkeypatch):
    from torch_jit_cache.config import Config
    monkeypatch.delenv("TJC_CACHE_DIR", raising=False)
    monkeypatch.delenv("TJC_DISABLE_DISK_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    c = Config()
    assert c.disk_cache is True and c.cache_dir == os.path.join("/somewhere", "torch_jit_cache")
    monkeypatch.setenv("TJC_CACHE_DIR", "/elsewhere")
    monkeypatch.setenv("TJC_DISABLE_DISK_CACHE", "1")
    c = Config()
    assert c.disk_cache is False and c.cache_dir == "/elsewhere"
    with pytest.raises(TypeError):
        c.disk_cache = "yes"


def _scaled(x, y):
    return torch.sin(x) * 2 + y


@pytest.mark.usefixtures("fresh_caches")
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_loaded_entry_frees_its_graph(disk_cache_on, tmp_path, monkeypatch, backend):
    # In one process: compile (stores), reset (the entry dies), call again (loads from disk).
    x, y = torch.randn(3), torch.randn(3)
    compiled = tjc.compile(_scaled, backend=backend)
    compiled(x, y)
    assert tjc.stats()["disk_cache_stores"] == 1
    tjc.reset()
    compiled = tjc.compile(_scaled, backend=backend)
    assert torch.equal(compiled(x, y), _scaled(x, y))
    stats = tjc.stats()
    assert (stats["graphs_traced"], stats["disk_cache_hits"]) == (0, 1)
    graph = entries.last_loaded
    assert graph() is not None
    del compiled
    tjc.reset()
    assert graph() is None   # by reference counting: no gc.collect()


def _helper(t):
    return torch.cos(t)


def _uses_helper(x):
    return _helper(x) + 1


@pytest.mark.usefixtures("fresh_caches")
def test_reassigned_function_is_not_rebound(disk_cache_on, tmp_path, monkeypatch):
    # Guards re-bound by name must reach the function the graph inlined: an impostor assigned under
    # the name, with the same module and qualname, has other code and is not taken for it.
    import types
    x = torch.randn(3)
    tjc.compile(_uses_helper)(x)
    assert tjc.stats()["disk_cache_stores"] == 1
    tjc.reset()
    impostor = types.FunctionType((lambda t: torch.sin(t)).__code__, globals(), "_helper")
    impostor.__qualname__ = "_helper"
    monkeypatch.setitem(globals(), "_helper", impostor)
    assert torch.equal(tjc.compile(_uses_helper)(x), torch.sin(x) + 1)
    stats = tjc.stats()
    assert (stats["graphs_traced"], stats["disk_cache_hits"]) == (1, 0)


@pytest.mark.usefixtures("fresh_caches")
def test_explain_traces_even_with_a_stored_entry(disk_cache_on, tmp_path, monkeypatch):
    # explain() reports the graph, which only a trace has: it never loads from disk.
    x, y = torch.randn(3), torch.randn(3)
    tjc.compile(_scaled)(x, y)
    assert tjc.stats()["disk_cache_stores"] == 1
    tjc.reset()
    assert tjc.explain(_scaled)(x, y).graph_count == 1
    assert tjc.stats()["disk_cache_hits"] == 0


VARIED = '''
import json, os, sys, torch, torch_jit_cache as tjc
import torch.nn.functional as F
K = 3
def a(x, y): return {"s": x + y, "p": [x * 2, y[1:]]}, (x.sum(), 1)
def b(x, *, scale=2.0): return x.to(torch.float64) * scale
def c(x): return F.softmax(x, dim=-1)[..., :2].reshape(-1)
def d(x, n): return x.view(n, -1).transpose(0, 1).contiguous() + K
def make(z):
    def inner(x): return x * z
    return inner
e = make(torch.tensor(5.0))
def f(xs): return torch.stack([t.cos() for t in xs]).mean(0)
def g(x): return x.new_zeros(2, dtype=torch.int64), torch.arange(4, device=x.device), x.max(dim=0)
def h(x): return x.clone().add_(1).relu_()
def i(x, y): return x @ y, x.t(), torch.where(x > 0, x, y.T[:x.shape[0], :x.shape[1]])
cases = [(a, (torch.randn(3), torch.randn(3)), {}), (b, (torch.randn(2),), {"scale": 3.0}),
         (c, (torch.randn(2, 4),), {}), (d, (torch.randn(6), 2), {}), (e, (torch.randn(3),), {}),
         (f, ([torch.randn(3) for _ in range(3)],), {}), (g, (torch.randn(3, 2),), {}),
         (h, (torch.randn(3),), {}),
         (i, (torch.randn(2, 3), torch.randn(3, 2)), {})]
def flat(o):
    if isinstance(o, dict):
        o = list(o.values())
    if isinstance(o, (list, tuple)):
        return [leaf for v in o for leaf in flat(v)]
    return [o]
torch.manual_seed(0)
bad = []
for fn, args, kw in cases:
    out = tjc.compile(fn, backend=os.environ.get("BACKEND", "eager"))(*args, **kw)
    want = fn(*args, **kw)
    fo, fw = flat(out), flat(want)
    same = len(fo) == len(fw) and type(out) is type(want) and all(
        (torch.equal(p, q) if isinstance(p, torch.Tensor) else p == q) for p, q in zip(fo, fw))
    if not same: bad.append(fn.__name__)
print("RESULT " + json.dumps({"ok": not bad, "bad": bad, **tjc.stats()}))
'''


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_varied_functions_load_and_match_eager(tmp_path, backend):
    # Dict, list and torch.return_types outputs, keyword arguments, a closure over a tensor, a list
    # argument, in-place methods (C method descriptors as graph targets), dtype and device arguments.
    script = tmp_path / "varied.py"
    script.write_text(VARIED)
    cache = tmp_path / "cache"
    first, _ = run(script, cache, BACKEND=backend)
    assert (first["graphs_traced"], first["disk_cache_stores"]) == (9, 9)
    second, err = run(script, cache, BACKEND=backend)
    assert (second["graphs_traced"], second["disk_cache_hits"], second["fallbacks"]) == (0, 9, 0), err


REGIONAL = '''
import json
import torch
import torch_jit_cache as tjc

class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
    def forward(self, x):
        return torch.relu(self.lin(x)) + x

blocks = torch.nn.ModuleList(Block() for _ in range(4))
want = x = torch.randn(2, 8)
for b in blocks:
    want = b(want)
for i, b in enumerate(blocks):
    blocks[i] = tjc.compile(b, backend="aot_eager")
with torch.no_grad():
    for b in blocks:
        x = b(x)
print("RESULT " + json.dumps({"ok": bool(torch.allclose(x, want.detach())), **tjc.stats()}))
'''


def test_blocks_compiled_one_by_one_trace_once_and_the_next_process_loads_it(tmp_path):
    # The tjc.compile(block) calls share one cache (one class, the same options): the first block
    # traces and stores, the others hit its entry; the next process loads that one entry from disk
    # for the first block, and the others hit it in memory.
    path = tmp_path / "regional.py"
    path.write_text(REGIONAL)
    cache = tmp_path / "cache"
    first, _ = run(path, cache)
    assert (first["graphs_traced"], first["disk_cache_stores"], first["disk_cache_hits"]) == (1, 1, 0)
    assert (first["hits"], first["shared_backend_compiles"]) == (3, 0)
    second, _ = run(path, cache)
    assert (second["graphs_traced"], second["disk_cache_hits"], second["hits"]) == (0, 1, 3)


SKIPPED_CHILD = '''
import json
import torch
import torch_jit_cache as tjc

def scale_of(cfg):   # a call the trace cannot inline (the print), with no tensor work of its own
    print("", end="")
    return cfg["scale"]

def f(x, cfg):
    return torch.sin(x) * scale_of(cfg)

x = torch.ones(3)
ok = torch.equal(tjc.compile(f)(x, {"scale": 3.0}), f(x, {"scale": 3.0}))
print("RESULT " + json.dumps({"ok": bool(ok), **tjc.stats()}))
'''


def test_a_code_traced_to_no_tensor_work_is_skipped_untraced_by_the_next_process(tmp_path):
    # The print breaks the graph inside scale_of, which then runs as its own frame, whose trace
    # does no tensor work: the first process skips it after a trace, the second without one (it
    # traced it again before: a warm HuggingFace model imported the tracer for its config reads).
    script = tmp_path / "skipped.py"
    script.write_text(SKIPPED_CHILD)
    first, err = run(script, tmp_path / "cache", TJC_LOG="fallbacks")
    assert (first["graphs_traced"], first["disk_cache_skips"]) == (2, 0) and "no tensor work" in err, err
    second, err = run(script, tmp_path / "cache", TJC_LOG="fallbacks")
    assert (second["graphs_traced"], second["disk_cache_hits"], second["disk_cache_skips"]) == (0, 2, 1), err
    assert "no tensor work" not in err   # nothing traced
