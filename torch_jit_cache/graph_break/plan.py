"""Where a frame may be cut: the plan for one instruction, or the reason it cannot be cut there.

`plan_break(code, index)` reads the decoded code (bytecode/instructions.py) and its analysis
(bytecode/analysis.py: stack effect, liveness, the with blocks of the exception table) and says
what the transformed code runs in the instruction's place, what it consumes and pushes, where
execution resumes and which locals are live there. What may not be cut is refused with
BreakRefused (graph_break/__init__.py lists the cases).

No torch here: codegen and the runtime's torch-free tests import this module.
"""
from __future__ import annotations

import dataclasses
import types

from bytecode import Instr

from ..bytecode.analysis import COND_JUMPS, BreakRefused, liveness, stack_effect, with_block_exits
from ..bytecode.emitter import attr_arg
from ..bytecode.instructions import decode, next_raw
from ..bytecode.versions import FACTS

__all__ = ["BreakPlan", "plan_break"]


# Raw instructions that may be run as ordinary bytecode at a break: they fall through (or are a
# POP_JUMP_IF conditional jump), touch no fast local or exception state, and push no NULL. A cell
# store runs on the frame's real cell (the transformed code has the original's cells).
_BREAKABLE = frozenset({
    "CALL", "CALL_KW", "CALL_FUNCTION_EX", "BINARY_OP", "BINARY_SUBSCR", "BINARY_SLICE",
    "COMPARE_OP", "CONTAINS_OP", "IS_OP", "UNARY_NEGATIVE", "UNARY_NOT", "UNARY_INVERT",
    "TO_BOOL", "FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE", "BUILD_STRING",
    "STORE_ATTR", "STORE_SUBSCR", "STORE_SLICE", "DELETE_SUBSCR", "STORE_GLOBAL", "DELETE_ATTR",
    "GET_ITER", "UNPACK_SEQUENCE", "UNPACK_EX", "IMPORT_NAME", "IMPORT_FROM", "BUILD_SLICE",
    "BUILD_TUPLE", "BUILD_LIST", "BUILD_MAP", "BUILD_SET", "LIST_EXTEND", "SET_UPDATE",
    "DICT_UPDATE", "DICT_MERGE", "LOAD_SUPER_ATTR", "STORE_DEREF", "DELETE_DEREF",
})
# How a frame reads its own locals: the builtins `locals()`, `vars()`, `exec`/`eval` without a
# namespace (loaded as globals), and the frame getters `sys._getframe()` /
# `inspect.currentframe()` (loaded as globals or attributes). A cut frame is not eager's there (the
# resume function receives the live locals alone, under the eager names, and the break instruction
# runs among the transformed code's temporaries), so a frame that loads any of them is never cut:
# it runs uncompiled where its trace fails. By load, not by call, so `vars(obj)` counts too (rare;
# still right); an attribute of that name (`model.eval()`) does not.
_INTROSPECTION_GLOBALS = frozenset({"locals", "vars", "exec", "eval", "_getframe", "currentframe"})
_INTROSPECTION_ATTRS = frozenset({"_getframe", "currentframe"})
_INTROSPECTION = {"LOAD_GLOBAL": _INTROSPECTION_GLOBALS, "LOAD_NAME": _INTROSPECTION_GLOBALS,
                  "LOAD_ATTR": _INTROSPECTION_ATTRS, "LOAD_METHOD": _INTROSPECTION_ATTRS}


def _introspection(insts) -> set:
    """The names through which the decoded frame reads its own locals (`_INTROSPECTION`)."""
    return {i.arg for i in insts if i.arg in _INTROSPECTION.get(i.op, ())}


@dataclasses.dataclass(frozen=True)
class BreakPlan:
    """How to cut a code object at one raw instruction.

    index      the decoded index of the instruction (a boundary: `Inst.first`)
    instr      the raw bytecode.Instr where the frame is cut
    emit       the Instr the transformed code runs in its place (the same, or LOAD_GLOBAL without
               its NULL)
    consumed   how many stack items (from the top) it pops
    pushed     per item it pushes, bottom first: True for a NULL (pushed again by the resume
               function), False for a value (empty for a conditional jump)
    jump       the normalized conditional-jump op, or None
    targets    decoded indices where execution resumes: (next,) or (fall-through, jump target);
               () for a raise, after which nothing resumes
    live       per target, the locals live there, in co_varnames order
    with_slots the stack slots holding the `__exit__` of each with block around the instruction,
               outermost first (what the blocks are is known only to the trace)
    prefix     instructions run just before `emit` (TO_BOOL before the jump it feeds)
    """
    index: int
    instr: Instr
    emit: Instr
    consumed: int
    pushed: tuple
    jump: str | None
    targets: tuple
    live: tuple
    with_slots: tuple = ()
    prefix: tuple = ()


def plan_break(code: types.CodeType, index: int) -> BreakPlan:
    """The plan for cutting `code` at decoded `index`, or BreakRefused with the reason: the start
    of a raw instruction, or the TO_BOOL that ends a 3.13 COMPARE_OP (translator `_fail`)."""
    insts = decode(code).insts
    introspection = _introspection(insts)
    if introspection:
        raise BreakRefused(f"the frame reads its own locals ({', '.join(sorted(introspection))}): "
                           "a resume function has only the live ones, and the cut instruction "
                           "runs in a frame whose locals are the compiler's")
    inst = insts[index]
    with_slots = with_block_exits(insts, inst)
    instr = inst.instr
    nxt = next_raw(insts, index)
    emit, prefix = instr, ()
    if inst.op in COND_JUMPS:
        jump, consumed, pushed, targets = inst.op, 1, (), (nxt, inst.target)
    elif inst.op == "TO_BOOL" and nxt < len(insts) and insts[nxt].op in COND_JUMPS:
        # bool() of a tensor for the jump after it (3.13: a raw TO_BOOL, or the tail of a COMPARE_OP
        # with its bool-cast bit, whose comparison then stays in the graph): both run as bytecode,
        # and a resume function per branch follows, as for a jump on a tensor in 3.11/3.12.
        after = next_raw(insts, nxt)
        prefix = (Instr("TO_BOOL", lineno=inst.lineno),)
        emit = insts[nxt].instr
        jump, consumed, pushed, targets = insts[nxt].op, 1, (), (after, insts[nxt].target)
    elif inst.op == "TO_BOOL" and not inst.first:   # the tail of a COMPARE_OP, no jump after it
        emit = Instr("TO_BOOL", lineno=inst.lineno)
        jump, consumed, pushed, targets = None, 1, (False,), (nxt,)
    elif instr.name == "LOAD_GLOBAL" or inst.op in ("LOAD_METHOD", "LOAD_SUPER_METHOD"):
        # The callable is loaded plainly (a bound method, for a method load), and the resume
        # function pushes the NULL where the version puts it: calling (NULL, bound method) is
        # calling (method, self).
        jump, targets = None, (nxt,)
        kind = "LOAD_GLOBAL" if instr.name == "LOAD_GLOBAL" else inst.op
        push_null = kind != "LOAD_GLOBAL" or instr.arg[0]
        consumed, plain_arg = {
            "LOAD_GLOBAL": lambda: (0, (False, instr.arg[1])),
            "LOAD_METHOD": lambda: (1, attr_arg(inst.arg)),
            "LOAD_SUPER_METHOD": lambda: (3, (False, *instr.arg[1:])),
        }[kind]()
        emit = Instr("LOAD_ATTR" if kind == "LOAD_METHOD" else instr.name, plain_arg,
                     lineno=instr.lineno)
        pushed = ((True, False) if FACTS.null_before_callable else (False, True)) if push_null \
            else (False,)
    elif instr.name == "RAISE_VARARGS":
        # A raise ends the frame: the transformed code raises it after the graph, and no resume
        # function follows, so no frame holds the exception in a local (exception -> traceback ->
        # frame -> exception would keep the frame's arguments alive until gc).
        jump, consumed, pushed, targets = None, instr.arg, (), ()
    elif instr.name in _BREAKABLE or inst.op == "LOAD_ATTR":   # LOAD_ATTR: never the method form
        jump = None
        consumed, n_pushed = stack_effect(instr)
        pushed = (False,) * n_pushed
        targets = (nxt,)
    else:
        raise BreakRefused(f"cannot resume after {instr.name}")
    if any(t >= len(insts) for t in targets):
        raise BreakRefused("nothing follows the instruction")
    live_in = liveness(insts)
    # Zero-argument super() reads the frame's first local without naming it (3.11 reads it
    # implicitly): it stays live wherever the code can call super().
    implicit = {code.co_varnames[0]} if "__class__" in code.co_freevars and code.co_argcount else set()
    order = {name: i for i, name in enumerate(code.co_varnames)}
    live = tuple(tuple(sorted(live_in[t] | implicit, key=order.__getitem__)) for t in targets)
    return BreakPlan(index, instr, emit, consumed, pushed, jump, targets, live, with_slots, prefix)
