"""`with` blocks over context managers written in Python: contextlib.nullcontext(), a class with
__enter__/__exit__ read from the frame or made by the trace. Their __enter__ and __exit__ are
inlined; what they store on the object is replayed after the graph, so the object is left as eager
leaves it. A graph break inside such a block cannot be cut (a resume function would run __enter__
again): the frame runs as written, entering and leaving once. All were whole-frame fallbacks
before ("only grad-mode and autocast context managers are traced"). Grad-mode and autocast blocks
have their own files (test_grad_contexts.py, test_autocast_contexts.py)."""
import contextlib
import io

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402

from context_helpers import CompiledCalls  # noqa: E402


class Depth:
    """Counts how deep it is entered; `as` binds the object itself."""

    def __init__(self, scale=1.0):
        self.depth = 0
        self.log = []
        self.scale = scale

    def __enter__(self):
        self.depth += 1
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.depth -= 1
        self.log.append("exit")
        return False


class Scaled:
    """Made inside the frame; __enter__ returns a value, not the object."""

    def __init__(self, k):
        self.k = k

    def __enter__(self):
        return self.k * 2

    def __exit__(self, *exc):
        pass


def with_nullcontext(x):
    with contextlib.nullcontext():
        y = x.sin()
    with contextlib.nullcontext(3) as k:
        return y * k


def with_user_object(x, cm):
    with cm as c:
        y = x * c.scale + c.depth
        inside = c.depth
    return y + cm.depth, inside


def with_made_object(x, k):
    with Scaled(k) as two_k:
        return x + two_k


def nested(x, cm):
    with torch.no_grad(), cm:
        with contextlib.nullcontext():
            y = x * 2
    return y, torch.is_grad_enabled()


def test_nullcontext_is_traced():
    x = torch.randn(3)
    compiled = CompiledCalls(with_nullcontext)
    torch.testing.assert_close(compiled(x), with_nullcontext(x))
    compiled.check(graphs=1, breaks=0)


def test_user_context_manager_is_inlined_and_its_stores_replayed():
    x = torch.randn(3)
    eager_cm, cm = Depth(2.0), Depth(2.0)
    compiled = CompiledCalls(with_user_object)
    for _ in range(2):
        expected = with_user_object(x, eager_cm)
        out = compiled(x, cm)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1] == expected[1] == 1
        assert (cm.depth, cm.log) == (eager_cm.depth, eager_cm.log)
    compiled.check(graphs=2, breaks=0)               # the log's length is guarded: it grew
    cm.scale = 5.0                                   # read in the block: guarded, recompiles
    eager_cm.scale = 5.0
    torch.testing.assert_close(compiled(x, cm)[0], with_user_object(x, eager_cm)[0])
    assert compiled.cnt.frame_count == 3
    assert (cm.depth, cm.log) == (eager_cm.depth, eager_cm.log)


def test_context_manager_made_by_the_trace():
    x = torch.randn(3)
    compiled = CompiledCalls(with_made_object)
    torch.testing.assert_close(compiled(x, 1.5), with_made_object(x, 1.5))
    compiled.check(graphs=1, breaks=0)


def test_nested_with_grad_mode():
    x = torch.randn(3, requires_grad=True)
    eager_cm, cm = Depth(), Depth()
    compiled = CompiledCalls(nested)
    out, expected = compiled(x, cm), nested(x, eager_cm)
    torch.testing.assert_close(out[0], expected[0])
    assert out[0].requires_grad is expected[0].requires_grad is False
    assert out[1] is expected[1] is True
    assert cm.log == eager_cm.log
    compiled.check(graphs=1, breaks=0)


def test_a_break_inside_runs_the_frame_as_written():
    def fn(x, cm):
        y = x + 1
        with cm:
            print("inside", cm.depth)
            y = y * 2
        return y

    x = torch.randn(3)
    eager_cm, cm = Depth(), Depth()
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        with contextlib.redirect_stdout(io.StringIO()) as eager_out:
            expected = fn(x, eager_cm)
        with contextlib.redirect_stdout(io.StringIO()) as out:
            got = compiled(x, cm)
        torch.testing.assert_close(got, expected)
        assert out.getvalue() == eager_out.getvalue()
        assert (cm.depth, cm.log) == (eager_cm.depth, eager_cm.log)


def test_exception_in_the_block_reaches_exit_as_in_eager():
    class Suppress(Depth):
        def __exit__(self, exc_type, exc, tb):
            super().__exit__(exc_type, exc, tb)
            return exc_type is ZeroDivisionError

    def fn(x, cm):
        with cm:
            y = x + 1
            1 / 0
        return y

    x = torch.randn(3)
    eager_cm, cm = Suppress(), Suppress()
    expected = fn(x, eager_cm)
    torch.testing.assert_close(tjc.compile(fn, backend="eager")(x, cm), expected)
    assert cm.log == eager_cm.log


def test_context_managers_not_written_in_python_still_run():
    # A C-implemented context manager (a lock) is still refused: the frame runs as written.
    import threading

    def fn(x, lock):
        with lock:
            return x + 1

    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn, backend="eager")(x, threading.Lock()), x + 1)


# -- @contextlib.contextmanager ---------------------------------------------------------------------

EVENTS = []


@contextlib.contextmanager
def scaled(k):
    EVENTS.append("enter")
    try:
        yield k * 2
    finally:
        EVENTS.append("exit")


def with_generator_cm(x, k):
    with scaled(k) as two_k:
        y = x * two_k
    return y + len(EVENTS)


def test_contextmanager_generator_is_traced_and_its_effects_replayed():
    x = torch.randn(3)
    compiled = CompiledCalls(with_generator_cm)
    EVENTS.clear()
    expected = with_generator_cm(x, 1.5)
    eager_events = list(EVENTS)
    EVENTS.clear()
    torch.testing.assert_close(compiled(x, 1.5), expected)
    assert EVENTS == eager_events == ["enter", "exit"]
    compiled.check(graphs=1, breaks=0)


def test_a_break_inside_a_contextmanager_block_runs_as_written():
    def fn(x, k):
        with scaled(k) as two_k:
            print("inside", two_k)
            y = x * two_k
        return y

    x = torch.randn(3)
    EVENTS.clear()
    with contextlib.redirect_stdout(io.StringIO()) as eager_out:
        expected = fn(x, 2.0)
    eager_events = list(EVENTS)
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        EVENTS.clear()
        with contextlib.redirect_stdout(io.StringIO()) as out:
            torch.testing.assert_close(compiled(x, 2.0), expected)
        assert out.getvalue() == eager_out.getvalue()
        assert EVENTS == eager_events


@contextlib.contextmanager
def yields_twice():
    yield 1
    yield 2


def test_a_contextmanager_that_does_not_stop_raises_as_in_eager():
    def fn(x):
        with yields_twice() as one:
            y = x + one
        return y

    x = torch.randn(3)
    with pytest.raises(RuntimeError) as eager:
        fn(x)
    with pytest.raises(RuntimeError) as compiled:
        tjc.compile(fn, backend="eager")(x)
    assert str(compiled.value) == str(eager.value)


def _break_in_a_made_block(x, log):
    y = x + 1
    with Logged(log):   # made by a call: the frame is cut before it, the block runs for real
        y = y * 2
        print("inside")
        y = y - 1
    return y * 3


def _break_in_a_contextmanager_block(x, log):
    y = x + 1
    with logged_generator(log):
        y = y * 2
        print("inside")
        if len(log) > 5:
            raise ValueError("not reached")
    return y * 3


class Logged:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")

    def __exit__(self, exc_type, exc, tb):
        self.log.append(("exit", exc_type))


@contextlib.contextmanager
def logged_generator(log):
    log.append("enter")
    try:
        yield
    finally:
        log.append("exit")


@pytest.mark.parametrize("fn", [_break_in_a_made_block, _break_in_a_contextmanager_block],
                         ids=lambda f: f.__name__)
def test_a_break_inside_a_block_made_by_a_call_cuts_before_the_with_statement(fn):
    # The graph before the with statement is kept (before, the whole frame ran as written); the
    # with statement, its block and the rest run as written, each __enter__/__exit__ once.
    x = torch.randn(3)
    with contextlib.redirect_stdout(io.StringIO()):
        report = tjc.explain(fn)(x, [])
    assert (report.graph_count, report.graph_break_count) == (1, 1)
    assert all("resume" in f for f in report.fallbacks)   # only the rest, from the with statement
    compiled = tjc.compile(fn, backend="eager")
    for _ in range(2):
        eager_log, log = [], []
        with contextlib.redirect_stdout(io.StringIO()):
            expected = fn(x, eager_log)
            got = compiled(x, log)
        torch.testing.assert_close(got, expected)
        assert log == eager_log and log[0] == "enter" and len(log) == 2
