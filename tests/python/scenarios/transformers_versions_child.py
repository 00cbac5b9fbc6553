"""Child of test_transformers_versions.py: run with another transformers first on PYTHONPATH, it
builds each HuggingFace zoo model from its config, runs it eagerly, under tjc.compile (three calls)
and under torch.compile's explain, and prints one JSON line per model (backend "eager" throughout)."""
import json
import sys
import warnings

import torch
import torch._dynamo
import transformers

import torch_jit_cache as tjc
from torch_jit_cache.testing import models as zoo


def main(names):
    warnings.simplefilter("ignore")
    for name in names:
        model, inputs = zoo.build(name)
        model.eval()
        with torch.no_grad():
            expected = zoo.tensors(model(*inputs.args, **inputs.kwargs))
            ours = tjc.explain(model)(*inputs.args, **inputs.kwargs)
            tjc.reset()
            compiled = tjc.compile(model)
            same, compiles = [], []
            for _ in range(3):
                got = zoo.tensors(compiled(*inputs.args, **inputs.kwargs))
                same.append(len(got) == len(expected) and all(
                    g.shape == e.shape and torch.allclose(g, e, rtol=1e-4, atol=1e-5) for g, e in zip(got, expected)))
                compiles.append(tjc.stats()["compiles"])
            tjc.reset()
            theirs = torch._dynamo.explain(model)(*inputs.args, **inputs.kwargs)
            torch._dynamo.reset()
        print(json.dumps(dict(model=name, transformers=transformers.__version__, same=same, compiles=compiles,
                              graphs=ours.graph_count, breaks=ours.graph_break_count,
                              fallbacks=[str(f)[:300] for f in ours.fallbacks],
                              reasons=[str(r)[:300] for r in ours.break_reasons],
                              tc_graphs=theirs.graph_count, tc_breaks=theirs.graph_break_count)), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
