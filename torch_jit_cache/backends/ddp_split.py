"""DDP: a graph split at gradient-bucket boundaries, so that communication overlaps the backward.

    model = tjc.compile(DDP(model), backend="inductor")

DDP all-reduces gradients bucket by bucket, each bucket as soon as all its gradients are ready.
AOTAutograd makes one backward function of a graph: every parameter's gradient comes out at its
end, so with one graph no all-reduce starts before the whole backward is done. Compiled while a
DDP forward runs (`DistributedDataParallel._get_active_ddp_module()`), a graph is cut where DDP's
buckets end (walking the graph backwards, as gradients come, a bucket closes once the parameters
its nodes read reach `bucket_bytes_cap`), each piece is compiled by the backend on its own, and the
pieces run one after the other: the backward of the last piece hands its bucket's gradients to DDP
while the backward of the earlier pieces runs. torch.compile's DDPOptimizer does the same.

Only for backends that go through AOTAutograd (every built-in but "eager", which runs the graph op
by op, autograd node by node, and gains nothing); the cut graph computes what the whole one does.
A graph that holds module state (get_attr, call_module), a parameter with a symbolic size, or fewer
than two buckets' worth of parameters is compiled whole.
"""
from __future__ import annotations

import sys

from . import static_inputs


def bucket_cap() -> int | None:
    """The bucket size in bytes of the DDP module whose forward is running, or None."""
    ddp = sys.modules.get("torch.nn.parallel.distributed")
    active = ddp.DistributedDataParallel._get_active_ddp_module() if ddp is not None else None
    return None if active is None else int(active.bucket_bytes_cap)


def partitions(gm, example_inputs, cap: int) -> dict | None:
    """{node: piece} for gm's operation nodes, pieces numbered in forward order, or None where gm
    stays whole (see the module's docstring)."""
    import torch

    if any(node.op in ("get_attr", "call_module") for node in gm.graph.nodes):
        return None
    sizes = {}
    for node, t in zip(gm.graph.find_nodes(op="placeholder"), example_inputs):
        if node.meta.get(static_inputs.STATIC_INPUT) and isinstance(t, torch.Tensor) and t.requires_grad:
            if not isinstance(t.numel(), int):
                return None
            sizes[node] = t.numel() * t.element_size()
    bucket, filled, counted, backward = 0, 0, set(), {}
    for node in reversed(gm.graph.nodes):
        if node.op in ("placeholder", "output"):
            continue
        if filled >= cap:   # the bucket is full: the nodes before it go to the next one
            bucket, filled = bucket + 1, 0
        backward[node] = bucket
        for arg in node.all_input_nodes:
            if arg in sizes and arg not in counted:
                counted.add(arg)
                filled += sizes[arg]
    if bucket == 0:
        return None
    return {node: bucket - b for node, b in backward.items()}


def compile_split(gm, example_inputs, pieces: dict, compile_piece):
    """gm cut into `pieces`, each compiled by `compile_piece(piece_gm, piece_example_inputs)` (a
    callable returning a tuple of the piece's outputs): the callable that runs them in order."""
    import torch
    from torch.fx.passes.split_module import split_module

    split = split_module(gm, None, lambda node: pieces[node])
    for call in split.graph.find_nodes(op="call_module"):   # a piece's static inputs stay static
        inner = getattr(split, call.target).graph.find_nodes(op="placeholder")
        for arg, node in zip(call.args, inner):
            kind = arg.meta.get(static_inputs.STATIC_INPUT) if isinstance(arg, torch.fx.Node) else None
            if kind:
                node.meta[static_inputs.STATIC_INPUT] = kind

    class CompilePieces(torch.fx.Interpreter):
        # Runs the cut graph on the fake inputs: each piece meets the fake values it will be
        # called with, is compiled on them, and is replaced by its compiled callable.
        # compile_piece is the instance's, never the class's closure: a class is in a cycle with
        # itself, and through compile_piece it held the compile() call's FrameCompiler, its cache
        # owner and entries, until the collector ran.
        def call_module(self, target, args, kwargs):
            piece = getattr(self.module, target)
            out = piece(*args, **kwargs)   # before compiling: the backend may rewrite its output
            compiled = self.compile_piece(piece, list(args))
            delattr(self.module, target)
            setattr(self.module, target, compiled if isinstance(out, (tuple, list)) else _first(compiled))
            return out

    runner = CompilePieces(split)
    runner.compile_piece = compile_piece
    runner.run(*example_inputs)
    split.recompile()
    return split.forward


def _first(compiled):
    """A piece with one output is called for that output; its compiled callable returns a tuple."""
    def run(*args):
        return compiled(*args)[0]
    return run
