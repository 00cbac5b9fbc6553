"""A small training-like program with a graph break and two recompiles: what the compile report's
tests and its screenshot run (`TJC_TRACE_DIR=DIR python -m torch_jit_cache.testing.report_sample`).

What it does, which the tests check in the trace and the page:
- `Block.forward` breaks the graph at `report_progress(h)` (print() inside the call: a side effect);
- its second entry comes from `scale` changing (2 -> 3: the guard `L['scale'] == 2` fails), its third
  from the batch size changing (4 -> 16: a size guard of `L['x']` fails);
- `loss_fn` compiles once, without a break.
Prints the outputs' sums, so a caller can compare them with eager's (TJC_REPORT_SAMPLE_EAGER=1).
"""
from __future__ import annotations

import os

import torch

import torch_jit_cache as tjc


def report_progress(h):
    print("step", tuple(h.shape))   # graph break: print() is a side effect


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, x, scale):
        h = torch.relu(self.fc(x)) * scale
        report_progress(h)
        return h + x


def loss_fn(y, target):
    return torch.nn.functional.mse_loss(y, target)


def run(eager: bool = False) -> list:
    torch.manual_seed(0)
    block = Block()
    model = block if eager else tjc.compile(block, backend="eager")
    loss = loss_fn if eager else tjc.compile(loss_fn, backend="eager")
    sums = []
    for batch, scale in ((4, 2), (4, 2), (4, 3), (16, 3)):
        x = torch.randn(batch, 8)
        y = model(x, scale)
        sums.append(round(loss(y, torch.zeros_like(y)).item(), 5))
    return sums


if __name__ == "__main__":
    print("sums", run(eager=os.environ.get("TJC_REPORT_SAMPLE_EAGER") == "1"))
