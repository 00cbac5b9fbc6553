"""The tracer: symbolic execution of a frame's bytecode into a torch.fx graph plus guards.

    trace(code, f_locals, f_globals, f_builtins, closure) -> TraceResult

`f_locals` holds the bound arguments by name and, for free variables, their cell contents.
Anything the tracer cannot handle raises Unsupported (never a wrong result).
Layering: frame.py (one trace of a root frame) -> translator.py -> handlers/ -> variables/ ->
output_graph.py (fx building); rebuild.py turns trackers into output specs. Tracing a frame again
at a graph break is graph_break/driver.py's, through `trace`.
"""
from __future__ import annotations

from ..guard.trace_result import Unsupported
from .frame import final_shape_guards, release_shape_state, root_translator, trace

__all__ = ["trace", "root_translator", "final_shape_guards", "release_shape_state", "Unsupported"]
