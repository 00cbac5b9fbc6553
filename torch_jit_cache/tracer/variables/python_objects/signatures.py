"""inspect.signature(f) in the trace: the names of the parameters, and for a function read from
the frame each Parameter's name, kind and default."""

from __future__ import annotations

import collections
import inspect
import types

from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import GuardKind
from ..base import CallableVariable, MethodVariable, VariableTracker, unsupported
from .classes import ClassVariable
from ..constant import ConstantVariable
from .functions import NestedFunctionVariable, UserFunctionVariable, UserMethodVariable


class SignatureFunctionVariable(CallableVariable):
    """inspect.signature(f) for a Python function or method the trace knows (transformers'
    apply_chunking_to_forward counts `inspect.signature(forward_fn).parameters`). Only the
    parameters are modelled (SignatureVariable): they follow from the function's code, guarded
    where the function is read. A function with `__signature__` or `__wrapped__` in its
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
        # Defaults are read through the function's source; a function made in this trace has none
        # known here (the stand-in above is made without them).
        fn_var = None if isinstance(target, NestedFunctionVariable) else target
        return SignatureVariable(tuple(params), fn_var)


class SignatureVariable(VariableTracker):
    """An inspect.Signature of which only `.parameters` is read; `fn_var` the function's tracker
    where it was read from the frame (its defaults are read through it), else None."""

    def __init__(self, params: tuple, fn_var=None):
        super().__init__(None)
        self.params, self.fn_var = params, fn_var

    def python_type(self):
        return inspect.Signature

    def var_getattr(self, tx, name):
        if name == "parameters":
            return ParameterNamesVariable(self.params, self.fn_var)
        unsupported(f"attribute {name!r} of an inspect.Signature")


class ParameterNamesVariable(VariableTracker):
    """Signature.parameters (a mappingproxy of name -> Parameter), for len(), `in`, iteration
    (its names), truth, `.keys()` and `parameters[name]` (ParameterVariable, of a function read
    from the frame); not `.values()` nor `.items()`."""

    def __init__(self, params: tuple, fn_var=None):
        super().__init__(None)
        self.params, self.fn_var = params, fn_var
        self.names = tuple(p.name for p in params)

    def python_type(self):
        return types.MappingProxyType

    def getitem(self, tx, key):
        """`parameters[name]`: the Parameter, of a function read from the frame."""
        name = key.as_python_constant() if key.is_python_constant() else None
        if not isinstance(name, str) or name not in self.names:
            unsupported(f"parameters[{key}] of an inspect.Signature")
        if self.fn_var is None:
            unsupported(f"parameters[{name!r}] of a function made in the trace")
        return ParameterVariable(self.params[self.names.index(name)], self.fn_var)

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
            return ParameterKeysVariable(self.params)
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

    def getitem(self, tx, key):
        unsupported("a subscript of a keys view (TypeError in Python)")


class ParameterVariable(VariableTracker):
    """One inspect.Parameter of a function read from the frame: its name and kind follow from the
    function's code (as the names do), its default from `f.__defaults__` / `f.__kwdefaults__`,
    read through the function's source and guarded as any value read there (a default replaced
    later recompiles); a parameter without one gets `inspect.Parameter.empty`, its absence held by
    the guard on that tuple's length. Its annotation and anything else are a graph break."""

    def __init__(self, param: inspect.Parameter, fn_var):
        super().__init__(None)
        self.param, self.fn_var = param, fn_var

    def python_type(self):
        return inspect.Parameter

    def var_getattr(self, tx, name):
        if name in ("name", "kind"):
            return ConstantVariable(getattr(self.param, name))
        if name == "default":
            return self._default(tx)
        unsupported(f"attribute {name!r} of an inspect.Parameter")

    def _default(self, tx):
        fn, source, p = self.fn_var.fn, self.fn_var.source, self.param
        kind = inspect.Parameter
        if p.kind in (kind.VAR_POSITIONAL, kind.VAR_KEYWORD):
            return ClassVariable(kind.empty)
        if p.kind is kind.KEYWORD_ONLY:
            found, where, key = fn.__kwdefaults__, AttrSource(source, "__kwdefaults__"), p.name
            if found is not None:
                tx.output.add_guard(where, GuardKind.TYPE_MATCH, dict)
                tx.output.add_guard(where, GuardKind.DICT_KEYS, tuple(found))
        else:
            code = fn.__code__
            positional = code.co_varnames[:code.co_argcount]
            found, where = fn.__defaults__, AttrSource(source, "__defaults__")
            if found is not None:
                tx.output.add_guard(where, GuardKind.TYPE_MATCH, tuple)
                tx.output.add_guard(where, GuardKind.LENGTH, len(found))
            key = positional.index(p.name) - (len(positional) - len(found or ()))
        if found is None:
            tx.output.add_guard(where, GuardKind.NONE_MATCH, None)
            return ClassVariable(kind.empty)
        if isinstance(key, int) and key < 0 or isinstance(key, str) and key not in found:
            return ClassVariable(kind.empty)
        return tx.wrap(found[key], ItemSource(where, key))


def wrap_signature(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)   # inspect.signature: its parameters' names, from the code
    return SignatureFunctionVariable(value, source)
