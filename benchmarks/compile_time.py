"""Compile time of N identical blocks: tjc.compile against torch.compile (issue 23's bars).

For N in 6, 12, 24 transformer-style blocks (LayerNorm, attention-free MLP, residual; width 64),
each variant runs in a fresh subprocess with its own empty inductor cache folder:
  regional   every block compiled on its own (`model.layers[i] = compile(block)`), then one
             forward: the first pass's seconds, compile included;
  whole      the model compiled as one (`compile(model)`), one forward;
and, for regional N=12, a second process on the same (now warm) inductor cache: the warm start.
  functional, warm process start: the same blocks as a plain function of (x, parameters) compiled
             whole; per compiler a fresh cache folder (inductor's, and tjc's on-disk cache,
             TJC_CACHE_DIR), a first process (cold) then a second (warm): the second's first call,
             and whether tjc loaded its entry from disk without tracing (`disk hits`). The regional
             warm row loads the block's entry from disk too (modules are guarded by value).
  floor      (inductor) a fresh process's import of the inductor modules every CPU artifact's code
             imports (async_compile, select_algorithm; they import torch._dynamo): what any
             compiler pays before an inductor graph runs, printed against torch.compile's warm
             first call. A warm start cannot go below it without a loader of its own.
  zoo warm start (`--zoo llama,nanogpt`): a zoo model (torch_jit_cache/testing/models.py, eval, no_grad)
             per compiler in a fresh cache folder: a cold process, then a warm one on the same
             folders (tjc's on-disk cache and inductor's FX graph / AOTAutograd caches), each one's
             first call (compile or load included); and the anchor, torch's own precompiled
             artifact (`torch.compile(model, fullgraph=True)` AOT-compiled, saved, then loaded by
             a third process with `_load_aot_compiled_module`): its load plus first call, or the
             reason torch refuses to save it (an ID_MATCH guard it cannot serialize).
Every child gets its own empty TJC_CACHE_DIR unless it is the warm one.
Each row says whether the output equals eager's, and tjc's rows the graphs it traced and how many
of them shared an earlier graph's backend compile (backends/sharing.py).

Bars (issue 23): tjc's first pass <= 0.5x torch.compile's; tjc's warm first call <= 0.5x
torch.compile's warm first call. The script prints whether each is met.

    .venv/bin/python benchmarks/compile_time.py [--quick] [--backend inductor] [--warm-start-only]
"""
import argparse
import json
import os
import sys
import tempfile
import time

from harness import options, print_head, run_json_child, write_results

GOAL_RATIO = 0.5


def functional_forward(x, params):
    """The blocks of `child` as a plain function of tensors: what a later process can load from
    tjc's on-disk cache (guards on tensors and named functions only)."""
    import torch
    for ln_w, ln_b, w1, b1, w2, b2 in params:
        h = torch.nn.functional.layer_norm(x, (x.shape[-1],), ln_w, ln_b)
        x = x + torch.nn.functional.linear(torch.nn.functional.gelu(torch.nn.functional.linear(h, w1, b1)), w2, b2)
    return x


def child(variant: str, compiler: str, blocks: int, backend: str) -> dict:
    import torch

    import torch_jit_cache as tjc

    from identical_blocks import Model

    if variant == "zoo":
        return _zoo_child(compiler, blocks, backend)
    blocks = int(blocks)
    if variant == "floor":
        t0 = time.perf_counter()
        import torch._inductor.async_compile  # noqa: F401
        import torch._inductor.select_algorithm  # noqa: F401
        return dict(variant=variant, compiler="none", seconds=time.perf_counter() - t0, torch=torch.__version__)
    torch.manual_seed(0)
    model = Model(blocks).eval()
    x = torch.randn(4, 16, 64)
    with torch.no_grad():
        expected = model(x)
    compile_fn = (lambda m: tjc.compile(m, backend=backend)) if compiler == "tjc" else \
        (lambda m: torch.compile(m, backend=backend))
    with torch.no_grad():
        t0 = time.perf_counter()
        if variant == "regional":
            for i, block in enumerate(model.layers):
                model.layers[i] = compile_fn(block)
            out = model(x)
        elif variant == "functional":
            params = [tuple(t.detach() for t in (b.ln.weight, b.ln.bias, b.fc1.weight, b.fc1.bias, b.fc2.weight,
                                                 b.fc2.bias)) for b in model.layers]
            out = compile_fn(functional_forward)(x, params)
        else:
            out = compile_fn(model)(x)
        seconds = time.perf_counter() - t0
    stats = tjc.stats()
    return dict(variant=variant, compiler=compiler, blocks=blocks, backend=backend, seconds=seconds,
                same=bool(torch.allclose(out, expected, rtol=1e-4, atol=1e-4)),
                graphs=stats["graphs"] if compiler == "tjc" else None,
                shared=stats["shared_backend_compiles"] if compiler == "tjc" else None,
                disk_hits=stats["disk_cache_hits"] if compiler == "tjc" else None,
                torch=torch.__version__)


def _zoo_child(compiler: str, model_name: str, backend: str) -> dict:
    """One process of the zoo warm start: build `model_name`, then time its first compiled call
    (`compiler`: tjc, torch, or aot-save / aot-load for torch's precompiled artifact)."""
    import torch

    import torch_jit_cache as tjc
    from torch_jit_cache.testing import models as zoo

    torch.manual_seed(0)
    model, inputs = zoo.build(model_name)
    model.eval()
    with torch.no_grad():
        expected = zoo.tensors(model(*inputs.args, **inputs.kwargs))
    row = dict(variant="zoo", model=model_name, compiler=compiler, backend=backend, torch=torch.__version__)
    artifact = os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "aot.bin")
    t0 = time.perf_counter()
    with torch.no_grad():
        if compiler.startswith("aot"):
            from torch._dynamo.aot_compile import ModelInput
            torch._dynamo.config.enable_aot_compile = True
            compiled = torch.compile(model, fullgraph=True, backend=backend)
            if compiler == "aot-save":
                try:
                    compiled._aot_compile([ModelInput(args=inputs.args, kwargs=inputs.kwargs, contexts=[])])
                    compiled._save_aot_compiled_module(artifact)
                except Exception as e:  # noqa: BLE001 - the anchor's own refusal is a result
                    return dict(row, seconds=None, refused=f"{type(e).__name__}: {e}"[:120])
                return dict(row, seconds=time.perf_counter() - t0)
            with open(artifact, "rb") as f:
                compiled._load_aot_compiled_module(f.read())
        elif compiler == "tjc":
            compiled = tjc.compile(model, backend=backend)
        else:
            compiled = torch.compile(model, backend=backend)
        out = zoo.tensors(compiled(*inputs.args, **inputs.kwargs))
    seconds = time.perf_counter() - t0
    same = len(out) == len(expected) and all(torch.allclose(a, b, rtol=1e-4, atol=1e-4) for a, b in zip(out, expected))
    stats = tjc.stats()
    return dict(row, seconds=seconds, same=bool(same), graphs=stats["graphs"] if compiler == "tjc" else None,
                disk_hits=stats["disk_cache_hits"] if compiler == "tjc" else None)


def _zoo_warm_start(names, backend) -> list:
    """Per zoo model: cold and warm first call of tjc and torch.compile, and the anchor."""
    print_head(f"{'model':<10}{'start':<7}{'tjc s':>8}{'torch.compile s':>17}{'ratio':>8}{'same':>6}"
               f"{'tjc traces':>12}{'disk hits':>10}")
    rows = []
    for name in names:
        pair = {}
        for c in ("tjc", "torch"):
            folder = tempfile.mkdtemp()
            pair[c] = [run_child("zoo", c, name, backend, folder), run_child("zoo", c, name, backend, folder)]
        for i, start in enumerate(("cold", "warm")):
            ours, theirs = pair["tjc"][i], pair["torch"][i]
            same = "y" if ours["same"] and theirs["same"] else "N"
            print(f"{name:<10}{start:<7}{ours['seconds']:>8.2f}{theirs['seconds']:>17.2f}"
                  f"{ours['seconds'] / theirs['seconds']:>8.2f}{same:>6}{ours['graphs']:>12}{ours['disk_hits']:>10}",
                  flush=True)
            ours["start"] = theirs["start"] = start
            rows += [ours, theirs]
        folder = tempfile.mkdtemp()
        saved = run_child("zoo", "aot-save", name, backend, folder)
        if saved.get("refused"):
            print(f"{name:<10}{'anchor':<7}{'':>8}{'refused':>17}   (torch's precompile: {saved['refused']})", flush=True)
            rows.append(saved)
            continue
        anchor = run_child("zoo", "aot-load", name, backend, folder)
        warm = pair["tjc"][1]
        print(f"{name:<10}{'anchor':<7}{warm['seconds']:>8.2f}{anchor['seconds']:>17.2f}"
              f"{warm['seconds'] / anchor['seconds']:>8.2f}{'y' if anchor['same'] else 'N':>6}"
              "   (tjc warm against torch's precompiled artifact, loaded)", flush=True)
        rows.append(dict(anchor, start="anchor"))
    return rows


def run_child(variant, compiler, blocks, backend, cache_dir) -> dict:
    # tjc's on-disk cache beside inductor's: empty for a fresh folder, warm for a second process.
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir, TJC_CACHE_DIR=os.path.join(cache_dir, "tjc"))
    env["TJC_DISABLE_DISK_CACHE"] = "0"   # harness.py turns it off by default
    cmd = [sys.executable, __file__, "--child", variant, "--compiler", compiler, "--blocks", str(blocks),
           "--backend", backend]
    return run_json_child(cmd, env, f"{compiler} {variant} N={blocks}")


def main():
    opts = options(__doc__, "compile_time", extra=lambda p: (
        p.add_argument("--backend", default="inductor"),
        p.add_argument("--warm-start-only", action="store_true", help="only the warm process start rows"),
        p.add_argument("--zoo", help="only the zoo warm start, for these models (comma-separated)"),
        p.add_argument("--child", help=argparse.SUPPRESS),
        p.add_argument("--compiler", help=argparse.SUPPRESS),
        p.add_argument("--blocks", help=argparse.SUPPRESS)))
    if opts.child:
        print(json.dumps(child(opts.child, opts.compiler, opts.blocks, opts.backend)))
        return
    if opts.zoo:
        rows = _zoo_warm_start(opts.zoo.split(","), opts.backend)
        write_results(opts.json, rows[0]["torch"], backend=opts.backend, rows=rows)
        return
    if opts.warm_start_only:
        n = 6 if opts.quick else 12
        print_head(f"{'variant':<16}{'N':>4}{'tjc s':>9}{'torch.compile s':>17}{'ratio':>8}{'same':>6}"
                   f"{'tjc graphs':>12}{'disk hits':>10}")
        rows = _warm_start(n, opts.backend)
        write_results(opts.json, rows[0]["torch"], backend=opts.backend, rows=rows)
        return
    sizes = [6] if opts.quick else [6, 12, 24]
    print_head(f"{'variant':<16}{'N':>4}{'tjc s':>9}{'torch.compile s':>17}{'ratio':>8}{'same':>6}"
               f"{'tjc graphs':>12}{'shared':>8}")
    rows, verdicts = [], []
    for variant in ("regional", "whole"):
        for n in sizes:
            pair = {c: run_child(variant, c, n, opts.backend, tempfile.mkdtemp()) for c in ("tjc", "torch")}
            rows += pair.values()
            _print_pair(variant, n, pair)
            verdicts.append(pair["tjc"]["seconds"] <= GOAL_RATIO * pair["torch"]["seconds"])
    n = sizes[-1] if opts.quick else 12
    warm = {}
    for c in ("tjc", "torch"):
        folder = tempfile.mkdtemp()
        run_child("regional", c, n, opts.backend, folder)      # fills the cache
        warm[c] = run_child("regional", c, n, opts.backend, folder)
    rows += warm.values()
    _print_pair("regional, warm", n, warm)
    rows += _warm_start(n, opts.backend)
    first_met = all(verdicts)
    warm_met = warm["tjc"]["seconds"] <= GOAL_RATIO * warm["torch"]["seconds"]
    print(f"goal: tjc's first pass <= {GOAL_RATIO}x torch.compile's in every row above the warm one: "
          f"{'met' if first_met else 'NOT met'}")
    print(f"goal: tjc's warm first pass <= {GOAL_RATIO}x torch.compile's: {'met' if warm_met else 'NOT met'} "
          f"({warm['tjc']['seconds']:.2f} s against {warm['torch']['seconds']:.2f} s)")
    write_results(opts.json, rows[0]["torch"], backend=opts.backend, rows=rows,
                  goal=dict(first_pass=first_met, warm=warm_met))


def _warm_start(n, backend) -> list:
    """functional, cold then warm process start, per compiler in its own fresh cache folder."""
    cold, warm = {}, {}
    for c in ("tjc", "torch"):
        folder = tempfile.mkdtemp()
        cold[c] = run_child("functional", c, n, backend, folder)
        warm[c] = run_child("functional", c, n, backend, folder)
    for name, pair in (("functional,cold", cold), ("functional,warm", warm)):
        ours, theirs = pair["tjc"], pair["torch"]
        same = "y" if ours["same"] and theirs["same"] else "N"
        print(f"{name:<16}{n:>4}{ours['seconds']:>9.2f}{theirs['seconds']:>17.2f}"
              f"{ours['seconds'] / theirs['seconds']:>8.2f}{same:>6}{ours['graphs']:>12}{ours['disk_hits']:>10}",
              flush=True)
        for row in pair.values():
            row["start"] = name.split(",")[1]
    rows = [*cold.values(), *warm.values()]
    if backend == "inductor":
        floor = run_child("floor", "none", n, backend, tempfile.mkdtemp())
        print(f"{'inductor floor':<16}{n:>4}{floor['seconds']:>9.2f}{warm['torch']['seconds']:>17.2f}"
              f"{floor['seconds'] / warm['torch']['seconds']:>8.2f}   (imports alone, against torch.compile's warm)",
              flush=True)
        rows.append(floor)
    return rows


def _print_pair(variant, n, pair):
    ours, theirs = pair["tjc"], pair["torch"]
    same = "y" if ours["same"] and theirs["same"] else "N"
    print(f"{variant:<16}{n:>4}{ours['seconds']:>9.2f}{theirs['seconds']:>17.2f}"
          f"{ours['seconds'] / theirs['seconds']:>8.2f}{same:>6}{ours['graphs']:>12}{ours['shared']:>8}", flush=True)


if __name__ == "__main__":
    main()
