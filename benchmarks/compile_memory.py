"""Peak memory of the first call: eager vs tjc.compile vs torch.compile on a model of several hundred MB.

The model is the zoo's nanoGPT (torch_jit_cache/testing/models.py) built from a larger GPTConfig
with random weights (default 4 layers of width 1536: about 113 M parameters, 450 MB in float32),
in eval under torch.no_grad(), called once on a (1, 64) batch of token ids. The first call is what
a compiler pays for: trace, backend compile and run. A trace that runs the model on real copies
of its tensors costs about the parameters' size again; one on fake tensors costs next to nothing.

Each variant (eager; tjc.compile and torch.compile with backend="eager", then "inductor") runs in a
fresh subprocess, so one variant's peak cannot hide in another's, and allocator caches start
empty. Measured in the child, around the first call only (building the model is not counted):
- on the CPU: the resident set's high-water mark (Linux VmHWM, reset to the current RSS just
  before the call through /proc/self/clear_refs) minus the RSS just before the call;
- with CUDA: torch.cuda.max_memory_allocated() minus memory_allocated() before the call (peak
  stats reset first); the model lives on the GPU.
Inductor's modules are imported before the measurement in every variant (torch.compile imports
them when called, tjc at its first graph: a once-per-process cost either way). Inductor compiles in
the measured process (TORCHINDUCTOR_COMPILE_THREADS=1): a worker pool's memory
would be outside the child's RSS, for both compilers alike; each child gets an empty inductor cache
folder, so every variant compiles afresh.

"above eager" is a variant's first-call peak minus eager's, in MB and as a share of the parameters'
size. The goal (issue 21): tjc within 5 % of the parameters' size above eager, and below
torch.compile's figure for the same backend.

Prints one table and writes benchmarks/results/compile_memory.json.

Usage: python benchmarks/compile_memory.py [--quick] [--layers 4] [--width 1536] [--no-inductor]
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
from harness import options, print_head, run_json_child, write_results  # noqa: E402

MB = 1024 * 1024
GOAL_SHARE = 0.05   # of the parameters' size, above eager


def _proc_status_kb(field: str):
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_high_water() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def child(variant: str, backend: str, layers: int, width: int) -> dict:
    """Build the model, run its first call under `variant`, return the measurement."""
    import gc

    import torch
    import torch._dynamo

    import torch_jit_cache as tjc
    from torch_jit_cache.testing import models as zoo

    if backend == "inductor":
        # Imported before the measurement for every variant: torch.compile() imports inductor
        # when it is called (before the first call), tjc when the first graph reaches the backend
        # (inside it). Those modules (~35 MB of RSS) are a once-per-process cost, not the compile's.
        import torch._inductor.compile_fx  # noqa: F401
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    torch.manual_seed(0)
    config = zoo.GPTConfig(block_size=64, vocab_size=256, n_layer=layers, n_head=max(1, width // 128),
                           n_embd=width, dropout=0.0, bias=True)
    model = zoo.GPT(config).to(device).eval()
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    idx = torch.randint(0, config.vocab_size, (1, config.block_size), device=device)
    if variant == "eager":
        fn = model
    elif variant == "tjc":
        fn = tjc.compile(model, backend=backend)
    else:
        fn = torch.compile(model, backend=backend)
    with torch.no_grad():
        gc.collect()
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
        else:
            before = _proc_status_kb("VmRSS") * 1024
            hwm_reset = _reset_high_water()
        t0 = time.perf_counter()
        out = fn(idx)
        if cuda:
            torch.cuda.synchronize()
        first_s = time.perf_counter() - t0
        if cuda:
            peak, how = torch.cuda.max_memory_allocated(), "cuda.max_memory_allocated"
        elif hwm_reset:
            peak, how = _proc_status_kb("VmHWM") * 1024, "VmHWM"
        else:   # the high-water mark since the process started: model construction included
            import resource
            peak, how = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "ru_maxrss"
    logits = out[0].float()
    return dict(variant=variant, backend=backend, device=device, how=how, params_mb=params / MB,
                first_s=first_s, peak_mb=(peak - before) / MB, checksum=float(logits.sum()),
                torch=torch.__version__)


def run_child(variant, backend, opts) -> dict:
    # A fresh inductor cache per child: a graph compiled by an earlier run (or variant) would
    # otherwise load from disk, and its compile's memory would not be measured.
    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS="1", TORCHINDUCTOR_CACHE_DIR=tempfile.mkdtemp())
    cmd = [sys.executable, __file__, "--child", variant, "--backend", backend,
           "--layers", str(opts.layers), "--width", str(opts.width)]
    return run_json_child(cmd, env, f"{variant}[{backend}]")


def main():
    opts = options(__doc__, "compile_memory", extra=lambda p: (
        p.add_argument("--layers", type=int, default=4),
        p.add_argument("--width", type=int, default=1536),
        p.add_argument("--no-inductor", action="store_true", help="backend='eager' rows only"),
        p.add_argument("--child", help=argparse.SUPPRESS),   # one variant, in this subprocess
        p.add_argument("--backend", default="eager", help=argparse.SUPPRESS)))
    if opts.child:
        print(json.dumps(child(opts.child, opts.backend, opts.layers, opts.width)))
        return
    if opts.quick:
        opts.layers, opts.width = 2, 768
    backends = ["eager"] if opts.no_inductor else ["eager", "inductor"]
    eager = run_child("eager", "eager", opts)
    rows = [eager]
    _print_row(eager, eager, first=True)
    for backend in backends:
        for variant in ("tjc", "torch.compile"):
            rows.append(run_child(variant, backend, opts))
            _print_row(rows[-1], eager, first=False)
    params = eager["params_mb"]
    print(f"peak: the first call's {eager['how']} high-water above the memory before the call, MB; "
          f"params: {params:.0f} MB on {eager['device']}")
    verdicts = []
    for backend in backends:
        ours = next(r for r in rows if r["variant"] == "tjc" and r["backend"] == backend)
        theirs = next(r for r in rows if r["variant"] == "torch.compile" and r["backend"] == backend)
        above, tc_above = ours["peak_mb"] - eager["peak_mb"], theirs["peak_mb"] - eager["peak_mb"]
        met = above <= GOAL_SHARE * params and above < tc_above
        verdicts.append(dict(backend=backend, tjc_above_mb=above, tc_above_mb=tc_above, met=met))
        print(f"goal [{backend}]: tjc within {GOAL_SHARE:.0%} of the parameters' size "
              f"({GOAL_SHARE * params:.0f} MB) above eager, better than torch.compile: "
              f"tjc +{above:.0f} MB, torch.compile +{tc_above:.0f} MB: {'met' if met else 'NOT met'}")
    write_results(opts.json, eager["torch"], layers=opts.layers, width=opts.width, rows=rows, goal=verdicts)


def _print_row(r, eager, first):
    if first:
        print_head(f"{'variant':<15}{'backend':<10}{'params MB':>10}{'first s':>9}{'peak MB':>9}"
                   f"{'above eager':>13}{'% params':>10}{'same':>6}")
    above = r["peak_mb"] - eager["peak_mb"]
    same = abs(r["checksum"] - eager["checksum"]) <= 1e-3 * max(1.0, abs(eager["checksum"]))
    print(f"{r['variant']:<15}{r['backend']:<10}{r['params_mb']:>10.0f}{r['first_s']:>9.2f}{r['peak_mb']:>9.0f}"
          f"{above:>+13.0f}{100 * above / r['params_mb']:>+9.1f}%{'y' if same else 'N':>6}", flush=True)


if __name__ == "__main__":
    main()
