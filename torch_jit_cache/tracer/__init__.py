"""The tracer: symbolic execution of a frame's bytecode into a torch.fx graph plus guards.

    trace(code, f_locals, f_globals, f_builtins, closure) -> TraceResult

`f_locals` holds the bound arguments by name and, for free variables, their cell contents.
Anything the tracer cannot handle raises Unsupported (never a wrong result).
Layering: translator.py -> handlers/ -> variables/ -> output_graph.py (fx building).
"""
from __future__ import annotations

from ..trace_result import GraphOutput, TraceResult, Unsupported
from .output_graph import OutputGraph
from .translator import InstructionTranslator

__all__ = ["trace", "Unsupported"]


def trace(code, f_locals, f_globals, f_builtins, closure=None) -> TraceResult:
    nargs = code.co_argcount + code.co_kwonlyargcount \
        + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    arg_names = code.co_varnames[:nargs]
    raw_args = {n: f_locals[n] for n in arg_names if n in f_locals}
    free = dict(f_locals)
    if closure is not None:  # cell contents from the closure win over f_locals
        for name, cell in zip(code.co_freevars, closure):
            try:
                free[name] = cell.cell_contents
            except ValueError:
                free.pop(name, None)
    output = OutputGraph(f_globals, f_builtins)
    tx = InstructionTranslator(code, output, f_globals, raw_args=raw_args,
                               free_cells=InstructionTranslator.root_cells(code, free))
    try:
        result = tx.run()
        outputs = GraphOutputs()
        try:
            spec = result.reconstruct(outputs)
        except Unsupported as e:
            raise Unsupported(e.reason, filename=code.co_filename,
                              lineno=code.co_firstlineno, instruction="RETURN_VALUE") from None
        try:
            gm = output.finish(outputs.nodes)
        except Unsupported:
            raise
        except Exception as e:  # torch.fx refused the graph (lint, codegen): never the user's error
            raise Unsupported(f"building the fx graph failed: {type(e).__name__}: {e}",
                              filename=code.co_filename, lineno=code.co_firstlineno) from None
        return TraceResult(graph=gm, graph_inputs=list(output.graph_inputs),
                           example_inputs=list(output.example_inputs), output=spec,
                           guards=output.guards)
    finally:
        output.release()
        del tx, output


class GraphOutputs:
    """The graph's outputs, numbered as trackers are rebuilt (`VariableTracker.reconstruct`): one
    output per distinct node, however often it is returned."""

    def __init__(self):
        self.nodes: list = []
        self._index: dict = {}

    def graph_output(self, node) -> GraphOutput:
        index = self._index.get(node)
        if index is None:
            index = self._index[node] = len(self.nodes)
            self.nodes.append(node)
        return GraphOutput(index)
