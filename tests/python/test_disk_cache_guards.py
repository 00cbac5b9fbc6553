"""A loaded entry checks what the live entry checks: the tensor facts TENSOR_MATCH compares in C++
(the inference, conj and neg dispatch keys among them) keep an entry stored for one tensor from
loading for another, across processes and within one (a recompile finds the stored entry).

The default configuration: the disk cache on (conftest.py turns it off for the rest of the suite).
"""
import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import torch_jit_cache as tjc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# One function per bit: it takes the other branch for a tensor with the bit set, which only the
# dispatch keys tell apart (same dtype, device, sizes and strides).
BITS = {
    "inference": "x.is_inference()",
    "conj": "x.is_conj()",
    "neg": "x.is_neg()",
}


def plain(bit):
    return torch.zeros(2, dtype=torch.complex64 if bit == "conj" else torch.float32)


def flagged(bit):
    if bit == "inference":
        with torch.inference_mode():
            return torch.zeros(2)
    if bit == "conj":
        return plain(bit).conj()
    return torch._neg_view(plain(bit))


def inference_f(x):
    return x + 1 if x.is_inference() else x - 1


def conj_f(x):
    return x + 1 if x.is_conj() else x - 1


def neg_f(x):
    return x + 1 if x.is_neg() else x - 1


FUNCTIONS = {"inference": inference_f, "conj": conj_f, "neg": neg_f}

CHILD = '''
import json, os, sys, torch, torch_jit_cache as tjc
sys.path.insert(0, os.environ["TESTS"])
from test_disk_cache_guards import FUNCTIONS, flagged, plain
bit = os.environ["BIT"]
f = FUNCTIONS[bit]
c = tjc.compile(f)
first = c(plain(bit))            # run 1 stores the entry; run 2 loads it
x = flagged(bit)
out = c(x)
ok = torch.equal(first, f(plain(bit))) and torch.equal(out, f(x))
print("RESULT " + json.dumps({"ok": bool(ok), "out": str(out), "eager": str(f(x)), **tjc.stats()}))
'''


def _child(script, cache, bit):
    env = dict(os.environ)
    env.pop("TJC_DISABLE_DISK_CACHE", None)
    env.update({"TJC_CACHE_DIR": str(cache), "PYTHONPATH": ROOT, "BIT": bit,
                "TESTS": os.path.dirname(os.path.abspath(__file__))})
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.parametrize("bit", sorted(BITS))
def test_a_second_process_gives_eager_answers(tmp_path, bit):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    cache = tmp_path / "cache"
    first = _child(script, cache, bit)
    assert first["ok"], first
    assert (first["graphs_traced"], first["disk_cache_stores"], first["disk_cache_hits"]) == (2, 2, 0), first
    second = _child(script, cache, bit)
    assert second["ok"], second
    # Both entries load, each for its own tensor.
    assert (second["graphs_traced"], second["disk_cache_hits"]) == (0, 2), second


@pytest.mark.usefixtures("fresh_caches")
@pytest.mark.parametrize("bit", sorted(BITS))
def test_a_recompile_in_the_same_process_does_not_load_the_other_entry(disk_cache_on, tmp_path, monkeypatch, bit):
    f = FUNCTIONS[bit]
    c = tjc.compile(f)
    assert torch.equal(c(plain(bit)), f(plain(bit)))
    assert tjc.stats()["disk_cache_stores"] == 1
    x = flagged(bit)
    assert torch.equal(c(x), f(x))
    assert (tjc.stats()["graphs_traced"], tjc.stats()["disk_cache_hits"]) == (2, 0)


@pytest.mark.usefixtures("fresh_caches")
def test_an_entry_stored_in_inference_mode_does_not_load_under_no_grad(disk_cache_on, tmp_path, monkeypatch):
    # Both turn grad mode off (GLOBAL_STATE is equal), but inference_mode also changes the thread's
    # dispatch-key state, which TENSOR_MATCH applies to the tensor's keys: the same tensor has
    # another state there, and the live guard rejects it.
    x = torch.zeros(2)
    c = tjc.compile(inference_f)
    with torch.inference_mode():
        c(x)
    assert tjc.stats()["disk_cache_stores"] == 1
    with torch.no_grad():
        assert torch.equal(c(x), inference_f(x))
    assert (tjc.stats()["graphs_traced"], tjc.stats()["disk_cache_hits"]) == (2, 0)
    # The stored state is the one the leaf had when compiled: under inference_mode again, it loads.
    tjc.reset()
    c = tjc.compile(inference_f)
    with torch.inference_mode():
        assert torch.equal(c(x), inference_f(x))
    assert (tjc.stats()["graphs_traced"], tjc.stats()["disk_cache_hits"]) == (0, 1)
