"""Emitting the code after a graph: the transformed code's end when the trace stopped at a break.

codegen.build_transformed_code calls `emit_break` after the graph call and the loads of the side
effects' targets and values. What it emits, in order (graph_break/__init__.py has the picture):
every carried stack item, live local and consumed item into a temporary (all before the
instruction runs, so it cannot change what they load); the side effects, in program order; the
break's switches entered (`Switches`: grad mode, autocast blocks) inside a protected range whose
handler leaves them and re-raises; the temporaries cleared except what the resume call passes; the
instruction itself, at its own line; then one resume call per target, with the live locals and
stack items as arguments, whose result the frame returns.

What must stay true: nothing the frame keeps in a local when the instruction or the resume
function raises may be the exception (exception -> traceback -> frame -> exception would keep the
frame's locals alive until gc), so temporaries and a resume code's stack arguments are cleared
before the instruction runs and after the resume call's last load.

No torch here: codegen and the runtime's torch-free tests import this module.
"""
from __future__ import annotations

import types
from typing import Callable, Sequence

import bytecode
from bytecode import Instr, TryBegin, TryEnd

from ..bytecode.emitter import CodegenError, Emitter, emitted_jump
from ..guard.trace_result import BreakOutput, ContextSwitch, EnteredContext
from .resume import stack_args

__all__ = ["emit_break", "Switches"]


def emit_break(em, spec: BreakOutput, result_local: str | None, resume_fns: Sequence[Callable],
               loaded: list, apply_effects: Callable) -> None:
    """After the graph: rebuild the stack and live locals, replay the side effects (`loaded` into
    temporaries already; `apply_effects(em, loaded)` emits them), run the unsupported instruction,
    call the resume function. `em`: codegen's emitter (the primitives and `build_output`)."""
    plan = spec.plan
    temp = em.temp
    if len(resume_fns) != len(plan.targets):
        raise CodegenError(f"{len(plan.targets)} resume targets but {len(resume_fns)} resume functions")

    # Everything is rebuilt before the instruction runs, so nothing it does changes what is loaded.
    carried = spec.stack[:len(spec.stack) - plan.consumed]
    consumed = spec.stack[len(spec.stack) - plan.consumed:]
    carried_temps = []
    for item in carried:
        if item is None or isinstance(item, EnteredContext):   # the resume function re-enters a block
            carried_temps.append(None)
            continue
        carried_temps.append(temp("___tjc_stack"))
        em.build_output(item, result_local)
        em.emit("STORE_FAST", carried_temps[-1])
    local_temps = {}
    for name, item in spec.locals:
        local_temps[name] = temp(f"___tjc_local_{name}")
        em.build_output(item, result_local)
        em.emit("STORE_FAST", local_temps[name])
    consumed_temps = []
    for item in consumed:
        consumed_temps.append(None if item is None else temp("___tjc_arg"))
        if item is not None:
            em.build_output(item, result_local)
            em.emit("STORE_FAST", consumed_temps[-1])
    apply_effects(em, loaded)   # in program order, before the instruction runs
    # Inside grad-mode or autocast blocks the instruction runs in the blocks' state, and the state
    # outside them is back before the resume function enters the blocks again, or before an
    # exception the instruction raises leaves the frame (as the blocks' exits would do in eager).
    # The protected range starts on an empty stack (the loads in it cannot raise), so the handler
    # finds the exception alone.
    switch = Switches(em, spec.switches, temp) if spec.switches else None
    handler = bytecode.Label()
    if switch is not None:
        switch.enter()
        try_begin = TryBegin(handler, push_lasti=False)
        em.instrs.append(try_begin)
    for name in consumed_temps:
        if name is None:
            em.emit("PUSH_NULL")
        else:
            em.emit("LOAD_FAST", name)
    # From here on the frame holds what the original would: its locals. A temporary or a resume
    # code's stack argument still bound when the instruction raises, or when a raise leaves the
    # resume function, would keep its object alive with the traceback, and an exception among
    # them would reach itself through it (a cycle only gc frees).
    kept = set(carried_temps) | set(local_temps.values()) | set(switch.exits if switch else ())
    em.clear([n for n in em.temps_made if n not in kept] + list(stack_args(em.original)))
    # The instruction itself, at its own line (a user exception raised by it points there).
    instr = plan.emit
    lineno = instr.lineno if isinstance(instr.lineno, int) else em.lineno
    if spec.kw_names:
        em.instrs.append(Instr("KW_NAMES", spec.kw_names, lineno=lineno))
    if instr.name == "CALL":
        em.precall(instr.arg, lineno)
    em.instrs += [Instr(p.name, p.arg, lineno=lineno) for p in plan.prefix]
    pushed_temps = [temp("___tjc_pushed") for null in plan.pushed if not null]
    if not plan.targets:   # a raise: nothing resumes after it
        em.instrs.append(Instr(instr.name, instr.arg, lineno=lineno))
        if switch is not None:
            em.instrs.append(TryEnd(try_begin))
    elif plan.jump is None:
        em.instrs.append(Instr(instr.name, instr.arg, lineno=lineno))
        if switch is not None:
            em.instrs.append(TryEnd(try_begin))
        for name in reversed(pushed_temps):
            em.emit("STORE_FAST", name)
        _call_resume(em, resume_fns[0], carried_temps, pushed_temps, plan.live[0], local_temps, switch)
    else:
        taken_label = bytecode.Label()
        em.instrs.append(Instr(emitted_jump(plan.jump), taken_label, lineno=lineno))
        if switch is not None:
            em.instrs.append(TryEnd(try_begin))
        _call_resume(em, resume_fns[0], carried_temps, pushed_temps, plan.live[0], local_temps, switch)
        em.instrs.append(taken_label)
        _call_resume(em, resume_fns[1], carried_temps, pushed_temps, plan.live[1], local_temps, switch)
    if switch is not None:
        # [exception]: the mode outside, then raise it again (RERAISE adds no traceback entry: the
        # traceback still points at the instruction's line).
        em.instrs.append(handler)
        switch.leave()
        em.emit("RERAISE", 0)


class Switches:
    """Emits the entry into a break's switches (trace_result.ModeSwitch, ContextSwitch), outermost
    first, and the way out of them, innermost first: `set(inside)` and `set(outside)`; or
    `enter()`, BEFORE_WITH, its exit kept in a temporary, and that exit called with (None, None,
    None)."""

    def __init__(self, em: Emitter, switches: tuple, temp):
        self.em, self.switches = em, switches
        self.exits = [temp("___tjc_exit") if isinstance(s, ContextSwitch) else None for s in switches]

    def enter(self) -> None:
        em = self.em
        for switch, exit_ in zip(self.switches, self.exits):
            if exit_ is None:
                em.call_const_with(switch.set, [lambda switch=switch: em.const(switch.inside)])
                em.emit("POP_TOP")
            else:
                em.call_const_with(switch.enter, [])
                em.emit("BEFORE_WITH")
                em.emit("POP_TOP")
                em.emit("STORE_FAST", exit_)

    def leave(self) -> None:
        em = self.em
        for switch, exit_ in reversed(list(zip(self.switches, self.exits))):
            if exit_ is None:
                em.call_const_with(switch.set, [lambda switch=switch: em.const(switch.outside)])
            else:
                em.call_with(lambda exit_=exit_: em.emit("LOAD_FAST", exit_), [lambda: em.const(None)] * 3)
            em.emit("POP_TOP")


def _call_resume(em: Emitter, fn, carried_temps: list, pushed_temps: list, live: tuple,
                 local_temps: dict, switch) -> None:
    """Call the resume function `fn`, or make it first from a resume code with free variables."""
    if switch is not None:
        switch.leave()
    # A live local unbound at the break has no temporary: it stays unbound in the resume function.
    names = [local_temps[n] for n in live if n in local_temps] \
        + [n for n in carried_temps if n is not None] + pushed_temps
    emit_fn = (lambda: em.make_closure(fn)) if isinstance(fn, types.CodeType) else (lambda: em.const(fn))
    # The arguments are on the stack alone when the resume function runs (cleared after the last
    # load): an exception it raises must not reach itself through this frame's temporaries.
    last = [lambda n=n: em.emit("LOAD_FAST", n) for n in names]
    if last:
        final = last[-1]
        last[-1] = lambda: (final(), em.clear(names))
    em.call_with(emit_fn, last)
    em.emit("RETURN_VALUE")
