"""The tracer: symbolic execution of a frame's bytecode into a torch.fx graph plus guards.

    trace(code, f_locals, f_globals, f_builtins, closure) -> TraceResult

`f_locals` holds the bound arguments by name and, for free variables, their cell contents.
Anything the tracer cannot handle raises Unsupported (never a wrong result).
Layering: translator.py -> handlers/ -> variables/ -> output_graph.py (fx building).
"""
from __future__ import annotations

from ..sources import ClosureSource
from ..trace_result import (ConstantOutput, DictOutput, GraphOutput, ListOutput, SourceOutput,
                            TraceResult, TupleOutput, Unsupported)
from .output_graph import OutputGraph
from .translator import InstructionTranslator
from .variables import (ConstantVariable, DictVariable, ListVariable, NNModuleVariable,
                        TensorVariable, TupleVariable)

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
        nodes: list = []
        try:
            spec = _output_spec(result, nodes)
        except Unsupported as e:
            raise Unsupported(e.reason, filename=code.co_filename,
                              lineno=code.co_firstlineno, instruction="RETURN_VALUE") from None
        try:
            gm = output.finish(nodes)
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


def _output_spec(v, nodes: list):
    if isinstance(v, TensorVariable):
        node = v.as_node()
        if node in nodes:
            return GraphOutput(nodes.index(node))
        nodes.append(node)
        return GraphOutput(len(nodes) - 1)
    if isinstance(v, TupleVariable):
        return TupleOutput(tuple(_output_spec(i, nodes) for i in v.items))
    if isinstance(v, ListVariable):
        return ListOutput(tuple(_output_spec(i, nodes) for i in v.items))
    if isinstance(v, DictVariable):
        return DictOutput(tuple((k, _output_spec(i, nodes)) for k, i in v.items.items()))
    if isinstance(v, ConstantVariable):
        return ConstantOutput(v.value)
    if v.source is not None and isinstance(v, NNModuleVariable) or getattr(v, "fn", None) \
            is not None and v.source is not None:
        return SourceOutput(v.source)
    raise Unsupported(f"returning {v}")


_ = ClosureSource  # re-exported for callers that build closure sources
