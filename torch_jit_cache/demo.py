"""A tour of torch_jit_cache: `python -m torch_jit_cache.demo`.

Part 1 (needs torch): `tjc.compile` on a small model — first call and per-call time with the eager
and inductor backends beside torch.compile's, the default backend (inductor), the entry's guards, a
recompile with its reason, and the model's entries freed when it is dropped. About a minute on 2
cores, most of it inductor compiling.
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


def _first_and_per_call(compiled, x):
    """(first call's ms, best per-call us over 5 x 200 calls, first call's output)."""
    import time

    t0 = time.perf_counter()
    out = compiled(x)
    first_ms = (time.perf_counter() - t0) * 1e3
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(200):
            compiled(x)
        best = min(best, (time.perf_counter() - t0) / 200 * 1e6)
    return first_ms, best, out


def compile_tour() -> int:
    import copy
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
    x = torch.randn(8, 16)
    expected = net(x)
    print(f"Part 1: tjc.compile on a small model, beside torch.compile (torch {torch.__version__})")
    print(f"  {'backend':<10}{'compiler':<15}{'first call':>12}{'per call':>12}")
    _, eager_us, _ = _first_and_per_call(net, x)
    print(f"  {'-':<10}{'eager':<15}{'-':>12}{eager_us:>9.1f} us")
    # Cold compiles on both sides: what both import is imported first, and neither finds an earlier
    # compile in a cache (tjc's disk cache, inductor's FX graph cache: a second compile of the same
    # graph would hit it). torch.compile gets its own copy of the model: the tour shows below that
    # tjc keeps nothing of `net`.
    from torch import _dynamo
    from torch._inductor import compile_fx, config as inductor_config  # noqa: F401 - imported before timing

    twin = copy.deepcopy(net)
    disk_cache, tjc.config.disk_cache = tjc.config.disk_cache, False
    try:
        with inductor_config.patch(fx_graph_cache=False):
            # inductor's once-per-process start (its C++ toolchain checks, ...) on another graph
            torch.compile(lambda t: t.sin() + 1, backend="inductor")(torch.randn(3))
            _dynamo.reset()
            for backend in ("eager", "inductor"):
                for name, make in (("tjc.compile", tjc.compile), ("torch.compile", torch.compile)):
                    compiled = make(net if name == "tjc.compile" else twin, backend=backend)
                    first_ms, per_call_us, out = _first_and_per_call(compiled, x)
                    if not torch.allclose(out, expected, atol=1e-5):
                        print(f"WRONG RESULT from {name}(backend={backend!r})")
                        return 1
                    print(f"  {backend:<10}{name:<15}{first_ms:>9.0f} ms{per_call_us:>9.1f} us")
                    del compiled
            print("  (first call: trace + compile, caches off; in each pair tjc compiles first, so torch.compile "
                  "may reuse inductor's compiled kernels)")
            model = tjc.compile(net)   # the default backend: inductor, as torch.compile's
            model(x)
    finally:
        tjc.config.disk_cache = disk_cache
    del twin
    _dynamo.reset()
    print(f"  tjc.compile(model), no backend named, compiles with {model.compile_options['backend']!r} "
          "(config.default_backend: 'inductor', as torch.compile's, unless set); later calls run from the cache")
    lines = tjc.cache_entries(model)[0].guards.splitlines()
    print(f"  the entry's guards (first 12 of {len(lines)} lines):")
    print("\n".join("    " + line for line in lines[:12]))
    net.scale = 2.0
    with inductor_config.patch(fx_graph_cache=False):
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
