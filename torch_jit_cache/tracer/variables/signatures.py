"""inspect.signature(f) in the trace: only the names of the parameters are modelled."""

from __future__ import annotations

import collections
import inspect
import types

from ...guard.sources import AttrSource
from ...guard.trace_result import GuardKind
from .base import CallableVariable, MethodVariable, VariableTracker, unsupported
from .constant import ConstantVariable
from .functions import NestedFunctionVariable, UserFunctionVariable, UserMethodVariable


class SignatureFunctionVariable(CallableVariable):
    """inspect.signature(f) for a Python function or method the trace knows (transformers'
    apply_chunking_to_forward counts `inspect.signature(forward_fn).parameters`). Only the names
    of the parameters are modelled (SignatureVariable): they follow from the function's code,
    guarded where the function is read. A function with `__signature__` or `__wrapped__` in its
    __dict__ (which inspect follows) is refused, and the __dict__'s keys are guarded so that one
    set later misses."""

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1:
            unsupported("inspect.signature with options")
        target, bound = args[0], False
        if isinstance(target, UserMethodVariable):
            target, bound = target.func, True
        if isinstance(target, NestedFunctionVariable):
            # Made in this trace: only plain names can be set on it; the names come from its code alone.
            fn = types.FunctionType(target.code, {}, target.code.co_name, None,
                                    tuple(types.CellType() for _ in target.code.co_freevars) or None)
        elif isinstance(target, UserFunctionVariable) and target.source is not None:
            fn = target.fn
            if "__signature__" in vars(fn) or "__wrapped__" in vars(fn):
                unsupported(f"inspect.signature of {fn.__qualname__}, which names another signature")
            tx.output.add_guard(AttrSource(target.source, "__dict__"), GuardKind.DICT_KEYS, tuple(vars(fn)))
        else:
            unsupported(f"inspect.signature of {args[0]}")
        params = list(inspect.signature(fn).parameters.values())
        if bound:   # a bound method's signature drops its first parameter, unless that is *args
            if not params:
                unsupported(f"inspect.signature of method {fn.__qualname__} with no parameters")
            if params[0].kind is not inspect.Parameter.VAR_POSITIONAL:
                params = params[1:]
        return SignatureVariable(tuple(p.name for p in params))


class SignatureVariable(VariableTracker):
    """An inspect.Signature of which only `.parameters` is read."""

    def __init__(self, names: tuple):
        super().__init__(None)
        self.names = names

    def python_type(self):
        return inspect.Signature

    def var_getattr(self, tx, name):
        if name == "parameters":
            return ParameterNamesVariable(self.names)
        unsupported(f"attribute {name!r} of an inspect.Signature")


class ParameterNamesVariable(VariableTracker):
    """Signature.parameters (a mappingproxy of name -> Parameter), for len(), `in`, iteration
    (its names), truth and `.keys()`; a Parameter itself is not modelled, so neither are
    `.values()`, `.items()` nor `[name]`."""

    def __init__(self, names: tuple):
        super().__init__(None)
        self.names = names

    def python_type(self):
        return types.MappingProxyType

    def length(self, tx) -> int:
        return len(self.names)

    def unpack(self, tx):
        return [ConstantVariable(n) for n in self.names]

    def contains(self, tx, item) -> bool:
        return item.as_python_constant() in self.names

    def truthy(self, tx) -> bool:
        return bool(self.names)

    def var_getattr(self, tx, name):
        if name == "keys":
            return MethodVariable(self, name)
        unsupported(f"attribute {name!r} of inspect.Signature.parameters")

    def call_method(self, tx, name, args, kwargs):
        if name == "keys" and not args and not kwargs:
            return ParameterKeysVariable(self.names)
        unsupported(f"inspect.Signature.parameters.{name}()")


class ParameterKeysVariable(ParameterNamesVariable):
    """`Signature.parameters.keys()`: its names as the OrderedDict's keys view, read as the mapping
    is (len, `in`, iteration, truth: diffusers' `set(inspect.signature(f).parameters.keys())`). It
    is not rebuilt after the graph: a view of a mapping the trace never held would not be the
    caller's."""

    def python_type(self):
        return type(collections.OrderedDict().keys())

    def var_getattr(self, tx, name):
        unsupported(f"attribute {name!r} of inspect.Signature.parameters.keys()")


def wrap_signature(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)   # inspect.signature: its parameters' names, from the code
    return SignatureFunctionVariable(value, source)
