"""The state at a cut: the stack, live locals and switches of the root frame where it stops.

The driver (driver.py) traces a frame again with a `Cut`; the translator stops at the cut's
(instruction, arrival) holding the interpreter's stack and locals there, and `Cut.state` makes
them output specs (tracer/rebuild.py `Rebuilder`) together with the side effects to replay before
the instruction runs: a BreakOutput, which codegen turns into the transformed code's end
(emit.py). A suspended generator in that state cannot be rebuilt: `Cut.state` raises
GeneratorAtBreak naming where the first generator still alive was made, and the driver cuts there.
"""
from __future__ import annotations

import dataclasses

import torch

from ..guard.sources import LocalSource
from ..guard.trace_result import BreakOutput, ContextSwitch, ModeSwitch, SourceOutput, Unsupported
from ..tracer.rebuild import BlockAtBreak, GeneratorAtBreak, Rebuilder
from ..tracer.variables import IteratorVariable
from ..tracer.variables.torch_objects.contexts import (AutocastExitVariable, GradModeExitVariable, InferenceModeExitVariable,
                                                      UserContextExitVariable)
from ..tracer.variables.torch_objects.dynamo_contexts import DynamoOnlyExitVariable
from .plan import BreakPlan

__all__ = ["Cut", "break_state", "break_switches"]


@dataclasses.dataclass(frozen=True)
class Cut:
    """Stop the root frame when it reaches `plan`'s instruction for the `arrival`-th time."""
    plan: BreakPlan
    arrival: int

    @property
    def stop_at(self) -> tuple:
        return (self.plan.index, self.arrival)

    def state(self, tx, outputs):
        """(the BreakOutput for the state `tx` stopped in, the side effects to replay first)."""
        try:
            return break_state(tx, self.plan, outputs)
        except GeneratorAtBreak:
            # Cut where the first one that has started was made (one not started yet is rebuilt).
            raise GeneratorAtBreak(next((g.created_at for g in tx.generators if g.started and not g.done),
                                        None)) from None


def break_state(tx, plan, outputs):
    """(the stack and live locals at the break, as output specs (graph_break/__init__.py), the side effects
    to replay before the break instruction runs)."""
    stack = tx.stack
    if plan.consumed > len(stack):
        raise Unsupported(f"the break instruction pops {plan.consumed} items of a stack of "
                          f"{len(stack)} (tracer bug)")
    switches, outside = break_switches(tx, plan)
    rebuild = Rebuilder(outputs)
    effects = (*tx.output.side_effects.reconstruct(rebuild), *tx.output.leave_grad_mode_effects(outside))
    # A loop's iterator on the stack whose items are known goes to the resume function as a tuple
    # of what it has still to yield (a range's as the rest of the range), made an iterator again by
    # the resume's prologue: the tracer can read a tuple or a range, so the rest of the loop is
    # compiled (a Python iterator it cannot read).
    stack_specs, iter_slots = [], []
    for i, v in enumerate(stack):
        if v is tx.NULL:
            stack_specs.append(None)
        elif i in plan.with_slots:
            stack_specs.append(v.entered_context())
        elif isinstance(v, IteratorVariable) and not rebuild.live_iterator(v) and i < len(stack) - plan.consumed:
            stack_specs.append(rebuild.remaining(v))
            iter_slots.append(i)
        else:
            stack_specs.append(rebuild(v))
    stack_specs = tuple(stack_specs)
    live = sorted(set().union(*plan.live), key=tx.code.co_varnames.index)
    local_specs = []
    for name in live:
        # A live local unbound at the break (read only on another path: the exception path of a
        # with block reads what its body assigns) is left out: unbound in the resume function too.
        if name in tx.locals:
            local_specs.append((name, rebuild(tx.locals[name])))
        elif name in tx.raw_args:
            local_specs.append((name, SourceOutput(LocalSource(name))))
    return BreakOutput(plan, stack_specs, tuple(local_specs), tuple(tx.kw_names or ()), switches=switches,
                       iter_slots=tuple(iter_slots)), effects


# The exits of the blocks a resume function can enter again (each has `entered_context`).
_BLOCK_EXITS = (GradModeExitVariable, AutocastExitVariable, InferenceModeExitVariable, DynamoOnlyExitVariable)


def break_switches(tx, plan) -> tuple:
    """(what the cut instruction runs inside (outermost first; empty: the frame's own state), the
    grad mode outside the open blocks), after
    checking that the with blocks around the break are grad-mode, autocast and inference-mode
    blocks that a resume function can enter again in order from the frame's state.

    Grad-mode blocks: each block's exit restores the mode of the grad-mode block around it, and the
    mode now is the innermost one's; they become one ModeSwitch (the mode is one flag). Autocast
    and inference-mode blocks: the ones on the stack are the trace's open blocks, in order; each
    becomes a ContextSwitch that enters the very block again (their state is several values,
    which only entering and leaving them sets as eager does). Entering an inference-mode block
    sets grad mode (to `not mode`, whatever it was) and leaving it restores the mode it found, so
    the inference-mode switches go first, then the grad switch from the mode they leave to the
    block's, then autocast (independent of both)."""
    stack, output = tx.stack, tx.output
    exits = []
    for slot in plan.with_slots:
        if slot < len(stack) - plan.consumed and isinstance(stack[slot], UserContextExitVariable) \
                and stack[slot].made_at is not None:
            # A Python-written block (the outermost one): the frame is cut before its with
            # statement instead, which then runs for real, __enter__ and __exit__ once each.
            raise BlockAtBreak(stack[slot].made_at, repr(stack[slot]))
        if slot >= len(stack) - plan.consumed or not isinstance(stack[slot], _BLOCK_EXITS):
            raise Unsupported(f"the break is inside a with block of {stack[slot] if slot < len(stack) else '?'}, "
                              "not a grad-mode, autocast or inference-mode block")
        exits.append(stack[slot])
    if sum(isinstance(v, _BLOCK_EXITS) for v in stack) != len(exits):
        raise Unsupported("a block's exit on the stack outside its with block")
    # The grad mode outside the open blocks: the one the outermost grad-mode or inference-mode
    # block restores, else the mode now (the frame's entry mode, unless the traced code switched
    # it outside a with statement: the graph's code leaves it so, before the switches).
    first = next((e for e in exits if isinstance(e, (GradModeExitVariable, InferenceModeExitVariable))), None)
    outside = output.grad_mode if first is None else \
        first.prev if isinstance(first, GradModeExitVariable) else first.block.prev_grad
    expected = outside
    for e in exits:
        if isinstance(e, GradModeExitVariable):
            if e.prev != expected:
                raise Unsupported("grad-mode blocks that a resume function cannot enter again in order")
            expected = e.mode
        elif isinstance(e, InferenceModeExitVariable):
            if e.block.prev_grad != expected:
                raise Unsupported("an inference-mode block that a resume function cannot enter again in order")
            expected = not e.block.mode
    if output.grad_mode != expected:
        raise Unsupported("the grad mode at the break is not its with block's")
    blocks = [e.block for e in exits if isinstance(e, AutocastExitVariable)]
    if len(blocks) != len(output.autocast_blocks) or any(a is not b for a, b in zip(blocks, output.autocast_blocks)):
        raise Unsupported("the autocast blocks open at the break are not its with blocks")
    inference = [e.block for e in exits if isinstance(e, InferenceModeExitVariable)]
    if len(inference) != len(output.inference_blocks) or \
            any(a is not b for a, b in zip(inference, output.inference_blocks)):
        raise Unsupported("the inference-mode blocks open at the break are not its with blocks")
    entered = tuple(ContextSwitch(e.entered_context().enter) for e in exits
                    if isinstance(e, InferenceModeExitVariable))
    after_entered = not inference[-1].mode if inference else outside
    grad = (ModeSwitch(torch._C._set_grad_enabled, expected, after_entered),) if expected != after_entered else ()
    # Blocks that only set TorchDynamo's settings (dynamo_contexts.py) are independent of the rest.
    return entered + grad + tuple(ContextSwitch(e.entered_context().enter) for e in exits
                                  if isinstance(e, (AutocastExitVariable, DynamoOnlyExitVariable))), outside
