"""tracer/variables/copying.py through the public API: copy.deepcopy in traced code.

The contract: a deepcopy of lists, dicts and plain objects is built in the trace as new objects
(mutating the copy leaves the original alone, as in eager); values deepcopy returns as they are
(ints, strs, classes) stay what was copied; Python's memo is followed (an object reached twice is
copied once); and what the trace cannot copy as deepcopy would (a tensor, a class with its own
__deepcopy__) is a graph break, never a shallow guess. Each case compares with eager and counts.
"""
import copy

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from context_helpers import CompiledCalls, compiled_like_eager  # noqa: E402


class Config:
    def __init__(self):
        self.hidden = 4
        self.names = ["q", "k"]
        self.extra = {"scale": 2}


def _copy_and_mutate(x, cfg):
    c = copy.deepcopy(cfg)
    c.hidden += 1
    c.names.append("v")
    c.extra["scale"] = 3
    return x * c.hidden * c.extra["scale"] + len(c.names), cfg.hidden, len(cfg.names), cfg.extra["scale"]


def _copy_of_containers(x, d):
    c = copy.deepcopy(d)
    c["a"].append(9)
    return x + len(c["a"]), len(d["a"]), c


def _memo_keeps_sharing(x):
    shared = [1, 2]
    pair = copy.deepcopy([shared, shared])
    pair[0].append(3)
    return x * len(pair[1]), pair[0] is pair[1]


@pytest.mark.parametrize("fn, args", [
    (_copy_and_mutate, lambda: (torch.randn(2), Config())),
    (_copy_of_containers, lambda: (torch.randn(2), {"a": [1, 2], "b": (3, "s")})),
    (_memo_keeps_sharing, lambda: (torch.randn(2),)),
], ids=["object", "containers", "memo"])
def test_deepcopy_is_built_in_the_trace_in_one_graph(fn, args):
    compiled_like_eager(fn, *args())


def test_the_original_is_untouched_after_the_compiled_call():
    cfg = Config()
    tjc.compile(_copy_and_mutate, backend="eager")(torch.ones(1), cfg)
    assert (cfg.hidden, cfg.names, cfg.extra) == (4, ["q", "k"], {"scale": 2})


class OwnCopy:
    def __init__(self):
        self.n = 2

    def __deepcopy__(self, memo):
        new = OwnCopy()
        new.n = self.n * 10
        return new


@pytest.mark.parametrize("make, reason", [(lambda: torch.ones(2), "deepcopy"), (OwnCopy, "deepcopy")],
                         ids=["tensor", "own-protocol"])
def test_what_the_trace_cannot_copy_breaks_and_runs_eagers_copy(make, reason):
    def copies(x, obj):
        c = copy.deepcopy(obj)
        return x + 1, getattr(c, "n", 0)

    x = torch.ones(2)
    calls = CompiledCalls(copies)
    got, expected = calls(x, make()), copies(x, make())
    torch.testing.assert_close(got[0], expected[0])
    assert got[1] == expected[1]
    out = tjc.explain(copies)(x, make())
    assert out.graph_break_count == 1 and reason in out.break_reasons[0]
