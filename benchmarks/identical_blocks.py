"""Identical blocks: the N transformer-style blocks compile_time.py compiles (LayerNorm, MLP,
residual), and, run as a script, ConvNeXt-style stages of identical blocks at four widths: first-call
seconds and compile counts for tjc.compile (dynamic=None and False) beside torch.compile's (backend
eager), each compiler in a fresh process, three rounds separated by its reset().

    .venv/bin/python benchmarks/identical_blocks.py

The blocks are defined at module level, as users' models are: an entry guarded by `Block`'s type
can be stored on tjc's disk cache and re-bound by name in a later process (a class made inside a
function cannot).
"""
import json
import os
import sys

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


class Model(nn.Module):
    def __init__(self, blocks: int):
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(blocks))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


# ---- Staged identical blocks: ConvNeXt's layout, first call and counts -------------------------

_STAGED_CHILD = r"""
import json, sys, time, torch, torch._dynamo, torch._dynamo.testing, torch_jit_cache as tjc
from torch_jit_cache.testing.staged_models import Block, convnext_stages
compiler, how, dynamic, rounds = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
torch._dynamo.config.cache_size_limit = 64   # torch's default 8 would run blocks 9-12 uncompiled
for _ in range(rounds):
    torch.manual_seed(0)
    model, x = convnext_stages()
    with torch.no_grad():
        expected = model(x)
    tjc.reset(); torch._dynamo.reset()
    counter = torch._dynamo.testing.CompileCounter()
    compile_one = (lambda m: tjc.compile(m, backend="eager", dynamic=dynamic)) if compiler == "tjc" else \
        (lambda m: torch.compile(m, backend=counter, dynamic=dynamic))
    with torch.no_grad():
        t0 = time.perf_counter()
        if how == "per-block":
            for stage in model.features[1::2]:
                for i, block in enumerate(stage):
                    stage[i] = compile_one(block)
            out = model(x)
        else:
            out = compile_one(model)(x)
        seconds = time.perf_counter() - t0
    s = tjc.stats()
    counts = dict(compiles=s["compiles"], graphs=s["graphs"], recompiles=s["recompiles"],
                  symbolic=sum("SYMBOLIC_SHAPES" in str(e.guards) for e in tjc.runtime.cache_entries(Block.forward))) \
        if compiler == "tjc" else dict(compiles=counter.frame_count, graphs=counter.frame_count)
    print("RESULT " + json.dumps(dict(seconds=seconds, equal=bool(torch.allclose(out, expected, atol=1e-5)), **counts)),
          flush=True)
"""


def staged(rounds: int = 3) -> list:
    """ConvNeXt-style stages (torch_jit_cache/testing/staged_models.py: 4 stages x 3 identical blocks,
    widths 16-128, each block its own stochastic-depth rate), eval, no_grad: each compiler in a fresh
    process, `rounds` rounds separated by its reset(); every block compiled on its own (as
    `nn.Module.compile()` per block) and the model compiled whole; backend eager for both."""
    import subprocess

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.dirname(here))
    env.setdefault("TJC_DISABLE_DISK_CACHE", "1")   # first calls that compile, not load
    rows = []
    for how in ("per-block", "whole"):
        for compiler, dynamic in (("tjc", None), ("tjc", False), ("torch.compile", None)):
            out = subprocess.run([sys.executable, "-c", _STAGED_CHILD, compiler, how, json.dumps(dynamic), str(rounds)],
                                 env=env, capture_output=True, text=True, timeout=1200)
            results = [json.loads(line[7:]) for line in out.stdout.splitlines() if line.startswith("RESULT ")]
            if out.returncode != 0 or not results:
                raise RuntimeError(out.stderr[-2000:])
            rows.append(dict(how=how, compiler=compiler, dynamic=dynamic, rounds=results))
    return rows


def main() -> None:
    rows = staged()
    print(f"{'compiled':10} {'compiler':14} {'dynamic':8} {'first call (s), each round':30} counts per round")
    for row in rows:
        seconds = ", ".join(f"{r['seconds']:.2f}" for r in row["rounds"])
        counts = " | ".join(" ".join(f"{k}={v}" for k, v in r.items() if k not in ("seconds", "equal"))
                            for r in row["rounds"])
        equal = all(r["equal"] for r in row["rounds"])
        print(f"{row['how']:10} {row['compiler']:14} {str(row['dynamic']):8} {seconds:30} {counts}"
              f"{'' if equal else '  OUTPUT DIFFERS FROM EAGER'}")
    results = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
    os.makedirs(results, exist_ok=True)
    with open(os.path.join(results, "identical_blocks.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
