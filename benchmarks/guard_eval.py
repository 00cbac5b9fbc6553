"""Cache-hit overhead of the torch_jit_cache runtime, side by side with torch.compile.

Prints one table and writes benchmarks/results/guard_eval.json. Rows:
  plain call, hook off             the baseline: the same function, no hook installed
  hit, N guarded args              a cached entry whose guards check N arguments
  100 tensors x 10 entries         10 entries that differ in one tensor's shape, called round-robin
  100 x 10, last arg differs       the same, the differing tensor last
Columns: ns per call, and ns added over the plain call. torch.compile(backend="eager") runs the
same functions in the same process when torch is installed (its `recompile_limit` raised so the
10-entry case stays compiled).

Usage: python benchmarks/guard_eval.py [--quick] [--json PATH]
"""
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
import torch_jit_cache as tjc  # noqa: E402
from harness import options  # noqa: E402
from torch_jit_cache import runtime  # noqa: E402

try:
    import torch
except ImportError:  # the runtime rows still run, on ints
    torch = None


def make_fn(n: int):
    """def f(a0, ..., a{n-1}): return a0"""
    args = ", ".join(f"a{i}" for i in range(n))
    ns = {}
    exec(f"def f({args}):\n    return a0\n", ns)
    return ns["f"]


def guard_everything(target):
    """A JIT for `target` that caches its own code, guarding every argument."""

    def callback(frame, entries):
        if frame.f_code is not target.__code__:
            return runtime.RUN_ORIGINAL
        return runtime.GuardedCode(frame.f_code, guards_for(frame))

    return callback


def guards_for(frame):
    g = runtime.GuardManager()
    for name, value in frame.f_locals.items():
        child = g.local(name)
        if torch is not None and isinstance(value, torch.Tensor):
            child.tensor_match(value)
        else:
            child.type_match(type(value))
            child.equals_match(value)
    if torch is not None:
        g.global_state()
    return g


def time_calls(fn, arg_sets, repeat: int, number: int) -> float:
    """Best-of-`repeat` ns per call, cycling through `arg_sets`."""
    k = len(arg_sets)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for i in range(number):
            fn(*arg_sets[i % k])
        best = min(best, (time.perf_counter_ns() - t0) / number)
    return best


def arg(i: int, shape=(4, 4)):
    return torch.randn(*shape) if torch is not None else i


def cases():
    for n in (1, 8, 64):
        yield f"hit, {n} guarded arg{'s' if n > 1 else ''}", make_fn(n), [tuple(arg(i) for i in range(n))]
    if torch is not None:
        base = [arg(i) for i in range(100)]
        sets = [tuple([torch.randn(j + 1, 4)] + base[1:]) for j in range(10)]
        yield "100 tensors x 10 entries", make_fn(100), sets
        # The entries differ in the LAST argument: a plain scan would check 99 matching tensors per
        # failing entry; fail-fast reordering moves the differing argument first in every tree.
        sets = [tuple(base[:-1] + [torch.randn(j + 1, 4)]) for j in range(10)]
        yield "100 x 10, last arg differs", make_fn(100), sets


def bench(quick: bool):
    repeat, number = (3, 2_000) if quick else (7, 20_000)
    tjc.config.cache_limit = 64  # the 10-entry case must stay cached (as for torch.compile below)
    rows = []
    for label, fn, arg_sets in cases():
        plain = time_calls(fn, arg_sets, repeat, number)
        runtime.reset()
        with runtime.eval_frame(guard_everything(fn)):
            for a in arg_sets:  # one miss per entry, then only hits
                fn(*a)
            assert len(runtime.cache_entries(fn)) == len(arg_sets)
            ours = time_calls(fn, arg_sets, repeat, number)
        row = {"case": label, "plain_ns": plain, "tjc_ns": ours, "tjc_added_ns": ours - plain}
        if torch is not None:
            from torch import _dynamo

            _dynamo.reset()
            _dynamo.config.recompile_limit = 64
            compiled = torch.compile(fn, backend="eager", dynamic=False)
            for a in arg_sets:
                compiled(*a)
            theirs = time_calls(compiled, arg_sets, repeat, number)
            row.update(torch_compile_ns=theirs, torch_compile_added_ns=theirs - plain)
        rows.append(row)
        runtime.reset()
    return rows, {"repeat": repeat, "number": number}


def main():
    opts = options(__doc__, "guard_eval")
    rows, params = bench(opts.quick)
    head = f"{'case':<28}{'plain ns':>10}{'tjc ns':>10}{'tjc +ns':>10}"
    if torch is not None:
        head += f"{'torch.compile ns':>18}{'t.c +ns':>10}"
    print(f"Python {platform.python_version()}, torch {torch.__version__ if torch else '-'}, "
          f"best of {params['repeat']} x {params['number']} calls")
    print(head)
    print("-" * len(head))
    for r in rows:
        line = f"{r['case']:<28}{r['plain_ns']:>10.0f}{r['tjc_ns']:>10.0f}{r['tjc_added_ns']:>10.0f}"
        if torch is not None:
            line += f"{r['torch_compile_ns']:>18.0f}{r['torch_compile_added_ns']:>10.0f}"
        print(line)
    out = Path(opts.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "torch": torch.__version__ if torch else None,
                               "machine": platform.machine(), "cpus": os.cpu_count(), **params, "rows": rows},
                              indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
