"""Graph breaks on real models, tjc.compile against torch.compile: graphs, breaks and frames run
uncompiled per model, and each of tjc's break reasons.

The models (torch_jit_cache/testing/hf_models.py) are tiny HuggingFace BART, Whisper (inference
and a training step with labels), CLIP, DistilBERT and ViT (training, with labels), and a
ConvNeXt-style stack whose stochastic depth is torchvision's; each reaches a part of the Python
object model in its forward. Counts come from tjc.explain and torch._dynamo.explain
(backend="eager") on the same inputs.

Prints a table and writes benchmarks/results/model_breaks.json.

Usage: python benchmarks/model_breaks.py [--quick] [--models bart_model,clip,...] [--reasons]
"""
import contextlib
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from harness import options, print_head, write_results  # noqa: E402
from torch_jit_cache.testing import hf_models  # noqa: E402


def _extra(parser):
    parser.add_argument("--models", default=",".join(hf_models.BREAK_MODELS),
                        help="comma-separated names (default: all)")
    parser.add_argument("--reasons", action="store_true", help="also print the frames run uncompiled")


def _counts(name):
    case = hf_models.build(name)
    args, kwargs = case.inputs.args, case.inputs.kwargs
    tjc.reset()
    torch._dynamo.reset()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        ours = tjc.explain(case.model)(*args, **kwargs)
        try:
            theirs = torch._dynamo.explain(case.model)(*args, **kwargs)
        finally:
            torch._dynamo.reset()
    return dict(model=name, tjc_graphs=ours.graph_count, tjc_breaks=ours.graph_break_count,
                tjc_uncompiled=len(ours.fallbacks), torch_graphs=theirs.graph_count,
                torch_breaks=theirs.graph_break_count, tjc_break_reasons=list(ours.break_reasons),
                tjc_uncompiled_reasons=list(ours.fallbacks))


def main():
    opts = options(__doc__, "model_breaks", _extra)
    names = [n for n in opts.models.split(",") if n]
    rows = []
    for name in names:
        if not hf_models.available(name):
            print(f"{name}: skipped (needs {hf_models.NEEDS[name]})")
            continue
        rows.append(_counts(name))
    head = f"{'model':18} {'tjc graphs/breaks':>18} {'uncompiled':>10} {'torch.compile':>14}"
    print_head(head)
    for r in rows:
        ours = f"{r['tjc_graphs']}/{r['tjc_breaks']}"
        theirs = f"{r['torch_graphs']}/{r['torch_breaks']}"
        print(f"{r['model']:18} {ours:>18} {r['tjc_uncompiled']:>10} {theirs:>14}")
    for r in rows:
        if r["tjc_break_reasons"] or (opts.reasons and r["tjc_uncompiled_reasons"]):
            print(f"\n{r['model']}:")
            for reason in r["tjc_break_reasons"]:
                print(f"  break: {reason}")
            if opts.reasons:
                for reason in r["tjc_uncompiled_reasons"]:
                    print(f"  uncompiled: {reason}")
    write_results(opts.json, torch.__version__, rows=rows)


if __name__ == "__main__":
    main()
