"""Programs compiled in rounds separated by tjc.reset(), for test_process_state.py: each round
returns what the compiler made (counters, graphs, guards), which must be the same in every round and
in a fresh process.

    python reset_rounds.py ROUNDS [BACKEND]   # one `ROUND {json}` line per round; the first is a
                                              # fresh process's. BACKEND: "eager" for the disk
                                              # cache (which stores named backends only); the
                                              # graphs are then not recorded

The programs: a model whose identical blocks break their graph on data (the resume functions of
each branch), a function called with three sizes (automatic dynamic), blocks of one class compiled
one by one across two stages of other widths, each with its own rate (one shared compiler), and
nanoGPT from the zoo. Weights and inputs are seeded. Classes live at module level, so that the disk
cache can re-bind them by name.
"""
import json
import re
import sys

import torch
from torch import nn

import torch_jit_cache as tjc
from torch_jit_cache import runtime
from torch_jit_cache.graph_break import resume
from torch_jit_cache.testing import models as zoo


class BranchBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        y = self.lin(x)
        if y.sum() > 0:   # a graph break on data
            y = y + 1
        return y


class BranchNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(BranchBlock() for _ in range(4))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def scaled(x):
    return x * 2 + x.sum(0)


class StageBlock(nn.Module):
    def __init__(self, width, rate):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.rate = rate

    def forward(self, x):
        return x + (1.0 - self.rate) * torch.relu(self.lin(x))


class Stages(nn.Module):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList(nn.Sequential(*(StageBlock(w, (2 * s + b) / 10) for b in range(2)))
                                    for s, w in enumerate((4, 8)))
        self.down = nn.Linear(4, 8)

    def forward(self, x):
        x = self.stages[0](x)
        return self.stages[1](self.down(x))


_ADDRESS = re.compile(r" at 0x[0-9a-f]+")


class _Graphs:
    """A backend that keeps each graph's code, as text."""

    def __init__(self):
        self.codes = []

    def __call__(self, gm, example_inputs):
        self.codes.append(_ADDRESS.sub("", gm.code))
        return gm.forward


# One backend for every round: a module's compiler is shared by what it is compiled with, the backend
# included, so a new one per round would never meet the last round's compiler.
GRAPHS = _Graphs()


def _entries(*codes) -> dict:
    """The guards of every live entry of `codes` and of every resume code, as text by qualname."""
    out = {}
    for code in [*codes, *list(resume._RESUME_CODES.keys())]:
        for entry in runtime.cache_entries(code):
            out.setdefault(code.co_qualname, []).append(_ADDRESS.sub("", str(entry.guards)))
    return {name: sorted(texts) for name, texts in sorted(out.items())}


# Counters that move with objects dying inside a compiled call (a torch weakref callback is a frame
# the hook sees and skips), not with what the compiler decides.
_UNDECIDED = ("misses", "skips")


def run_round(backend=None) -> tuple:
    """One round: reset(), then every program, compared with eager. Returns what the compiler made
    and the compiled objects, for the caller to keep alive while the next round compiles (as
    `tjc.reset(); model = tjc.compile(Net())` does: the last round's model dies only once the
    assignment is done)."""
    tjc.reset()
    GRAPHS.codes = []
    graphs = GRAPHS if backend is None else backend
    torch.manual_seed(0)
    net, x = BranchNet(), torch.randn(2, 8)
    compiled = tjc.compile(net, backend=graphs)
    torch.testing.assert_close(compiled(x), net(x))

    f = tjc.compile(scaled, backend=graphs)
    for rows in (3, 5, 7):
        t = torch.randn(rows, 4)
        torch.testing.assert_close(f(t), scaled(t))

    torch.manual_seed(0)
    stages, x = Stages(), torch.randn(2, 4)
    expected = stages(x)
    for stage in stages.stages:
        for block in stage:
            tjc.compile_(block, backend=graphs)
    for _ in range(2):
        torch.testing.assert_close(stages(x), expected)

    model, inputs = zoo.build("nanogpt")
    model.eval()
    with torch.no_grad():
        expected = model(*inputs.args, **inputs.kwargs)
        gpt = tjc.compile(model, backend=graphs)
        got = gpt(*inputs.args, **inputs.kwargs)
    torch.testing.assert_close(got, expected)

    stats = {k: v for k, v in tjc.stats().items() if k not in _UNDECIDED}
    made = {"stats": stats, "graphs": GRAPHS.codes,
            "entries": _entries(BranchNet.forward.__code__, BranchBlock.forward.__code__, scaled.__code__,
                                StageBlock.forward.__code__, type(model).forward.__code__)}
    return made, (compiled, f, stages, gpt)


def run_rounds(rounds: int, backend=None) -> list:
    """`rounds` rounds, each round's compiled objects alive until the next has compiled."""
    made, alive = [], None
    for _ in range(rounds):
        one, alive = run_round(backend)
        made.append(one)
    del alive
    return made


def main(argv) -> None:
    for one in run_rounds(int(argv[1]), *argv[2:3]):
        print("ROUND " + json.dumps(one), flush=True)


if __name__ == "__main__":
    # Run as the module reset_rounds, not __main__: guards name the classes by module, and the
    # test compares with what its own process makes.
    import reset_rounds as this_module

    this_module.main(sys.argv)
