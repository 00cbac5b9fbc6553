"""Resume code: a new code object that continues a code object at one of its instructions.

`build_resume_code` makes it from the original's bytecode: a prologue pushes the stack back (what
each slot holds: `NULL`, `VALUE`, `ITER`, or a with block entered again) and jumps to the target;
the rest is the original body, unchanged but for three rewrites: instructions on the frame's own
cells read them as free variables (the resume code's free variables are the original's cell
variables, then its free variables), 3.13's superinstructions are split (the arguments come
first, so the locals' indices change and may no longer fit a pair's 4-bit halves), and on 3.12+
a load of a local that is not an argument of the resume code is checked (below). Which code
objects are resume codes, and how deep their chains go, is graph_break/resume.py's.

No torch here: codegen and the runtime's torch-free tests import this module.
"""
from __future__ import annotations

import types

import bytecode
from bytecode import CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from .analysis import BreakRefused, split_superinstruction
from .emitter import Emitter
from .instructions import decode
from .versions import FACTS

__all__ = ["NULL", "VALUE", "ITER", "build_resume_code", "stack_arg_names"]


# What the resume function's prologue pushes for each stack slot (bottom first): NULL, a value
# passed as an argument, or an iterator made from a tuple passed as an argument (a loop's iterator,
# passed as the items it has still to yield: graph_break/state.py `break_state`).
NULL, VALUE, ITER = "null", "value", "iter"
_SLOT_PUSH = {
    NULL: lambda name, lineno: [Instr("PUSH_NULL", lineno=lineno)],
    VALUE: lambda name, lineno: [Instr("LOAD_FAST", name, lineno=lineno)],
    ITER: lambda name, lineno: [Instr("LOAD_FAST", name, lineno=lineno), Instr("GET_ITER", lineno=lineno)],
}


def stack_arg_names(code: types.CodeType, count: int) -> list:
    taken = set(code.co_varnames)
    names = []
    for i in range(count):
        name = f"___tjc_stack_{i}"
        while name in taken:
            name += "_"
        names.append(name)
    return names


def build_resume_code(code: types.CodeType, target: int, slots: tuple, live: tuple,
                      origin_name: str, origin_qualname: str) -> tuple:
    """(a code object that continues `code` at decoded index `target`, the names of its arguments
    that carry stack items). `origin_name`, `origin_qualname`: the user's function it continues,
    whose names the resume code's name and qualname extend.

    `slots`, one per stack item, bottom first: NULL, VALUE, ITER (`_SLOT_PUSH`), or a with block
    to enter again (an object whose `enter` is a constant callable that makes the context manager:
    trace_result.EnteredContext). Its arguments: the live locals under their own names (in
    co_varnames order, so the first argument stays first where it is live), then one per VALUE or
    ITER slot. Its prologue pushes the stack back (PUSH_NULL, LOAD_FAST, LOAD_FAST and GET_ITER,
    or `enter()`, BEFORE_WITH, POP_TOP, which leaves the block's exit where the original's
    exception table expects it) and jumps to the target; the body is the original's, after its
    prologue.
    """
    insts = decode(code).insts
    original = decode(code).bytecode
    target_instr = insts[target].instr
    stack_names = stack_arg_names(code, sum(1 for slot in slots if slot in (VALUE, ITER)))
    body_start = next(i for i, item in enumerate(original)
                      if isinstance(item, Instr) and item.name == "RESUME") + 1
    label = Label()
    lineno = target_instr.lineno if isinstance(target_instr.lineno, int) else code.co_firstlineno
    # The frame's own cells become free variables of the resume function, before its own.
    freevars = [*code.co_cellvars, *code.co_freevars]
    prologue = [Instr("COPY_FREE_VARS", len(freevars), lineno=lineno)] if freevars else []
    prologue.append(Instr("RESUME", 0, lineno=lineno))
    names = iter(stack_names)
    for slot in slots:
        if slot in _SLOT_PUSH:
            prologue += _SLOT_PUSH[slot](next(names) if slot != NULL else None, lineno)
        else:
            prologue += _enter_again(code, slot.enter, lineno)
    # The stack items live on the stack only, as in the original frame: kept as locals too, an
    # exception among them would reach itself through its traceback and this frame (a cycle that
    # keeps the frame's locals alive until gc), and locals() would list them.
    prologue += [Instr("DELETE_FAST", name, lineno=lineno) for name in stack_names]
    prologue.append(Instr("JUMP_FORWARD", label, lineno=lineno))
    body = []
    found = False
    arguments = frozenset(live)
    open_try = None   # the protected range the original is in at this point, if any
    renamed = {}      # an original TryBegin -> the copy that starts at the target
    for item in original[body_start:]:
        if item is target_instr:
            body += _enter_range_at(label, open_try, renamed)
            found = True
        if isinstance(item, TryBegin):
            open_try = item
        elif isinstance(item, TryEnd):
            open_try = None
            if item.entry in renamed:
                item = TryEnd(renamed[item.entry])
        body += [_checked_load(_cell_as_free(part, code.co_cellvars), arguments)
                 for part in split_superinstruction(item)]
    if not found:
        raise BreakRefused("the resume point is not in the code's body")
    bc = bytecode.Bytecode(prologue + body)
    bc.first_lineno = original.first_lineno
    bc.filename = original.filename
    bc.name = f"{origin_name}_resume_at_{lineno}"
    bc.qualname = f"{origin_qualname}.<resume at line {lineno}>"
    bc.flags = original.flags & ~(bytecode.CompilerFlags.VARARGS | bytecode.CompilerFlags.VARKEYWORDS)
    bc.cellvars = []
    bc.freevars = freevars
    bc.argnames = [*live, *stack_names]
    bc.argcount = len(bc.argnames)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    return bc.to_code(), tuple(stack_names)


def _enter_range_at(label, open_try, renamed) -> list:
    """The target `label`, and where it lies inside a protected range (a with block's body, most
    often), the range split there: the part before it ends, and a copy with the same handler starts
    at the label. The prologue jumps to the label; without the split its path would enter the range
    without passing its start, and the stack depth the handler is entered with (the least depth
    inside the range from its start on) would be measured from the prologue's empty stack: too low
    for a with block's handler, whose WITH_EXCEPT_START reads the exit below it (the `bytecode`
    library then fails with "negative stack size" where the range ends in a raise)."""
    if open_try is None:
        return [label]
    again = TryBegin(open_try.target, open_try.push_lasti)
    renamed[open_try] = again
    return [TryEnd(open_try), label, again]


def _cell_as_free(item, cellvars: tuple):
    """An instruction on one of the frame's own cells, made to read it as a free variable.

    Where LOAD_FAST loads a cell for a closure tuple (FACTS.load_fast_of_cell_is_load_closure), an
    argument that is also a cell shares its slot with the cell, and the library names that slot
    by the argument's name (a str), not by a CellVar. Left as a str, it would become a new local
    of the resume code, never bound: the closure would be built from NULL, which the interpreter
    does not check (a crash, not an error)."""
    arg = getattr(item, "arg", None)
    if isinstance(arg, CellVar):
        return Instr(item.name, FreeVar(arg.name), location=item.location)
    if (FACTS.load_fast_of_cell_is_load_closure and isinstance(arg, str) and arg in cellvars
            and item.name == "LOAD_FAST"):
        return Instr(item.name, FreeVar(arg), location=item.location)
    return item


def _checked_load(item, arguments: frozenset):
    """LOAD_FAST of a local that is not an argument of the resume code, as LOAD_FAST_CHECK where
    LOAD_FAST does not check (FACTS.load_fast_unchecked).

    The original's compiler proved each LOAD_FAST bound on every path from the function's start;
    the resume code starts elsewhere, with only the live locals bound. A local the liveness
    analysis missed would then be read as NULL, which 3.12+'s LOAD_FAST does not check: a crash of
    the user's process. Checked, it is an UnboundLocalError. Arguments are bound by the call and
    keep the fast load."""
    if (FACTS.load_fast_unchecked and getattr(item, "name", None) == "LOAD_FAST"
            and isinstance(item.arg, str) and item.arg not in arguments):
        return Instr("LOAD_FAST_CHECK", item.arg, location=item.location)
    return item


def _enter_again(code, enter, lineno) -> list:
    """`enter()` then BEFORE_WITH, keeping the exit: a with block entered again in a prologue."""
    em = Emitter(code, lineno)
    em.call_const_with(enter, [])
    em.emit("BEFORE_WITH")
    em.emit("POP_TOP")
    return em.instrs
