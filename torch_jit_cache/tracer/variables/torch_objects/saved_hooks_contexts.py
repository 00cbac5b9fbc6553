"""`torch.autograd.graph.disable_saved_tensors_hooks(message)` in traced code, as a with block and
as a decorator (`@disable_saved_tensors_hooks(message)` applied in the trace, or `...(message)(fn)`).

The block sets autograd's thread-local "saved tensors default hooks disabled" message: pushing
default hooks inside it raises with that message, and entering it where hooks are pushed raises
too. It restores the message it found when it ends. Nothing a graph computes reads that state, so
the block becomes two graph nodes that set it at call time, as eager does: `enter_hooks_disabled(
message)` before the block's ops, returning the message in force before (None: enabled), and
`exit_hooks_disabled(that node)` after them, which restores it. The message before is read where
the graph runs, never while tracing, so no guard is needed; an error eager gives on entering
(hooks pushed) is the graph's error at the same point. The real state is not changed while tracing:
what inside the block could read it (pushing or reading hooks, the getter) is not traced (a break).

Refused (the frame runs as written or breaks before the call): a graph break inside the block
(its exit has no `entered_context`: graph_break/state.py), an exception the trace raises through
it, a message that is not a constant str, and a backend that compiles through AOTAutograd (it runs
the nodes while it traces, not at call time).
"""
from __future__ import annotations

import contextlib

import torch
import torch.fx

from ....backends import tracing_for_eager
from ....guard.trace_result import CallOutput, ConstantOutput, GuardKind, SourceOutput
from ..base import TracedRaise, VariableTracker, unsupported
from ..constant import ConstantVariable

DISABLE_SAVED_TENSORS_HOOKS = torch.autograd.graph.disable_saved_tensors_hooks
_GET_MESSAGE = torch._C._autograd._saved_tensors_hooks_get_disabled_error_message
_DISABLE = torch._C._autograd._saved_tensors_hooks_disable
_ENABLE = torch._C._autograd._saved_tensors_hooks_enable


def enter_hooks_disabled(message):
    """Graph node: disable saved tensors default hooks with `message`; the message in force before.
    Where hooks are pushed, disabling sets the message and raises: the state before is restored
    first, as the context manager's `finally` does in eager."""
    prev = _GET_MESSAGE()
    try:
        _DISABLE(message)
    except BaseException:
        exit_hooks_disabled(prev)
        raise
    return prev


def exit_hooks_disabled(prev):
    """Graph node: restore what `enter_hooks_disabled` found."""
    if prev is None:
        _ENABLE()
    else:
        _DISABLE(prev)


torch.fx.node.has_side_effect(enter_hooks_disabled)
torch.fx.node.has_side_effect(exit_hooks_disabled)


def wrap_hooks_disable(tx, value, source, g):
    """builder.py's rule for disable_saved_tensors_hooks, read by identity."""
    g(GuardKind.ID_MATCH, value)
    return HooksDisableFunctionVariable(source)


def _enter(tx, message: str):
    if not tracing_for_eager():
        unsupported("disable_saved_tensors_hooks under a backend that compiles through AOTAutograd "
                    "(it runs the block's state switch while tracing, not at call time)")
    return tx.output.create_node("call_function", enter_hooks_disabled, (message,), {})


def _exit(tx, node) -> None:
    tx.output.create_node("call_function", exit_hooks_disabled, (node,), {})


class HooksDisableFunctionVariable(VariableTracker):
    """torch.autograd.graph.disable_saved_tensors_hooks, before it is called."""

    def call_function(self, tx, args, kwargs):
        values = [*args, *(v for k, v in kwargs.items() if k == "error_message")]
        if len(values) != 1 or len(args) + len(kwargs) != 1 or not values[0].is_python_constant() \
                or type(values[0].as_python_constant()) is not str:
            unsupported("disable_saved_tensors_hooks with other than one constant str message")
        return HooksDisabledVariable(values[0].as_python_constant())

    def as_python_constant(self):
        return DISABLE_SAVED_TENSORS_HOOKS

    def reconstruct(self, outputs):
        return SourceOutput(self.source) if self.source is not None else ConstantOutput(DISABLE_SAVED_TENSORS_HOOKS)

    def __repr__(self):
        return "HooksDisableFunctionVariable()"


class HooksDisabledVariable(VariableTracker):
    """The context manager `disable_saved_tensors_hooks(message)` made in the trace, not entered."""

    def __init__(self, message: str):
        super().__init__(None)
        self.message = message
        self.entered = False   # its generator ran: eager's object cannot be entered again

    def python_type(self):
        return contextlib._GeneratorContextManager

    def enter(self, tx):
        """BEFORE_WITH: (the exit it leaves below, what `as` binds: None, what it yields)."""
        if self.entered:
            unsupported("a disable_saved_tensors_hooks object entered twice (eager raises)")
        self.entered = True
        return HooksDisabledExitVariable(_enter(tx, self.message)), ConstantVariable(None)

    def call_function(self, tx, args, kwargs):
        """The decorator form: `fn` wrapped to run in the block at each call."""
        if len(args) != 1 or kwargs or args[0].is_python_constant():
            unsupported(f"call to {self}")
        return HooksDisabledFunctionVariable(self.message, args[0])

    def reconstruct(self, outputs):
        # A new one: making it changes nothing (its generator has not started).
        if self.entered:
            unsupported("a disable_saved_tensors_hooks object that was entered leaves the trace")
        return outputs.once(self, lambda: CallOutput(ConstantOutput(DISABLE_SAVED_TENSORS_HOOKS), ("error_message",),
                                                     (ConstantOutput(self.message),)))

    def __repr__(self):
        return f"HooksDisabledVariable({self.message!r})"


class HooksDisabledExitVariable(VariableTracker):
    """The exit BEFORE_WITH left for such a block (`node`: the enter node): called at the block's
    normal end it closes the block in the graph. No `entered_context`: a break inside is refused."""

    def __init__(self, node):
        super().__init__(None)
        self.node = node
        self.exited = False

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 3 or not all(a.is_python_constant() and a.as_python_constant() is None for a in args):
            unsupported("an exception through a disable_saved_tensors_hooks block")
        if self.exited:
            unsupported("a disable_saved_tensors_hooks block exited twice (tracer bug)")
        self.exited = True
        _exit(tx, self.node)
        return ConstantVariable(None)

    def __repr__(self):
        return "HooksDisabledExitVariable()"


def _decorated(message, fn):
    """`disable_saved_tensors_hooks(message)(fn)`, made again after the graph."""
    return DISABLE_SAVED_TENSORS_HOOKS(message)(fn)


class HooksDisabledFunctionVariable(VariableTracker):
    """`disable_saved_tensors_hooks(message)(fn)` made in the trace: `fn` called inside the block."""

    def __init__(self, message: str, fn):
        super().__init__(None)
        self.message, self.fn = message, fn

    def python_type(self):
        return type(_decorated)

    def call_function(self, tx, args, kwargs):
        node = _enter(tx, self.message)
        try:
            result = tx.call(self.fn, args, kwargs)
        except TracedRaise:
            unsupported("an exception through a function decorated with disable_saved_tensors_hooks")
        _exit(tx, node)
        return result

    def reconstruct(self, outputs):
        return outputs.once(self, lambda: CallOutput(ConstantOutput(_decorated), ("message", "fn"),
                                                     (ConstantOutput(self.message), outputs.rebuild(self.fn))))

    def __repr__(self):
        return f"HooksDisabledFunctionVariable({self.message!r}, {self.fn!r})"
