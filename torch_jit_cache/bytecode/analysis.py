"""Facts read off decoded bytecode: stack effects, liveness, the with blocks of the exception
table, and 3.13's superinstructions.

Each function reads a list of decoded instructions (instructions.Inst) or one raw bytecode.Instr,
and changes nothing. They are what a cut at one instruction needs (graph_break/plan.py) and what
listing every break needs (graph_break/passing.py); a fact that differs per version
is read from versions.py, never from a version number.

No torch here: codegen and the runtime's torch-free tests import this module.
"""
from __future__ import annotations

from bytecode import Instr

__all__ = ["BreakRefused", "COND_JUMPS", "SUPERINSTRUCTIONS", "stack_effect", "liveness", "is_with_handler",
           "with_block_exits", "split_superinstruction"]


class BreakRefused(Exception):
    """The frame cannot be cut at this instruction; the reason says why, in words."""


COND_JUMPS = frozenset({"POP_JUMP_IF_TRUE", "POP_JUMP_IF_FALSE", "POP_JUMP_IF_NONE",
                        "POP_JUMP_IF_NOT_NONE"})   # normalized ops (instructions._RENAMES)
# (items consumed, items pushed) where the bytecode library's per-instruction numbers are not the
# instruction's own (it spreads 3.11's PRECALL/CALL pair over both, and counts what BEFORE_WITH and
# 3.11's LOAD_METHOD pop as pushed); the rest use the library.
_EFFECT = {"CALL": lambda arg: (arg + 2, 1), "CALL_KW": lambda arg: (arg + 3, 1),
           "BEFORE_WITH": lambda arg: (1, 2), "LOAD_METHOD": lambda arg: (1, 2)}
# Instructions that end a block: no fall-through successor.
_NO_FALLTHROUGH = frozenset({"RETURN_VALUE", "JUMP", "RAISE_VARARGS", "RERAISE"})

# 3.13's pairs of fast-local instructions in one, each local's index in 4 bits of the argument
# (code that moves locals past index 15 must split them: `split_superinstruction`).
SUPERINSTRUCTIONS = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
}


def stack_effect(instr: Instr) -> tuple:
    """(items consumed, items pushed) by the raw instruction when it falls through."""
    if instr.name in _EFFECT:
        return _EFFECT[instr.name](instr.arg)
    pre, post = instr.pre_and_post_stack_effect(jump=False)
    return max(0, -pre), post if pre <= 0 else pre + post   # loads: the library says (pushed, 0)


def is_with_handler(insts: list, handler) -> bool:
    """Whether the exception-table entry `handler` (target, depth, lasti) is a with block's: its
    code calls the __exit__ with the exception (PUSH_EXC_INFO, WITH_EXCEPT_START, in 3.11 to 3.13)."""
    target = handler[0]
    return target + 1 < len(insts) and insts[target].op == "PUSH_EXC_INFO" \
        and insts[target + 1].op == "WITH_EXCEPT_START"


def with_block_exits(insts: list, inst) -> tuple:
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
        if not is_with_handler(insts, handler) or not lasti or depth < 1:
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


def liveness(insts: list) -> list:
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


def split_superinstruction(item) -> list:
    """A superinstruction as its two instructions (the resume function's arguments come first, so
    its locals' indices change and may no longer fit the pair's 4-bit halves); anything else as is."""
    pair = SUPERINSTRUCTIONS.get(getattr(item, "name", None))
    if pair is None:
        return [item]
    return [Instr(op, name, location=item.location) for op, name in zip(pair, item.arg)]
