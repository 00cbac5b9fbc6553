"""A tour of torch_jit_cache: `python -m torch_jit_cache.demo`.

Part 1 (needs torch): `tjc.compile` on a small model — first call traced and compiled, later calls
served from the cache, a recompile with its reason, and the model's entries freed when it is dropped.
Part 2 (no torch needed): the runtime under it, driven by a hand-written JIT.

The JIT specializes `scaled_sum` on the module it is given: on a cache miss it returns the
function's code with the marker constant 1.0 replaced by the module's scale, guarded by the
module's identity (held weakly) and the arguments' types (and tensor facts when torch is here).
The tour shows hits and misses, the guard tree, why a miss happened, and an entry dying with the
object it guards.
"""
import gc
import sys

from torch_jit_cache import runtime

try:
    import torch
except ImportError:
    torch = None


class Scaler:
    """Stands in for a user module: the JIT bakes `scale` into the code it caches."""

    def __init__(self, scale):
        self.scale = scale


def scaled_sum(mod, xs):
    total = 0
    for x in xs:
        total = total + x * 1.0  # the JIT replaces 1.0 with mod.scale
    return total


def specialize(frame, entries):
    """The cache-miss callback."""
    if frame.f_code is not scaled_sum.__code__:
        return runtime.RUN_ORIGINAL
    for entry in entries:
        print(f"    miss: entry {entry!r} failed on: {entry.explain(frame)}")
    loc = frame.f_locals
    mod, xs = loc["mod"], loc["xs"]
    g = runtime.GuardManager()
    g.local("mod").id_match(mod)  # weak: the entry dies with the module
    g.local("xs").type_match(type(xs))
    g.local("xs").length(len(xs))
    for i, x in enumerate(xs):
        item = g.local("xs").item(i)
        if torch is not None and isinstance(x, torch.Tensor):
            item.tensor_match(x)
        else:
            item.type_match(type(x))
    consts = tuple(mod.scale if (type(c) is float and c == 1.0) else c for c in frame.f_code.co_consts)
    print(f"    compiled for scale={mod.scale}")
    return runtime.GuardedCode(frame.f_code.replace(co_consts=consts), g)


def compile_tour() -> int:
    import time
    import weakref

    import torch_jit_cache as tjc

    class TinyNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
            self.scale = 0.5

        def forward(self, x):
            return torch.softmax(self.body(x) * self.scale, dim=-1)

    tjc.reset()
    torch.manual_seed(0)
    net = TinyNet().eval()
    model = tjc.compile(net)
    x = torch.randn(8, 16)
    t0 = time.perf_counter()
    out = model(x)
    first_ms = (time.perf_counter() - t0) * 1e3
    if not torch.allclose(out, net(x), atol=1e-6):
        print("WRONG RESULT from the compiled model")
        return 1
    def per_call_us(fn):
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(200):
                fn(x)
            best = min(best, (time.perf_counter() - t0) / 200 * 1e6)
        return best

    hit_us, eager_us = per_call_us(model), per_call_us(net)
    print("Part 1: tjc.compile on a small model")
    print(f"  first call (trace + compile): {first_ms:.1f} ms; then {hit_us:.1f} us per call from the cache "
          f"(eager: {eager_us:.1f} us)")
    lines = tjc.cache_entries(model)[0].guards.splitlines()
    print(f"  the entry's guards (first 12 of {len(lines)} lines):")
    print("\n".join("    " + line for line in lines[:12]))
    net.scale = 2.0
    model(x)
    entries = tjc.cache_entries(model)
    print(f"  net.scale changed: recompiled ({len(entries)} entries), stats: {tjc.stats()}")
    probe = weakref.ref(net)
    del net, model, entries
    print(f"  model dropped: freed={probe() is None}, entries evicted: {tjc.stats()['evictions']}")
    return 0 if probe() is None else 1


def main() -> int:
    if torch is not None and compile_tour() != 0:
        return 1
    print("Part 2: the runtime with a hand-written JIT")
    runtime.reset()
    values = [torch.ones(2, 2), torch.ones(2, 2)] if torch is not None else [1.0, 2.0]
    a, b = Scaler(2.0), Scaler(3.0)
    print(f"torch_jit_cache runtime demo (Python {sys.version.split()[0]}, "
          f"{'torch ' + torch.__version__ if torch else 'no torch'})")
    with runtime.eval_frame(specialize):
        print("1. first call with module a: a miss, then compiled")
        r1 = scaled_sum(a, values)
        print("2. same module: a hit, straight from C++")
        r2 = scaled_sum(a, values)
        print("3. module b: the identity guard fails, a second entry")
        r3 = scaled_sum(b, values)
    expect = [sum(v * s for v in values) for s in (2.0, 2.0, 3.0)]
    for got, want in zip((r1, r2, r3), expect):
        same = bool((got == want).all()) if torch is not None else got == want
        if not same:
            print(f"WRONG RESULT: {got} != {want}")
            return 1
    entries = runtime.cache_entries(scaled_sum)
    print(f"4. {len(entries)} cache entries; the newest guards:")
    print("   " + entries[0].guards.replace("\n", "\n   "))
    print(f"   stats: {runtime.stats()}")
    print("5. drop module b: its entry is evicted at once, no reset(), no gc.collect()")
    gc.disable()
    newest = entries[0]
    del b, entries
    print(f"   evicted={newest.evicted} ({newest.eviction_reason}); "
          f"{len(runtime.cache_entries(scaled_sum))} entry left")
    gc.enable()
    print(f"   stats: {runtime.stats()}")
    return 0 if newest.evicted else 1


if __name__ == "__main__":
    sys.exit(main())
