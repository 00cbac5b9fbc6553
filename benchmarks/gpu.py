"""The GPU path (issue 24): eager, tjc.compile and torch.compile per call on CUDA, side by side.

Rows (bf16 on CUDA; --quick shrinks every size):
  decode       nanoGPT 6x384 decoding one token per call, batch 1, its KV caches as buffers written in
               place at the position (torch_jit_cache/testing/models.py: DecodeGPT)
  nanogpt      nanoGPT 6x384 forward, B8 T256, in eval under no_grad
  nanogpt_train  the same model's training step: forward, backward, AdamW step
  llama, gpt2  HuggingFace LlamaForCausalLM / GPT2LMHeadModel forward, small configs, B8 T256
               (skipped with the reason where transformers is not installed)
  resnet50     torchvision's resnet50 (the zoo's ResNet with ResNet-50's depths where torchvision is
               missing), batch 32, 224x224, eval under no_grad

Variants per row: eager, then for each mode tjc.compile and torch.compile with the same arguments:
  eager            backend="eager"
  inductor         backend="inductor"
  reduce-overhead  backend="inductor", mode="reduce-overhead" (CUDA graphs)
tjc runs before torch.compile in each mode, so inductor's on-disk caches (FX graphs, Triton kernels)
can only shorten torch.compile's first call, never tjc's (--no-fx-graph-cache: compile every graph).

Per variant: the first call (trace + compile + run, synchronised), the median of later calls (each
synchronised, after warm-up calls; torch.compiler.cudagraph_mark_step_begin() before every training
step, as users of reduce-overhead must call it), whether the outputs of a fixed sequence of calls
equal eager's (relative error of each tensor's norm within bf16's or fp32's tolerance), and the
deltas of inductor's cudagraph counters with the reasons it logged: a reduce-overhead variant that
skipped CUDA graphs is flagged. Graphs/breaks come from tjc.explain and torch._dynamo.explain.
Prints the ratios tjc/torch.compile per mode and whether issue 24's goal holds: tjc <= 1.0x
torch.compile with reduce-overhead and <= 1.05x with inductor on every row.

Without CUDA it prints "no CUDA device: skipped" and exits 0. `--device cpu --quick` runs every row
at tiny sizes on the CPU (reduce-overhead there skips CUDA graphs), a check of the code paths only.
The JSON (benchmarks/results/gpu.json) is rewritten after every row, so a run stopped by a timeout
keeps the rows it finished.

Usage: python benchmarks/gpu.py [--quick] [--device cpu] [--rows decode,nanogpt] [--modes inductor]
                               [--dtype float16] [--no-fx-graph-cache]
"""
import copy
import gc
import logging
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torch._inductor.config  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from harness import options, print_head, write_results  # noqa: E402
from torch_jit_cache.testing import models as zoo  # noqa: E402

# The compile arguments of each mode, the same for tjc.compile and torch.compile.
MODES = {
    "eager": dict(backend="eager"),
    "inductor": dict(backend="inductor"),
    "reduce-overhead": dict(backend="inductor", mode="reduce-overhead"),
}
COMPILERS = {"tjc": tjc.compile, "torch.compile": torch.compile}
# Issue 24's goal: tjc's per-call time over torch.compile's, at most, per mode.
GOAL = {"inductor": 1.05, "reduce-overhead": 1.0}
# Relative error of a tensor's norm against eager's, at most: bf16 keeps 8 bits of mantissa and a
# compiler may fuse and reorder reductions differently; fp32 (the CPU smoke run) is held tighter.
TOLERANCE = {torch.bfloat16: 3e-2, torch.float16: 1e-2, torch.float32: 1e-4}


# ---- the rows ----------------------------------------------------------------------------------

class Forward:
    """A model's forward on fixed inputs, in eval mode under no_grad."""
    inference = True

    def __init__(self, model, args=(), kwargs=None):
        self.model, self.args, self.kwargs = model.eval(), args, kwargs or {}

    def explain_call(self):
        return self.model, self.args, self.kwargs

    def variant(self, compile_fn):
        """(step, check): step(i) is one call; check() the calls compared with eager (after the first)."""
        fn = compile_fn(self.model)

        def step(i):
            return fn(*self.args, **self.kwargs)
        return step, lambda: _clone(step(0))


class Decode:
    """One token per call at positions 0, 1, ... (wrapping at the cache's length); the caches are
    emptied before the first call and before the compared sequence."""
    inference = True

    def __init__(self, config, device, dtype, checked=8):
        self.model, self.steps = zoo.decode_steps(config, steps=config.block_size, device=device)
        self.model.to(dtype)
        self.checked = checked

    def explain_call(self):
        self.model.reset_cache()
        return self.model, self.steps[0], {}

    def variant(self, compile_fn):
        fn = compile_fn(self.model)
        self.model.reset_cache()

        def step(i):
            return fn(*self.steps[i % len(self.steps)])

        def check():
            self.model.reset_cache()
            return [t for i in range(self.checked) for t in _clone(step(i))]
        return step, check


class TrainStep:
    """Forward with the loss, backward, an AdamW step, on a fresh copy of the model per variant:
    the losses of the first steps are compared with eager's."""
    inference = False

    def __init__(self, model, args, checked=2):
        self.base, self.args, self.checked = model.train(), args, checked

    def explain_call(self):
        return copy.deepcopy(self.base), self.args, {}

    def variant(self, compile_fn):
        model = copy.deepcopy(self.base)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        fn = compile_fn(model)

        def step(i):
            torch.compiler.cudagraph_mark_step_begin()  # a new step: the last step's graph outputs may go
            _, loss = fn(*self.args)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return loss.detach()
        return step, lambda: [t for i in range(self.checked) for t in _clone(step(i))]


def _gpt_config(quick, **kw):
    # train_shakespeare_char.py's model: 6 layers, 6 heads, width 384, 256 positions, 65 characters.
    if quick:
        return zoo.GPTConfig(block_size=32, vocab_size=65, n_layer=2, n_head=2, n_embd=32, bias=False, **kw)
    return zoo.GPTConfig(block_size=256, vocab_size=65, n_layer=6, n_head=6, n_embd=384, bias=False, **kw)


def _tokens(batch, seq, vocab, device, seed=1):
    return torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed)).to(device)


def _decode(device, dtype, quick):
    return Decode(_gpt_config(quick), device, dtype)


def _nanogpt(device, dtype, quick, train=False):
    torch.manual_seed(0)
    config = _gpt_config(quick)
    batch, seq = (2, 32) if quick else (8, 256)
    model = zoo.GPT(config).to(device, dtype)
    args = (_tokens(batch, seq, config.vocab_size, device), _tokens(batch, seq, config.vocab_size, device, 2))
    return TrainStep(model, args) if train else Forward(model, args)


def _huggingface(name, device, dtype, quick):
    if not zoo.available(name):
        raise Skip("transformers is not installed")
    if quick:
        import transformers

        transformers.logging.set_verbosity_error()
        model, inputs = zoo.build(name)
        kwargs = {k: v.to(device) for k, v in inputs.kwargs.items()}
        return Forward(model.to(device, dtype), kwargs=kwargs)
    import transformers

    transformers.logging.set_verbosity_error()  # its notes on the small configs
    torch.manual_seed(0)
    vocab = 1024
    if name == "llama":
        config = transformers.LlamaConfig(vocab_size=vocab, hidden_size=256, intermediate_size=688,
                                          num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=512)
        model = transformers.LlamaForCausalLM(config)
    else:
        config = transformers.GPT2Config(vocab_size=vocab, n_embd=256, n_layer=4, n_head=4, n_positions=512,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(config)
    ids = _tokens(8, 256, vocab, device)
    return Forward(model.to(device, dtype), kwargs=dict(input_ids=ids, labels=ids))


def _resnet50(device, dtype, quick):
    torch.manual_seed(0)
    if quick:
        model, inputs = zoo.build("resnet")
        return Forward(model.to(device, dtype), (inputs.args[0].to(device, dtype),))
    try:
        import torchvision
        model = torchvision.models.resnet50()
    except ImportError:  # BasicBlocks at ResNet-50's depths, width 64: a ResNet-34
        model = zoo.ResNet(layers=(3, 4, 6, 3), num_classes=1000, width=64)
    x = torch.randn(32, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    return Forward(model.to(device, dtype), (x.to(device, dtype),))


ROWS = {
    "decode": _decode,
    "nanogpt": _nanogpt,
    "llama": lambda device, dtype, quick: _huggingface("llama", device, dtype, quick),
    "gpt2": lambda device, dtype, quick: _huggingface("gpt2", device, dtype, quick),
    "nanogpt_train": lambda device, dtype, quick: _nanogpt(device, dtype, quick, train=True),
    "resnet50": _resnet50,
}


class Skip(Exception):
    """A row that cannot run here, with the reason."""


# ---- measuring ----------------------------------------------------------------------------------

def _clone(out):
    return [t.detach().clone() for t in zoo.tensors(out)]


class _SkipReasons(logging.Handler):
    """The reasons inductor logs when it skips CUDA graphs (its "cudagraphs" artifact logger)."""

    def __init__(self):
        super().__init__()
        self.reasons = []

    def emit(self, record):
        message = record.getMessage()
        if "skipping cudagraphs" in message and message not in self.reasons:
            self.reasons.append(message)


def _cudagraph_counters():
    return {k: v for k, v in torch._dynamo.utils.counters["inductor"].items() if "cudagraph" in k}


def _compiles(compiler):
    """Frames `compiler` has compiled (recompiles included): a running count, compared before and after."""
    if compiler == "tjc":
        return tjc.stats()["compiles"]
    if compiler == "torch.compile":
        return torch._dynamo.utils.counters["frames"]["ok"]
    return 0


def _reset():
    tjc.reset()
    torch._dynamo.reset()  # cudagraph trees too
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _relative_errors(got, expected):
    """Per tensor: |got - expected| / |expected| (norms), or None where shapes or dtypes differ."""
    if len(got) != len(expected):
        return [None]
    errors = []
    for g, e in zip(got, expected):
        if g.shape != e.shape or g.dtype != e.dtype:
            errors.append(None)
        elif not e.is_floating_point():
            errors.append(0.0 if torch.equal(g, e) else float("inf"))
        else:
            scale = e.double().norm().item() or 1.0
            errors.append((g.double() - e.double()).norm().item() / scale)
    return errors


def measure(row, compiler, mode, device, warmup, repeat, skip_log):
    """One variant of a row: first-call seconds, per-call milliseconds (median), the compared outputs."""
    _reset()
    if compiler == "eager":
        compile_fn = lambda model: model  # noqa: E731
    else:
        compile_fn = lambda model: COMPILERS[compiler](model, **MODES[mode])  # noqa: E731
    counters, compiled_before = _cudagraph_counters(), _compiles(compiler)
    skip_log.reasons = []
    with torch.no_grad() if row.inference else torch.enable_grad():
        step, check = row.variant(compile_fn)
        _sync(device)
        t0 = time.perf_counter()
        outputs = _clone(step(0))
        _sync(device)
        first_s = time.perf_counter() - t0
        outputs += check()
        for i in range(warmup):
            step(i)
        times = []
        for i in range(repeat):
            _sync(device)
            t0 = time.perf_counter()
            step(i)
            _sync(device)
            times.append(time.perf_counter() - t0)
    after = _cudagraph_counters()
    compiles = _compiles(compiler) - compiled_before
    deltas = {k: v - counters.get(k, 0) for k, v in after.items() if v != counters.get(k, 0)}
    del step, check
    _reset()
    return dict(first_s=first_s, ms=statistics.median(times) * 1e3, compiles=compiles, cudagraph_counters=deltas,
                cudagraph_skip_reasons=list(skip_log.reasons)), outputs


def capture_counts(row):
    """(tjc graphs, breaks, frames uncompiled), (torch.compile graphs, breaks) of one call."""
    model, args, kwargs = row.explain_call()
    with torch.no_grad() if row.inference else torch.enable_grad():
        _reset()
        ours = tjc.explain(model, backend="eager")(*args, **kwargs)
        _reset()
        theirs = torch._dynamo.explain(model)(*args, **kwargs)
        _reset()
    return dict(tjc_graphs=ours.graph_count, tjc_breaks=ours.graph_break_count, tjc_uncompiled=len(ours.fallbacks),
                tc_graphs=theirs.graph_count, tc_breaks=theirs.graph_break_count)


def run_row(name, device, dtype, opts, skip_log):
    """The row's dict: its capture counts and every variant's measurement (or error)."""
    result = dict(row=name)
    try:
        row = ROWS[name](device, dtype, opts.quick)
    except Skip as why:
        result["skipped"] = str(why)
        return result
    warmup, repeat = (2, 5) if opts.quick else (10, 30 if name.endswith("_train") else 100)
    try:
        result.update(capture_counts(row))
    except Exception as error:  # noqa: BLE001 - reported in the table, the row goes on
        result["explain_error"] = f"{type(error).__name__}: {error}"
    variants = [("eager", "eager")] + [(c, m) for m in opts.modes for c in COMPILERS]
    expected = None
    tolerance = TOLERANCE.get(dtype, 1e-4)
    for compiler, mode in variants:
        key = "eager" if compiler == "eager" else f"{compiler}[{mode}]"
        try:
            measured, outputs = measure(row, compiler, mode, device, warmup, repeat, skip_log)
        except Exception as error:  # noqa: BLE001 - one variant failing must not lose the others
            result[key] = dict(error=f"{type(error).__name__}: {str(error)[:400]}")
            print(f"  {name} {key}: {result[key]['error']}", flush=True)
            _reset()
            continue
        if expected is None:
            expected = outputs
        errors = _relative_errors(outputs, expected)
        measured["max_rel_error"] = None if None in errors else max(errors, default=0.0)
        measured["correct"] = None not in errors and all(e <= tolerance for e in errors)
        measured["cudagraphs_skipped"] = bool(measured["cudagraph_counters"].get("cudagraph_skips"))
        result[key] = measured
    return result


# ---- the table ----------------------------------------------------------------------------------

def ratios(row):
    """{mode: tjc ms / torch.compile ms} for the modes both measured."""
    out = {}
    for mode in MODES:
        ours, theirs = row.get(f"tjc[{mode}]", {}), row.get(f"torch.compile[{mode}]", {})
        if "ms" in ours and "ms" in theirs:
            out[mode] = ours["ms"] / theirs["ms"]
    return out


def _cell(v, fmt):
    return format(v, fmt) if v is not None else "-"


def print_row(row, modes, first):
    if first:
        print_head(f"{'row':<14}{'mode':<16}{'eager ms':>9}{'tjc ms':>9}{'t.c ms':>9}{'tjc/tc':>7}"
                   f"{'tjc 1st s':>10}{'tc 1st s':>9}{'tjc g/b/u':>10}{'tc g/b':>7}{'comp':>6}{'ok':>5}  cudagraphs")
    if "skipped" in row:
        print(f"{row['row']:<14}skipped: {row['skipped']}", flush=True)
        return
    eager = row.get("eager", {})
    counts = (f"{row['tjc_graphs']}/{row['tjc_breaks']}/{row['tjc_uncompiled']}", f"{row['tc_graphs']}/{row['tc_breaks']}") \
        if "tjc_graphs" in row else ("?", "?")
    for mode in modes:
        ours, theirs = row.get(f"tjc[{mode}]", {}), row.get(f"torch.compile[{mode}]", {})
        ratio = ratios(row).get(mode)
        ok = "/".join("err" if "error" in v else ("y" if v.get("correct") else "N") for v in (ours, theirs))
        compiles = "/".join(str(v.get("compiles", "-")) for v in (ours, theirs))
        graphs = ""
        if mode == "reduce-overhead":
            graphs = " ".join(f"{who}:{'SKIPPED' if v.get('cudagraphs_skipped') else ('-' if 'error' in v else 'on')}"
                              for who, v in (("tjc", ours), ("tc", theirs)))
        print(f"{row['row']:<14}{mode:<16}{_cell(eager.get('ms'), '9.3f')}{_cell(ours.get('ms'), '9.3f')}"
              f"{_cell(theirs.get('ms'), '9.3f')}{_cell(ratio, '7.2f')}{_cell(ours.get('first_s'), '10.1f')}"
              f"{_cell(theirs.get('first_s'), '9.1f')}{counts[0]:>10}{counts[1]:>7}{compiles:>6}{ok:>5}  {graphs}", flush=True)
    for key, v in row.items():
        if isinstance(v, dict) and v.get("cudagraph_skip_reasons"):
            print(f"  {row['row']} {key}: " + "; ".join(v["cudagraph_skip_reasons"]), flush=True)


def verdict(rows, modes):
    """Issue 24's goal over every measured row: (held, [what fails it])."""
    failures = []
    for row in rows:
        if "skipped" in row:
            continue
        for mode in modes:
            if mode not in GOAL:
                continue
            ours, theirs = row.get(f"tjc[{mode}]", {}), row.get(f"torch.compile[{mode}]", {})
            ratio = ratios(row).get(mode)
            if ratio is None:
                failures.append(f"{row['row']} {mode}: not measured ({ours.get('error') or theirs.get('error')})")
            elif not ours.get("correct"):
                failures.append(f"{row['row']} {mode}: tjc's outputs differ from eager's")
            elif ratio > GOAL[mode]:
                failures.append(f"{row['row']} {mode}: {ratio:.2f}x > {GOAL[mode]}x")
            if mode == "reduce-overhead" and ours.get("cudagraphs_skipped"):
                failures.append(f"{row['row']} {mode}: tjc skipped CUDA graphs")
    return not failures, failures


def main():
    opts = options(__doc__, "gpu", extra=lambda p: (
        p.add_argument("--device", default="cuda", help="cuda (default) or cpu (a smoke run of the code paths)"),
        p.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of {', '.join(ROWS)}"),
        p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}"),
        p.add_argument("--dtype", default=None, help="bfloat16 on cuda, float32 on cpu unless given"),
        p.add_argument("--no-fx-graph-cache", action="store_true",
                       help="inductor compiles every graph afresh (first calls compare fairly; its Triton "
                            "kernel cache still serves the second compiler; slower)")))
    device = torch.device(opts.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: skipped")
        return
    names = opts.rows.split(",")
    opts.modes = opts.modes.split(",")
    for name, known in [(n, ROWS) for n in names] + [(m, MODES) for m in opts.modes]:
        if name not in known:
            raise SystemExit(f"unknown {name!r}; known: {', '.join(known)}")
    dtype = getattr(torch, opts.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    if opts.no_fx_graph_cache:
        torch._inductor.config.fx_graph_cache = False
    if device.type == "cpu":
        # One intra-op thread: on a shared machine, OpenMP's barriers wait for threads the OS has
        # descheduled and a call takes 100x its time; the CPU run checks code paths, not speed.
        torch.set_num_threads(1)
    warnings.simplefilter("ignore")  # HuggingFace's config warnings; failures show in the table
    skip_log = _SkipReasons()
    for logger in ("torch._inductor.cudagraph_utils.__cudagraphs", "torch._inductor.output_code"):
        logging.getLogger(logger).addHandler(skip_log)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"{where}, {dtype}, torch {torch.__version__}, tjc {tjc.__version__}"
          f"{' (--quick sizes)' if opts.quick else ''}", flush=True)
    rows = []
    for name in names:
        rows.append(run_row(name, device, dtype, opts, skip_log))
        print_row(rows[-1], opts.modes, first=len(rows) == 1)
        write_results(opts.json, torch.__version__, device=where, dtype=str(dtype), quick=opts.quick, rows=rows)
    print("ms: median per call (synchronised, warmed); 1st s: the first call (trace + compile + run);")
    print("g/b/u: graphs/breaks/frames uncompiled of one call (explain); comp: frames compiled in the variant's")
    print("calls, recompiles included (tjc/tc); ok: outputs equal eager's (tjc/tc);")
    print("cudagraphs: SKIPPED where inductor skipped CUDA graphs for that variant (reasons below the row)")
    for mode in opts.modes:
        line = ", ".join(f"{r['row']} {ratios(r)[mode]:.2f}" for r in rows if mode in ratios(r))
        print(f"tjc/torch.compile, {mode}: {line or '-'}")
    held, failures = verdict(rows, opts.modes)
    note = " (a CPU run: the timings check the code paths only)" if device.type != "cuda" else ""
    print(f"issue 24's goal (tjc <= 1.0x with reduce-overhead, <= 1.05x with inductor, every row): "
          f"{'HOLDS' if held else 'NOT MET'}{note}")
    for failure in failures:
        print(f"  {failure}")
    write_results(opts.json, torch.__version__, device=where, dtype=str(dtype), quick=opts.quick, rows=rows,
                  goal_holds=held, goal_failures=failures)


if __name__ == "__main__":
    main()
