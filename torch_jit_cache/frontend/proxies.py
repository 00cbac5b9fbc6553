"""Proxies for what a compiled graph calls opaquely, and the table of what is called that way.

A graph that calls a module or function as one node must hold something callable, and a cache
entry owns its graph: holding the user's module there would keep it alive for as long as the
entry, and the entry lives until the module dies (its guards hold it weakly) -- a cycle through
the C++ cache that no collector sees. So the graph holds a proxy instead:

- a module proxy is a new instance of the module's own class, made with `cls.__new__`, whose
  instance `__dict__` IS the original's (the same dict object, not a copy). Parameters, buffers,
  submodules, hooks and attributes set after compiling all show through, `type(proxy)` is the
  original's class, and the original itself is referenced by nothing the entry owns. Rejected:
  `copy.copy` (a new `__dict__`: later attribute changes would not show through), a
  `weakref.proxy` (its type is not the module's class, and backends inspect submodules' types);
- a function proxy is a new function object over the original's code, globals, closure cells
  and defaults: cell contents changed later show through, the function object itself is not held.

What stays fragile, as in TorchDynamo: an object in the shared `__dict__` (or in a closure cell)
that refers back to the original keeps it alive through the proxy.

`allow_in_graph` marks user functions and nn.Module subclasses to be called this way; the marks
are a WeakSet (a marked class or function that dies leaves nothing behind). torch is imported
lazily: the runtime's users import this package without torch.
"""
from __future__ import annotations

import types
import weakref

__all__ = ["allow_in_graph", "is_allowed_in_graph", "builtin_opaque_reason", "module_proxy",
           "function_proxy", "preserving_derived_state", "OPAQUE_BUILTIN_MODULES"]

# Built-in torch.nn modules the tracer calls as one opaque node (by their name in torch.nn; the
# class must be exactly torch.nn's, a user subclass has a forward of its own and is traced), and
# why they are not traced through or lowered to a functional form like the leaves in
# tracer/variables/modules/nn_module.py. Calling the module itself keeps eager's exact behaviour,
# including the fast paths torch picks at call time.
OPAQUE_BUILTIN_MODULES = {
    "LSTM": "one fused op (torch.lstm) over flat weights that RNNBase keeps in sync with its "
            "parameters; input packing and hidden-state defaults are decided at call time",
    "GRU": "one fused op (torch.gru) over flat weights, as LSTM",
    "RNN": "one fused op (torch.rnn_tanh / rnn_relu) over flat weights, as LSTM",
    "MultiheadAttention": "picks torch._native_multi_head_attention (the fast path) or the "
                          "functional path at call time from grad mode, training and its inputs",
    "TransformerEncoderLayer": "the fast path torch._transformer_encoder_layer_fwd runs in eval "
                               "without grad, chosen at call time; the module keeps that choice",
    "TransformerEncoder": "may turn its input into a nested tensor from the padding mask (a "
                          "data-dependent fast path) and calls its layers' fast paths",
    "TransformerDecoderLayer": "built from MultiheadAttention blocks with their fast paths",
    "TransformerDecoder": "a stack of TransformerDecoderLayer",
    "Transformer": "TransformerEncoder and TransformerDecoder together",
}

# Attributes of a built-in opaque module that are derived from others: RNNBase's list of its own
# parameters and weakrefs to them, rebuilt by forward whenever a parameter is not the one the
# weakref names. They need no guard (the tracer guards every other attribute, see
# tracer/variables/modules/opaque_calls.py), but whoever swaps parameters (torch.func.functional_call for
# the example run, AOTAutograd compiling the graph) leaves its own tensors in them:
# `preserving_derived_state` puts the module's back.
DERIVED_ATTRIBUTES = ("_flat_weights", "_flat_weight_refs")

# Functions and nn.Module subclasses the user marked; weak, so a mark never outlives its object.
_ALLOWED: "weakref.WeakSet" = weakref.WeakSet()


def allow_in_graph(fn_or_module_class):
    """Call `fn_or_module_class` as one opaque node in compiled graphs instead of tracing it.

    Takes a Python function or an nn.Module subclass (exactly that class, not its subclasses) and
    returns it unchanged, so it works as a decorator. The call runs eagerly inside the graph, with
    the tensors it is given; its parameters get gradients as in eager. It runs once more while a
    graph is traced, on example copies of the inputs (a module's parameters and buffers are
    copies too), so it must have no Python side effects, and its outputs -- tensors, or tuples and
    lists of tensors and None -- must have shapes that depend only on its inputs' shapes.
    """
    obj = fn_or_module_class
    if isinstance(obj, type):
        import torch.nn as nn

        if not issubclass(obj, nn.Module):
            raise TypeError(f"allow_in_graph takes a function or an nn.Module subclass, got class "
                            f"{obj.__qualname__}")
    elif not isinstance(obj, types.FunctionType):
        raise TypeError(f"allow_in_graph takes a function or an nn.Module subclass, got "
                        f"{type(obj).__name__} (a bound method or partial: mark its function)")
    _ALLOWED.add(obj)
    return obj


def is_allowed_in_graph(obj) -> bool:
    try:
        return obj in _ALLOWED
    except TypeError:   # unhashable: never marked
        return False


def builtin_opaque_reason(cls) -> str | None:
    """Why built-in module class `cls` is called opaquely, or None if it is not in the table."""
    name = cls.__name__
    if name not in OPAQUE_BUILTIN_MODULES or not cls.__module__.startswith("torch.nn."):
        return None
    import torch.nn as nn

    return OPAQUE_BUILTIN_MODULES[name] if getattr(nn, name, None) is cls else None


class preserving_derived_state:
    """Puts the DERIVED_ATTRIBUTES of `modules` back as they were on entry, on exit."""

    def __init__(self, modules):
        self._saved = [(vars(m), name, vars(m)[name]) for m in modules for name in DERIVED_ATTRIBUTES
                       if name in vars(m)]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for d, name, value in self._saved:
            d[name] = value
        self._saved = []


def module_proxy(module):
    """A new instance of `type(module)` sharing `module`'s instance dict (see the module docstring)."""
    cls = type(module)
    proxy = cls.__new__(cls)
    object.__setattr__(proxy, "__dict__", module.__dict__)
    return proxy


def function_proxy(fn: types.FunctionType) -> types.FunctionType:
    """A new function over `fn`'s code, globals, closure cells and defaults."""
    proxy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    proxy.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    proxy.__qualname__ = fn.__qualname__
    proxy.__module__ = fn.__module__
    return proxy
