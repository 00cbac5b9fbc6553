"""Raising and handling exceptions: RAISE_VARARGS, RERAISE, and the handler code the exception
table jumps to (PUSH_EXC_INFO, CHECK_EXC_MATCH, POP_EXCEPT, and 3.12+'s generator wrapper
STOPITERATION_ERROR, normalized in bytecode/instructions.py), and the exceptional exit of a with
block over a context manager written in Python (WITH_EXCEPT_START).

A raise is a TracedRaise carrying the exception's tracker (variables/exceptions.py); the translator
unwinds to the handler of the raising instruction (translator.py `_handle`). The handler's own
instructions are the same in 3.11, 3.12 and 3.13: [prev, exc] after PUSH_EXC_INFO, CHECK_EXC_MATCH
per `except` clause, POP_EXCEPT on the way out, and a cleanup (COPY 3, POP_EXCEPT, RERAISE 1)
where the except body itself raises. A with block's handler is PUSH_EXC_INFO, WITH_EXCEPT_START
(which calls the `__exit__` left four slots down with the exception's class, the exception and its
traceback), a jump over RERAISE 2 where __exit__ returned true, then the same cleanup: all run as
traced bytecode, so an __exit__ that swallows the exception (unittest's assertRaises) goes on
after the block, and one that does not re-raises it to whatever encloses the block.
"""
from ..variables import ConstantVariable
from ..variables.base import TracedRaise, Unsupported, unsupported
from ..variables.classes import ClassVariable
from ..variables.contexts import BlockExitVariable, GradModeExitVariable, UserContextExitVariable
from ..variables.exceptions import (ExceptionVariable, HandledInfoVariable, TracebackVariable, exception_of,
                                    set_cause, traced_raise)
from .registry import make_registry

HANDLERS, handler = make_registry()


@handler("RAISE_VARARGS")
def raise_varargs(tx, inst):
    if inst.arg == 0:   # a bare `raise`: the exception being handled
        current = tx.output.handled_exception
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
    # RuntimeError from it (PEP 479), which is refused, as for 3.11 (variables/generators.py).
    exc = tx.stack[-1]
    if not isinstance(exc, ExceptionVariable) or issubclass(exc.cls, StopIteration):
        unsupported(f"{exc} raised in a generator (a RuntimeError in Python)")


def exits_with_exception(exit_) -> bool:
    """Whether the with block whose `__exit__` BEFORE_WITH left as `exit_` can be left by an
    exception in the trace: a context manager written in Python whose __exit__ is inlined, or a
    grad-mode, autocast or inference-mode block (their __exit__ restores the state it restores at
    the normal end, and returns a false value). @contextmanager blocks are not (their __exit__
    throws into the generator): a raise in them stays refused (translator.py `_handle`)."""
    if isinstance(exit_, UserContextExitVariable):
        return exit_.modelled is None and not exit_.exited
    if isinstance(exit_, GradModeExitVariable):
        return not exit_.exited
    return isinstance(exit_, BlockExitVariable)


_NO_EXCEPTION = [ConstantVariable(None)] * 3


@handler("WITH_EXCEPT_START")
def with_except_start(tx, inst):
    # [exit, lasti, prev, exc] -> [exit, lasti, prev, exc, exit(type(exc), exc, tb)]
    exit_, exc = tx.stack[-4], tx.stack[-1]
    if not isinstance(exc, ExceptionVariable) or not exits_with_exception(exit_):
        unsupported(f"WITH_EXCEPT_START of {exit_} with {exc}")
    if not isinstance(exit_, UserContextExitVariable):
        _refuse_leaving_the_frame(tx, inst)
        exit_.call_function(tx, _NO_EXCEPTION, {})   # the state restored; the result is falsy
        tx.push(ConstantVariable(False))
        return
    cls = exc.class_tracker(tx)
    exit_.exited = True
    try:
        result = tx.call(exit_.exit_fn, [exit_.ctx, cls, exc, TracebackVariable(exc)], {})
    except Unsupported as e:
        # An __exit__ the trace cannot follow: the frame breaks where the exception was raised,
        # as it did before the block's exit was traced (the break cannot be inside the handler).
        if not isinstance(e, TracedRaise) and e.break_at is None:
            e.break_at = tx.with_raise_site
        raise
    if result.is_python_constant() and not result.as_python_constant():
        _refuse_leaving_the_frame(tx, inst)
    tx.push(result)


def _refuse_leaving_the_frame(tx, inst) -> None:
    """An exception a with block lets through that nothing of the compiled frame encloses (no try
    block, no other with block) would leave it by the re-raise of the block's cleanup, which runs
    the whole frame as written: the frame breaks where it was raised instead, as an uncaught raise
    does (the graph runs, then the raise, at its line)."""
    cleanup = inst.handler   # the block's cleanup (COPY 3, POP_EXCEPT, RERAISE 1)
    if tx.depth == 0 and tx.with_raise_site is not None and cleanup is not None \
            and tx.instructions[cleanup[0]].handler is None:
        refused = Unsupported("an exception leaves the frame through a with block")
        refused.break_at = tx.with_raise_site
        raise refused
