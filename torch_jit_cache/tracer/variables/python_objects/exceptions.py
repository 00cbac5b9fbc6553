"""ExceptionVariable: an exception object made in the trace, raised and caught there (try/except).

An exception is modelled as its class, the trackers of its arguments and the links CPython keeps
on it: what `except E` matches (isinstance over its class), what `e.args`, `str(e)` and `type(e)`
read, `__context__`, `__cause__` and `__suppress_context__` (set as the interpreter sets them:
`chain_context`, `raise ... from ...`) and whether it has a traceback. Only classes whose instances
are no more than that are modelled (`modelled_class`): the builtin exceptions, and user subclasses
of them that define nothing but a docstring; a class with its own __init__, __str__ or attributes
is refused. A traceback is a TracebackVariable: known to exist, never read. An exception with a
traceback never leaves the trace (returned, stored where the frame sees it, live at a graph
break): its traceback is not modelled, so such a trace is refused. One made and not raised yet
(live at a graph break at its raise) is made again by calling its class; one raised whose
traceback was dropped (`e.with_traceback(None)`, as unittest's assertRaises does) and whose
context is the caller's is made again with that context (`make_raised_exception`).

A raise is a Python exception of the tracer's (`TracedRaise`, base.py) that carries the tracker;
the translator finds the handler in the exception table (translator.py) or lets it out of the
frame. `traced_raise` picks the TracedRaise subclass a modelled catcher expects (KeyError for the
Mapping mixins, AttributeError for hasattr, user_object.py and builtins.py).
"""
from __future__ import annotations

import sys
import types

from ....guard.sources import AttrSource
from ....guard.trace_result import CallOutput, ConstantOutput, GuardKind, SourceOutput
from ....guard.trace_result import Unsupported
from ..base import TRACED_RAISES, TracedRaise, VariableTracker, provides, unsupported
from ..constant import ConstantVariable
from .caller_exception import caller_handles_none
from ..collections.containers import TupleVariable

__all__ = ["ExceptionVariable", "HandledInfoVariable", "TracedException", "TracebackVariable",
           "modelled_class", "guard_modelled", "traced_raise", "exception_of", "set_cause", "chain_context",
           "type_error", "raised_value", "constant_exception"]

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


# The context of an exception raised where the trace handles no exception of its own: whatever
# the thread handled when the frame was entered (the caller's `except` block, usually nothing),
# which the trace does not know. Reading it is refused.
UNKNOWN_CONTEXT = "<the exception handled when the frame was entered>"


class ExceptionVariable(VariableTracker):
    """An instance of `cls` (a modelled_class) made in the trace with positional `args` (trackers)."""

    identity_family = "exception"   # `e.__context__ is other`: one tracker per exception object

    def __init__(self, cls, args: list, cls_source=None, cls_var=None):
        super().__init__(None)
        self.cls = cls
        self.cls_source = cls_source   # where a user's class was read: it is loaded again from there
        # The tracker of a class a class statement made in the trace (class_statements.py): what
        # type(e) and e.__class__ are, inside the trace only (such an exception never leaves it).
        self.cls_var = cls_var
        self.args = list(args)
        self.context = None            # None, an ExceptionVariable or UNKNOWN_CONTEXT
        self.cause = None              # None or an ExceptionVariable
        self.suppress_context = False
        self.raised = False
        self.has_traceback = False     # set by a raise, cleared by `e.with_traceback(None)`

    def python_type(self):
        return self.cls

    def identity_object(self):
        return self

    def truthy(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name):
        if name == "args":
            return TupleVariable(list(self.args))
        if name == "__class__" and (self.cls_source is not None or self.cls_var is not None):
            return self.class_tracker(tx)   # type(e) serves every class
        if name == "__context__":
            if self.context is UNKNOWN_CONTEXT and caller_handles_none(tx):
                return ConstantVariable(None)
            if self.context is UNKNOWN_CONTEXT:
                unsupported(f"__context__ of a {self.cls.__name__} raised outside any except block of the "
                            "trace (the exception the caller handled is not known to it)")
            return self.context or ConstantVariable(None)
        if name == "__cause__":
            return self.cause or ConstantVariable(None)
        if name == "__suppress_context__":
            return ConstantVariable(self.suppress_context)
        if name == "__traceback__":
            if self.has_traceback:
                return TracebackVariable(self)
            return ConstantVariable(None)
        if name == "with_traceback":
            return ExceptionMethodVariable(self, name)
        unsupported(f"attribute {name!r} of a traced {self.cls.__name__}")

    def class_tracker(self, tx):
        """type(self) as a tracker: loaded from its source, or a builtin class."""
        if self.cls_source is not None:
            return tx.wrap(self.cls, self.cls_source)
        if self.cls_var is not None:
            return self.cls_var
        if self.cls.__module__ != "builtins":
            unsupported(f"type() of a {self.cls.__name__}, whose class has no source")
        return tx.wrap_constant(self.cls)   # a builtin class: its ClassVariable

    def var_setattr(self, tx, name, value):
        # Links only: the object is the trace's own (a store needs no replay), and one holding a
        # link is never made again after the graph (reconstruct).
        if name == "__suppress_context__" and value.is_python_constant():
            self.suppress_context = bool(value.as_python_constant())
            return
        if name in ("__context__", "__cause__"):
            link = _link(value)
            if link is _NOT_AN_EXCEPTION:
                raise type_error(f"exception {name.strip('_')} must be None or derive from BaseException")
            if name == "__context__":
                self.context = link
            else:
                self.cause, self.suppress_context = link, True
            return
        unsupported(f"STORE_ATTR {name} on a traced {self.cls.__name__}")

    def reconstruct(self, outputs):
        # Made again by calling its class: right for one made and not raised (a graph break at the
        # raise), and for one raised whose traceback was dropped and whose __context__ is what
        # Python gave it at a raise outside every except block of the trace (make_raised_exception).
        # A traceback and links set in the trace are not made again.
        if self.has_traceback:
            unsupported(f"a {self.cls.__name__} with a traceback leaves the trace (its traceback is not modelled)")
        remake = make_exception
        if self.raised:
            if self.context is not UNKNOWN_CONTEXT:
                unsupported(f"a {self.cls.__name__} the trace raised leaves it with a __context__ set in the trace")
            remake = make_raised_exception
        elif self.context is not None:
            unsupported(f"a {self.cls.__name__} with a __context__ set in the trace leaves it")
        if self.cause is not None or self.suppress_context:
            unsupported(f"a {self.cls.__name__} with a __cause__ set in the trace leaves it")
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


class ExceptionMethodVariable(VariableTracker):
    """`e.with_traceback`, bound to a traced exception."""

    def __init__(self, exc, name):
        super().__init__(None)
        self.exc, self.name = exc, name

    def call_function(self, tx, args, kwargs):
        if kwargs or len(args) != 1:
            unsupported(f"{self.name}() with {len(args)} arguments")
        tb = args[0]
        if isinstance(tb, TracebackVariable):
            self.exc.has_traceback = True
        elif tb.is_python_constant() and tb.as_python_constant() is None:
            self.exc.has_traceback = False
        else:
            raise type_error("__traceback__ must be a traceback or None")
        return self.exc

    def __repr__(self):
        return f"ExceptionMethodVariable({self.exc!r}.{self.name})"


class TracebackVariable(VariableTracker):
    """The traceback of an exception the trace raised: known to be one, never read (its frames are
    the trace's, which have no frame objects). `traceback.clear_frames(tb)` on it does nothing:
    the frames it would clear are gone already (functions.py)."""

    def __init__(self, exc):
        super().__init__(None)
        self.exc = exc

    def python_type(self):
        return types.TracebackType

    def truthy(self, tx) -> bool:
        return True

    def var_getattr(self, tx, name):
        unsupported(f"attribute {name!r} of the traceback of a traced {self.exc.cls.__name__}")

    def __repr__(self):
        return f"TracebackVariable({self.exc!r})"


class HandledExceptionFunction(VariableTracker):
    """sys.exc_info or sys.exception (guarded by identity where read): what they return inside an
    except block of the trace is the exception it handles; outside every one it is the caller's,
    unknown to the trace (CallerExceptionVariable: held and passed on, never read)."""

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def call_function(self, tx, args, kwargs):
        if args or kwargs:
            unsupported(f"{self.fn.__name__}() with arguments")
        exc = tx.output.handled_exception
        if exc is None and caller_handles_none(tx):
            return ConstantVariable(None) if self.fn is sys.exception else TupleVariable([ConstantVariable(None)] * 3)
        if exc is None:
            # One tracker per part and trace: `sys.exception() is sys.exception()` holds.
            if getattr(tx.output, "caller_exception", None) is None:
                tx.output.caller_exception = tuple(CallerExceptionVariable(p) for p in ("type", "value", "traceback"))
            parts = tx.output.caller_exception
            return parts[1] if self.fn is sys.exception else TupleVariable(list(parts))
        if self.fn is sys.exc_info:
            return TupleVariable([exc.class_tracker(tx), exc, TracebackVariable(exc)])
        return exc

    def __repr__(self):
        return f"HandledExceptionFunction(sys.{self.fn.__name__})"


def handled_by_caller(part: str):
    """sys.exc_info()'s `part` ("type", "value" or "traceback"), called from transformed code."""
    return sys.exc_info()[("type", "value", "traceback").index(part)]


class CallerExceptionVariable(VariableTracker):
    """sys.exception() outside every except block of the trace: the exception the thread handled
    when the frame was entered (UNKNOWN_CONTEXT; usually None), which the trace does not know. It
    may be held and passed on (contextlib.ExitStack.__exit__ keeps it for a chain it fixes only
    when an exit raises); `is` against itself is True, against an exception the trace made
    (a new object) False; what reads it (truth, `is None`, attributes) breaks (operators.is_op
    asks `caller_exception`), and it is read again after the graph where it is live."""

    caller_exception = True

    def __init__(self, part: str = "value"):
        super().__init__(None)
        self.part = part   # sys.exc_info()'s "type", "value" (sys.exception()) or "traceback"

    def is_same(self, other):
        """`self is other`: True, False, or None where the trace does not know."""
        if other is self:
            return True
        if self.part == "value" and isinstance(other, ExceptionVariable):
            return False
        return None

    def reconstruct(self, outputs):
        # Read again where the transformed code runs, outside every except block of its own: the
        # thread still handles what it handled when the frame was entered.
        return outputs.once(self, lambda: CallOutput(ConstantOutput(handled_by_caller), ("part",),
                                                     (ConstantOutput(self.part),)))

    def __repr__(self):
        return f"CallerExceptionVariable({self.part})"


HANDLED_EXCEPTION_FUNCTIONS = (sys.exc_info, sys.exception)   # 3.11+


def wrap_handled_exception_function(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    return HandledExceptionFunction(value, source)


_NOT_AN_EXCEPTION = object()


def _link(value):
    """`value` as an exception link (__context__, __cause__): None, an ExceptionVariable, or
    _NOT_AN_EXCEPTION where Python refuses it with a TypeError."""
    if isinstance(value, ExceptionVariable):
        return value
    if value.is_python_constant():
        const = value.as_python_constant()
        if const is None:
            return None
        if not isinstance(const, type):
            return _NOT_AN_EXCEPTION
    unsupported(f"exception link to {value}")


def type_error(message: str) -> TracedRaise:
    """A TypeError(message) raised in the trace, where Python's interpreter raises one."""
    return traced_raise(ExceptionVariable(TypeError, [ConstantVariable(message)]))


def _not_an_exception(value) -> bool:
    """Whether `value` is an object Python refuses to raise (or to take as a cause): neither an
    exception nor an exception class. Unknown objects are not judged here."""
    if value.is_python_constant():
        const = value.as_python_constant()
        return not (isinstance(const, BaseException) or isinstance(const, type) and issubclass(const, BaseException))
    try:
        cls = value.python_type()
    except Unsupported:
        return False
    return cls in (tuple, list, dict, set, str, int, float)


def exception_of(tx, value, message="exceptions must derive from BaseException") -> ExceptionVariable:
    """What `raise value` raises: an exception made in the trace, or a modelled class, called
    with no arguments; a TypeError(message) is raised for what is no exception at all."""
    if isinstance(value, ExceptionVariable):
        return value
    if _not_an_exception(value):
        raise type_error(message)
    cls = value.as_python_constant() if value.is_python_constant() else None
    if isinstance(cls, type) and modelled_class(cls):
        if not getattr(value, "made_in_trace", False):   # a class statement's: the trace's own, unguarded
            guard_modelled(tx, cls, value.source)
        return ExceptionVariable(cls, [], cls_source=value.source if cls.__module__ != "builtins" else None,
                                 cls_var=value if value.source is None else None)
    unsupported(f"raise {value}")


def set_cause(tx, exc: ExceptionVariable, cause) -> None:
    """`raise exc from cause`: an exception, a class called with no arguments, or None; anything
    else a TypeError, as Python's RAISE_VARARGS."""
    if not (cause.is_python_constant() and cause.as_python_constant() is None):
        cause = exception_of(tx, cause, "exception causes must derive from BaseException")
    else:
        cause = None
    exc.cause, exc.suppress_context = cause, True


def chain_context(exc: ExceptionVariable, handled) -> None:
    """What a new raise of `exc` does to its __context__ while `handled` (the exception the trace's
    innermost except block handles; None: the frame's entry one) is handled: it becomes `handled`,
    and a chain from `handled` that led back to `exc` is cut there, so that no cycle forms. Not
    for a re-raise (RERAISE, a bare raise), which keeps the context it had."""
    if handled is exc:
        return
    if handled is None:
        exc.context = UNKNOWN_CONTEXT   # unchanged when the entry one is None, else that one
        return
    seen, link = set(), handled
    while isinstance(link.context, ExceptionVariable) and id(link) not in seen:
        seen.add(id(link))
        if link.context is exc:
            link.context = None
            break
        link = link.context
    exc.context = handled


@provides
def traced_raise(exc: ExceptionVariable, reason: str | None = None, reraise: bool = False) -> TracedRaise:
    """The tracer's exception for raising `exc`: the TRACED_RAISES kind a modelled catcher expects
    where its class is one of theirs (a subclass counts, as `except KeyError` catches it).
    `reraise`: RERAISE or a bare raise, which leave the exception's __context__ as it is."""
    kind = next((k for base, k in TRACED_RAISES.items() if issubclass(exc.cls, base)), TracedException)
    if reason is None:
        shown = ", ".join(repr(a.as_python_constant()) if a.is_python_constant() else str(a)
                          for a in exc.args)
        reason = f"{exc.cls.__name__}({shown})"
    raised = kind(reason)
    raised.value = exc
    raised.fresh = not reraise
    exc.raised = exc.has_traceback = True
    return raised


@provides
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
        raised.value.raised = raised.value.has_traceback = True
    return raised.value
