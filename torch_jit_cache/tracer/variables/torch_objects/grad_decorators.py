"""Functions decorated with a grad mode in the trace: `torch.no_grad()(fn)`, `torch.enable_grad()(fn)`
and the no-parentheses forms `torch.no_grad(fn)`, `torch.enable_grad(fn)`.

torch's decorator returns a new function that enters the mode around each call of `fn`; making it
changes nothing (the mode is entered per call). The trace keeps `GradModeDecoratedVariable`: calling
it inlines `fn` with the mode set, and restores the mode after, as `call_decorated` (contexts.py)
does for a decorated function read from the frame. One that leaves the trace (returned, live at a
graph break) is made again after the graph by decorating the rebuilt `fn` with the same class.
"""
from __future__ import annotations

import types

from ....guard.trace_result import CallOutput, ConstantOutput
from ..base import VariableTracker


def decorate(cls, fn, args=()):
    """`cls(*args)(fn)`: the function torch's grad-mode decorator makes, made again after the graph
    (`torch.set_grad_enabled(mode)(fn)` switches the mode and back: no change)."""
    return cls(*args)(fn)


class GradModeDecoratedVariable(VariableTracker):
    """`cls(*args)(fn)` made in the trace: `fn` (a tracker) called with grad mode `mode`."""

    def __init__(self, cls, mode: bool, fn, args: tuple = ()):
        super().__init__(None)
        self.cls, self.mode, self.fn, self.args = cls, mode, fn, args

    def python_type(self):
        return types.FunctionType

    def call_function(self, tx, args, kwargs):
        prev = tx.output.grad_mode
        tx.output.set_grad_mode(self.mode)
        result = tx.call(self.fn, args, kwargs)
        tx.output.set_grad_mode(prev)
        return result

    def reconstruct(self, outputs):
        return outputs.once(self, lambda: CallOutput(ConstantOutput(decorate), ("cls", "fn", "args"),
                                                     (ConstantOutput(self.cls), outputs.rebuild(self.fn),
                                                      ConstantOutput(self.args))))

    def __repr__(self):
        return f"GradModeDecoratedVariable({self.cls.__name__}, {self.fn!r})"
