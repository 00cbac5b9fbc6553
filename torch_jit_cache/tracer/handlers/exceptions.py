"""Raising and handling exceptions: RAISE_VARARGS, RERAISE, and the handler code the exception
table jumps to (PUSH_EXC_INFO, CHECK_EXC_MATCH, POP_EXCEPT, a with block's WITH_EXCEPT_START, and
3.12+'s generator wrapper STOPITERATION_ERROR, normalized in bytecode/instructions.py).

A raise is a TracedRaise carrying the exception's tracker (variables/python_objects/exceptions.py); the translator
unwinds to the handler of the raising instruction (translator.py `_handle`). The handler's own
instructions are the same in 3.11, 3.12 and 3.13: [prev, exc] after PUSH_EXC_INFO, CHECK_EXC_MATCH
per `except` clause, POP_EXCEPT on the way out, and a cleanup (COPY 3, POP_EXCEPT, RERAISE 1)
where the except body itself raises. A with block's handler is PUSH_EXC_INFO, WITH_EXCEPT_START
(which calls the `__exit__` left four slots down with the exception's class, the exception and its
traceback), a jump over RERAISE 2 where __exit__ returned true, then the same cleanup: all run as
traced bytecode, so an __exit__ that swallows the exception (unittest's assertRaises) goes on
after the block, and one that does not re-raises it to whatever encloses the block.
Grad-mode, autocast, inference-mode and Dynamo-only blocks restore their state there and let it
through (variables/torch_objects/contexts.py `accepts_exception`).
"""
from ..variables import ConstantVariable
from ..variables.base import unsupported
from ..variables.python_objects.caller_exception import caller_handles_none
from ..variables.python_objects.classes import ClassVariable
from ..variables.torch_objects.contexts import UserContextExitVariable
from ..variables.python_objects.exceptions import (ExceptionVariable, HandledInfoVariable, TracebackVariable, exception_of,
                                                   set_cause, traced_raise)
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("RAISE_VARARGS")
def raise_varargs(tx, inst):
    if inst.arg == 0:   # a bare `raise`: the exception being handled
        current = tx.output.handled_exception
        if current is None and caller_handles_none(tx):   # no exception handled anywhere
            raise traced_raise(ExceptionVariable(RuntimeError, [ConstantVariable("No active exception to reraise")]))
        if current is None:
            unsupported("a bare raise of an exception the trace did not catch")
        raise traced_raise(current, reraise=True)
    cause = tx.pop() if inst.arg == 2 else None
    exc = exception_of(tx, tx.pop())
    if cause is not None:
        set_cause(tx, exc, cause)
    raise traced_raise(exc)


def _pop_exception(tx, inst) -> ExceptionVariable:
    """The exception on top of the stack, popped, where `inst` expects one."""
    exc = tx.pop()
    if not isinstance(exc, ExceptionVariable):
        unsupported(f"{inst.op} of {exc}")
    return exc


@handler("RERAISE")
def reraise(tx, inst):
    # RERAISE n reads f_lasti from the stack (n > 0) and leaves it: the unwind drops it.
    raise traced_raise(_pop_exception(tx, inst), reraise=True)


@handler("PUSH_EXC_INFO")
def push_exc_info(tx, inst):
    exc = _pop_exception(tx, inst)
    tx.push(HandledInfoVariable(tx.output.handled_exception))
    tx.output.handled_exception = exc
    tx.push(exc)


@handler("WITH_EXCEPT_START")
def with_except_start(tx, inst):
    # [exit, lasti, prev, exc] -> [exit, lasti, prev, exc, exit(type(exc), exc, tb)] (3.11 to
    # 3.13): the block's exit, which the translator checked takes an exception (translator._handle,
    # contexts.accepts_exception). The handler code after it re-raises unless the result is true.
    exc = tx.stack[-1]
    if not isinstance(exc, ExceptionVariable) or len(tx.stack) < 4:
        unsupported(f"WITH_EXCEPT_START on {exc}")
    exit_ = tx.stack[-4]
    # A Python-written __exit__ sees the exception's class as type(exc) would give it; the other
    # exits restore their state and ignore what they are passed.
    cls = exc.class_tracker(tx) if isinstance(exit_, UserContextExitVariable) else ClassVariable(exc.cls)
    tx.push(exit_.call_function(tx, [cls, exc, TracebackVariable(exc)], {}))


@handler("POP_EXCEPT")
def pop_except(tx, inst):
    saved = tx.pop()
    if not isinstance(saved, HandledInfoVariable):
        unsupported(f"POP_EXCEPT of {saved}")
    tx.output.handled_exception = saved.previous


@handler("CHECK_EXC_MATCH")
def check_exc_match(tx, inst):
    # [exc, cls] -> [exc, isinstance(exc, cls)]; the class (or tuple of classes) was loaded, and
    # guarded, where the except clause names it.
    cls = tx.pop()
    exc = tx.stack[-1]
    if not isinstance(exc, ExceptionVariable) or not cls.is_python_constant():
        unsupported(f"except {cls} on {exc}")
    match = cls.as_python_constant()
    classes = match if isinstance(match, tuple) else (match,)
    if not all(isinstance(c, type) and issubclass(c, BaseException) for c in classes):
        unsupported(f"except {cls}: not exception classes")
    tx.push(ConstantVariable(issubclass(exc.cls, match)))


@handler("LOAD_ASSERTION_ERROR")
def load_assertion_error(tx, inst):
    tx.push(ClassVariable(AssertionError))


@handler("STOPITERATION_ERROR")
def stopiteration_error(tx, inst):
    # 3.12+ generators' own handler: [exc] -> [exc], and a StopIteration would become a
    # RuntimeError from it (PEP 479), which is refused, as for 3.11 (variables/python_objects/generators.py).
    exc = tx.stack[-1]
    if not isinstance(exc, ExceptionVariable) or issubclass(exc.cls, StopIteration):
        unsupported(f"{exc} raised in a generator (a RuntimeError in Python)")

