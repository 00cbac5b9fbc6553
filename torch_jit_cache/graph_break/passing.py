"""Passing over breaks: how a trace reaches the next break instead of stopping at the first.

fullgraph=True lists every break a frame would take (driver.py `list_breaks`): each round traces
the frame again with a `PassingOver` hook on the root translator, holding the breaks found so far.
The trace passes over each of them (pops what the instruction consumes, pushes UNKNOWN, takes the
fall-through path) and over any raw instruction that uses an UNKNOWN, so that it reaches the next
real break. A jump on an UNKNOWN other than a conditional one ends the list: its path is unknown.
"""
from __future__ import annotations

from ..bytecode.analysis import COND_JUMPS, stack_effect
from ..bytecode.instructions import next_raw
from ..guard.trace_result import Unsupported

__all__ = ["PassingOver", "UNKNOWN"]


class _Unknown:
    """What an instruction left unrun pushed."""

    def __repr__(self):
        return "UNKNOWN"


UNKNOWN = _Unknown()

# Normalized ops that move a value without using it: they run as usual on an UNKNOWN.
_MOVES = frozenset({"STORE_FAST", "POP_TOP", "COPY", "SWAP", "RETURN_VALUE", "NOP"})


class PassingOver:
    """The translator's `pass_over` hook; `found`: {(index, arrival): BreakPlan} of breaks listed."""

    def __init__(self, found: dict):
        self.found = found

    def __call__(self, tx, inst) -> bool:
        """Run the instruction at `tx.ip` abstractly, when it is a break already listed or a raw
        instruction that uses an UNKNOWN. False: the translator runs it as usual."""
        plan = self.found.get((tx.ip, tx.arrivals[tx.boundary]))
        if plan is not None and not plan.targets:   # a raise listed already: the frame ends there
            tx.done = True
            return True
        if plan is not None:
            consumed, pushed, target = plan.consumed, plan.pushed, plan.targets[0]
        elif not inst.first:
            return False
        else:
            end = next_raw(tx.instructions, tx.ip)
            parts = tx.instructions[tx.ip:end]
            if all(i.op in _MOVES for i in parts):
                return False
            consumed, n_pushed = stack_effect(inst.instr)
            if not any(v is UNKNOWN for v in tx.stack[len(tx.stack) - consumed:]):
                return False
            if any(i.target is not None for i in parts) and inst.op not in COND_JUMPS:
                raise Unsupported(f"{inst.instr.name} on a value an unsupported instruction made",
                                  filename=tx.code.co_filename, lineno=inst.lineno,
                                  instruction=inst.describe())
            pushed, target = (False,) * n_pushed, end
        tx.popn(consumed)
        tx.stack += [tx.NULL if null else UNKNOWN for null in pushed]
        if inst.instr.name.startswith("CALL"):
            tx.kw_names = None
        tx.ip = target
        return True
