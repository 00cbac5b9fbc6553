"""One rank of test_variables_distributed.py: joins a 2-process gloo group over 127.0.0.1, runs the named
scenarios eagerly and compiled on the same inputs, and writes, after each scenario, what it saw to a
JSON file: the collectives each call issued (counted by torch's profiler: one `c10d::` dispatcher
op per collective, whether dist.* or a functional collective issued it), the values returned, the
graphs compiled and the graph breaks. test_variables_distributed.py compares them with eager's.

    python distributed_worker.py RANK WORLD PORT OUT.json SCENARIO [SCENARIO ...]

Every collective is bounded by the group's timeout, so a rank that issues one collective too many
fails (gloo raises) instead of hanging; the test bounds the processes themselves too."""
import datetime
import functools
import gc
import io
import contextlib
import json
import os
import sys
import time
import traceback
import weakref

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc
from torch.profiler import ProfilerActivity, profile

import torch_jit_cache as tjc
from torch_jit_cache.testing import CompileCounterWithBackend

GROUP_TIMEOUT_S = 20


def collectives(fn, *args):
    """fn(*args) and the names of the collectives it issued."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = fn(*args)
    return out, [e.name for e in prof.events() if e.name.startswith("c10d::")]


def plain(value):
    """A JSON-able copy of what a call returned."""
    if isinstance(value, torch.Tensor):
        return {"tensor": value.detach().tolist(), "dtype": str(value.dtype)}
    if isinstance(value, (tuple, list)):
        return [plain(v) for v in value]
    return value


def run(fn, inputs, backend="eager", dynamic=False, call=None):
    """fn eagerly, then compiled, on copies of each call's inputs (a list of argument tuples).
    `call(f, *args)`, when given, makes the call (and reports what it returns)."""
    result = {}
    for mode in ("eager", "compiled"):
        tjc.reset()
        counter = CompileCounterWithBackend(backend)
        f = fn if mode == "eager" else tjc.compile(fn, backend=counter, dynamic=dynamic)
        calls = []
        dist.barrier()   # not profiled: both ranks start the mode together
        with contextlib.redirect_stdout(io.StringIO()):
            for args in inputs:
                args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
                out, names = collectives(f if call is None else functools.partial(call, f), *args)
                calls.append({"collectives": names, "out": plain(out), "args": plain(args)})
        result[mode] = {"calls": calls, "graphs": counter.frame_count,
                        "breaks": tjc.stats()["graph_breaks"]}
    return result


RANK = WORLD = None


def x_of(n, width=4):
    """Inputs that differ per rank, so a reduction is visible in the values."""
    return torch.arange(n * width, dtype=torch.float32).reshape(n, width) + 100 * RANK


# -- scenarios -------------------------------------------------------------------------------------

def all_reduce_fn(x):
    y = x * 2
    dist.all_reduce(y)
    return y + 1


def first_compile():
    return run(all_reduce_fn, [(x_of(2),)])


def recompile():
    # Both ranks recompile at the third call (a new static size).
    return run(all_reduce_fn, [(x_of(2),), (x_of(2),), (x_of(3),), (x_of(3),)])


def sum_reduce_fn(x):
    s = x.sum(0)          # the collective's size does not depend on the batch
    dist.all_reduce(s)
    return x * s


def recompile_apart():
    # Rank 1's batch changes at the second call: it recompiles there, rank 0 does not.
    sizes = [2, 2, 2] if RANK == 0 else [2, 3, 3]
    return run(sum_reduce_fn, [(x_of(n),) for n in sizes])


def every_collective_fn(x, big):
    y = x + 1
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    gathered = torch.empty(WORLD * x.shape[0], x.shape[1])
    dist.all_gather_into_tensor(gathered, y)
    scattered = torch.empty(big.shape[0] // WORLD, big.shape[1])
    dist.reduce_scatter_tensor(scattered, big * 3)
    b = x * 5
    dist.broadcast(b, src=1)
    rank = dist.get_rank()
    return gathered * (rank + 1), scattered + dist.get_world_size(), b


def every_collective(backend):
    return lambda: run(every_collective_fn, [(x_of(2), x_of(4)), (x_of(2), x_of(4))], backend=backend)


def functional_fn(x):
    a = fc.all_reduce(x * 2, "sum", dist.group.WORLD)
    g = fc.all_gather_tensor(x, 0, dist.group.WORLD)
    name = dist.group.WORLD.group_name
    r = torch.ops._c10d_functional.all_reduce(x + 1, "max", name)
    r = torch.ops._c10d_functional.wait_tensor(r)
    return a + 1, g, r


def functional():
    return run(functional_fn, [(x_of(2),), (x_of(2),)])


def break_between_fn(x):
    y = x * 2
    dist.all_reduce(y)
    print("a graph break", end="")
    z = y + x
    dist.all_reduce(z)
    return z


def break_between():
    return run(break_between_fn, [(x_of(2),), (x_of(2),)])


def async_fn(x):
    y = x * 2
    work = dist.all_reduce(y, async_op=True)
    z = x * 3                 # overlaps with the collective
    work.wait()
    return y + z


def async_op():
    return run(async_fn, [(x_of(2),), (x_of(2),)])


def barrier_fn(x):
    y = x + 1
    dist.barrier()
    return y * 2


def barrier():
    return run(barrier_fn, [(x_of(2),), (x_of(2),)])


def dynamic_fn(x):
    y = x.sum(0)
    dist.all_reduce(y)
    g = torch.empty(WORLD * x.shape[0], x.shape[1])
    dist.all_gather_into_tensor(g, x)
    return x + y, g


def dynamic():
    return run(dynamic_fn, [(x_of(n),) for n in (2, 3, 5)], dynamic=True)


def grad_fn(x, w):
    y = x * 2
    dist.all_reduce(y)      # invisible to autograd, as eager's: y keeps its history
    dist.all_reduce(w)      # a leaf parameter, written in place
    return (y * w).sum()


def backward(f, x):
    x = x.detach().requires_grad_()
    w = torch.nn.Parameter(torch.full((x.shape[1],), RANK + 1.0))
    out = f(x, w)
    out.backward()
    return out, x.grad, w.grad, w.detach()


def gradients(backend):
    return lambda: run(grad_fn, [(x_of(2),), (x_of(2),)], backend=backend, call=backward)


def sgd_steps(run, params: list, local=lambda t: t) -> list:
    """Three SGD steps of `run` (a model of one output per sample) on rank-dependent batches, as
    calls: each step's loss and gradients, then the parameters after (`local`: what this rank holds
    of a tensor, its shard of a DTensor)."""
    opt = torch.optim.SGD(params, lr=0.1)
    calls = []
    dist.barrier()
    for step in range(3):
        opt.zero_grad()
        loss = run(x_of(2) / 100 + step).square().mean()
        loss.backward()
        grads = [None if p.grad is None else local(p.grad).clone() for p in params]
        opt.step()
        calls.append({"collectives": [], "out": plain(loss), "args": plain(grads)})
    calls.append({"collectives": [], "out": plain([local(p).detach() for p in params]), "args": []})
    return calls


def compile_stats(counter) -> dict:
    """What a training scenario reports of the compiles: graphs, breaks, frames run uncompiled,
    backend calls and DDP pieces."""
    stats = tjc.stats()
    return {"graphs": stats["graphs"], "breaks": stats["graph_breaks"], "fallbacks": stats["fallbacks"],
            "backend_calls": counter.frame_count, "pieces": stats["ddp_pieces"]}


class DDPNet(torch.nn.Module):
    """A user's model (its forward is user code the compiler traces) inside DDP."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(4, 4) for _ in range(8)])

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x))
        return x.sum(-1)


def ddp_training(backend):
    """Three SGD steps of DDP(model), eagerly and compiled (tjc.compile(DDP(model))): each step's
    loss, the gradients DDP all-reduced, the parameters after; graphs, breaks and fallbacks."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    def train():
        result = {}
        for mode in ("eager", "compiled"):
            tjc.reset()
            torch.manual_seed(0)   # the same model on every rank, as DDP requires
            # 160-byte buckets: each holds two layers' parameters (80 bytes each), 4 buckets.
            ddp = DDP(DDPNet(), bucket_cap_mb=160 / 2**20)
            counter = CompileCounterWithBackend(backend)
            model = ddp if mode == "eager" else tjc.compile(ddp, backend=counter)
            result[mode] = {"calls": sgd_steps(model, list(ddp.parameters())), **compile_stats(counter)}
        return result
    return train


class FSDPNet(torch.nn.Module):
    """A user's model of two blocks for FSDP2: uneven shards (3 rows over 2 ranks: FSDP2 pads)."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(4, 4)   # the root's own: every block's input requires grad
        self.blocks = torch.nn.ModuleList([FSDPBlock(), FSDPBlock()])
        self.head = torch.nn.Linear(4, 1)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x).squeeze(-1)


class FSDPBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(4, 3)
        self.down = torch.nn.Linear(3, 4)

    def forward(self, x):
        return x + self.down(torch.tanh(self.up(x)))


def fsdp2_training(backend, how):
    """Three SGD steps of a model sharded with fully_shard (each block, then the root), eagerly and
    compiled: "outside" compiles the sharded model whole (tjc.compile(model)); "per_block" compiles
    each block in place before sharding it (torchtitan's order); "no_sync" compiles it whole with
    gradient sync off (set_requires_gradient_sync(False): gradients accumulate unreduced, which the
    graph's all-gather does not reproduce, so FSDP2's hooks run each block). Each step's loss, the
    gradients and the parameters after (each rank's shards), graphs, breaks, fallbacks."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    def train():
        result = {}
        for mode in ("eager", "compiled"):
            tjc.reset()
            torch.manual_seed(0)   # the same model on every rank before sharding
            model = FSDPNet()
            mesh = init_device_mesh("cpu", (WORLD,))
            counter = CompileCounterWithBackend(backend)
            for block in model.blocks:
                if how == "per_block" and mode == "compiled":
                    tjc.compile_(block, backend=counter)
                fully_shard(block, mesh=mesh)
            fully_shard(model, mesh=mesh)
            if how == "no_sync":
                model.set_requires_gradient_sync(False)
            run = tjc.compile(model, backend=counter) if mode == "compiled" and how != "per_block" else model
            calls = sgd_steps(run, list(model.parameters()), local=lambda t: t.to_local())
            result[mode] = {"calls": calls, **compile_stats(counter)}
            # The model, its sharded parameters and the compiled entries go with the last reference
            # (FSDP2's own state and hooks form cycles, freed by the collector, as in eager).
            refs = [weakref.ref(model), weakref.ref(next(model.parameters()))]
            entries = tjc.cache_entries(FSDPNet.forward)
            del model, run, block
            gc.collect()
            result[mode]["alive"] = sum(r() is not None for r in refs) + sum(not e.evicted for e in entries)
            result[mode]["entries"] = len(entries)
        return result
    return train


SCENARIOS = {
    "first_compile": first_compile, "recompile": recompile, "recompile_apart": recompile_apart,
    "every_collective_eager": every_collective("eager"),
    "every_collective_aot_eager": every_collective("aot_eager"),
    "every_collective_inductor": every_collective("inductor"),
    "functional": functional, "break_between": break_between, "async_op": async_op,
    "barrier": barrier, "dynamic": dynamic,
    "gradients_eager": gradients("eager"), "gradients_aot_eager": gradients("aot_eager"),
    "ddp_training_eager": ddp_training("eager"), "ddp_training_aot_eager": ddp_training("aot_eager"),
    "fsdp2_outside_eager": fsdp2_training("eager", "outside"),
    "fsdp2_outside_aot_eager": fsdp2_training("aot_eager", "outside"),
    "fsdp2_per_block_aot_eager": fsdp2_training("aot_eager", "per_block"),
    "fsdp2_no_sync_aot_eager": fsdp2_training("aot_eager", "no_sync"),
}


def initialized_fn(x):
    if dist.is_initialized():
        return x + dist.get_world_size()
    return x - 1


def main():
    global RANK, WORLD
    rank, world, port, out_path, *names = sys.argv[1:]
    RANK, WORLD = int(rank), int(world)
    # is_initialized() is a constant guarded on the default group: compiled before the group
    # exists, the function compiles again once it does.
    counter = CompileCounterWithBackend("eager")
    before_init = tjc.compile(initialized_fn, backend=counter)
    seen_before = before_init(torch.zeros(1)).item()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=RANK,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))
    collectives(torch.ones, 1)   # the profiler's first start costs seconds: not a scenario's
    results = {"is_initialized": {"before": seen_before, "after": before_init(torch.zeros(1)).item(),
                                  "graphs": counter.frame_count}}
    try:
        for name in names:
            start = time.perf_counter()
            try:
                results[name] = SCENARIOS[name]()
                results[name]["seconds"] = time.perf_counter() - start
            except Exception:
                results[name] = {"error": traceback.format_exc()}
            with open(out_path + ".tmp", "w") as f:   # whole or absent, even if the rank is killed
                json.dump(results, f)
            os.replace(out_path + ".tmp", out_path)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
