"""One trace of a root frame: its translator, its end state, and the ShapeEnv it leaves.

`trace` runs the root frame's translator once, to RETURN_VALUE or to a cut, and makes the
TraceResult: the fx graph, its inputs, the guards and the output spec. Tracing a frame again (at a
break, where a generator was made, with static shapes, past every break) is the graph-break
driver's (graph_break/driver.py), which calls `trace` for each attempt.
"""
from __future__ import annotations

from ..guard.shape_guards import pinning
from ..guard.trace_result import TraceResult, Unsupported
from .output_graph import OutputGraph
from .rebuild import GraphOutputs, return_state
from .translator import InstructionTranslator

__all__ = ["trace", "root_translator", "final_shape_guards", "release_shape_state"]


def trace(code, f_locals, f_globals, f_builtins, closure=None, cut=None, plan=None) -> TraceResult:
    """One trace of the root frame, to its return or to a cut.

    `cut`: where to stop and what to make of the state there (graph_break/state.py `Cut`: its
    `stop_at`, the (instruction, arrival) where the root frame stops, and `state(tx, outputs)`, the
    output spec and side effects there); None: trace to RETURN_VALUE. `plan`: dynamic.FramePlan,
    which tensor dimensions are symbols (None: all static). Raises GeneratorAtBreak (rebuild.py)
    where the state holds a suspended generator; the graph-break driver moves the cut."""
    stop_at = cut.stop_at if cut is not None else None
    output, tx = root_translator(code, f_locals, f_globals, f_builtins, closure, plan, stop_at=stop_at)
    try:
        result = tx.run()
        outputs = GraphOutputs()
        if cut is not None and not tx.stopped:
            raise Unsupported("the second trace did not reach the graph break (tracer bug)",
                              filename=code.co_filename, lineno=code.co_firstlineno)
        try:
            if cut is not None:
                spec, effects = cut.state(tx, outputs)
            else:
                spec, effects = return_state(result, output.side_effects, outputs)
                effects = (*effects, *output.leave_grad_mode_effects(output.grad_mode))
        except Unsupported as e:
            where = "graph break" if cut is not None else "RETURN_VALUE"
            failed = Unsupported(e.reason, filename=code.co_filename, lineno=code.co_firstlineno, instruction=where)
            # Traced to its return with no tensor work, the frame run as written does all the trace
            # saw: what its return holds need not be rebuilt (convert_frame skips it, as a frame
            # whose trace does no tensor work).
            failed.leaves_without_tensor_work = cut is None and not output.has_tensor_work()
            raise failed from None
        try:
            gm = output.finish(outputs.nodes)
            output.fake_shapes.check_in_graph(gm, output.example_inputs)
        except Unsupported as e:
            if e.filename != "?" or type(e) is not Unsupported:
                raise
            raise Unsupported(e.reason, filename=code.co_filename, lineno=code.co_firstlineno,
                              instruction="building the graph") from None
        except Exception as e:  # torch.fx refused the graph (lint, codegen): never the user's error
            raise Unsupported(f"building the fx graph failed: {type(e).__name__}: {e}",
                              filename=code.co_filename, lineno=code.co_firstlineno) from None
        result = TraceResult(graph=gm, graph_inputs=list(output.graph_inputs),
                             example_inputs=list(output.example_inputs), output=spec,
                             guards=output.guards, side_effects=effects,
                             shape_state=output.fake_shapes, exact_reads=tuple(output.exact_reads))
        result.shape_guards = final_shape_guards(result)
        output.fake_shapes = None   # handed to the result: released by its user (release_shape_state)
        return result
    finally:
        output.release()
        del tx, output


def final_shape_guards(result: TraceResult):
    """The shape guards of `result` from its ShapeEnv as it stands now: called when the trace ends
    and again after the backend compiled, which may have specialised sizes (inductor fixing a
    convolution's channel count adds a replacement and a guard to the ShapeEnv). A size the backend
    made a constant is no symbol's any more, so TENSOR_MATCH checks it. Raises Unsupported for a
    guard that cannot be built: the entry is then not made."""
    shape_guards = None
    if result.shape_state is not None:
        result.shape_state.check_marks()
        shape_guards = result.shape_state.guards()
        if not shape_guards.bindings and not shape_guards.exprs:
            shape_guards = None   # a static trace: TENSOR_MATCH checks every size
    return pinning(shape_guards, result.exact_reads)


def release_shape_state(result: TraceResult) -> None:
    """Drops `result`'s ShapeEnv and fake inputs (fake_shapes.py: nothing may wait for the collector)."""
    if result.shape_state is not None:
        result.shape_state.release()
        result.shape_state = None


def _root_args(code, f_locals) -> dict:
    nargs = code.co_argcount + code.co_kwonlyargcount \
        + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return {n: f_locals[n] for n in code.co_varnames[:nargs] if n in f_locals}


def _free(code, f_locals, closure) -> dict:
    free = dict(f_locals)
    if closure is not None:  # cell contents from the closure win over f_locals
        for name, cell in zip(code.co_freevars, closure):
            try:
                free[name] = cell.cell_contents
            except ValueError:
                free.pop(name, None)
    return free


def root_translator(code, f_locals, f_globals, f_builtins, closure, plan=None, **options):
    """A fresh OutputGraph and the root frame's translator over it."""
    output = OutputGraph(f_globals, f_builtins, plan)
    cells = InstructionTranslator.root_cells(code, _free(code, f_locals, closure), output, closure)
    return output, InstructionTranslator(code, output, f_globals, raw_args=_root_args(code, f_locals),
                                         free_cells=cells, **options)
