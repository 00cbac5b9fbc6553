"""Test helpers for code that compiles: backends that count what they were asked to compile.

`CompileCounter` is the backend tests pass to `tjc.compile(..., backend=cnt)` to assert how many
frames were compiled (recompiles show up as a higher count) and how many operations the graphs
held. It keeps counts only, never the graphs: a test that checks that dropped models are freed
must not be defeated by its own counter.

`check_refleaks(fn)` runs fn repeatedly and raises RefleakError when memory keeps growing after
warm-up (refleaks.py; `pytest --refleaks` does it for every test, pytest_plugin.py).
Importing this module needs no torch.
"""
from __future__ import annotations

from typing import Callable

from .refleaks import RefleakError, RefleakReport, check_refleaks

__all__ = ["CompileCounter", "CompileCounterWithBackend", "RefleakError", "RefleakReport",
           "check_refleaks", "count_ops"]

_CALL_OPS = ("call_function", "call_method", "call_module")


def count_ops(gm) -> int:
    """The operations in a graph: its call_function, call_method and call_module nodes."""
    return sum(1 for node in gm.graph.nodes if node.op in _CALL_OPS)


class CompileCounter:
    """A backend that counts compiled frames and their operations, and runs the graph eagerly."""

    runs_graph_eagerly = True   # what the tracer lets into a graph may depend on it (backends)

    def __init__(self):
        self.frame_count = 0
        self.op_count = 0

    def __call__(self, gm, example_inputs) -> Callable:
        self.frame_count += 1
        self.op_count += count_ops(gm)
        return gm.forward

    def clear(self) -> None:
        self.frame_count = 0
        self.op_count = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(frame_count={self.frame_count}, op_count={self.op_count})"


class CompileCounterWithBackend(CompileCounter):
    """Counts like CompileCounter, then compiles with the named (or given) backend."""

    def __init__(self, backend="eager"):
        super().__init__()
        self.backend = backend
        self.runs_graph_eagerly = backend == "eager"

    def __call__(self, gm, example_inputs) -> Callable:
        from ..backends import lookup   # keeps `import torch_jit_cache.testing` light

        self.frame_count += 1
        self.op_count += count_ops(gm)
        return lookup(self.backend)(gm, example_inputs)
