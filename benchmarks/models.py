"""Real models: eager vs tjc.compile vs torch.compile, per call, with graphs, breaks and compile time.

The models are torch_jit_cache/testing/models.py's zoo: nanoGPT, a torchvision-style ResNet, the
word_language_model LSTM and Transformer from pytorch/examples, and tiny HuggingFace Bert, GPT2,
Llama and T5 built from configs with random weights. Each is run in eval mode under
torch.no_grad() (inference, the per-call cost a serving loop pays) on the zoo's inputs.

Per model and compiler: the first call (trace + backend compile + run), the best per-call time of
later calls, the graphs and breaks of one run (tjc.explain and torch._dynamo.explain on the same
inputs), and whether the outputs equal eager's. backend="eager" for both compilers on every model;
then backend="inductor" for the models named in INDUCTOR (tjc's graphs go to the same inductor).

Prints one table and writes benchmarks/results/models.json.

Usage: python benchmarks/models.py [--quick] [--models nanogpt,bert] [--no-inductor]
"""
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from harness import options, print_head, write_results  # noqa: E402
from torch_jit_cache.testing import models as zoo  # noqa: E402

INDUCTOR = ("nanogpt", "resnet", "bert")


def per_call_us(fn, inputs, repeat: int) -> float:
    """The fastest of `repeat` calls, in microseconds (the first calls are warm-up)."""
    for _ in range(3):
        fn(*inputs.args, **inputs.kwargs)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(*inputs.args, **inputs.kwargs)
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def first_call_s(fn, inputs):
    t0 = time.perf_counter()
    out = fn(*inputs.args, **inputs.kwargs)
    return time.perf_counter() - t0, out


def same(out, expected) -> bool:
    got, want = zoo.tensors(out), zoo.tensors(expected)
    return len(got) == len(want) and all(
        g.shape == w.shape and g.dtype == w.dtype and torch.allclose(g, w, rtol=1e-4, atol=1e-5)
        for g, w in zip(got, want))


def measure(name, backend, repeat):
    model, inputs = zoo.build(name)
    model.eval()
    with torch.no_grad():
        expected = model(*inputs.args, **inputs.kwargs)
        eager_us = per_call_us(model, inputs, repeat)

        tjc.reset()
        ours = tjc.explain(model, backend=backend)(*inputs.args, **inputs.kwargs)
        tjc.reset()
        compiled = tjc.compile(model, backend=backend)
        tjc_first, tjc_out = first_call_s(compiled, inputs)
        tjc_us = per_call_us(compiled, inputs, repeat)

        torch._dynamo.reset()
        theirs = torch._dynamo.explain(model)(*inputs.args, **inputs.kwargs)
        torch._dynamo.reset()
        tc = torch.compile(model, backend=backend)
        tc_first, tc_out = first_call_s(tc, inputs)
        tc_us = per_call_us(tc, inputs, repeat)
    del compiled, tc
    tjc.reset()
    torch._dynamo.reset()
    return dict(model=name, backend=backend, eager_us=eager_us,
                tjc_us=tjc_us, tjc_first_s=tjc_first, tjc_graphs=ours.graph_count,
                tjc_breaks=ours.graph_break_count, tjc_uncompiled=len(ours.fallbacks), tjc_same=same(tjc_out, expected),
                tc_us=tc_us, tc_first_s=tc_first, tc_graphs=theirs.graph_count, tc_breaks=theirs.graph_break_count,
                tc_same=same(tc_out, expected))


def main():
    opts = options(__doc__, "models", extra=lambda p: (
        p.add_argument("--models", default=",".join(zoo.MODELS), help="comma-separated zoo names"),
        p.add_argument("--no-inductor", action="store_true", help="backend='eager' rows only")))
    repeat = 20 if opts.quick else 200
    names = [n for n in opts.models.split(",") if zoo.available(n)]
    runs = [(n, "eager") for n in names]
    if not opts.no_inductor:
        runs += [(n, "inductor") for n in names if n in INDUCTOR]
    warnings.simplefilter("ignore")  # HuggingFace's config warnings; tjc's own fallbacks show as counts
    rows = []
    for name, backend in runs:
        rows.append(measure(name, backend, repeat))
        _print_row(rows[-1], first=len(rows) == 1)
    print("us: best per-call time of later calls; first: the first call (trace + compile + run), seconds;")
    print("g/b: graphs/breaks of one run; unc: frames tjc ran uncompiled; ok: outputs equal eager's")
    write_results(opts.json, torch.__version__, repeat=repeat, rows=rows)


def _print_row(r, first):
    if first:
        print_head(f"{'model':<15}{'backend':<10}{'eager us':>10}{'tjc us':>10}{'t.c us':>10}"
                   f"{'tjc/tc':>8}{'tjc first':>10}{'tc first':>10}{'tjc g/b':>9}{'unc':>5}{'t.c g/b':>9}"
                   f"{'ok':>7}")
    ok = ("y" if r["tjc_same"] else "N") + "/" + ("y" if r["tc_same"] else "N")
    print(f"{r['model']:<15}{r['backend']:<10}{r['eager_us']:>10.0f}{r['tjc_us']:>10.0f}{r['tc_us']:>10.0f}"
          f"{r['tjc_us'] / r['tc_us']:>8.2f}{r['tjc_first_s']:>10.2f}{r['tc_first_s']:>10.2f}"
          f"{str(r['tjc_graphs']) + '/' + str(r['tjc_breaks']):>9}{r['tjc_uncompiled']:>5}"
          f"{str(r['tc_graphs']) + '/' + str(r['tc_breaks']):>9}{ok:>7}", flush=True)


if __name__ == "__main__":
    main()
