"""Graph breaks: where a frame may be cut at an unsupported instruction, and the resume functions.

When the trace of a frame fails at a raw instruction of the ROOT frame (or inside a call the root
inlined: the failure is then the root's CALL), convert_frame traces the frame again and stops at
that instruction's boundary (translator.py `stop_at`): the stack and locals there are the
interpreter's. The transformed code (codegen.build_break_code) then

1. calls the graph captured so far;
2. rebuilds the live stack and locals from graph outputs, constants and sources, into temporaries
   (all of them before step 3, so the unsupported instruction cannot change what they load), loads
   the targets and values of the side effects recorded before the break the same way, and then
   replays those effects in program order (tracer/side_effects.py);
3. pushes the items the unsupported instruction consumes (NULLs of a pending call re-pushed as
   NULL) and runs that instruction as ordinary bytecode, at its own line;
4. calls a resume function with the live locals and the stack items (NULLs left out), and returns
   what it returns. A conditional jump calls one of two resume functions, one per target.

A resume function is a new code object made from the original's bytecode: a prologue pushes the
stack items back (PUSH_NULL where a NULL was) and jumps to the instruction after the break; the rest
is the original body, unchanged. It is a normal frame: under the hook it is traced, cached on its
own code, and may break again. It is a constant of the transformed code, so it dies with the cache
entry that made it.

Loops: a loop's iterator on the stack whose items the trace knows (a tuple, a range, enumerate or
zip, an nn.ModuleList, a container the trace built) is passed as the tuple of the items it has
still to yield, and the prologue makes it an iterator again (slot ITER), so the resume function's
trace reads the rest of the loop; a list or dict read from the frame keeps Python's own iterator
(the rest of the frame may change it), which no trace can read. A break in every iteration makes
one resume function per iteration, in a chain at most `max_depth` long (config.max_resume_depth).

Inside grad-mode with blocks (`with torch.no_grad()`, `enable_grad()`, `set_grad_enabled(flag)`;
tracer/variables/contexts.py), as TorchDynamo does: the blocks around the instruction are read
from the exception table (`_with_blocks`: each with body's handler is PUSH_EXC_INFO,
WITH_EXCEPT_START at the depth of the block's exit plus one; its cleanup's handler is whatever
encloses the block), and the trace says which grad mode each one sets (trace_result.EnteredContext
in the exit's stack slot). The graph ends in the frame's own mode; step 3 runs the instruction in
the innermost block's mode, inside a protected range whose handler sets the frame's mode back and
re-raises (what the blocks' exits do in eager when the exception leaves them), and sets it back
before step 4 on the normal path. The resume function's prologue enters the blocks again in
order, outermost first: `torch.no_grad()` or `torch.enable_grad()` (a constant), BEFORE_WITH,
POP_TOP, which leaves a new exit where the original's exception table expects one; the body's
with-block handler and the exit call at the end of the block are the original's, unchanged. So
the rest of the block, and its exit, run as in eager, and the mode after the call is eager's.

Inside autocast blocks (`with torch.autocast("cpu", ...)`, `torch.amp.autocast(...)`) the same
way, with the block's arguments: the graph leaves every autocast block it entered before its end;
step 3 enters `torch.autocast(*args)` around the instruction (BEFORE_WITH, its exit kept in a
temporary: trace_result.ContextSwitch) and calls that exit with (None, None, None) after it, on
both paths, innermost first; the resume function's prologue enters the block again with
`functools.partial(torch.autocast, *args)()` (the EnteredContext's constant). Entering and leaving
a real block, rather than setting the state, keeps torch's autocast nesting count and weight cache
as a block's would be (the cache does not outlive one graph or the instruction: a weight cast
before the break is cast again after it).

A raise (RAISE_VARARGS) is cut with no target: the transformed code runs it after the graph and no
resume function follows. Nothing the transformed code or a resume function keeps in a local may be
the exception (exception -> traceback -> frame -> exception keeps every local of the frames it
passed alive until gc: seed 000): the break code deletes its temporaries before the instruction
runs and before the resume call, and a resume function's prologue deletes its stack arguments.

What may not be cut here, and falls back to running the whole frame uncompiled (never a wrong
result):
- a frame that names `locals`, `vars`, `exec`, `eval`, `_getframe` or `currentframe`
  (`_INTROSPECTION`, by the loads of those names): it would see the compiler's locals, not eager's;
- an instruction inside a try block, or inside a with block of anything but a grad mode or a CPU
  autocast (the exception table would need the block's setup replayed in the resume function);
- jumps other than the POP_JUMP_IF family, and anything outside `_BREAKABLE`. LOAD_GLOBAL of a
  callable and method loads (LOAD_METHOD, the method forms of LOAD_ATTR and LOAD_SUPER_ATTR, which
  push NULL or self as only the run knows) are cut too: the callable is loaded plainly (a bound
  method) and the resume function pushes a NULL where the version puts it;
- grad-mode blocks a resume function could not enter again in order (the mode at the break is not
  the innermost block's, or a block's exit restores another mode than the block around it sets),
  and autocast blocks on the stack that are not the trace's open blocks, in order.

Cells: the resume code's free variables are the original's cell variables, then its free
variables (instructions on a cell variable are made to read a free variable); the transformed code
makes the resume function per call, closing over the frame's real cells, so a closure made before
the break and the rest of the frame share them. Stores the trace made to the frame's own cells are
side effects replayed in step 2; a store to a free variable is itself a break (STORE_DEREF runs on
the real cell), since a function read through another path may share the cell.

A live local that is unbound at the break (assigned on a path not taken, or read only on another
path, such as a with block's handler reading what the body assigns) is left out of the resume
function's arguments: unbound there too, so a later read raises UnboundLocalError as it would have.

Side effects: the tracer records attribute stores and deletions on plain user objects and
nn.Modules, global stores and deletions, and mutation of lists and dicts read from the frame
(tracer/side_effects.py), and step 2 replays them, in program order, before the instruction runs:
the instruction (a print, say) and the resume function see the state eager would have there. The
state rebuilt in step 2 reloads objects read from the frame from their sources (the very objects
the effects were applied to), and all loads happen before the first effect is applied, so an
effect cannot redirect a source path. Tensor effects are the graph's own (in-place ops, run by the
graph in program order); containers the trace built are rebuilt from their items, once. What the
tracer refuses to record (a property setter, a custom __setattr__, a tensor attribute, nonlocal
stores, a mutation it cannot prove unaliased) is itself the unsupported instruction: it runs as
bytecode at the break, after the recorded effects, which is program order.

No torch here: codegen and the runtime's torch-free tests import this module.
"""
from __future__ import annotations

import dataclasses
import dis
import types
import weakref

import bytecode
from bytecode import CellVar, FreeVar, Instr, Label

from .instructions import FACTS, SUPERINSTRUCTIONS, decode, next_raw

__all__ = ["BreakPlan", "plan_break", "build_resume_code", "is_resume_code", "stack_args", "BreakRefused"]


class BreakRefused(Exception):
    """The frame cannot be cut at this instruction; the reason says why, in words."""


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
COND_JUMPS = frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE",
                        "POP_JUMP_IF_NOT_NONE"})   # normalized ops (instructions._RENAMES)
# (items consumed, items pushed) where the bytecode library's per-instruction numbers are not the
# instruction's own (it spreads 3.11's PRECALL/CALL pair over both, and counts what BEFORE_WITH and
# 3.11's LOAD_METHOD pop as pushed); the rest use the library.
_EFFECT = {"CALL": lambda arg: (arg + 2, 1), "CALL_KW": lambda arg: (arg + 3, 1),
           "BEFORE_WITH": lambda arg: (1, 2), "LOAD_METHOD": lambda arg: (1, 2)}
# Instructions that end a block: no fall-through successor.
_NO_FALLTHROUGH = frozenset({"RETURN_VALUE", "JUMP", "RAISE_VARARGS", "RERAISE"})


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
    with_slots = _with_blocks(insts, inst)
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
            "LOAD_METHOD": lambda: (1, (False, inst.arg) if FACTS.load_attr_method_flag else inst.arg),
            "LOAD_SUPER_METHOD": lambda: (3, (False, *instr.arg[1:])),
        }[kind]()
        emit = Instr("LOAD_ATTR" if kind == "LOAD_METHOD" else instr.name, plain_arg,
                     lineno=instr.lineno)
        pushed = ((True, False) if FACTS.null_before_callable else (False, True)) if push_null \
            else (False,)
    elif instr.name == "RAISE_VARARGS":
        # A raise ends the frame: the transformed code raises it after the graph, and no resume
        # function follows, so no frame holds the exception in a local (exception -> traceback ->
        # frame -> exception would keep the frame's arguments alive until gc: seed 000).
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
    live_in = _liveness(insts)
    # Zero-argument super() reads the frame's first local without naming it (3.11 reads it
    # implicitly): it stays live wherever the code can call super().
    implicit = {code.co_varnames[0]} if "__class__" in code.co_freevars and code.co_argcount else set()
    order = {name: i for i, name in enumerate(code.co_varnames)}
    live = tuple(tuple(sorted(live_in[t] | implicit, key=order.__getitem__)) for t in targets)
    return BreakPlan(index, instr, emit, consumed, pushed, jump, targets, live, with_slots, prefix)


def _with_blocks(insts: list, inst) -> tuple:
    """The stack slots of the `__exit__`s of the with blocks around `inst`, outermost first; a try
    block around it is refused.

    The exception table nests by chains, the same in 3.11, 3.12 and 3.13: an instruction in a with
    body goes to the block's handler (PUSH_EXC_INFO, WITH_EXCEPT_START, ...) at the depth where
    BEFORE_WITH left the exit, plus one; that handler's first instruction goes to its own cleanup
    (COPY 3, POP_EXCEPT, RERAISE 1), and the cleanup's first instruction to whatever encloses the
    block: the next with block's handler, a try block's, or nothing."""
    slots = []
    handler = inst.handler
    while handler is not None:
        target, depth, lasti = handler
        if target + 1 >= len(insts) or insts[target].op != "PUSH_EXC_INFO" \
                or insts[target + 1].op != "WITH_EXCEPT_START" or not lasti or depth < 1:
            raise BreakRefused("the instruction is inside a try block")
        slots.append(depth - 1)
        cleanup = insts[target].handler
        if cleanup is None or insts[cleanup[0]].op != "COPY":
            raise BreakRefused("a with block's exception handler of an unknown shape")
        handler = insts[cleanup[0]].handler
    slots.reverse()
    if any(a >= b for a, b in zip(slots, slots[1:])):
        raise BreakRefused("with blocks whose exits are not nested on the stack")
    return tuple(slots)


def stack_effect(instr: Instr) -> tuple:
    """(items consumed, items pushed) by the raw instruction when it falls through."""
    if instr.name in _EFFECT:
        return _EFFECT[instr.name](instr.arg)
    pre, post = instr.pre_and_post_stack_effect(jump=False)
    return max(0, -pre), post if pre <= 0 else pre + post   # loads: the library says (pushed, 0)


def _liveness(insts: list) -> list:
    """For each decoded instruction, the set of fast locals read on some path from it before being
    written (a backward fixpoint over fall-through, jump and exception-handler edges).

    LOAD_FAST_AND_CLEAR (3.12's inlined comprehensions) neither reads nor writes: it saves a local
    that may be unbound and STORE_FAST puts it back, so a local it touches need not be bound."""
    n = len(insts)
    succ = []
    for i, inst in enumerate(insts):
        s = []
        if inst.op not in _NO_FALLTHROUGH and i + 1 < n:
            s.append(i + 1)
        if inst.target is not None:
            s.append(inst.target)
        if inst.handler is not None:
            s.append(inst.handler[0])
        succ.append(s)
    live = [frozenset()] * n
    changed = True
    while changed:
        changed = False
        for i in range(n - 1, -1, -1):
            out = frozenset().union(*(live[j] for j in succ[i])) if succ[i] else frozenset()
            op = insts[i].op
            if op == "STORE_FAST":
                new = out - {insts[i].arg}
            elif op in ("LOAD_FAST", "DELETE_FAST"):
                new = out | {insts[i].arg}
            else:
                new = out
            if new != live[i]:
                live[i] = new
                changed = True
    return live


# -- resume functions ----------------------------------------------------------------------------

# Resume codes made by this process, held weakly, with how many resume codes they descend from
# (1: made from a user's code): the hook compiles them whatever the trace rules say of their
# module (they exist only because their origin was compiled).
_RESUME_CODES: "weakref.WeakKeyDictionary[types.CodeType, _Origin]" = weakref.WeakKeyDictionary()


@dataclasses.dataclass(frozen=True)
class _Origin:
    """Where a resume code comes from: the user's function it continues, and its depth."""
    name: str
    qualname: str
    depth: int
    stack_args: tuple = ()   # its arguments that carry stack items, not locals of the original

# What the resume function's prologue pushes for each stack slot (bottom first): NULL, a value
# passed as an argument, or an iterator made from a tuple passed as an argument (a loop's iterator,
# passed as the items it has still to yield: tracer/__init__.py `_break_state`).
NULL, VALUE, ITER = "null", "value", "iter"
_SLOT_PUSH = {
    NULL: lambda name, lineno: [Instr("PUSH_NULL", lineno=lineno)],
    VALUE: lambda name, lineno: [Instr("LOAD_FAST", name, lineno=lineno)],
    ITER: lambda name, lineno: [Instr("LOAD_FAST", name, lineno=lineno), Instr("GET_ITER", lineno=lineno)],
}


def is_resume_code(code: types.CodeType) -> bool:
    return code in _RESUME_CODES


def stack_args(code: types.CodeType) -> tuple:
    """The arguments of a resume code that carry stack items (none for any other code): the
    transformed code of a resume function clears them once loaded, as the prologue does."""
    origin = _RESUME_CODES.get(code)
    return origin.stack_args if origin is not None else ()


def stack_arg_names(code: types.CodeType, count: int) -> list:
    taken = set(code.co_varnames)
    names = []
    for i in range(count):
        name = f"___tjc_stack_{i}"
        while name in taken:
            name += "_"
        names.append(name)
    return names


def build_resume_code(code: types.CodeType, target: int, slots: tuple,
                      live: tuple, max_depth: int = 32) -> types.CodeType:
    """A code object that continues `code` at decoded index `target`.

    `slots`, one per stack item, bottom first: NULL, VALUE, ITER (`_SLOT_PUSH`), or a with block
    to enter again (an object whose `enter` is a constant callable that makes the context manager:
    trace_result.EnteredContext). Its arguments: the live locals under their own names (in
    co_varnames order, so the first argument stays first where it is live), then one per VALUE or
    ITER slot. Its prologue pushes the stack back (PUSH_NULL, LOAD_FAST, LOAD_FAST and GET_ITER,
    or `enter()`, BEFORE_WITH, POP_TOP, which leaves the block's exit where the original's
    exception table expects it) and jumps to the target; the body is the original's, after its
    prologue.
    """
    parent = _RESUME_CODES.get(code)
    origin = _Origin(code.co_name, code.co_qualname, 1) if parent is None \
        else _Origin(parent.name, parent.qualname, parent.depth + 1)
    if origin.depth > max_depth:
        raise BreakRefused(f"more than {max_depth} resume functions in a chain (a graph break in a "
                           "long loop: the rest runs uncompiled; TJC_MAX_RESUME_DEPTH raises it)")
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
            prologue += _enter_again(slot.enter, lineno)
    # The stack items live on the stack only, as in the original frame: kept as locals too, an
    # exception among them would reach itself through its traceback and this frame (a cycle that
    # keeps the frame's locals alive until gc), and locals() would list them.
    prologue += [Instr("DELETE_FAST", name, lineno=lineno) for name in stack_names]
    prologue.append(Instr("JUMP_FORWARD", label, lineno=lineno))
    body = []
    found = False
    for item in original[body_start:]:
        if item is target_instr:
            body.append(label)
            found = True
        body += _split(_cell_as_free(item))
    if not found:
        raise BreakRefused("the resume point is not in the code's body")
    bc = bytecode.Bytecode(prologue + body)
    bc.first_lineno = original.first_lineno
    bc.filename = original.filename
    bc.name = f"{origin.name}_resume_at_{lineno}"
    bc.qualname = f"{origin.qualname}.<resume at line {lineno}>"
    bc.flags = original.flags & ~(bytecode.CompilerFlags.VARARGS | bytecode.CompilerFlags.VARKEYWORDS)
    bc.cellvars = []
    bc.freevars = freevars
    bc.argnames = [*live, *stack_names]
    bc.argcount = len(bc.argnames)
    bc.posonlyargcount = 0
    bc.kwonlyargcount = 0
    resume = bc.to_code()
    _RESUME_CODES[resume] = dataclasses.replace(origin, stack_args=tuple(stack_names))
    return resume


def _cell_as_free(item):
    """An instruction on one of the frame's own cells, made to read it as a free variable."""
    if isinstance(getattr(item, "arg", None), CellVar):
        return Instr(item.name, FreeVar(item.arg.name), location=item.location)
    return item


def _split(item) -> list:
    """A superinstruction as its two instructions (the resume function's arguments come first, so
    its locals' indices change and may no longer fit the pair's 4-bit halves); anything else as is."""
    pair = SUPERINSTRUCTIONS.get(getattr(item, "name", None))
    if pair is None:
        return [item]
    return [Instr(op, name, location=item.location) for op, name in zip(pair, item.arg)]


def _enter_again(enter, lineno) -> list:
    """`enter()` then BEFORE_WITH, keeping the exit: a with block entered again in a prologue."""
    call = [Instr("PUSH_NULL", lineno=lineno), Instr("LOAD_CONST", enter, lineno=lineno)]
    if not FACTS.null_before_callable:
        call.reverse()
    if FACTS.precall:
        call.append(Instr("PRECALL", 0, lineno=lineno))
    return call + [Instr("CALL", 0, lineno=lineno), Instr("BEFORE_WITH", lineno=lineno),
                   Instr("POP_TOP", lineno=lineno)]


def resume_function(code: types.CodeType, f_globals: dict, target: int, slots: tuple,
                    live: tuple, max_depth: int = 32):
    """The resume function for `code` at `target`, held only by the transformed code that calls
    it; for a code with free variables, the resume code (the transformed code makes the function
    per call, with the frame's closure)."""
    resume = build_resume_code(code, target, slots, live, max_depth)
    if resume.co_freevars:
        return resume
    return types.FunctionType(resume, f_globals, resume.co_name)


def emitted_jump(op: str) -> str:
    """The raw name that emits the normalized conditional jump `op` as a forward jump."""
    forward = op.replace("POP_JUMP_IF_", "POP_JUMP_FORWARD_IF_")
    return forward if forward in _OPNAMES else op


_OPNAMES = frozenset(dis.opmap)
