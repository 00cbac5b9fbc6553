"""The on-disk cache for graphs that read module state: modules called opaquely (nn.LSTM,
nn.TransformerEncoder), buffers updated in place (BatchNorm in training), identities bound on load.

As test_disk_cache.py: child processes share a cache folder; a cold one stores, a warm one loads
(no trace), and both compare with eager.
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
from torch_jit_cache.pipeline.disk_cache import entries  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = '''
import copy, json, os
import torch, torch.nn as nn, torch.nn.functional as F
import torch_jit_cache as tjc

class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = nn.LSTM(8, 8, 2)
        self.out = nn.Linear(8, 20)
    def forward(self, ids, hidden):
        y, hidden = self.rnn(self.emb(ids), hidden)
        return F.log_softmax(self.out(y), -1), hidden

class EncoderNet(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.out = nn.Linear(8, 4)
    def forward(self, x, mask):
        return self.out(self.encoder(x, mask=mask))

class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(c)
    def forward(self, x):
        return F.relu(self.bn(self.conv(x)) + x)

class ResNetLike(nn.Module):
    def __init__(self, shared_bn=False):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        # The same BatchNorm under two names, or two equal ones: which one is a guarded fact.
        self.bn2 = self.bn if shared_bn else nn.BatchNorm2d(4)
        self.blocks = nn.Sequential(Block(4), Block(4))
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(4, 3)
    def forward(self, x):
        x = self.pool(F.relu(self.bn2(self.bn(self.stem(x)))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.blocks(x), 1), 1))

case = os.environ["CASE"]
torch.manual_seed(int(os.environ.get("SEED", "0")))
if case == "lstm":
    model, args = LSTMNet(), (torch.randint(0, 20, (5, 3)), (torch.zeros(2, 3, 8), torch.zeros(2, 3, 8)))
elif case == "encoder":
    mask = torch.log(torch.tril(torch.ones(5, 5)))
    model, args = EncoderNet(), (torch.randn(5, 3, 8), mask)
else:
    model, args = ResNetLike(shared_bn=bool(os.environ.get("SHARED_BN"))), (torch.randn(2, 3, 8, 8),)
model.train(case == "resnet_train")
reference = copy.deepcopy(model)
compiled = tjc.compile(model, backend=os.environ.get("BACKEND", "eager"))

def flat(o):
    return [t for v in o for t in flat(v)] if isinstance(o, (tuple, list)) else [o]

ok = True
for _ in range(2):   # the second call: the entry hit, buffers updated once more
    with torch.set_grad_enabled(case == "resnet_train"):
        out, want = compiled(*args), reference(*args)
    ok = ok and all(torch.allclose(a, b, atol=1e-6) for a, b in zip(flat(out), flat(want)))
    ok = ok and all(torch.equal(a, b) for a, b in zip(model.buffers(), reference.buffers()))
print("RESULT " + json.dumps({"ok": bool(ok), **tjc.stats()}))
'''


def run(script, cache, **env):
    full = dict(os.environ)
    full.pop("TJC_DISABLE_DISK_CACHE", None)
    full.update({"TJC_CACHE_DIR": str(cache), "PYTHONPATH": ROOT, "TJC_LOG": "disk_cache",
                 **{k: str(v) for k, v in env.items()}})
    proc = subprocess.run([sys.executable, str(script)], env=full, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    stats = json.loads(line[len("RESULT "):])
    assert stats["ok"], (proc.stdout, proc.stderr)
    return stats, proc.stderr


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "child.py"
    path.write_text(CHILD)
    return path


# (The encoder under aot_eager is not compiled at all: its mask check is data-dependent there.)
@pytest.mark.parametrize("case, backend", [("lstm", "eager"), ("lstm", "aot_eager"), ("encoder", "eager"),
                                           ("resnet_eval", "eager"), ("resnet_eval", "aot_eager"),
                                           ("resnet_train", "eager"), ("resnet_train", "aot_eager")])
def test_module_state_is_stored_and_loaded(script, tmp_path, case, backend):
    # The LSTM and the encoder are called opaquely (the graph holds a proxy, re-made on load from
    # L['self'].rnn); the ResNet reads F.max_pool2d (a closure torch makes) and, in training,
    # updates BatchNorm's running statistics in place (the child compares them with eager's).
    cache = tmp_path / "cache"
    cold, err = run(script, cache, CASE=case, BACKEND=backend)
    assert (cold["graphs_traced"], cold["disk_cache_stores"]) == (1, 1), err
    warm, err = run(script, cache, CASE=case, BACKEND=backend, SEED=1)   # other weights
    assert (warm["graphs_traced"], warm["disk_cache_hits"]) == (0, 1), err


def test_one_module_under_two_names_is_a_guarded_fact(script, tmp_path):
    # In training one BatchNorm reached as self.bn and self.bn2 is pinned by identity (its buffers
    # are updated in place): an entry stored for one shared BatchNorm does not load for two equal
    # ones, nor the other way round.
    cache = tmp_path / "cache"
    shared, _ = run(script, cache, CASE="resnet_train", SHARED_BN=1)
    assert shared["disk_cache_stores"] == 1
    distinct, err = run(script, cache, CASE="resnet_train")
    assert (distinct["graphs_traced"], distinct["disk_cache_hits"]) == (1, 0), err
    assert "reach two objects; the stored entry's were one" in err
    again, err = run(script, cache, CASE="resnet_train", SHARED_BN=1)
    assert (again["graphs_traced"], again["disk_cache_hits"]) == (0, 1), err


class _Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(4, 4)

    def forward(self, x):
        return self.rnn(x)[0].relu()


@pytest.mark.usefixtures("fresh_caches")
def test_a_loaded_graph_does_not_keep_the_module_alive(disk_cache_on, tmp_path, monkeypatch):
    # The loaded graph calls a proxy of the frame's LSTM (its dict, not the object): the model
    # dies when the user drops it, and the loaded graph with it, by reference counting.
    x = torch.randn(3, 2, 4)
    with torch.no_grad():
        tjc.compile(_Recurrent().eval())(x)
        assert tjc.stats()["disk_cache_stores"] == 1
        tjc.reset()
        model = _Recurrent().eval()
        compiled = tjc.compile(model)
        assert torch.equal(compiled(x), model(x))
    assert (tjc.stats()["graphs_traced"], tjc.stats()["disk_cache_hits"]) == (0, 1)
    graph, alive = entries.last_loaded, weakref.ref(model)
    assert graph() is not None
    del compiled, model
    assert alive() is None and graph() is None


DYNAMIC = '''
import json, os, torch, torch_jit_cache as tjc
def f(x, y):
    return (x * 2).sum(0) + y[: x.shape[0] // 2].sum() + y.mean(), x.shape[0] + 1
compiled = tjc.compile(f, backend=os.environ.get("BACKEND", "eager"))
ok = True
for shape, n in json.loads(os.environ["SHAPES"]):
    x, y = torch.randn(*shape), torch.randn(n)
    (out, n), (want, m) = compiled(x, y), f(x, y)
    ok = ok and torch.allclose(out, want) and n == m
print("RESULT " + json.dumps({"ok": bool(ok), **tjc.stats()}))
'''


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_a_symbolic_entry_loads_for_exactly_the_sizes_it_accepts(tmp_path, backend):
    # Sizes 4 then 8: a static entry, then an automatic dynamic one (x.size(0) >= 2, and
    # x.size(0) // 2 <= y.size(0)). A later process loads the dynamic one for sizes 5 and 9 (no
    # trace), the backend compiling it where x and y have one size (5, 5) and then running it where
    # they do not (9, 12); size 1 (0/1 specialization) and a 3-d x are outside its guards, and trace.
    script = tmp_path / "dynamic.py"
    script.write_text(DYNAMIC)
    cache = tmp_path / "cache"
    cold, err = run(script, cache, BACKEND=backend, SHAPES="[[[4, 3], 4], [[8, 3], 8]]")
    assert (cold["graphs_traced"], cold["disk_cache_stores"]) == (2, 2), err
    warm, err = run(script, cache, BACKEND=backend, SHAPES="[[[5, 3], 5], [[9, 3], 12]]")
    assert (warm["graphs_traced"], warm["disk_cache_hits"], warm["hits"]) == (0, 1, 1), err
    one, err = run(script, cache, BACKEND=backend, SHAPES="[[[1, 3], 1]]")
    assert (one["graphs_traced"], one["disk_cache_hits"]) == (1, 0), err
    assert "L['x'].size()[0]: 1 < min" in err
    three_d, err = run(script, cache, BACKEND=backend, SHAPES="[[[6, 3, 2], 6]]")
    assert (three_d["graphs_traced"], three_d["disk_cache_hits"]) == (1, 0), err


DECORATED = '''
import functools, json, torch, torch_jit_cache as tjc

def returns_tuple(func):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        return func(self, *args, **kwargs)
    return wrapper

def scaled(func):   # names its wrapper by hand, without __wrapped__
    def wrapper(self, x):
        return func(self, x) * 2
    wrapper.__qualname__, wrapper.__name__ = func.__qualname__, func.__name__
    return wrapper

class Config:
    def __init__(self):
        self._scale = 3.0
    @property
    def scale(self):
        return self._scale

class Inner(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.config = Config()
    @returns_tuple
    def forward(self, x):
        return self.act(self.lin(x) * self.config.scale)
    @scaled
    def act(self, x):
        return torch.tanh(x)

class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
    def forward(self, x):
        return self.inner(x).relu()

model, x = Outer(), torch.randn(2, 4)
ok = torch.equal(tjc.compile(model)(x), model(x))
print("RESULT " + json.dumps({"ok": bool(ok), **tjc.stats()}))
'''


def test_decorated_methods_and_properties_are_named_through_what_wraps_them(tmp_path):
    # As transformers' models: forward under a functools.wraps decorator (the function is the
    # wrapper's __wrapped__), a helper under a decorator that copies only the name (a closure
    # cell of the wrapper), a config
    # read through a property (its fget), each guarded by identity or its code. Each is named by
    # the path from what its qualname reaches, and re-bound by it in the next process.
    script = tmp_path / "decorated.py"
    script.write_text(DECORATED)
    cache = tmp_path / "cache"
    cold, err = run(script, cache)
    assert (cold["graphs_traced"], cold["disk_cache_stores"]) == (1, 1), err
    warm, err = run(script, cache)
    assert (warm["graphs_traced"], warm["disk_cache_hits"]) == (0, 1), err


NESTED = '''
import json, os, torch, torch_jit_cache as tjc

def make(k):
    def inner(x):
        return x * k
    return inner

helper = make(float(os.environ["K"]))

def f(x):
    return helper(x) + 1

x = torch.randn(3)
ok = torch.equal(tjc.compile(f)(x), f(x))
print("RESULT " + json.dumps({"ok": bool(ok), **tjc.stats()}))
'''


def test_a_nested_function_is_stored_by_its_code_and_contents(tmp_path):
    # A function made inside another is guarded by its code (by identity) and by what the trace
    # read from it (its cell): stored as what its code is, the cell by value. The next process's
    # helper, made again with the same k, loads; one made with another k traces.
    script = tmp_path / "nested.py"
    script.write_text(NESTED)
    cache = tmp_path / "cache"
    cold, err = run(script, cache, K=3)
    assert (cold["graphs_traced"], cold["disk_cache_stores"]) == (1, 1), err
    warm, err = run(script, cache, K=3)
    assert (warm["graphs_traced"], warm["disk_cache_hits"]) == (0, 1), err
    other, err = run(script, cache, K=4)
    assert (other["graphs_traced"], other["disk_cache_hits"]) == (1, 0), err
