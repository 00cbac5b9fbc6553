"""The graph-break driver: the one loop that traces a frame again.

    trace_frame(frame, plan, dynamic, fullgraph) -> Traced

reads top to bottom as the attempts it makes, each one trace of the root frame (tracer.trace):
1. the frame as it is (`plan`: symbolic sizes where frontend/dynamic.py chose them);
2. where that trace failed at an instruction the frame can be cut at (plan.py), the frame again,
   stopped there (state.py `Cut`): a trace never resumes another's state, since the first may have
   added nodes and guards past the break (an inlined call that failed half-way);
3. where the state at the cut holds a suspended generator (it cannot be rebuilt), the cut moved to
   where the first live generator was made, and the frame traced again, a few times at most;
4. where the symbolic trace broke or failed and a static one would not, the static one (and the
   code keeps static shapes from then on: `dynamic.refuse`);
5. under fullgraph=True, instead of cutting, every break the frame would take, each found by
   tracing again past the ones before (`list_breaks`), raised as one EveryBreak.
The random generator's state is put back after each attempt: nothing a trace runs may shift the
numbers the compiled call then draws from eager's.
"""
from __future__ import annotations

import dataclasses

import torch

from .. import tracer
from ..bytecode.analysis import BreakRefused
from ..guard.trace_result import (BreakOutput, FloatSymbolGuard, TraceBudgetExceeded, TraceResult, Unsupported,
                                  drop_tracebacks)
from ..tracer.rebuild import BlockAtBreak, GeneratorAtBreak
from .passing import PassingOver
from .plan import plan_break
from .state import Cut

__all__ = ["Traced", "EveryBreak", "trace_frame", "list_breaks"]

_MAX_BREAK_MOVES = 8


class EveryBreak(Exception):
    """fullgraph=True: the frame would break more than once; the text lists each break."""


@dataclasses.dataclass
class Traced:
    """A frame's trace: its result, the text of the failure it was cut at (None: not cut), whether
    that failure was inside a call the frame inlined there, and the dynamic plan it used."""
    result: TraceResult
    break_reason: str | None
    in_callee: bool
    plan: object

    @property
    def cut(self) -> bool:
        return isinstance(self.result.output, BreakOutput)


def trace_frame(frame, plan, dynamic, fullgraph: bool) -> Traced:
    """The frame's trace, cut at its first break where it has one (the module docstring's steps).
    A trace with symbolic sizes that breaks or fails where the static one would not (an opaque
    module that cannot run on fake tensors, an op without a symbolic rule) must not make the frame
    worse than static shapes do: the frame is traced again with static shapes, and if that trace
    has no break, it is used and `dynamic` keeps static shapes for this code from then on (one
    entry per size, as before dynamic shapes). A mark_dynamic dimension is never given up this
    way: the user asked for it."""
    rng = torch.random.get_rng_state()
    if not plan.symbolic:
        return _trace_cut(frame, plan, fullgraph, rng)
    failure = None
    try:
        traced = _trace_cut(frame, plan, fullgraph, rng)
    except FloatSymbolGuard:
        raise   # floats become constants, the tensors' sizes stay symbolic (pipeline/convert_frame.py)
    except TraceBudgetExceeded:
        raise   # a static trace runs the same loop: the frame runs uncompiled
    except Unsupported as e:
        failure, traced = e, None
    if traced is not None and (not traced.cut or plan.strict):
        return traced
    if failure is not None and plan.strict:
        raise failure
    static = plan.as_static()
    try:
        static_traced = _trace_cut(frame, static, fullgraph, rng)
    except Unsupported:
        if failure is not None:
            raise failure from None
        return traced
    if static_traced.cut and traced is not None:
        tracer.release_shape_state(static_traced.result)
        return traced
    if traced is not None:
        tracer.release_shape_state(traced.result)
    why = str(failure) if failure is not None else traced.break_reason
    if failure is not None:
        drop_tracebacks(failure)
    dynamic.refuse(frame.f_code, why)
    return static_traced


def _trace_cut(frame, plan, fullgraph: bool, rng) -> Traced:
    """The frame traced to its end, or, when the trace fails at an instruction of this frame where
    it can be cut, a second trace that stops there, with the failure's text and whether it failed
    inside a call the frame inlined there."""
    try:
        return Traced(_trace_moving(frame, None, plan), None, False, plan)
    except Unsupported as e:
        if e.break_at is None:
            raise
        if fullgraph:   # name every break, not only the first
            texts = list_breaks(frame.f_code, frame.f_locals, frame.f_globals, frame.f_builtins,
                                frame.closure, e)
            if len(texts) > 1:
                raise EveryBreak(_every_break_text(texts)) from None
            raise
        failure = (str(e), e.reason, e.filename, e.lineno, e.instruction, e.break_at, e.in_callee)
        drop_tracebacks(e)
    finally:
        torch.random.set_rng_state(rng)
    text, reason, filename, lineno, instruction, (index, arrival), in_callee = failure
    try:
        cut = Cut(plan_break(frame.f_code, index), arrival)
    except BreakRefused as why:
        raise Unsupported(f"{reason}; no graph break there: {why}", filename=filename,
                          lineno=lineno, instruction=instruction) from None
    try:
        return Traced(_trace_moving(frame, cut, plan), text, in_callee, plan)
    except FloatSymbolGuard:
        raise
    except Unsupported as refused:
        # The state at the cut could not be carried over (a with block no resume function enters
        # again, a value that cannot be rebuilt): the fallback names the break that caused it first,
        # and is located there, so reports group it by its real cause.
        drop_tracebacks(refused)
        raise Unsupported(f"{reason}; no graph break there: {refused.reason}", filename=filename,
                          lineno=lineno, instruction=instruction) from None
    finally:
        torch.random.set_rng_state(rng)


def _trace_moving(frame, cut, plan) -> TraceResult:
    """One trace to `cut` (None: to the return). A generator alive at the cut cannot be rebuilt
    (variables/python_objects/generators.py): the cut moves to where the first generator the frame made and had
    not exhausted there was made (before it, that generator does not exist yet), and the frame is
    traced again, a few times at most."""
    code = frame.f_code
    for _ in range(_MAX_BREAK_MOVES):
        try:
            return tracer.trace(code, frame.f_locals, frame.f_globals, frame.f_builtins, frame.closure,
                                cut=cut, plan=plan)
        except GeneratorAtBreak as moved:
            where, what = moved.to, "a generator is alive at the graph break"
            earlier = "where it was made"
        except BlockAtBreak as moved:
            where, what = moved.to, f"the break is inside a with block of {moved.what}"
            earlier = "before its with statement"
        if where is None or where == cut.stop_at:
            break
        try:
            cut = Cut(plan_break(code, where[0]), where[1])
        except BreakRefused as why:
            raise Unsupported(f"{what}, and the frame cannot be cut {earlier} ({why})",
                              filename=code.co_filename, lineno=code.co_firstlineno,
                              instruction="graph break") from None
    raise Unsupported(f"{what} (it cannot be carried over)",
                      filename=code.co_filename, lineno=code.co_firstlineno, instruction="graph break")


def _every_break_text(texts: list) -> str:
    counts = dict.fromkeys(texts, 0)
    for t in texts:
        counts[t] += 1
    lines = [f"  {i}. {t}" + (f" ({n} times)" if n > 1 else "")
             for i, (t, n) in enumerate(counts.items(), 1)]
    return (f"{len(texts)} graph breaks (values they make are unknown here, so breaks "
            "that depend on them may be missing):\n" + "\n".join(lines))


def list_breaks(code, f_locals, f_globals, f_builtins, closure, first, limit: int = 64) -> list:
    """fullgraph=True: the text of every break the frame would take, starting from `first` (the
    Unsupported its trace stopped at, with `break_at` set). Each round traces the frame again,
    passing over the breaks found so far (passing.py), to the next one. The list
    ends at the frame's end, or with the failure that stops it: one that cannot be cut
    (plan_break refuses it), a failure in no instruction of the root, or a jump on a
    value an unsupported instruction made (its path is unknown)."""
    found, failure = {}, first
    texts = [str(first)]
    while failure is not None and len(found) < limit:
        index, arrival = failure.break_at
        try:
            found[(index, arrival)] = plan_break(code, index)
        except BreakRefused as why:
            texts[-1] += f"; no graph break there ({why}): breaks after it are not listed"
            break
        failure = None
        output, tx = tracer.root_translator(code, f_locals, f_globals, f_builtins, closure,
                                            pass_over=PassingOver(found))
        try:
            tx.run()
        except Unsupported as e:
            texts.append(str(e))
            if e.break_at is None or e.break_at in found:
                break
            failure = e
            e.__traceback__ = None
        finally:
            output.release()
            del tx, output
    return texts
