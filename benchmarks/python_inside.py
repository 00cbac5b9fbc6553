"""Python work inside a compiled call that falls back: eager vs tjc.compile vs torch.compile.

The compiled function cannot be captured (in the first iteration of its loop it branches on a
tensor's value: torch.compile skips a frame that breaks inside a loop, tjc runs a frame it cannot
trace uncompiled), and it does Python work:
helpers called thousands of times with different ints, helpers called from C (map), helpers that
build strings and dicts, and helpers that read a tensor's shape without computing on it. Every frame
of that work runs inside the compiled call, so each compiler sees it; none of it has tensor work, so
it must run at eager speed (issue 8, point 3: tjc was 8x slower, each helper traced per int value).

Both compilers use backend="eager". Columns: best-of-N time per compiled call, and the ratio to eager.
Prints a table and writes benchmarks/results/python_inside.json.

Usage: python benchmarks/python_inside.py [--quick]
"""
import platform
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from harness import best_us, options, print_head, write_results  # noqa: E402

N = 3000


def helper(i):
    return (i * 7) % 13


def loop_of_helpers(x):
    s = 0
    for i in range(N):
        if i == 0 and x.sum() > 0:  # data-dependent: neither compiler captures this frame
            s += 0
        s += helper(i)
    return x + s


def map_of_helpers(x):
    s = 0
    for i in range(1):
        if i == 0 and x.sum() > 0:  # data-dependent: neither compiler captures this frame
            s += 0
        s += sum(map(helper, range(N)))
    return x + s


def describe(i):
    return {"name": f"layer{i}", "size": i * 4, "tags": ("a", "b")[: i % 3]}


def dicts_and_strings(x):
    total = 0
    for i in range(N // 3):
        if i == 0 and x.sum() > 0:  # data-dependent: neither compiler captures this frame
            total += 0
        total += len(describe(i)["name"])
    return x + total


def rows(t):
    return t.shape[0] + t.dim()


def shape_reads(x):
    s = 0
    for i in range(N):
        if i == 0 and x.sum() > 0:  # data-dependent: neither compiler captures this frame
            s += 0
        s += rows(x)
    return x + s


CASES = [
    (f"helper(i) x{N}", loop_of_helpers),
    (f"map(helper) x{N}", map_of_helpers),
    (f"dicts+strs x{N // 3}", dicts_and_strings),
    (f"t.shape x{N}", shape_reads),
]


def main():
    opts = options(__doc__, "python_inside")
    repeat = 30 if opts.quick else 200
    x = torch.ones(4)
    rows_out = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for label, fn in CASES:
            tjc.reset()
            torch._dynamo.reset()
            ours = tjc.compile(fn, backend="eager")
            theirs = torch.compile(fn, backend="eager")
            expected = fn(x)
            for _ in range(3):  # warm: every compile, recompile and skip decision happens here
                assert torch.equal(ours(x), expected) and torch.equal(theirs(x), expected)
            # Interleaved rounds, so drift on a shared machine hits all three columns alike.
            eager = tjc_us = tc_us = float("inf")
            for _ in range(5):
                eager = min(eager, best_us(fn, x, repeat // 5))
                tjc_us = min(tjc_us, best_us(ours, x, repeat // 5))
                tc_us = min(tc_us, best_us(theirs, x, repeat // 5))
            stats = tjc.stats()
            rows_out.append({"case": label, "eager_us": eager, "tjc_us": tjc_us, "torch_compile_us": tc_us,
                             "tjc_entries": stats["compiles"], "tjc_cache_limit_hits": stats["cache_limit_hits"]})
    tjc_warnings = [str(w.message) for w in caught if "torch_jit_cache" in str(w.message)]
    print(f"Python {platform.python_version()}, torch {torch.__version__}, best of {repeat} calls, backend=eager")
    head = (f"{'case':<22}{'eager us':>10}{'tjc us':>10}{'t.c us':>10}{'tjc/eager':>11}{'t.c/eager':>11}"
            f"{'tjc entries':>13}")
    print_head(head)
    for r in rows_out:
        print(f"{r['case']:<22}{r['eager_us']:>10.1f}{r['tjc_us']:>10.1f}{r['torch_compile_us']:>10.1f}"
              f"{r['tjc_us'] / r['eager_us']:>11.3f}{r['torch_compile_us'] / r['eager_us']:>11.3f}"
              f"{r['tjc_entries']:>13}")
    print(f"torch_jit_cache warnings: {len(tjc_warnings)}")
    write_results(opts.json, torch.__version__, repeat=repeat, rows=rows_out, tjc_warnings=tjc_warnings)


if __name__ == "__main__":
    sys.exit(main())
