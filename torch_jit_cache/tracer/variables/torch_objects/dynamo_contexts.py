"""Context managers that concern TorchDynamo alone, traced as blocks that do nothing in the graph.

`torch._dynamo.error_on_graph_break(flag)` sets a setting of TorchDynamo's compiler (whether a graph
break inside the block is an error); tjc has no such per-block setting (`fullgraph=True` is per
compile call), so in a traced frame the block is a no-op: nothing enters the graph, and the frame's
own break rules apply inside it. Outside the trace it still runs for real, so whatever the setting
means to torch.compile is eager's: at a graph break inside the block the break instruction runs inside
a real `error_on_graph_break(flag)` block (a ContextSwitch), and the resume function enters one again
(a constant `functools.partial(error_on_graph_break, flag)`), as for inference_mode blocks
(contexts.py). The factory read from the frame is guarded by identity; its arguments must be
constant bools.

Not traced, with the reason: the decorator form (`@error_on_graph_break(False)` applied in the
trace), arguments that are not constants.
"""
from __future__ import annotations

import functools
import sys

from ....guard.trace_result import EnteredContext, GuardKind, SourceOutput
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable

# The factories by name in torch._dynamo, with the check on the arguments each takes (positional,
# after the bound ones).
_FACTORY_ARGS = {
    "error_on_graph_break": lambda args: len(args) == 1 and type(args[0]) is bool,
}


def _factories() -> dict:
    """{factory: its argument check} for the factories torch._dynamo has, if it is imported.

    Never imports it: a value can only be one of its functions once the user's code has imported
    it, and importing it here would run its module code with the user's frames on the stack (an
    import of torch._dynamo keeps the frames it was imported from alive, and with them whatever
    they hold: the user's model)."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        return {}
    return {getattr(dynamo, name): check for name, check in _FACTORY_ARGS.items() if hasattr(dynamo, name)}


def is_dynamo_only(value) -> bool:
    # By identity: a value's own __hash__/__eq__ (a user object's) never runs.
    return any(value is factory for factory in _factories())


def dynamo_context_class(value, source=None):
    """The tracker for a factory of `_factories()`, or for the constant `functools.partial(factory,
    *args)` a resume function's prologue enters a block again with; else None."""
    if isinstance(value, functools.partial) and not value.keywords and is_dynamo_only(value.func):
        return DynamoOnlyFactoryVariable(value.func, source, value.args)
    if is_dynamo_only(value):
        return DynamoOnlyFactoryVariable(value, source)
    return None


def wrap_dynamo_only(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    return DynamoOnlyFactoryVariable(value, source)


class DynamoOnlyFactoryVariable(VariableTracker):
    """error_on_graph_break (and the like) before it is called; `bound`: arguments a resume
    function's constant partial already holds."""

    def __init__(self, fn, source=None, bound: tuple = ()):
        super().__init__(source)
        self.fn, self.bound = fn, bound

    def python_type(self):
        return type(self.fn) if not self.bound else functools.partial

    def call_function(self, tx, args, kwargs):
        if kwargs or not all(a.is_python_constant() for a in args):
            unsupported(f"{self.fn.__name__} with arguments that are not positional constants")
        values = (*self.bound, *(a.as_python_constant() for a in args))
        if not _factories()[self.fn](values):
            unsupported(f"{self.fn.__name__}{values!r}: arguments it does not take")
        return DynamoOnlyContextVariable(self.fn, values)

    def reconstruct(self, outputs):
        if self.source is None or self.bound:
            return super().reconstruct(outputs)
        return SourceOutput(self.source)

    def __repr__(self):
        return f"DynamoOnlyFactoryVariable({self.fn.__name__}{self.bound})"


class DynamoOnlyContextVariable(VariableTracker):
    """The context manager the factory made in the trace, not entered yet. Calling it (the decorator
    form) or rebuilding it after the graph is refused (the base class)."""

    def __init__(self, fn, args: tuple):
        super().__init__(None)
        self.fn, self.args = fn, args

    def python_type(self):
        return object

    def enter(self, tx):
        """BEFORE_WITH: (the exit it leaves below, what `as` binds: None, as its __enter__)."""
        return DynamoOnlyExitVariable(self.fn, self.args), ConstantVariable(None)

    def __repr__(self):
        return f"DynamoOnlyContextVariable({self.fn.__name__}{self.args})"


class DynamoOnlyExitVariable(VariableTracker):
    """The exit BEFORE_WITH left for such a block: leaving it does nothing in the trace, whether the
    block ends normally or by an exception (it never suppresses one)."""

    def __init__(self, fn, args: tuple):
        super().__init__(None)
        self.fn, self.args = fn, args

    def call_function(self, tx, args, kwargs):
        return ConstantVariable(None)

    def entered_context(self) -> EnteredContext:
        """How a graph break inside the block carries it over (graph_break/state.py)."""
        return EnteredContext(functools.partial(self.fn, *self.args))

    def __repr__(self):
        return f"DynamoOnlyExitVariable({self.fn.__name__}{self.args})"
