"""Per-call dispatch overhead of tjc.compile against torch.compile, both with backend="eager".

Rows: a one-tensor function, an eight-tensor function and a 16-layer MLP module; columns: eager,
tjc.compile and torch.compile per call (best of N repeats), and each compiler's first call (trace +
compile). Prints a table and writes benchmarks/results/dispatch_overhead.json.

Usage: python benchmarks/dispatch_overhead.py [--quick]
"""
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from harness import options, print_head, write_results  # noqa: E402


def one_tensor(x):
    return x + 1


def eight_tensors(a, b, c, d, e, f, g, h):
    return a + b + c + d + e + f + g + h


class MLP16(torch.nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(16))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def per_call_ns(fn, args, repeat, number):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for _ in range(number):
            fn(*args)
        best = min(best, (time.perf_counter_ns() - t0) / number)
    return best


def first_call_ms(make, args):
    fn = make()
    t0 = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - t0) * 1e3


def main():
    opts = options(__doc__, "dispatch_overhead")
    repeat, number = (3, 500) if opts.quick else (7, 5000)
    torch.manual_seed(0)
    mlp = MLP16().eval()
    cases = [
        ("1 tensor", one_tensor, (torch.randn(8),)),
        ("8 tensors", eight_tensors, tuple(torch.randn(8) for _ in range(8))),
        ("16-layer MLP", mlp, (torch.randn(4, 32),)),
    ]
    rows = []
    with torch.no_grad():
        for label, fn, args in cases:
            tjc.reset()
            torch._dynamo.reset()
            tjc_first = first_call_ms(lambda: tjc.compile(fn, backend="eager"), args)
            torch._dynamo.reset()
            tc_first = first_call_ms(lambda: torch.compile(fn, backend="eager"), args)
            tjc.reset()
            torch._dynamo.reset()
            ours = tjc.compile(fn, backend="eager")
            theirs = torch.compile(fn, backend="eager")
            ours(*args)
            theirs(*args)
            row = {
                "case": label,
                "eager_ns": per_call_ns(fn, args, repeat, number),
                "tjc_ns": per_call_ns(ours, args, repeat, number),
                "torch_compile_ns": per_call_ns(theirs, args, repeat, number),
                "tjc_first_call_ms": tjc_first,
                "torch_compile_first_call_ms": tc_first,
                "tjc_graphs": tjc.stats()["graphs"],
            }
            rows.append(row)
    print(f"Python {platform.python_version()}, torch {torch.__version__}, best of {repeat} x {number} calls")
    head = (f"{'case':<14}{'eager ns':>10}{'tjc ns':>10}{'t.c ns':>10}{'tjc +ns':>10}{'t.c +ns':>10}"
            f"{'tjc 1st ms':>12}{'t.c 1st ms':>12}")
    print_head(head)
    for r in rows:
        print(f"{r['case']:<14}{r['eager_ns']:>10.0f}{r['tjc_ns']:>10.0f}{r['torch_compile_ns']:>10.0f}"
              f"{r['tjc_ns'] - r['eager_ns']:>10.0f}{r['torch_compile_ns'] - r['eager_ns']:>10.0f}"
              f"{r['tjc_first_call_ms']:>12.1f}{r['torch_compile_first_call_ms']:>12.1f}")
    write_results(opts.json, torch.__version__, repeat=repeat, number=number, rows=rows)


if __name__ == "__main__":
    sys.exit(main())
