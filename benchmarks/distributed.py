"""Distributed training: DDP and FSDP2 steps, eager vs tjc.compile vs torch.compile (issue 26).

Two processes (ranks) join a gloo group over 127.0.0.1 (--nccl: one process per GPU, NCCL) and
train a small GPT LM (torch_jit_cache/testing/models.py's nanoGPT) a few AdamW steps, each rank on
its own batch, in these variants:

- DDP: eager DDP(model); tjc.compile(DDP(model)) and torch.compile(DDP(model)), backends
  "aot_eager" and "inductor" (the default 25 MB bucket: one bucket for this model);
- DDP with several buckets (bucket_cap_mb a fifth of the parameters' size): the same rows, where
  tjc (backends/ddp_split.py) and torch.compile (its DDPOptimizer) cut the graph at the buckets;
- FSDP2 (torch.distributed.fsdp.fully_shard, each block then the root): eager; compiled outside
  (the fully_shard-ed model compiled whole); per block (each block compiled in place, then
  fully_shard-ed: torchtitan's order). Where this torch cannot shard on the device, a row says why.

Per variant (rank 0's clock): the first step (trace + compile + run), the median step of the
steps after a warm-up; tjc's graphs / breaks / frames run uncompiled / DDP pieces (tjc.stats())
and torch.compile's graphs / breaks (torch._dynamo's counters) / backend compiles (a counter
wrapping the backend: DDPOptimizer compiles one per piece); and the losses of every step on both
ranks against the eager row of the same group ("=": bit for bit; otherwise the max abs diff).
--quick: a 2-layer model, 5 timed steps, and inductor rows in the plain DDP group only (about 3
minutes on 2 cores).

Every inductor variant compiles into an empty inductor cache of its own (no kernel reused from an
earlier row), after a warm-up compile of a small function has paid inductor's one-time start. Each collective is bounded by the group's timeout and the two processes by
--timeout, so a desync fails the run instead of hanging it.

Prints one table and writes benchmarks/results/distributed.json.

Usage: python benchmarks/distributed.py [--quick] [--nccl] [--backends aot_eager,inductor] [--timeout S]
"""
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._dynamo.testing  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import ranks as ranks_of  # noqa: E402
# The zoo's nanoGPT: traced as a user's model is, also under DDP's forward (trace_rules.MODULE_RULES).
from torch_jit_cache.testing import models as zoo  # noqa: E402
from harness import options, print_head, write_results  # noqa: E402


# The model and the steps: --quick, then the full run. "ddp buckets" trains a wider model:
# torch.compile's DDPOptimizer asserts that DDP's first bucket (1 MB) is no larger than
# bucket_cap_mb, so BUCKETS buckets need BUCKETS MB of parameters or more.
SIZES = {
    True: dict(config=dict(n_layer=2, n_head=2, n_embd=32, block_size=32, vocab_size=128),
               buckets_config=dict(n_layer=2, n_head=2, n_embd=256, block_size=32, vocab_size=128), batch=4,
               warmup=2, steps=5),
    False: dict(config=dict(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512),
                buckets_config=dict(n_layer=4, n_head=4, n_embd=256, block_size=128, vocab_size=512), batch=8,
                warmup=3, steps=20),
}
# The groups, in run order; each compares its rows' losses with the eager row named here.
GROUPS = (("ddp", "ddp"), ("ddp buckets", "ddp buckets"), ("fsdp2 outside", "fsdp2 outside"),
          ("fsdp2 per block", "fsdp2 outside"))
BUCKETS = 5            # "ddp buckets": bucket_cap_mb = the parameters' bytes / BUCKETS
GROUP_TIMEOUT_S = 300  # a collective waits at most this (the other rank may still be compiling)


# -- one rank --------------------------------------------------------------------------------------

def batch(size, device, rank, group):
    """This rank's tokens and targets (ranks train on different data, as DDP and FSDP do)."""
    g = torch.Generator().manual_seed(1000 + rank)
    cfg = size["buckets_config" if group == "ddp buckets" else "config"]
    shape = (size["batch"], cfg["block_size"])
    idx = torch.randint(0, cfg["vocab_size"], shape, generator=g)
    targets = torch.randint(0, cfg["vocab_size"], shape, generator=g)
    return idx.to(device), targets.to(device)


def compiled(module, compiler, backend, tc_counter):
    """module compiled whole (a wrapper), or as it is for the eager rows."""
    if compiler == "tjc":
        return tjc.compile(module, backend=backend)
    if compiler == "torch.compile":
        return torch.compile(module, backend=tc_counter)
    return module


def compile_in_place(module, compiler, backend, tc_counter):
    if compiler == "tjc":
        tjc.compile_(module, backend=backend)
    elif compiler == "torch.compile":
        module.compile(backend=tc_counter)


def build(group, compiler, backend, size, device, tc_counter):
    """(the callable a step calls, the parameters to optimise, the DDP module or None)."""
    torch.manual_seed(0)   # the same model on every rank, as DDP and FSDP require
    model = zoo.GPT(zoo.GPTConfig(**size["buckets_config" if group == "ddp buckets" else "config"])).to(device)
    if group.startswith("ddp"):
        cap = 25.0
        if group == "ddp buckets":
            cap = sum(p.numel() * p.element_size() for p in model.parameters()) / BUCKETS / 2**20
        ddp = DDP(model, bucket_cap_mb=cap)
        return compiled(ddp, compiler, backend, tc_counter), list(ddp.parameters()), ddp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.transformer.h:
        if group == "fsdp2 per block":
            compile_in_place(block, compiler, backend, tc_counter)
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    if group == "fsdp2 per block":
        return model, list(model.parameters()), None
    return compiled(model, compiler, backend, tc_counter), list(model.parameters()), None


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train(group, compiler, backend, size, device, rank, cache_root):
    """One variant: its step times, losses and compile counts on this rank."""
    tjc.reset()
    torch._dynamo.reset()
    counters.clear()
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-", dir=cache_root)
    tc_counter = torch._dynamo.testing.CompileCounterWithBackend(backend) if compiler == "torch.compile" else None
    run, params, ddp = build(group, compiler, backend, size, device, tc_counter)
    opt = torch.optim.AdamW(params, lr=1e-3)
    idx, targets = batch(size, device, rank, group)
    times, losses = [], []
    dist.barrier()
    for _ in range(1 + size["warmup"] + size["steps"]):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = run(idx, targets)
        loss.backward()
        opt.step()
        sync(device)
        times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    out = dict(first_s=times[0], step_ms=statistics.median(times[1 + size["warmup"]:]) * 1e3, losses=losses)
    if ddp is not None:   # DDP rebuilds its buckets after the first step, by bucket_cap_mb
        sizes = ddp._get_ddp_logging_data().get("rebuilt_bucket_sizes", "")
        out.update(bucket_cap_mb=ddp.bucket_bytes_cap / 2**20, buckets=len(str(sizes).split(",")) if sizes else None)
    if compiler == "tjc":
        out["tjc_stats"] = tjc.stats()
    elif compiler == "torch.compile":
        out["tc"] = dict(graphs=counters["stats"]["unique_graphs"], breaks=sum(counters["graph_break"].values()),
                         backend_compiles=tc_counter.frame_count, break_reasons=dict(counters["graph_break"]))
    return out


def variants(backends, quick):
    """(group, compiler, backend) in run order: each group's eager row first. --quick compiles
    with inductor (cold, the slow part on 2 cores) in the plain DDP group only."""
    out = []
    for group, _ in GROUPS:
        if group != "fsdp2 per block":
            out.append((group, "eager", None))
        for backend in backends:
            if not (quick and backend == "inductor" and group != "ddp"):
                out += [(group, "tjc", backend), (group, "torch.compile", backend)]
    return out


def warm_inductor(cache_root):
    """Compiles a small function with inductor once in this process, so that the first inductor
    row's first step does not also pay inductor's one-time start (its imports, the C++ compiler's
    checks, in-process code caches that outlive the variant's empty cache folder): measured without
    this, the first inductor row took 52-67 s and the next 14 s, whichever compiler went first."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="inductor-warm-", dir=cache_root)
    layer = torch.nn.Linear(8, 8)
    torch.compile(lambda x: torch.nn.functional.gelu(layer(x)).sum(), backend="inductor")(
        torch.ones(4, 8, requires_grad=True)).backward()
    torch._dynamo.reset()


def rank_main(opts):
    rank, world = opts.rank, opts.world
    size = SIZES[opts.quick]
    if opts.nccl:
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    dist.init_process_group("nccl" if opts.nccl else "gloo", init_method=f"tcp://127.0.0.1:{opts.port}",
                            rank=rank, world_size=world, timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))
    warnings.simplefilter("ignore")
    results, skip = [], {}
    if "inductor" in opts.backends.split(","):
        warm_inductor(opts.cache_root)
    try:
        for group, compiler, backend in variants(opts.backends.split(","), opts.quick):
            row = dict(group=group, compiler=compiler, backend=backend)
            if group.startswith("fsdp2") and "fsdp2" in skip:
                row["error"] = skip["fsdp2"]
            else:
                try:
                    row.update(train(group, compiler, backend, size, device, rank, opts.cache_root))
                except Exception as e:
                    row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
                    row["traceback"] = traceback.format_exc()[-3000:]
                    if group == "fsdp2 outside" and compiler == "eager":   # this torch cannot shard here
                        skip["fsdp2"] = "skipped: eager FSDP2 failed: " + row["error"]
            results.append(row)
            with open(opts.out + ".tmp", "w") as f:   # whole or absent, even if the rank is killed
                json.dump(results, f)
            os.replace(opts.out + ".tmp", opts.out)
    finally:
        dist.destroy_process_group()


# -- the driver ------------------------------------------------------------------------------------

def run_ranks(opts, world, folder):
    """Starts the ranks, bounded by opts.timeout; returns each rank's rows and why it ended."""
    (port,) = ranks_of.free_ports(1)
    caches = [folder / f"inductor{r}" for r in range(world)]   # each rank and variant: an empty cache
    for c in caches:
        c.mkdir()
    flags = (["--quick"] if opts.quick else []) + (["--nccl"] if opts.nccl else [])

    def argv_of(r, out):
        return ["--rank", r, "--world", world, "--port", port, "--out", out, "--cache-root", caches[r],
                "--backends", opts.backends, *flags]
    ranks = ranks_of.run_ranks(__file__, world, argv_of, folder, opts.timeout,
                               omp_threads=os.environ.get("OMP_NUM_THREADS", "1"))
    return [dict(rows=rank["results"] or [], why=rank["why"], log=rank["log"]) for rank in ranks]


def compare(rows_by_rank, eager_of):
    """Each row of rank 0, with its losses (all ranks) against its group's eager row."""
    merged = []
    for i, row in enumerate(rows_by_rank[0]):
        row = dict(row)
        others = [rows[i] for rows in rows_by_rank[1:] if i < len(rows)]
        row["losses_all_ranks"] = [row.get("losses")] + [o.get("losses") for o in others]
        for o in others:
            if "error" in o and "error" not in row:
                row["error"] = "rank 1+: " + o["error"]
        base = eager_of.get(dict(GROUPS)[row["group"]])
        if "error" not in row and base is not None and row["compiler"] != "eager":
            got = [x for losses in row["losses_all_ranks"] for x in (losses or [])]
            want = [x for losses in base["losses_all_ranks"] for x in (losses or [])]
            row["loss_max_abs_diff"] = max(abs(a - b) for a, b in zip(got, want)) if len(got) == len(want) else None
        if row["compiler"] == "eager" and "error" not in row:
            eager_of[row["group"]] = row
        merged.append(row)
    return merged


def main():
    opts = options(__doc__, "distributed", extra=lambda p: (
        p.add_argument("--nccl", action="store_true", help="one process per GPU, NCCL (else 2 on the CPU, gloo)"),
        p.add_argument("--backends", default="aot_eager,inductor", help="comma-separated compile backends"),
        p.add_argument("--timeout", type=float, default=None, help="seconds for the whole run (both processes)"),
        p.add_argument("--rank", type=int, default=None, help=argparse_hidden()),
        p.add_argument("--world", type=int, default=2, help=argparse_hidden()),
        p.add_argument("--port", type=int, default=None, help=argparse_hidden()),
        p.add_argument("--out", default=None, help=argparse_hidden()),
        p.add_argument("--cache-root", default=None, help=argparse_hidden())))
    if opts.rank is not None:
        rank_main(opts)
        return
    world = torch.cuda.device_count() if opts.nccl else 2
    if opts.nccl and world < 2:
        raise SystemExit("--nccl needs at least 2 CUDA devices")
    if opts.timeout is None:
        opts.timeout = 420 if opts.quick else 1800
    size = SIZES[opts.quick]
    with tempfile.TemporaryDirectory(prefix="tjc-dist-") as folder:
        ranks = run_ranks(opts, world, Path(folder))
    for r, rank in enumerate(ranks):
        if rank["why"] != "rc 0":
            print(f"rank {r}: {rank['why']}\n{rank['log']}", file=sys.stderr)
    rows = compare([rank["rows"] for rank in ranks], {})
    _print_table(rows, size, world, opts)
    write_results(opts.json, torch.__version__, world=world, dist_backend="nccl" if opts.nccl else "gloo",
                  sizes=size, rows=rows, ranks_ended=[rank["why"] for rank in ranks])


def argparse_hidden():
    import argparse

    return argparse.SUPPRESS


def _counts(r):
    if "tjc_stats" in r:
        s = r["tjc_stats"]
        return f"{s['graphs']}/{s['graph_breaks']}/{s['fallbacks']}/{s['ddp_pieces']}"
    if "tc" in r:
        return f"{r['tc']['graphs']}/{r['tc']['breaks']}/-/{r['tc']['backend_compiles']}"
    return "-"


def _print_table(rows, size, world, opts):
    cfg = size["config"]
    print(f"{world} ranks, {'nccl' if opts.nccl else 'gloo'}; nanoGPT {cfg['n_layer']}x{cfg['n_embd']}, "
          f"batch {size['batch']}x{cfg['block_size']} per rank; AdamW; median of {size['steps']} steps after "
          f"{1 + size['warmup']}")
    print_head(f"{'group':<17}{'compiler':<15}{'backend':<11}{'step ms':>9}{'first s':>9}{'g/b/unc/pieces':>16}"
               f"{'losses':>10}")
    for r in rows:
        if r["compiler"] == "eager" and r.get("buckets") is not None and r["group"] == "ddp buckets":
            cfg = size["buckets_config"]
            print(f"(ddp buckets: nanoGPT {cfg['n_layer']}x{cfg['n_embd']}, bucket_cap_mb {r['bucket_cap_mb']:.2f}: "
                  f"{r['buckets']} DDP buckets)")
        head = f"{r['group']:<17}{r['compiler']:<15}{r['backend'] or '-':<11}"
        if "error" in r:
            print(head + r["error"])
            continue
        diff = r.get("loss_max_abs_diff")   # None: no eager row to compare with, or fewer steps
        loss = "" if r["compiler"] == "eager" else "?" if diff is None else "=" if diff == 0 else f"{diff:.1e}"
        print(f"{head}{r['step_ms']:>9.1f}{r['first_s']:>9.2f}{_counts(r):>16}{loss:>10}")
    print("step ms: median step (forward, backward, AdamW) of rank 0; first s: the first step (compiles);")
    print("g/b/unc/pieces: tjc: graphs/breaks/frames uncompiled/DDP pieces (tjc.stats()); torch.compile:")
    print("unique graphs/breaks/-/backend compiles (DDPOptimizer: one per piece); losses: every step, both ranks,")
    print("against the group's eager row ('=' bit for bit, else max abs diff)")


if __name__ == "__main__":
    main()
