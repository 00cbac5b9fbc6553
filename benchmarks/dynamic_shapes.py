"""Dynamic shapes: a 50-token generation loop, eager vs tjc.compile vs torch.compile, and the hit cost
of a dynamic entry against a static one.

Generation: the zoo's nanoGPT (torch_jit_cache/testing/models.py) in eval under no_grad, greedy
decoding of 50 tokens from a 4-token prompt without a KV cache, so every step calls the model on a
sequence one longer than the last: each new length is what a static-shape compiler recompiles for.
Per compiler (backend="eager" for both, then "inductor" unless --no-inductor): the frames compiled
during the loop, the whole loop's time (compiles included, a fresh cache), the per-token time of a
second loop (every step a cache hit), and whether the tokens equal eager's.

Hit overhead: one small function (x * 2 + 1 on a (4, T) tensor) compiled with a static entry
(dynamic=False, one T) and with a dynamic one (mark_dynamic on T): the best per-call time of each,
beside eager and torch.compile's static and dynamic entries. The difference is what the
SYMBOLIC_SHAPES guard costs on a hit.

Prints two tables and writes benchmarks/results/dynamic_shapes.json.

Usage: python benchmarks/dynamic_shapes.py [--quick] [--no-inductor] [--tokens 50]
"""
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from harness import best_us, options, print_head, write_results  # noqa: E402
from torch_jit_cache.testing import CompileCounterWithBackend  # noqa: E402
from torch_jit_cache.testing import models as zoo  # noqa: E402


def generate(model, idx, tokens, block_size):
    for _ in range(tokens):
        idx_cond = idx if idx.size(1) <= block_size else idx[:, -block_size:]
        logits = model(idx_cond)[0][:, -1, :]
        idx = torch.cat((idx, logits.argmax(-1, keepdim=True)), dim=1)
    return idx


class _DynamoCounter:
    """torch.compile backend that counts its compiles and hands the graph to `backend`."""

    def __init__(self, backend):
        self.backend, self.frame_count = backend, 0

    def __call__(self, gm, example_inputs):
        self.frame_count += 1
        if self.backend == "eager":
            return gm.forward
        from torch._inductor.compile_fx import compile_fx
        return compile_fx(gm, example_inputs)


def generation_row(backend, tokens):
    model, inputs = zoo.build("nanogpt")
    model.eval()
    prompt = inputs.args[0][:, :4]
    block = model.config.block_size
    row = dict(backend=backend, tokens=tokens)
    with torch.no_grad():
        t0 = time.perf_counter()
        expected = generate(model, prompt, tokens, block)
        row["eager_total_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        generate(model, prompt, tokens, block)
        row["eager_token_ms"] = (time.perf_counter() - t0) / tokens * 1e3
        for name, make, counter in (
                ("tjc", lambda c: tjc.compile(model, backend=c), CompileCounterWithBackend(backend)),
                ("tc", lambda c: torch.compile(model, backend=c), _DynamoCounter(backend))):
            tjc.reset()
            torch._dynamo.reset()
            compiled = make(counter)
            t0 = time.perf_counter()
            out = generate(compiled, prompt, tokens, block)
            row[f"{name}_total_s"] = time.perf_counter() - t0
            row[f"{name}_compiles"] = counter.frame_count
            row[f"{name}_same"] = bool(torch.equal(out, expected))
            t0 = time.perf_counter()
            generate(compiled, prompt, tokens, block)
            row[f"{name}_token_ms"] = (time.perf_counter() - t0) / tokens * 1e3
            row[f"{name}_compiles_after"] = counter.frame_count
            del compiled
    tjc.reset()
    torch._dynamo.reset()
    return row


def _best_us(fn, x, repeat):
    for _ in range(5):   # warm-up: the compile and the first hits
        fn(x)
    return best_us(fn, x, repeat)


def _small(x):
    return x * 2 + 1


def hit_row(repeat):
    x = torch.randn(4, 16)
    row = dict(eager_us=_best_us(_small, x, repeat))
    for name, compile_fn in (("tjc", tjc.compile), ("tc", torch.compile)):
        tjc.reset()
        torch._dynamo.reset()
        static = compile_fn(_small, dynamic=False)
        row[f"{name}_static_us"] = _best_us(static, x, repeat)
        tjc.reset()
        torch._dynamo.reset()
        dynamic = compile_fn(_small)
        marked = torch.randn(4, 16)
        (tjc.mark_dynamic if name == "tjc" else torch._dynamo.mark_dynamic)(marked, 1)
        dynamic(marked)
        row[f"{name}_dynamic_us"] = _best_us(dynamic, x, repeat)
        del static, dynamic
    tjc.reset()
    torch._dynamo.reset()
    return row


def main():
    opts = options(__doc__, "dynamic_shapes", extra=lambda p: (
        p.add_argument("--no-inductor", action="store_true", help="backend='eager' only"),
        p.add_argument("--tokens", type=int, default=50)))
    tokens = 10 if opts.quick else opts.tokens
    repeat = 200 if opts.quick else 2000
    warnings.simplefilter("ignore")
    backends = ["eager"] if opts.no_inductor else ["eager", "inductor"]
    gen = []
    print_head(f"{'generation':<12}{'backend':<10}{'tokens':>7}{'eager ms/tok':>13}{'tjc ms/tok':>11}{'t.c ms/tok':>11}"
               f"{'tjc total s':>12}{'t.c total s':>12}{'eager total':>12}{'tjc comp':>9}{'t.c comp':>9}{'ok':>6}")
    for backend in backends:
        r = generation_row(backend, tokens)
        gen.append(r)
        ok = ("y" if r["tjc_same"] else "N") + "/" + ("y" if r["tc_same"] else "N")
        print(f"{'nanoGPT':<12}{backend:<10}{tokens:>7}{r['eager_token_ms']:>13.3f}{r['tjc_token_ms']:>11.3f}"
              f"{r['tc_token_ms']:>11.3f}{r['tjc_total_s']:>12.2f}{r['tc_total_s']:>12.2f}{r['eager_total_s']:>12.2f}"
              f"{r['tjc_compiles']:>9}{r['tc_compiles']:>9}{ok:>6}", flush=True)
    print("ms/tok: a second loop, every step a cache hit; total: the first loop with a fresh cache (compiles "
          "included); comp: frames compiled in the first loop (none in the second); ok: tokens equal eager's")
    print()
    hit = hit_row(repeat)
    print_head(f"{'hit overhead':<14}{'eager us':>9}{'tjc static':>11}{'tjc dynamic':>12}{'t.c static':>11}"
               f"{'t.c dynamic':>12}")
    print(f"{'x * 2 + 1':<14}{hit['eager_us']:>9.2f}{hit['tjc_static_us']:>11.2f}{hit['tjc_dynamic_us']:>12.2f}"
          f"{hit['tc_static_us']:>11.2f}{hit['tc_dynamic_us']:>12.2f}")
    print("best per-call time of a hit on a (4, 16) tensor; dynamic: dim 1 marked dynamic at the first compile")
    write_results(opts.json, torch.__version__, tokens=tokens, repeat=repeat, generation=gen, hit=hit)


if __name__ == "__main__":
    main()
