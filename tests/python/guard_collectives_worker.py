"""One rank of test_guard_collectives.py: joins a 2-process gloo group over 127.0.0.1 and calls a
compiled function whose guards miss on rank 1 only, with guard collectives off and on (also for a
function that all-reduces), then once more after the default group was destroyed and made again
(on a second port). Writes what each
scenario saw (compiles, recompiles, forced misses, whether outputs equal eager's) to a JSON file.

    python guard_collectives_worker.py RANK WORLD PORT SECOND_PORT OUT.json

Every collective is bounded by the group's timeout, so a rank whose vote finds no partner fails
(gloo raises) instead of hanging; the test bounds the processes themselves too."""
import datetime
import gc
import json
import os
import sys
import traceback

import torch
import torch.distributed as dist

import torch_jit_cache as tjc
from torch_jit_cache.runtime import guard_collectives
from torch_jit_cache.testing import CompileCounterWithBackend

GROUP_TIMEOUT_S = 20
RANK = WORLD = None


def fn(x):
    return x * 2 + 1


def reduced_fn(x):
    s = x.sum(0)          # the collective's size does not depend on the batch
    dist.all_reduce(s)    # a node of the graph: votes and the graph's collectives interleave
    return x * s


def apart(enabled, fn=fn):
    """Three calls; rank 1's batch changes at the second: its guards miss there, rank 0's hit."""
    tjc.reset()
    previous = tjc.set_enable_guard_collectives(enabled)
    counter = CompileCounterWithBackend("eager")
    f = tjc.compile(fn, backend=counter)
    sizes = [2, 2, 2] if RANK == 0 else [2, 3, 3]
    equal = []
    for n in sizes:
        x = torch.arange(n * 4, dtype=torch.float32).reshape(n, 4) + 100 * RANK
        equal.append(torch.equal(f(x), fn(x)))
    stats = tjc.stats()
    was_enabled = tjc.set_enable_guard_collectives(False)
    return {"previous": previous, "was_enabled": was_enabled, "equal": equal, "compiles": counter.frame_count,
            "recompiles": stats["recompiles"], "forced_misses": stats["forced_misses"]}


def init(port):
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=RANK, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))


def main():
    global RANK, WORLD
    rank, world, port, second_port, out_path = sys.argv[1:]
    RANK, WORLD = int(rank), int(world)
    results = {}

    def record(name, scenario):
        try:
            results[name] = scenario()
        except Exception:
            results[name] = {"error": traceback.format_exc()}
        with open(out_path + ".tmp", "w") as f:   # whole or absent, even if the rank is killed
            json.dump(results, f)
        os.replace(out_path + ".tmp", out_path)

    # Not initialized: the vote is the local lookup's result (no collective to pair).
    record("uninitialized", lambda: apart(True))
    init(port)
    record("off", lambda: apart(False))
    record("on", lambda: apart(True))
    record("on_with_a_collective", lambda: apart(True, reduced_fn))
    vote_group = guard_collectives._groups[1]
    results["vote_group_kept"] = vote_group() is not None   # torch.distributed holds it while it lives
    dist.destroy_process_group()
    gc.collect()
    init(second_port)

    def reinit():
        result = apart(True)
        result["old_vote_group_freed"] = vote_group() is None
        result["new_vote_group"] = guard_collectives._groups[0]() is dist.group.WORLD
        return result

    record("reinit", reinit)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
