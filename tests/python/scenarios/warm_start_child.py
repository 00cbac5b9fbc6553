"""Child of test_warm_start.py: one process of a cold/warm pair, run with the defaults a user gets
(disk cache on, the default backend and cache folder). Prints one `RESULT {json}` line per model
or program; every result is compared with eager in this same process.

    python warm_start_child.py zoo cold|warm [names...]
    python warm_start_child.py fuzz cold|warm FOLDER FIRST COUNT [CHANGE...]
    python warm_start_child.py default cold|warm

zoo: each model compiled with tjc.compile, an eval call under no_grad and a training step (forward,
zoo.loss_of, backward), against eager on a deep copy: outputs, gradients and buffers. The cold run
calls eval then train; the warm run goes over the models in the other order, calls train then eval
on the same inputs (what the cold run stored), then both on a batch one larger (what no stored entry
was made for: a loaded entry must turn it down). fuzz: the differential fuzzer's programs, written
to FOLDER as modules; the warm run takes them in the other order and changes the inputs after the
first call (CHANGE..., by default every input change of the fuzzer's, in turn) and makes one
other change of any kind. zoo and fuzz name backend="eager" (inductor would compile each of their
graphs for seconds); default compiles a small module with no backend argument: the backend a user
gets, inductor, stored by the cold run and loaded by the warm one.
"""
import copy
import json
import os
import random
import sys
import time
import warnings

import torch

import torch_jit_cache as tjc
from torch_jit_cache.testing import models as zoo

# The dimension that is the batch in each model's inputs (0 where not named).
BATCH_DIM = {"lstm_lm": 1, "transformer_lm": 1}
COUNTED = ("graphs", "graphs_traced", "disk_cache_stores", "disk_cache_hits", "fallbacks")


def _counts(before):
    now = tjc.stats()
    return {k: now[k] - before[k] for k in COUNTED}


def _bigger_batch(name, inputs):
    """The inputs with one more row in the batch (a copy of the first)."""
    dim = BATCH_DIM.get(name, 0)
    grow = lambda v: torch.cat([v, v.narrow(dim, 0, 1)], dim) if isinstance(v, torch.Tensor) else \
        tuple(grow(x) for x in v) if isinstance(v, tuple) else v  # noqa: E731
    return zoo.Inputs(tuple(grow(a) for a in inputs.args), {k: grow(v) for k, v in inputs.kwargs.items()})


def _compare(what, got, expected, bad):
    if len(got) != len(expected):
        bad.append(f"{what}: {len(got)} tensors, eager {len(expected)}")
        return
    for i, (g, e) in enumerate(zip(got, expected)):
        if g.shape != e.shape or g.dtype != e.dtype or not torch.allclose(g, e, rtol=1e-4, atol=1e-5):
            bad.append(f"{what} {i}: {g.dtype}{tuple(g.shape)} differs from eager's {e.dtype}{tuple(e.shape)}")


def _call(model, kind, inputs):
    """(outputs, gradients, buffers) of one eval call under no_grad or one training step, and the
    forward call's seconds."""
    model.train(kind == "train")
    t0 = time.perf_counter()
    with torch.set_grad_enabled(kind == "train"):
        out = model(*inputs.args, **inputs.kwargs)
    seconds = time.perf_counter() - t0
    grads = []
    if kind == "train":
        zoo.loss_of(out).backward()
        grads = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        model.zero_grad(set_to_none=True)
    return ([t.detach() for t in zoo.tensors(out)], grads, [b.clone() for b in model.buffers()]), seconds


def zoo_run(mode, names):
    order = list(zoo.MODELS) if not names else names
    if mode == "warm":
        order = order[::-1]
    for name in order:
        if not zoo.available(name):
            continue
        model, inputs = zoo.build(name)
        twin = copy.deepcopy(model)
        compiled = tjc.compile(twin, backend="eager")
        seen = [("eval", inputs), ("train", inputs)]
        unseen = [("train", _bigger_batch(name, inputs))]
        phases = {"seen": seen} if mode == "cold" else {"seen": seen[::-1], "unseen": unseen}
        bad, result, first = [], {"model": name, "mode": mode}, None
        for phase, calls in phases.items():
            before = tjc.stats()
            for kind, args in calls:
                try:
                    got, seconds = _call(compiled, kind, args)
                    first = first or seconds   # the first forward call: a load, or a trace
                except Exception as e:  # noqa: BLE001 - reported, and eager's run decides
                    got = e
                expected, _ = _call(model, kind, args)
                if isinstance(got, Exception):
                    bad.append(f"{phase} {kind}: raised {type(got).__name__}: {got}")
                    continue
                for what, g, e in zip(("outputs", "gradients", "buffers"), got, expected):
                    _compare(f"{phase} {kind} {what}", g, e, bad)
            result[phase] = _counts(before)
        result.update(first_call_s=round(first, 3), bad=bad)
        print("RESULT " + json.dumps(result), flush=True)
        del compiled, twin
        tjc.reset()


# The fuzzer's changes that give the calls after the first other inputs (program_fuzzer.CHANGES).
INPUT_CHANGES = ("batch size", "aliased inputs", "non-contiguous x", "non-dense x", "x at an offset",
                 "inference x", "y requires grad", "no_grad")


def fuzz_run(mode, folder, first, count, changes):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import program_fuzzer

    seeds = list(range(first, first + count))
    for i, seed in enumerate(seeds if mode == "cold" else seeds[::-1]):
        # cold: the suite's own changes; warm: each program's first call as cold's (it loads), then
        # an input change, in turn, and another change of any kind, which the cold run may not have
        # made: what a loaded entry did not see, it must refuse
        names = None if mode == "cold" else \
            sorted({changes[i % len(changes)], random.Random(f"warm {seed}").choice(sorted(program_fuzzer.CHANGES))})
        try:
            outcome = program_fuzzer.check_program(seed, change_names=names, folder=folder,
                                                   draw=0 if mode == "cold" else 1)
        except program_fuzzer.Mismatch as e:
            print("RESULT " + json.dumps({"seed": seed, "mode": mode, "bad": str(e)}), flush=True)
            continue
        print("RESULT " + json.dumps({"seed": seed, "mode": mode, "bad": None, "changes": outcome.changes,
                                      "graphs": outcome.graphs, "disk_cache_stores": outcome.disk_cache_stores,
                                      "disk_cache_hits": outcome.disk_cache_hits}), flush=True)


class SmallNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return torch.softmax(self.body(x) * 0.5, dim=-1)


def default_run(mode):
    """SmallNet compiled as a user compiles it, `tjc.compile(model)`: the backend it got (recorded on
    the compiled module, and inductor's own count of the graphs it compiled, from its FX graph cache's
    counters), an eval call against eager, and the disk cache's counts."""
    from torch._dynamo.utils import counters

    torch.manual_seed(0)
    model, x = SmallNet().eval(), torch.randn(8, 16)
    compiled = tjc.compile(model)
    before = tjc.stats()
    t0 = time.perf_counter()
    with torch.no_grad():
        got = compiled(x)
        seconds = time.perf_counter() - t0
        expected = model(x)
    bad = []
    _compare("outputs", [got], [expected], bad)
    inductor = sum(counters["inductor"][k] for k in ("fxgraph_cache_miss", "fxgraph_cache_hit", "fxgraph_cache_bypass"))
    print("RESULT " + json.dumps({"mode": mode, "backend": str(compiled.compile_options["backend"]),
                                  "inductor_graphs": inductor, "seen": _counts(before),
                                  "first_call_s": round(seconds, 3), "bad": bad}), flush=True)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    what, mode = sys.argv[1], sys.argv[2]
    if what == "zoo":
        zoo_run(mode, sys.argv[3:])
    elif what == "default":
        default_run(mode)
    else:
        fuzz_run(mode, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6:] or INPUT_CHANGES)
