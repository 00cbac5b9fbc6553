"""The per-call cost of guard collectives (tjc.set_enable_guard_collectives, issue 26).

Two processes (ranks) join a gloo group over 127.0.0.1 and call a trivial function (`x + 1` on a
4-element tensor) in a loop: eagerly, compiled (backend "eager") with guard collectives off, and
compiled with them on (each call votes: one all-reduce of a one-element tensor on a gloo group);
then the same two rows under torch.compile (torch.compiler.set_enable_guard_collectives).
For reference, the collective a vote issues, alone, and the all_gather_object of a bool that
torch.compile's guard collectives issue instead. Each row is the median over --repeats runs of --calls calls, both ranks starting each run together
(a barrier); rank 0's clock. The difference of the last two rows is what a vote costs.

Prints one table and writes benchmarks/results/guard_collectives.json.

Usage: python benchmarks/guard_collectives.py [--calls N] [--repeats R] [--timeout S]
"""
import argparse
import datetime
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def fn(x):
    return x + 1


def per_call_us(f, x, calls, repeats):
    import torch.distributed as dist

    f(x)   # compiled (and voting from the second call on)
    f(x)
    runs = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        for _ in range(calls):
            f(x)
        runs.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(runs)


def rank_main(rank, port, out, calls, repeats):
    import torch
    import torch.distributed as dist

    import torch_jit_cache as tjc

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    x = torch.ones(4)
    group = dist.new_group(backend="gloo")

    def all_reduce(flag):   # what a vote issues, alone
        dist.all_reduce(flag, op=dist.ReduceOp.MIN, group=group)

    def all_gather_object(hit):   # torch.compile's vote
        votes = [None] * 2
        dist.all_gather_object(votes, hit, group=group)

    rows = {"eager": per_call_us(fn, x, calls, repeats),
            "one all_reduce of an int32 (a vote's collective)": per_call_us(all_reduce, torch.ones(1, dtype=torch.int32),
                                                                            calls, repeats),
            "one all_gather_object of a bool (torch.compile's)": per_call_us(all_gather_object, True, calls, repeats)}
    for name, enabled in (("tjc.compile, guard collectives off", False), ("tjc.compile, guard collectives on", True)):
        tjc.reset()
        tjc.set_enable_guard_collectives(enabled)
        rows[name] = per_call_us(tjc.compile(fn, backend="eager"), x, calls, repeats)
        rows[name + ": recompiles"] = tjc.stats()["recompiles"]
    tjc.set_enable_guard_collectives(False)
    for name, enabled in (("torch.compile, guard collectives off", False), ("torch.compile, guard collectives on", True)):
        torch._dynamo.reset()
        torch.compiler.set_enable_guard_collectives(enabled)
        rows[name] = per_call_us(torch.compile(fn, backend="eager"), x, calls, repeats)
    torch.compiler.set_enable_guard_collectives(False)
    dist.destroy_process_group()
    if rank == 0:
        pathlib.Path(out).write_text(json.dumps(rows, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--rank", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rank is not None:
        rank_main(args.rank, args.port, args.out, args.calls, args.repeats)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    results = ROOT / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    out = results / "guard_collectives.json"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, __file__, "--rank", str(r), "--port", str(port), "--out", str(out),
                               "--calls", str(args.calls), "--repeats", str(args.repeats)], env=env)
             for r in range(2)]
    deadline = time.monotonic() + args.timeout
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            break
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    if any(p.returncode != 0 for p in procs):
        sys.exit(f"a rank failed: return codes {[p.returncode for p in procs]}")
    rows = json.loads(out.read_text())
    print(f"{'2 ranks, gloo, rank 0':52s} {'us per call':>12s}")
    for name, value in rows.items():
        print(f"{name:52s} {value:12.1f}" if isinstance(value, float) else f"{name:52s} {value:12d}")
    for compiler in ("tjc.compile", "torch.compile"):
        on, off = rows[f"{compiler}, guard collectives on"], rows[f"{compiler}, guard collectives off"]
        print(f"{compiler + ': a vote costs (on - off)':52s} {on - off:12.1f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
