"""An exception raised in the trace inside a `with` block, unwound through the block's exit
(translator._handle, handlers/exceptions.py WITH_EXCEPT_START): a Python-written __exit__ is
inlined with (type, exception, traceback) and may suppress it (contextlib.suppress, unittest's
assertRaises, a user class), grad-mode blocks restore their mode and let it through. Compared
with eager: values, the exception raised, how often each __exit__ ran and with what, the objects'
state after, and graphs and breaks."""
import contextlib
import io
import unittest
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

pytestmark = pytest.mark.torch


class Recorder:
    """A context manager that records its calls and suppresses the exception classes it is given."""

    def __init__(self, *suppress):
        self.suppress, self.log = suppress, []

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append(("exit", exc_type, None if exc is None else exc.args, tb is None))
        return exc_type is not None and issubclass(exc_type, self.suppress)


def _explain(fn, *args):
    with contextlib.redirect_stdout(io.StringIO()):
        return tjc.explain(fn)(*args)


def _suppressed_division(x):
    y = x + 1
    with contextlib.suppress(ZeroDivisionError):
        y = y * 2
        1 / 0
        y = y * 100
    return y - 1


def _recorded(x, cm):
    y = x + 1
    with cm:
        y = y * 2
        int("not a number")
        y = y * 100
    return y - 1


def _caught_outside_no_grad(x):
    y = x + 1
    try:
        with torch.no_grad():
            y = y * 2
            int("not a number")
    except ValueError:
        y = y + 5
    return y, torch.is_grad_enabled()


def _assert_raises(x, case):
    with case.assertRaises(ValueError) as caught:
        int("not a number")
    return x + 1, caught.exception


class _Case(unittest.TestCase):
    def runTest(self):
        pass


@pytest.mark.parametrize("fn", [_suppressed_division, _caught_outside_no_grad], ids=lambda f: f.__name__)
def test_an_exception_through_a_block_is_traced_whole(fn):
    x = torch.randn(3, requires_grad=True)
    e = _explain(fn, x)
    assert (e.graph_count, e.graph_break_count, e.fallbacks) == (1, 0, [])
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        got, expected = compiled(x), fn(x)
        torch.testing.assert_close(got, expected)
    assert torch.is_grad_enabled()


def test_a_python_exit_that_suppresses_runs_once_with_the_exception():
    x = torch.randn(3)
    e = _explain(_recorded, x, Recorder(ValueError))
    assert (e.graph_count, e.graph_break_count, e.fallbacks) == (1, 0, [])
    compiled = tjc.compile(_recorded, backend="eager")
    for _ in range(2):
        eager_cm, compiled_cm = Recorder(ValueError), Recorder(ValueError)
        torch.testing.assert_close(compiled(x, compiled_cm), _recorded(x, eager_cm))
        assert compiled_cm.log == eager_cm.log == [
            "enter", ("exit", ValueError, ("invalid literal for int() with base 10: 'not a number'",), False)]


def test_a_python_exit_that_lets_it_through_runs_once_and_the_exception_is_eagers():
    x = torch.randn(3)
    compiled = tjc.compile(_recorded, backend="eager")
    for _ in range(2):
        eager_cm, compiled_cm = Recorder(KeyError), Recorder(KeyError)
        with pytest.raises(ValueError) as eager_info:
            _recorded(x, eager_cm)
        with pytest.raises(ValueError) as compiled_info:
            compiled(x, compiled_cm)
        assert compiled_info.value.args == eager_info.value.args
        assert compiled_cm.log == eager_cm.log and len(eager_cm.log) == 2


def test_assert_raises_keeps_the_exception_as_eager():
    x, case = torch.randn(3), _Case()
    e = _explain(_assert_raises, x, case)
    assert (e.graph_count, e.graph_break_count, e.fallbacks) == (1, 0, [])
    compiled = tjc.compile(_assert_raises, backend="eager")
    for _ in range(2):
        (got, got_exc), (expected, expected_exc) = compiled(x, case), _assert_raises(x, case)
        torch.testing.assert_close(got, expected)
        assert type(got_exc) is type(expected_exc) is ValueError and got_exc.args == expected_exc.args
        assert got_exc.__traceback__ is None and expected_exc.__traceback__ is None
        assert got_exc.__context__ is expected_exc.__context__ is None


def test_the_kept_exception_has_the_context_python_gives_it():
    x, case = torch.randn(3), _Case()
    compiled = tjc.compile(_assert_raises, backend="eager")
    for _ in range(2):
        try:
            raise KeyError("outer")
        except KeyError as outer:
            got, expected = compiled(x, case)[1], _assert_raises(x, case)[1]
            assert got.__context__ is expected.__context__ is outer


def test_an_exception_through_a_contextmanager_block_is_not_traced_through():
    # @contextmanager's __exit__ throws the exception into its generator: not modelled; the
    # frame runs as written and the generator's handler sees the exception, as in eager.
    seen = []

    @contextlib.contextmanager
    def catching():
        try:
            yield
        except ValueError as e:
            seen.append(e.args)

    def fn(x):
        y = x + 1
        with catching():
            int("not a number")
        return y * 2

    x = torch.randn(3)
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        torch.testing.assert_close(compiled(x), fn(x))
    assert len(seen) == 4 and len(set(seen)) == 1


def test_the_context_manager_is_freed_after_the_call():
    x = torch.randn(3)
    compiled = tjc.compile(_recorded, backend="eager")
    cm = Recorder(ValueError)
    compiled(x, cm)
    ref = weakref.ref(cm)
    del cm
    assert ref() is None


class _ExitThatBreaks(Recorder):
    def __init__(self, log):
        super().__init__(ValueError)
        self.log = log

    def __exit__(self, exc_type, exc, tb):
        print("exit sees", exc_type.__name__)   # a break inside the inlined __exit__
        return super().__exit__(exc_type, exc, tb)


def _made_block_whose_exit_breaks(x, log):
    y = x + 1
    with _ExitThatBreaks(log):
        y = y * 2
        int("not a number")
    return y * 3


def test_an_exit_that_cannot_be_traced_cuts_before_the_with_statement():
    # The failure is in __exit__, reached by unwinding: the frame is cut as at the raise, which
    # moves the cut before the with statement; the block then runs as written, __exit__ once.
    x = torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()):
        report = _explain(_made_block_whose_exit_breaks, x, [])
    assert (report.graph_count, report.graph_break_count) == (1, 1)
    compiled = tjc.compile(_made_block_whose_exit_breaks, backend="eager")
    for _ in range(2):
        log, eager_log = [], []
        with contextlib.redirect_stdout(io.StringIO()):
            torch.testing.assert_close(compiled(x, log), _made_block_whose_exit_breaks(x, eager_log))
        assert log == eager_log and len(log) == 2
