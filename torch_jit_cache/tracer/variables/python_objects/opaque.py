"""OpaqueVariable: a value of a kind the tracer does not model, read from the frame (a compiled
regex, a deque, a numpy array, an object from a C extension).

It is never read while tracing. It may be moved (into locals, onto the stack, into a container
the trace builds), compared with None, and given to isinstance/type/callable (its type is guarded),
but any other use is Unsupported, so that use becomes the graph break (graph_break/) rather
than the load: the frame is compiled up to the call of `pattern.match(s)`, the call runs as
bytecode, and the resume function continues with its result. A method of its type is read only
when the break rebuilds the stack (`pattern.match` at the CALL), never while tracing; any other
attribute is itself a break (its read may fail, or run a property).
"""
from __future__ import annotations

import inspect
import types

from ....guard.trace_result import GuardKind, SourceOutput
from ..base import MethodVariable, VariableTracker, unsupported

# Class attributes whose read through an instance cannot raise (an instance attribute of the same
# name would be read instead, which cannot raise either).
_METHOD_KINDS = (types.FunctionType, types.MethodDescriptorType, types.BuiltinFunctionType,
                 types.WrapperDescriptorType, types.ClassMethodDescriptorType, classmethod,
                 staticmethod)


class OpaqueVariable(VariableTracker):
    exact_type = True   # wrap_opaque guards its type
    def __init__(self, cls: type, source):
        super().__init__(source)
        self.cls = cls

    def python_type(self):
        return self.cls   # guarded by TYPE_MATCH where it was wrapped

    def var_getattr(self, tx, name: str) -> VariableTracker:
        # Read later only where reading it cannot fail: a method of the (guarded) type.
        # (A __getattribute__ written in Python may do anything; one in C finds the type's methods.)
        if not isinstance(inspect.getattr_static(self.cls, "__getattribute__"), types.FunctionType) and \
                isinstance(inspect.getattr_static(self.cls, name, None), _METHOD_KINDS):
            return MethodVariable(self, name)
        unsupported(f"attribute {name!r} of a {self.cls.__name__} (a type the tracer does not model)")

    def call_function(self, tx, args, kwargs):
        unsupported(f"call of a {self.cls.__name__} (a type the tracer does not model)")

    def reconstruct(self, outputs):
        return SourceOutput(self.source)

    def __repr__(self):
        return f"OpaqueVariable({self.cls.__name__} from {self.source})"

    def call_method(self, tx, name, args, kwargs):
        self.var_getattr(tx, name)   # refuses what cannot be read
        unsupported(f"call of {self.cls.__name__}.{name} (a type the tracer does not model)")


def wrap_opaque(tx, value, source, g):
    """builder.py's last rule: a value of a type the tracer does not model, used nowhere yet: a
    graph break where it is used."""
    g(GuardKind.TYPE_MATCH, type(value))
    return OpaqueVariable(type(value), source)
