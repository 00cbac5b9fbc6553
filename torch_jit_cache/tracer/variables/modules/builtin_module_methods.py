"""Functions of torch.nn's module classes read as values (`nn.Embedding.forward`, reached from a
subclass's `super().forward(x)`, or `nn.Conv1d._conv_forward`): methods of a module, called with
the module first, never torch functions to put in the graph by name (nn_module.py's leaf table
and inlining decide what a call does).
"""
from __future__ import annotations

import sys
import types

from torch import nn

from ....guard.trace_result import GuardKind
from ..base import CallableVariable, unsupported
from ..python_objects.functions import UserFunctionVariable
from .built_modules import BuiltModuleVariable
from .nn_module import LEAF_ARITY, LEAF_MODULES, LeafSettings, NNModuleVariable, builtin_forward_refusal


def builtin_module_owner(fn) -> type | None:
    """The torch.nn module class whose own __dict__ holds the function `fn` (`nn.Embedding.forward`,
    `nn.Conv1d._conv_forward`), else None. Such a function is reached from a subclass's
    `super().forward(x)` or as `nn.Embedding.forward(self, x)`: it is a method of the module, never
    a torch function to put in the graph by name (its module path names no such function, and the
    parameters it reads would be hidden from the backend, so they would get no gradient)."""
    if not isinstance(fn, types.FunctionType) or not (fn.__module__ or "").startswith("torch.nn"):
        return None
    owner_path, _, name = fn.__qualname__.rpartition(".")
    owner = sys.modules.get(fn.__module__)
    for part in owner_path.split(".") if owner_path else ():
        owner = getattr(owner, part, None)
    if isinstance(owner, type) and issubclass(owner, nn.Module) and vars(owner).get(name) is fn:
        return owner
    return None


class BuiltinModuleMethodVariable(CallableVariable):
    """A function of a built-in module class (builtin_module_owner), read through a source that the
    builder guards by identity. Calling a leaf module's `forward` with a module of that class (or a
    subclass: `super().forward(x)`) is that leaf's op, exactly as calling a plain instance is
    (LEAF_MODULES: the parameters are graph inputs, read through the module's source). Any other
    function of the class, called with a module of it, is inlined (builtin_forward_refusal says
    which modules are not: a graph break where it is called, with its name)."""

    def __init__(self, fn, owner: type, source=None):
        super().__init__(fn, source)
        self.owner = owner

    def call_function(self, tx, args, kwargs):
        cls, name = self.owner, self.fn.__name__
        leaf = LEAF_MODULES.get(cls) if name == "forward" else None
        if args and isinstance(args[0], BuiltModuleVariable) and isinstance(args[0].module, cls):
            # A module built in the trace (no parameters, settings only): the function inlined, its
            # `self.setting` reads answered by the built module.
            return tx.call(UserFunctionVariable(self.fn, self.source), args, kwargs)
        if not args or not isinstance(args[0], NNModuleVariable) or not isinstance(args[0].module, cls):
            unsupported(f"{cls.__name__}.{name} called with {args[0] if args else 'no arguments'}")
        if leaf is None:
            # Outside the leaf table: inlined as the module's own forward is (builtin_forward_refusal).
            why = builtin_forward_refusal(args[0].module, cls)
            if why is not None:
                unsupported(f"{cls.__name__}.{name} of built-in module {cls.__name__} is not traced: {why}")
            return tx.call(UserFunctionVariable(self.fn, self.source), args, kwargs)
        mv, rest = args[0], args[1:]
        if kwargs or not 1 <= len(rest) <= LEAF_ARITY.get(cls, 1):
            unsupported(f"{cls.__name__}.forward called with {len(rest)} args and {list(kwargs)}")
        return leaf(tx, mv, LeafSettings(tx, mv), *rest)

    def __repr__(self):
        return f"BuiltinModuleMethodVariable({self.fn.__qualname__})"


def wrap_builtin_module_method(tx, value, source, g):
    """nn.Embedding.forward (super().forward(x)): a method, not a torch op."""
    owner = builtin_module_owner(value)
    if owner is None:
        return None
    g(GuardKind.ID_MATCH, value)
    return BuiltinModuleMethodVariable(value, owner, source)
