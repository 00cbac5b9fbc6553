"""Runs a worker script as several processes (ranks) of one process group over 127.0.0.1, for the
tests of torch.distributed (tests/python/test_variables_distributed.py, test_guard_collectives.py)
and benchmarks/distributed.py.

    ranks = run_ranks(worker, world, argv_of, folder, timeout_s)
    # argv_of(rank, out_path) -> the worker's arguments; each rank writes its JSON to out_path
    # -> [{"results": what it wrote ({} if nothing), "why": "rc 0" | "killed after ...",
    #      "log": its last lines}] per rank

Each process is bounded by `timeout_s` (all together), so a rank that desyncs or waits for a
partner that is gone fails the test instead of hanging it; what a rank wrote before that is still
returned, to be checked scenario by scenario."""
import json
import os
import pathlib
import socket
import subprocess
import sys
import time


def free_ports(n: int) -> list:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def run_ranks(worker, world: int, argv_of, folder, timeout_s: float, omp_threads: str = "1") -> list:
    """The worker's folder and this checkout come first on the ranks' path (the package they
    import is this one, whichever environment runs them); OMP_NUM_THREADS=`omp_threads`."""
    worker = pathlib.Path(worker)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(worker.parent), str(pathlib.Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]),
        OMP_NUM_THREADS=omp_threads)
    outs = [folder / f"rank{r}.json" for r in range(world)]
    # Output to files, not pipes: a rank blocked on a full pipe would stall the other's collectives.
    logs = [open(folder / f"rank{r}.log", "w+") for r in range(world)]
    procs = [subprocess.Popen([sys.executable, str(worker), *map(str, argv_of(r, outs[r]))],
                              env=env, stdout=logs[r], stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    deadline = time.monotonic() + timeout_s
    timed_out = False
    for p in procs:
        try:
            p.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    results = []
    for p, out, log in zip(procs, outs, logs):
        log.seek(0)
        text = "\n".join(line for line in log.read().splitlines() if "USDT" not in line)[-3000:]
        log.close()
        seen = json.loads(out.read_text()) if out.exists() else {}
        why = f"killed after {timeout_s} s (a desync?)" if timed_out else f"rc {p.returncode}"
        results.append({"results": seen, "why": why, "log": text})
    return results


def scenario(ranks: list, name: str) -> list:
    """Every rank's result of scenario `name`, failing with the rank's log where one stopped
    before it finished or raised in it."""
    out = []
    for rank, r in enumerate(ranks):
        result = r["results"].get(name)
        assert result is not None, f"rank {rank} stopped before {name} finished ({r['why']}):\n{r['log']}"
        assert "error" not in result, f"rank {rank}, {name}:\n{result['error']}"
        out.append(result)
    return out
