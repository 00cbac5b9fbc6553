"""Grad mode switched outside a with statement: `torch._C._set_grad_enabled(mode)` called (a context
manager written in Python sets it in its __enter__ and __exit__), and `torch.set_grad_enabled(mode)`
made where no BEFORE_WITH follows (its __init__ sets the mode; the object may be entered later,
or used as a decorator, whose __call__ sets back the mode it found when made).

Such a switch holds for the rest of the frame and after it, as in eager. The trace follows it
(OutputGraph.switch_grad_mode: the real mode too, so the example ops and `torch.is_grad_enabled()`
see it); the graph still ends in the frame's entry mode, and the mode the traced code has outside
its open blocks where it returns or breaks is set after the graph by a side effect
(EffectKind.SET_STATE, OutputGraph.leave_grad_mode_effects; at a break, graph_break/state.py
`break_switches` names that mode, which the break's switches and the resume function start from).
The GLOBAL_STATE guard pins the entry mode, so every mode the trace sets is a constant of it.

A `torch.set_grad_enabled` object (SetGradEnabledVariable) holds its `mode` and the `prev` it found
when made: entering it sets `mode`, its exit sets `prev` (torch's __exit__ does, whatever the mode
was at entry), and it is rebuilt after the graph as an object of the class with the same two
attributes, not made again (making it would switch the mode a second time). One read from the
frame is that object with `mode` and `prev` guarded where they are read (contexts.context_object).
Refused inside a torch.inference_mode block (its exit restores grad mode through its own guard).
"""
from __future__ import annotations

import torch

from ....guard.sources import AttrSource
from ....guard.trace_result import CallOutput, ConstantOutput, GuardKind, SourceOutput
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable
from .grad_decorators import GradModeDecoratedVariable

SET_GRAD_ENABLED = torch._C._set_grad_enabled


def remade_set_grad_enabled(mode, prev):
    """A `torch.set_grad_enabled` object the trace made, made again after the graph without
    switching the mode (its __init__ would)."""
    obj = torch.set_grad_enabled.__new__(torch.set_grad_enabled)
    obj.mode, obj.prev = mode, prev
    return obj


def _constant_bool(v, what: str) -> bool:
    if not v.is_python_constant() or type(v.as_python_constant()) is not bool:
        unsupported(f"{what} with a mode that is not a constant bool")
    return v.as_python_constant()


class GradSwitchFunctionVariable(VariableTracker):
    """`torch._C._set_grad_enabled`, held by identity."""

    def call_function(self, tx, args, kwargs):
        if len(args) != 1 or kwargs:
            unsupported("torch._C._set_grad_enabled called with other than one argument")
        tx.output.switch_grad_mode(_constant_bool(args[0], "torch._C._set_grad_enabled"),
                                   "torch._C._set_grad_enabled()")
        return ConstantVariable(None)

    def as_python_constant(self):
        return SET_GRAD_ENABLED

    def python_type(self):
        return type(SET_GRAD_ENABLED)

    def reconstruct(self, outputs):
        return SourceOutput(self.source) if self.source is not None else ConstantOutput(SET_GRAD_ENABLED)

    def __repr__(self):
        return "GradSwitchFunctionVariable()"


def wrap_grad_switch(tx, value, source, g):
    """builder.py's rule for `torch._C._set_grad_enabled`; None for any other value."""
    if value is not SET_GRAD_ENABLED:
        return None
    g(GuardKind.ID_MATCH, value)
    return GradSwitchFunctionVariable(source)


def make_set_grad_enabled(tx, mode: bool):
    """`torch.set_grad_enabled(mode)` made in the trace, outside a with statement: the mode switches now."""
    prev = tx.output.grad_mode
    tx.output.switch_grad_mode(mode, "torch.set_grad_enabled(...)")
    return SetGradEnabledVariable(mode, prev)


def frame_set_grad_enabled(tx, ctx, value):
    """The tracker of a `torch.set_grad_enabled` object `value` the trace holds as `ctx` (a torch
    callable, read from the frame): its mode and prev, guarded where it has a source."""
    def read(name):
        attr = getattr(value, name)
        v = ConstantVariable(attr) if ctx.source is None else tx.wrap(attr, AttrSource(ctx.source, name))
        return _constant_bool(v, f"a torch.set_grad_enabled object's {name}")
    return SetGradEnabledVariable(read("mode"), read("prev"), ctx.source)


class SetGradEnabledVariable(VariableTracker):
    """A `torch.set_grad_enabled` object: `mode` what entering it sets, `prev` what its exit (and
    its use as a decorator) sets back. BEFORE_WITH enters it as contexts.GradModeVariable with
    that `prev` (contexts.context_object)."""

    def __init__(self, mode: bool, prev: bool, source=None):
        super().__init__(source)
        self.mode, self.prev = mode, prev

    def python_type(self):
        return torch.set_grad_enabled

    def call_function(self, tx, args, kwargs):
        """`torch.set_grad_enabled(mode)(fn)`: sets back the mode found when made, and returns `fn`
        wrapped to run in `mode` (grad_decorators.py)."""
        if len(args) != 1 or kwargs or args[0].is_python_constant():
            unsupported(f"call to {self}")
        tx.output.switch_grad_mode(self.prev, "torch.set_grad_enabled(...)(fn)")
        return GradModeDecoratedVariable(torch.set_grad_enabled, self.mode, args[0], (self.mode,))

    def var_getattr(self, tx, name):
        if name in ("mode", "prev"):
            return ConstantVariable(getattr(self, name))
        return super().var_getattr(tx, name)

    def reconstruct(self, outputs):
        if self.source is not None:
            return SourceOutput(self.source)
        return outputs.once(self, lambda: CallOutput(ConstantOutput(remade_set_grad_enabled), ("mode", "prev"),
                                                     (ConstantOutput(self.mode), ConstantOutput(self.prev))))

    def __repr__(self):
        return f"SetGradEnabledVariable(mode={self.mode}, prev={self.prev})"
