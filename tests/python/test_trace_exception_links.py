"""What CPython keeps on an exception, traced: __context__ set by a raise inside an except block
(a cycle cut, a re-raise keeping it), `raise ... from ...` (__cause__, __suppress_context__), the
TypeError of raising what is no exception, __traceback__ and with_traceback(None), and a raise
inside a with block over a context manager written in Python, whose __exit__ is traced with the
exception (tracer/variables/python_objects/exceptions.py, handlers/exceptions.py). Each case runs eagerly and
compiled, compares what it returns, and asserts one graph with no break; the last part checks what
still falls back, and that an exception leaving the frame is eager's."""
import math
import sys
import traceback
import types
import unittest
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import assert_same, explain_counts  # noqa: E402


def assert_whole(fn, *args):
    """Same as eager on two compiled calls, one graph, no break and no fallback."""
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    expected = fn(*args)
    for _ in range(2):
        assert_same(expected, compiled(*args))
    assert cnt.frame_count == 1
    assert explain_counts(fn, *args) == (1, 0, [])


def summary(e):
    """What a test compares of an exception: its class, args and links."""
    if e is None:
        return None
    return (type(e), e.args, type(e.__context__), type(e.__cause__), e.__suppress_context__)


# -- __context__ and __cause__ ------------------------------------------------------------------------

def implicit_context(x, flag):
    try:
        try:
            if flag:
                raise ValueError("first")
            raise IndexError("other")
        except ValueError:
            raise KeyError("second")
    except (KeyError, IndexError) as e:
        ctx = e.__context__
        return x + 1, type(e), e.args, type(ctx), ctx.args if ctx is not None and flag else None, \
            e.__cause__ is None, e.__suppress_context__


@pytest.mark.parametrize("flag", [True, False])
def test_a_raise_inside_an_except_block_sets_its_context(flag):
    if flag:
        assert_whole(implicit_context, torch.ones(2), flag)
    else:   # the IndexError's context is the caller's handled exception: not known to the trace
        got = tjc.compile(implicit_context, backend="eager")(torch.ones(2), flag)
        assert_same(implicit_context(torch.ones(2), flag), got)


def explicit_cause(x, which):
    try:
        try:
            raise TypeError("ctx")
        except TypeError as t:
            if which == "instance":
                raise IndexError("a") from KeyError("cause")
            if which == "class":
                raise IndexError from KeyError
            if which == "caught":
                raise IndexError("b") from t
            raise IndexError("c") from None
    except IndexError as e:
        cause = e.__cause__
        return x + 2, summary(e), type(cause), cause and cause.args, e.__context__.args, e.__context__ is cause


@pytest.mark.parametrize("which", ["instance", "class", "caught", "none"])
def test_raise_from_sets_cause_and_suppresses_the_context(which):
    assert_whole(explicit_cause, torch.ones(2), which)


def cycle_cut(x):
    try:
        try:
            raise ValueError("a")
        except ValueError as a:
            try:
                raise KeyError("b")
            except KeyError as b:
                inner = b
                raise a
    except ValueError as e:
        # a's context is b; b's was a, cut so that no cycle forms (as the interpreter does)
        return x + 3, type(e.__context__), e.__context__ is inner, inner.__context__ is None


def test_raising_an_exception_again_cuts_the_context_cycle():
    assert_whole(cycle_cut, torch.ones(2))


def reraise_keeps_context(x, bare):
    try:
        try:
            raise TypeError("foo")
        except TypeError:
            try:
                raise KeyError("caught")
            except KeyError:
                pass
            if bare:
                raise
            raise KeyError("fresh")
    except (TypeError, KeyError) as e:
        return x * 2, type(e), e.args


@pytest.mark.parametrize("bare", [True, False])
def test_a_bare_raise_re_raises_the_handled_exception(bare):
    assert_whole(reraise_keeps_context, torch.ones(2), bare)


def set_links(x):
    try:
        raise ValueError("v")
    except ValueError as e:
        e.__cause__ = KeyError("k")
        e.__context__ = None
        return x + 1, type(e.__cause__), e.__suppress_context__, e.__context__ is None


def test_setting_the_links_by_attribute():
    assert_whole(set_links, torch.ones(2))


# -- what is not an exception --------------------------------------------------------------------------

def raise_what(x, which):
    try:
        if which == "int":
            raise 5
        if which == "str":
            raise "foo"
        if which == "tuple":
            raise (IndexError, KeyError)
        raise IndexError from 5
    except TypeError as e:
        return x - 1, e.args


@pytest.mark.parametrize("which", ["int", "str", "tuple", "cause"])
def test_raising_what_is_no_exception_raises_type_error(which):
    assert_whole(raise_what, torch.ones(2), which)


# -- the traceback -----------------------------------------------------------------------------------

def read_traceback(x):
    try:
        raise IndexError("i")
    except IndexError as e:
        had = isinstance(e.__traceback__, types.TracebackType) and e.__traceback__ is not None
        same = e.with_traceback(None) is e
        return x + 1, had, same, e.__traceback__ is None


def test_traceback_exists_and_with_traceback_none_clears_it():
    assert_whole(read_traceback, torch.ones(2))


# -- with blocks over context managers written in Python --------------------------------------------

class Swallow:
    """Suppresses the exceptions of `classes` and records what __exit__ was given."""

    def __init__(self, *classes):
        self.classes = classes
        self.seen = None

    def __enter__(self):
        return self

    def __exit__(self, tp, value, tb):
        if tp is None:
            return False
        self.seen = (tp, value.args, tb is not None)
        return issubclass(tp, self.classes)


def with_swallow(x, key, classes):
    d = {"a": 1}
    cm = Swallow(*classes)
    try:
        with cm:
            y = x * d[key]
            y = y + 1
    except KeyError as e:
        return x - 1, e.args, cm.seen
    return x + 1, cm.seen


@pytest.mark.parametrize("key,classes", [("a", (KeyError,)), ("b", (KeyError,)), ("b", (ValueError,)),
                                         ("b", (LookupError, ValueError))])
def test_exit_sees_the_exception_and_may_swallow_it(key, classes):
    assert_whole(with_swallow, torch.ones(2), key, classes)


class Case(unittest.TestCase):
    def runTest(self):
        pass


CASE = Case()


def unittest_assert_raises(x):
    with CASE.assertRaises(ValueError):
        math.acos(2.0)
    with CASE.assertRaises(IndexError) as cm:
        [1][3]
    with CASE.assertRaises(TypeError):
        int("1", 2, 3)
    CASE.assertRaises(OverflowError, math.exp, 1000.0)
    return x + len(cm.exception.args)


def test_unittest_assert_raises_as_a_context_manager_and_a_call():
    assert_whole(unittest_assert_raises, torch.ones(2))


def exit_that_does_not_swallow_inside_a_callee(x):
    def inner():
        try:
            raise TypeError("foo")
        except TypeError:
            raise
    with Swallow(KeyError) as outer, Swallow(TypeError) as cm:
        inner()
    return x + 1, cm.seen, outer.seen


def test_a_re_raise_from_a_callee_passes_through_two_exits():
    # `with a, b` is two nested blocks: the inner one (TypeError) swallows, the outer never sees it.
    assert_whole(exit_that_does_not_swallow_inside_a_callee, torch.ones(2))


class ReadsTheTraceback(Swallow):
    def __exit__(self, tp, value, tb):
        self.seen = tb.tb_lineno if tb is not None else None
        return True


def exit_reads_traceback(x):
    cm = ReadsTheTraceback()
    with cm:
        y = x + 1
        raise ValueError("v")
    return y, cm.seen is not None


def test_an_exit_that_reads_the_traceback_is_not_traced_with_it():
    got = tjc.compile(exit_reads_traceback, backend="eager")(torch.ones(2))
    assert_same(exit_reads_traceback(torch.ones(2)), got)


def test_what_the_exit_reads_is_guarded():
    cm = Swallow(KeyError)

    def fn(x):
        with cm:
            raise KeyError("k")
        return x + 1

    compiled = tjc.compile(fn, backend="eager")
    torch.testing.assert_close(compiled(torch.ones(2)), fn(torch.ones(2)))
    assert explain_counts(fn, torch.ones(2)) == (1, 0, [])
    cm.classes = (ValueError,)   # now __exit__ lets it through
    with pytest.raises(KeyError):
        fn(torch.ones(2))
    with pytest.raises(KeyError):
        compiled(torch.ones(2))


def test_the_context_manager_is_freed_after_an_exceptional_exit():
    def fn(x, cm):
        with cm:
            raise KeyError("k")
        return x + 1

    cm = Swallow(KeyError)
    ref = weakref.ref(cm)
    compiled = tjc.compile(fn, backend="eager")
    torch.testing.assert_close(compiled(torch.ones(2), cm), torch.ones(2) + 1)
    del cm
    assert ref() is None


# -- what still falls back, and an exception that leaves the frame ------------------------------------

def context_unknown(x):
    try:
        raise ValueError("v")
    except ValueError as e:
        return x + 1, e.__context__ is None


def test_the_context_of_a_raise_outside_every_except_block_is_not_known():
    # It is whatever the caller was handling: the compiled call must read the real one.
    compiled = tjc.compile(context_unknown, backend="eager")
    try:
        raise KeyError("outer")
    except KeyError:
        assert_same(context_unknown(torch.ones(2)), compiled(torch.ones(2)))
    assert_same(context_unknown(torch.ones(2)), compiled(torch.ones(2)))


def escapes(x, how):
    y = x + 1
    try:
        raise ValueError("inner")
    except ValueError as e:
        if how == "from":
            raise KeyError("outer") from e
        if how == "context":
            raise KeyError("outer")
        with Swallow(IndexError):   # its __exit__, compiled on its own while the ValueError is
            raise                   # handled, fails to trace: that must not drop its traceback
    return y


@pytest.mark.parametrize("how", ["from", "context", "through_exit"])
def test_an_exception_that_leaves_the_frame_is_eagers(how):
    def run(f):
        with pytest.raises((KeyError, ValueError)) as info:
            f(torch.ones(2), how)
        e = info.value
        line = traceback.extract_tb(e.__traceback__)[-1].line
        return summary(e), summary(e.__context__), line

    assert run(tjc.compile(escapes, backend="eager")) == run(escapes)


def exc_info_outside_handlers(x):
    return x + 1, sys.exc_info()[0]


def test_sys_exc_info_outside_every_handler_is_the_callers():
    compiled = tjc.compile(exc_info_outside_handlers, backend="eager")
    try:
        raise KeyError("outer")
    except KeyError:
        assert_same(exc_info_outside_handlers(torch.ones(2)), compiled(torch.ones(2)))
    assert_same(exc_info_outside_handlers(torch.ones(2)), compiled(torch.ones(2)))


def holds_the_callers_exception(x):
    handled = sys.exception() if hasattr(sys, "exception") else sys.exc_info()[1]
    made = ValueError("made here")
    return x + 1, handled, handled is made, handled is handled, sys.exc_info()[2]


def test_the_callers_exception_is_held_in_the_trace_and_read_again_after_the_graph():
    """Outside every except block of the trace, sys.exception() is whatever the caller handles:
    held (not read) in the trace, never an exception the trace made, and read again where it
    leaves it, so one graph serves callers handling an exception and callers handling none."""
    cnt = CompileCounter()
    compiled = tjc.compile(holds_the_callers_exception, backend=cnt)
    before = tjc.stats()
    for _ in range(2):
        try:
            raise KeyError("outer")
        except KeyError:
            expected, got = holds_the_callers_exception(torch.ones(2)), compiled(torch.ones(2))
            assert got[1] is expected[1] and got[4] is expected[4]
            assert_same(got[0], expected[0]) and got[2:4] == expected[2:4]
        assert_same(holds_the_callers_exception(torch.ones(2)), compiled(torch.ones(2)))
    assert cnt.frame_count == 1
    assert tjc.stats()["graph_breaks"] == before["graph_breaks"] and tjc.stats()["fallbacks"] == before["fallbacks"]


def compares_the_callers_exception_with_none(x):
    e = sys.exc_info()[1]
    equal = e == None  # noqa: E711 - with no break before it: the trace must not answer it
    return (x + 1 if equal else x - 1), e != None, [e] == [None], e in (None,), e is None  # noqa: E711


def test_reading_the_callers_exception_is_a_break_and_runs_as_eager():
    compiled = tjc.compile(compares_the_callers_exception_with_none, backend="eager")
    try:
        raise KeyError("outer")
    except KeyError:
        assert_same(compares_the_callers_exception_with_none(torch.ones(2)), compiled(torch.ones(2)))
    assert_same(compares_the_callers_exception_with_none(torch.ones(2)), compiled(torch.ones(2)))


def exit_stack_callbacks(x):
    import contextlib
    seen = []
    with contextlib.ExitStack() as stack:
        stack.callback(seen.append, 1)
        stack.push(lambda *exc: seen.append(2))   # no context manager: pushed as a callback
        y = x * 2
    return y, seen


def test_an_exit_stack_runs_its_callbacks_in_the_trace():
    """ExitStack.__exit__ keeps the caller's exception for a chain it fixes only if an exit raises."""
    assert_whole(exit_stack_callbacks, torch.ones(2))


def raise_in_grad_mode_blocks(x, flag, which):
    blocks = {"no_grad": torch.no_grad, "enable_grad": torch.enable_grad,
              "inference": torch.inference_mode,
              "autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16)}
    x = torch.cos(x)
    try:
        with blocks[which]():
            x = torch.sin(x)
            if flag:
                raise NotImplementedError("in the block")
            x = x * 2
    except NotImplementedError:
        x = torch.sigmoid(x)
    return x, torch.is_grad_enabled(), torch.is_inference_mode_enabled(), torch.is_autocast_enabled("cpu")


@pytest.mark.parametrize("which", ["no_grad", "enable_grad", "inference", "autocast"])
@pytest.mark.parametrize("flag", [True, False])
def test_a_raise_leaves_grad_mode_autocast_and_inference_blocks_restored(flag, which):
    x = torch.ones(3, requires_grad=True)
    want = raise_in_grad_mode_blocks(x, flag, which)
    cnt = CompileCounter()
    got = tjc.compile(raise_in_grad_mode_blocks, backend=cnt)(x, flag, which)
    assert_same(want, got)
    assert got[0].requires_grad == want[0].requires_grad and got[0].dtype == want[0].dtype
    assert explain_counts(raise_in_grad_mode_blocks, x, flag, which) == (1, 0, [])


def handled_by_sys(x, flag):
    try:
        if flag:
            raise KeyError("k")
        raise ValueError("v")
    except (KeyError, ValueError) as e:
        tp, value, tb = sys.exc_info()
        return x + 1, tp, value is e, tb is not None, sys.exception() is e


@pytest.mark.parametrize("flag", [True, False])
def test_sys_exc_info_and_sys_exception_in_a_handler(flag):
    assert_whole(handled_by_sys, torch.ones(2), flag)


# -- errors of list and dict methods ----------------------------------------------------------------

def container_errors(x, which):
    a, d = [1, 2], {"k": 1}
    try:
        if which == "pop_empty":
            [].pop()
        elif which == "pop_range":
            a.pop(5)
        elif which == "setitem":
            a[7] = 0
        elif which == "delitem":
            del a[-9]
        elif which == "append_no_arg":
            a.append()
        elif which == "dict_get_3":
            d.get(1, 2, 3)
        elif which == "dict_get_kw":
            d.get(key=1)
        return x, a, d
    except (IndexError, TypeError) as e:
        return x + 1, type(e), e.args, a, d


@pytest.mark.parametrize("which", ["pop_empty", "pop_range", "setitem", "delitem", "append_no_arg", "dict_get_3",
                                   "dict_get_kw"])
def test_list_and_dict_method_errors_are_raised_in_the_trace(which):
    assert_whole(container_errors, torch.ones(2), which)


def test_a_list_method_error_that_leaves_the_frame_is_eagers():
    def fn(x, a):
        y = x + 1
        a.pop(len(a) + 3)
        return y

    with pytest.raises(IndexError) as want:
        fn(torch.ones(2), [1])
    with pytest.raises(IndexError) as got:
        tjc.compile(fn, backend="eager")(torch.ones(2), [1])
    assert got.value.args == want.value.args
    assert traceback.extract_tb(got.value.__traceback__)[-1].line == "a.pop(len(a) + 3)"


def uncaught_in_no_grad(x):
    with torch.no_grad():
        y = x * 2
        raise ValueError("v", y.shape[0])
    return y


def test_an_uncaught_raise_through_a_grad_mode_block_still_breaks_at_its_line():
    # The block's exit is traced on the way out, but the exception leaves the frame: the graph
    # runs, then the raise at its own line (no fallback of the whole frame), grad mode restored.
    before = tjc.stats()
    with pytest.raises(ValueError) as info:
        tjc.compile(uncaught_in_no_grad, backend="eager")(torch.ones(2))
    after = tjc.stats()
    assert info.value.args == ("v", 2) and torch.is_grad_enabled()
    assert traceback.extract_tb(info.value.__traceback__)[-1].line == 'raise ValueError("v", y.shape[0])'
    assert {k: after[k] - before[k] for k in ("graphs", "graph_breaks", "fallbacks")} == \
        {"graphs": 1, "graph_breaks": 1, "fallbacks": 0}
