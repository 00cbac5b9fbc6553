"""ExceptionVariable: an exception object made in the trace, raised and caught there (try/except).

An exception is modelled as its class and the trackers of its arguments: what `except E` matches
(isinstance over its class), what `e.args`, `str(e)` and `type(e)` read. Only classes whose
instances are no more than that are modelled (`modelled_class`): the builtin exceptions, and user
subclasses of them that define nothing but a docstring; a class with its own __init__, __str__ or
attributes is refused, as is reading any other attribute (__cause__, __traceback__, ...). An
exception the trace raised never leaves it (returned, stored where the frame sees it, live at a
graph break): its traceback and context are not modelled, so such a trace is refused. One made and
not raised yet (live at a graph break at its raise) is made again by calling its class.

A raise is a Python exception of the tracer's (`TracedRaise`, base.py) that carries the tracker;
the translator finds the handler in the exception table (translator.py) or lets it out of the
frame. `traced_raise` picks the TracedRaise subclass a modelled catcher expects (KeyError for the
Mapping mixins, AttributeError for hasattr, user_object.py and builtins.py).
"""
from __future__ import annotations

import sys
import types

from ...sources import AttrSource
from ...trace_result import CallOutput, ConstantOutput, GuardKind, SourceOutput
from .base import TRACED_RAISES, TracedRaise, VariableTracker, unsupported
from .constant import ConstantVariable
from .containers import TupleVariable

__all__ = ["ExceptionVariable", "HandledInfoVariable", "TracedException", "modelled_class", "guard_modelled",
           "traced_raise", "exception_of", "raised_value", "constant_exception"]

# What a user subclass of an exception may define and still be no more than its base: the class
# statement's own bookkeeping.
_BOOKKEEPING = frozenset({"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                          "__firstlineno__", "__static_attributes__"})


class TracedException(TracedRaise):
    """A raise of an exception the trace models (ExceptionVariable) that no catcher of
    TRACED_RAISES expects: `raise ValueError(...)`, a user's exception, a fold that raised."""


def make_exception(cls, args):
    """An exception the trace made and did not raise, made again after the graph (reconstruct)."""
    return cls(*args)


def make_raised_exception(cls, args):
    """An exception the trace raised and whose traceback it dropped (`e.with_traceback(None)`, as
    unittest's assertRaises does before keeping it), made again after the graph: its context is
    what Python gave it at the raise, the exception the thread was handling when the frame was
    entered (still the one it handles after the graph)."""
    e = cls(*args)
    e.__context__ = sys.exc_info()[1]
    return e


def modelled_class(cls) -> bool:
    """Whether instances of `cls` are their class and args alone: a builtin exception, or a plain
    type-made subclass of one that adds nothing but a docstring."""
    if not isinstance(cls, type) or not issubclass(cls, BaseException) or type(cls) is not type:
        return False
    for klass in cls.__mro__:
        if klass.__module__ == "builtins":
            continue
        if set(vars(klass)) - _BOOKKEEPING:
            return False
    return True


# What a modelled instance's behaviour is read from: how it is made, printed and its attributes
# read. A user class is guarded to keep finding its builtin base's: by type, since slot wrappers
# cannot be held weakly (ID_MATCH); a function, property or classmethod set on the class later
# (`Err.__str__ = ...`) has another type and compiles again. A builtin class cannot change.
_BEHAVIOUR = ("__new__", "__init__", "__str__", "__repr__", "__getattribute__", "args")


def guard_modelled(tx, cls, source) -> None:
    """Guards what modelled_class(cls) read from a user class (read from `source`); refuses a
    user class with no source (it could not be guarded)."""
    if cls.__module__ == "builtins":
        return
    if source is None:
        unsupported(f"exception class {cls.__qualname__} has no source to guard it by")
    for name in _BEHAVIOUR:
        tx.output.add_guard(AttrSource(source, name), GuardKind.TYPE_MATCH, type(getattr(cls, name)))


class ExceptionVariable(VariableTracker):
    """An instance of `cls` (a modelled_class) made in the trace with positional `args` (trackers)."""

    def __init__(self, cls, args: list, cls_source=None):
        super().__init__(None)
        self.cls = cls
        self.cls_source = cls_source   # where a user's class was read: it is loaded again from there
        self.args = list(args)
        self.cause = None   # `raise ... from c`: kept, never read (reading __cause__ is refused)
        self.raised = False
        # What the trace handled when it raised it (its __context__; translator._handle sets it):
        # None, the exception the thread handled at frame entry, or a tracker; UNKNOWN_CONTEXT: not seen.
        self.raise_context = UNKNOWN_CONTEXT
        self.traceback_dropped = False   # `e.with_traceback(None)` was called

    def python_type(self):
        return self.cls

    def truthy(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name):
        if name == "args":
            return TupleVariable(list(self.args))
        if name == "__class__" and self.cls_source is not None:   # type(e) serves every class
            return tx.wrap(self.cls, self.cls_source)
        if name == "with_traceback":
            return _WithTraceback(self)
        unsupported(f"attribute {name!r} of a traced {self.cls.__name__}")

    def reconstruct(self, outputs):
        # Made again by calling its class: right for one made and not raised (a graph break at the
        # raise); one the trace raised has a traceback and a context that are not modelled.
        remake = make_exception
        if self.raised:
            if not self.traceback_dropped or self.raise_context is not None or self.cause is not None:
                unsupported(f"a {self.cls.__name__} the trace raised leaves it (its traceback is not modelled)")
            remake = make_raised_exception
        if self.cls_source is None and self.cls.__module__ != "builtins":
            # A user class with no source: maybe one a class statement made in the trace, which
            # the compiled code would not make again.
            unsupported(f"a {self.cls.__name__} leaves the trace, and its class has no source")
        cls = SourceOutput(self.cls_source) if self.cls_source is not None else ConstantOutput(self.cls)
        return outputs.once(self, lambda: CallOutput(ConstantOutput(remake), ("cls", "args"),
                                                     (cls,
                                                      outputs.rebuild(TupleVariable(self.args)))))

    def example(self):
        """A real instance with the same class and args, for str() and repr(): its args must be
        Python constants (the class runs no code of the user's: modelled_class)."""
        if not all(a.is_python_constant() for a in self.args):
            unsupported(f"str() of a {self.cls.__name__} whose args are not Python constants")
        return self.cls(*[a.as_python_constant() for a in self.args])

    def __repr__(self):
        return f"ExceptionVariable({self.cls.__name__}, {self.args!r})"


class HandledInfoVariable(VariableTracker):
    """What PUSH_EXC_INFO saves below the caught exception: the exception that was being handled
    before (an ExceptionVariable), or None for whatever the thread handled when the frame was
    entered (unknown to the trace). POP_EXCEPT puts it back (handlers/exceptions.py)."""

    def __init__(self, previous):
        super().__init__(None)
        self.previous = previous

    def __repr__(self):
        return f"HandledInfoVariable({self.previous!r})"


UNKNOWN_CONTEXT = object()


class _WithTraceback(VariableTracker):
    """`e.with_traceback` of a traced exception: only `with_traceback(None)`, which drops the
    traceback (the one thing of it the trace does not model) and returns `e`."""

    def __init__(self, exc):
        super().__init__(None)
        self.exc = exc

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1 or not (args[0].is_python_constant() and args[0].as_python_constant() is None):
            unsupported("with_traceback() of a traced exception with a traceback other than None")
        self.exc.traceback_dropped = True
        return self.exc


class TracebackVariable(VariableTracker):
    """The traceback WITH_EXCEPT_START passes to a with block's `__exit__`: not modelled, so any
    use of it but passing it on (reading a frame, storing it past the graph) is refused; only `tb
    is None` is answered (False, as in eager)."""

    def __init__(self):
        super().__init__(None)

    def python_type(self):
        return types.TracebackType

    def __repr__(self):
        return "TracebackVariable()"


def exception_of(tx, value) -> ExceptionVariable:
    """What `raise value` raises: an exception made in the trace, or a modelled class, called
    with no arguments."""
    if isinstance(value, ExceptionVariable):
        return value
    cls = value.as_python_constant() if value.is_python_constant() else None
    if isinstance(cls, type) and modelled_class(cls):
        guard_modelled(tx, cls, value.source)
        return ExceptionVariable(cls, [], cls_source=value.source if cls.__module__ != "builtins" else None)
    unsupported(f"raise {value}")


def traced_raise(exc: ExceptionVariable, reason: str | None = None) -> TracedRaise:
    """The tracer's exception for raising `exc`: the TRACED_RAISES kind a modelled catcher expects
    where its class is one of theirs (a subclass counts, as `except KeyError` catches it)."""
    kind = next((k for base, k in TRACED_RAISES.items() if issubclass(exc.cls, base)), TracedException)
    if reason is None:
        shown = ", ".join(repr(a.as_python_constant()) if a.is_python_constant() else str(a)
                          for a in exc.args)
        reason = f"{exc.cls.__name__}({shown})"
    raised = kind(reason)
    raised.value = exc
    exc.raised = True
    return raised


def constant_exception(tx, error: BaseException) -> ExceptionVariable | None:
    """`error`, raised by Python on constants (a fold: int("x")), as a tracker, where it is a
    modelled class with constant args; else None."""
    if not modelled_class(type(error)):
        return None
    args = [tx.wrap_constant(a) for a in error.args]
    if not all(isinstance(a, ConstantVariable) for a in args):
        return None
    return ExceptionVariable(type(error), args)


def raised_value(raised: TracedRaise) -> ExceptionVariable | None:
    """The tracker of what `raised` raises (made from its `made_of` the first time), or None where
    its raise site does not model it."""
    if raised.value is None and raised.made_of is not None:
        cls, args = raised.made_of
        raised.value = ExceptionVariable(cls, args)
        raised.value.raised = True
    return raised.value
