"""Exceptions raised and caught inside the trace (try/except/finally): a raise the tracer models (a
`raise` statement, a missing dict key, a list index out of range, int("x"), an assert) caught by a
try block of the same frame or of an inlined caller is handled in the trace, and the graph goes on
(tracer/handlers/exceptions.py, translator.py `_handle`). Each case runs both ways (the exception
raised, and not: a flag or the inputs decide), compares results and side effects with eager and
asserts one graph, no break. The last part checks what must still fall back or break cleanly."""
import io
import sys
import weakref

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import assert_same, explain_counts  # noqa: E402


def run_both(fn, *args, calls=2):
    """fn eagerly and compiled `calls` times, each on fresh lists (side effects compared too);
    returns the compile count."""
    def fresh(a):
        return list(a) if isinstance(a, list) else a

    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    eager_args = [fresh(a) for a in args]
    expected = fn(*eager_args)
    for _ in range(calls):
        got_args = [fresh(a) for a in args]
        assert_same(expected, compiled(*got_args))
        assert_same(eager_args, got_args)
    return cnt.frame_count


def assert_whole(fn, *args):
    """Same as eager, and captured as one graph with no break and no fallback."""
    assert run_both(fn, *args) == 1
    assert explain_counts(fn, *args)[:2] == (1, 0)


class ModelError(ValueError):
    pass


class OtherError(Exception):
    """A user exception with a docstring and nothing else."""


# -- caught in the same frame -------------------------------------------------------------------------

def missing_key(x, key):
    d = {"a": 1}
    try:
        v = d[key]
    except KeyError:
        v = 3
    return x * v


@pytest.mark.parametrize("key", ["a", "b"])
def test_missing_dict_key_is_caught(key):
    assert_whole(missing_key, torch.randn(3), key)


def raise_builtin(x, flag, log):
    try:
        if flag:
            raise ValueError("bad value", 2)
        y = x + 1
    except ValueError as e:
        log.append(str(e))
        log.append(e.args)
        log.append(repr(e))
        y = x - 1
    return y


@pytest.mark.parametrize("flag", [True, False])
def test_raise_and_catch_builtin_with_as(flag):
    assert_whole(raise_builtin, torch.randn(3), flag, [])


def user_classes(x, which, log):
    try:
        if which == 1:
            raise ModelError("model")
        if which == 2:
            raise OtherError
        y = x * 1
    except KeyError:
        y = x * 10
    except (OtherError, IndexError) as e:
        log.append(type(e).__name__)
        y = x * 2
    except ValueError as e:   # ModelError is a ValueError
        log.append(str(e))
        log.append(isinstance(e, ModelError))
        y = x * 3
    return y


@pytest.mark.parametrize("which", [0, 1, 2])
def test_user_exception_classes_and_clauses(which):
    assert_whole(user_classes, torch.randn(3), which, [])


def with_finally(x, flag, log):
    try:
        log.append("try")
        if flag:
            raise KeyError("k")
        y = x + 1
    except KeyError as e:
        log.append(("except", str(e)))
        y = x + 2
    else:
        log.append("else")
    finally:
        log.append("finally")
    return y


@pytest.mark.parametrize("flag", [True, False])
def test_except_else_finally(flag):
    assert_whole(with_finally, torch.randn(3), flag, [])


def finally_only_inside(x, flag, log):
    try:
        try:
            if flag:
                raise OtherError("inner")
            y = x * 2
        finally:
            log.append("inner finally")
    except OtherError:
        y = x * 5
    return y


@pytest.mark.parametrize("flag", [True, False])
def test_finally_runs_on_the_way_out(flag):
    assert_whole(finally_only_inside, torch.randn(3), flag, [])


def reraise_to_outer(x, flag, bare, log):
    try:
        try:
            if flag:
                raise ModelError("first")
            y = x * 1
        except ModelError as e:
            log.append("inner")
            if bare:
                raise
            raise e
    except ValueError as e:
        log.append(("outer", str(e)))
        y = -x
    return y


@pytest.mark.parametrize("flag", [True, False])
@pytest.mark.parametrize("bare", [True, False])
def test_reraise_from_an_except_block_to_an_outer_try(flag, bare):
    assert_whole(reraise_to_outer, torch.randn(3), flag, bare, [])


def raise_from(x, flag, log):
    try:
        try:
            if flag:
                raise KeyError("k")
            y = x * 1
        except KeyError as e:
            raise OtherError("wrapped") from e
    except OtherError as e:
        log.append(str(e))
        y = x + 7
    return y


@pytest.mark.parametrize("flag", [True, False])
def test_raise_from(flag):
    assert_whole(raise_from, torch.randn(3), flag, [])


def handler_with_its_own_try(x, flag, log):
    try:
        if flag:
            raise IndexError("i")
        y = x * 1
    except IndexError:
        try:
            {}["nope"]
        except KeyError as e:
            log.append(str(e))
        y = x * 4
    return y


@pytest.mark.parametrize("flag", [True, False])
def test_try_inside_an_except_block(flag):
    assert_whole(handler_with_its_own_try, torch.randn(3), flag, [])


def modelled_errors(x, n, s):
    out = []
    try:
        out.append([1, 2, 3][n])
    except IndexError as e:
        out.append(str(e))
    try:
        out.append((1, 2)[n])
    except LookupError as e:   # IndexError's base
        out.append(str(e))
    try:
        out.append(int(s))
    except ValueError as e:
        out.append(str(e))
    try:
        out.append(10 // (n - 5))
    except ZeroDivisionError as e:
        out.append(str(e))
    return x + len(out), out


@pytest.mark.parametrize("n,s", [(1, "4"), (5, "x"), (-9, "7")])
def test_errors_python_raises_on_constants(n, s):
    assert_whole(modelled_errors, torch.randn(3), n, s)


# Written through exec: pytest rewrites the assert statements of a test module into calls.
exec(compile("""
def assert_caught(x, flag):
    try:
        assert not flag, "flag set"
        y = x + 1
    except AssertionError as e:
        y = x * len(str(e))
    return y
""", "<assert_caught>", "exec"))


@pytest.mark.parametrize("flag", [True, False])
def test_assert_statement_caught(flag):
    assert_whole(assert_caught, torch.randn(3), flag)


def loop_with_try(x, keys):
    d = {"a": 1.0, "c": 3.0}
    total = x
    for k in keys:
        try:
            total = total + d[k]
        except KeyError:
            total = total - 1
            continue
        total = total * 2
    return total


def test_try_in_a_loop_with_continue():
    assert_whole(loop_with_try, torch.randn(3), ["a", "b", "c", "d"])


# -- across inlined calls ------------------------------------------------------------------------------

def _lookup(d, key, log):
    try:
        return d[key]
    finally:
        log.append(("looked up", key))


def _check(x, flag):
    if flag:
        raise ModelError("from callee")
    return x.sin()


def caught_in_caller(x, flag, log):
    try:
        y = _check(x, flag) + _lookup({"a": 2}, "a" if flag else "b", log)
    except ModelError as e:
        log.append(str(e))
        y = x.cos()
    except KeyError:
        log.append("no key")
        y = x.tan()
    return y


@pytest.mark.parametrize("flag", [True, False])
def test_raised_in_an_inlined_call_caught_by_the_caller(flag):
    assert_whole(caught_in_caller, torch.randn(3), flag, [])


def _catches_own(x, flag):
    try:
        if flag:
            raise OtherError("own")
        return x + 1
    except OtherError:
        return x - 1


def callee_catches(x, flag):
    return _catches_own(x, flag) * 2


@pytest.mark.parametrize("flag", [True, False])
def test_callee_catches_its_own(flag):
    assert_whole(callee_catches, torch.randn(3), flag)


# -- guards ----------------------------------------------------------------------------------------------

CAUGHT = KeyError


def catches_global_class(x):
    try:
        {}["k"]
    except CAUGHT:
        return x + 1
    except LookupError:
        return x + 2


def test_the_except_clause_class_is_guarded():
    global CAUGHT
    cnt = CompileCounter()
    compiled = tjc.compile(catches_global_class, backend=cnt)
    x = torch.randn(3)
    try:
        CAUGHT = KeyError
        torch.testing.assert_close(compiled(x), x + 1)
        CAUGHT = IndexError   # the first clause no longer matches: compiled again
        torch.testing.assert_close(compiled(x), x + 2)
        assert cnt.frame_count == 2
    finally:
        CAUGHT = KeyError


def test_a_flag_that_changes_the_path_recompiles():
    cnt = CompileCounter()
    compiled = tjc.compile(raise_builtin, backend=cnt)
    x = torch.randn(3)
    for flag in (True, False, True):
        got, want = [], []
        assert_same(raise_builtin(x, flag, want), compiled(x, flag, got))
        assert got == want
    assert cnt.frame_count == 2


# -- what still falls back or breaks cleanly ---------------------------------------------------------------

def uncaught(x, flag):
    y = x + 1
    if flag:
        raise ModelError("not caught")
    return y


def test_an_uncaught_raise_still_raises_the_real_exception():
    compiled = tjc.compile(uncaught, backend="eager")
    torch.testing.assert_close(compiled(torch.ones(2), False), torch.ones(2) + 1)
    with pytest.raises(ModelError, match="not caught"):
        compiled(torch.ones(2), True)


def uncaught_after_handler(x, flag):
    try:
        if flag:
            raise KeyError("k")
    except KeyError:
        raise OtherError("from the handler")
    return x


def test_an_exception_leaving_a_handler_uncaught_runs_the_frame_as_written():
    compiled = tjc.compile(uncaught_after_handler, backend="eager")
    with pytest.raises(OtherError, match="from the handler") as info:
        compiled(torch.ones(2), True)
    assert isinstance(info.value.__context__, KeyError)
    torch.testing.assert_close(compiled(torch.ones(2), False), torch.ones(2))


def shape_mismatch(x, y):
    try:
        z = x + y   # a fake-tensor error at trace time is never caught into the handler
    except RuntimeError:
        z = x
    return z


def test_a_tensor_error_in_a_try_block_is_not_caught_in_the_trace():
    x, y = torch.randn(3), torch.randn(4)
    got = tjc.compile(shape_mismatch, backend="eager")(x, y)
    torch.testing.assert_close(got, shape_mismatch(x, y))
    graphs, breaks, _ = explain_counts(shape_mismatch, x, y)
    assert graphs == 0


def keeps_the_exception(x, flag):
    try:
        if flag:
            raise ModelError("kept")
        err = None
    except ModelError as e:
        err = e
    return x + 1, err


def test_a_caught_exception_that_leaves_the_trace_falls_back():
    compiled = tjc.compile(keeps_the_exception, backend="eager")
    y, err = compiled(torch.ones(2), True)
    assert type(err) is ModelError and err.args == ("kept",) and err.__traceback__ is not None
    torch.testing.assert_close(y, torch.ones(2) + 1)


def reads_exc_info(x, flag):
    try:
        if flag:
            raise OtherError("info")
        n = 0
    except OtherError:
        n = len(str(sys.exc_info()[1]))
    return x + n


def test_sys_exc_info_in_a_handler_is_eagers():
    for flag in (True, False):
        got = tjc.compile(reads_exc_info, backend="eager")(torch.ones(2), flag)
        torch.testing.assert_close(got, reads_exc_info(torch.ones(2), flag))


def raise_inside_with(x, flag):
    try:
        with torch.no_grad():
            if flag:
                raise OtherError("in with")
            y = x * 2
    except OtherError:
        y = x * 3
    return y, torch.is_grad_enabled()


def test_a_raise_through_a_grad_mode_block_is_eagers():
    for flag in (True, False):
        x = torch.ones(2, requires_grad=True)
        got = tjc.compile(raise_inside_with, backend="eager")(x, flag)
        want = raise_inside_with(x, flag)
        assert_same(want, got)
        assert got[0].requires_grad == want[0].requires_grad


class Custom(Exception):
    def __init__(self, code):
        super().__init__(f"code {code}")
        self.code = code


def custom_init(x, flag):
    try:
        if flag:
            raise Custom(3)
        n = 0
    except Custom as e:
        n = e.code
    return x + n


def test_an_exception_class_with_its_own_init_is_not_modelled():
    for flag in (True, False):
        got = tjc.compile(custom_init, backend="eager")(torch.ones(2), flag)
        torch.testing.assert_close(got, custom_init(torch.ones(2), flag))


_SINK = io.StringIO()


def try_around_a_break(x, log):
    try:
        print("in the try block", file=_SINK)   # print() is a break the tracer takes
        log.append("printed")
        y = x + 1
    except KeyError:
        y = x * 1
    return y


def test_a_graph_break_inside_a_try_block_keeps_todays_fallback():
    got, want = [], []
    assert_same(try_around_a_break(torch.ones(2), want), tjc.compile(try_around_a_break, backend="eager")(
        torch.ones(2), got))
    assert got == want
    graphs, breaks, fallbacks = explain_counts(try_around_a_break, torch.ones(2), [])
    assert (graphs, breaks, len(fallbacks)) == (0, 0, 1)


def _gen(n):
    yield 1
    if n > 1:
        raise OtherError("in generator")
    yield 2


def generator_raises(x, n, log):
    g = _gen(n)
    try:
        for v in g:
            log.append(v)
    except OtherError as e:
        log.append(str(e))
    log.append(next(g, "finished"))
    return x + len(log)


@pytest.mark.parametrize("n", [1, 2])
def test_raised_in_a_generator_finishes_it(n):
    assert_whole(generator_raises, torch.randn(3), n, [])


class Patchable(ValueError):
    pass


def prints_patchable(x, flag):
    try:
        if flag:
            raise Patchable("plain")
        n = 0
    except Patchable as e:
        n = len(str(e))
    return x + n


def test_a_method_set_on_the_exception_class_later_recompiles():
    cnt = CompileCounter()
    compiled = tjc.compile(prints_patchable, backend=cnt)
    x = torch.zeros(2)
    torch.testing.assert_close(compiled(x, True), x + 5)
    try:
        Patchable.__str__ = lambda self: "patched message"   # no longer what the trace modelled
        torch.testing.assert_close(compiled(x, True), prints_patchable(x, True))
        torch.testing.assert_close(compiled(x, True), x + 15)
    finally:
        del Patchable.__str__
    torch.testing.assert_close(compiled(x, True), x + 5)


def raise_the_class(x, flag):
    try:
        if flag:
            raise Patchable
        n = 1
    except ValueError as e:
        n = len(e.args) + 2
    return x * n


@pytest.mark.parametrize("flag", [True, False])
def test_raise_of_a_class_makes_an_instance(flag):
    assert_whole(raise_the_class, torch.randn(3), flag)


def next_until_stop(x, items):
    it = iter(items)
    total = x
    while True:
        try:
            v = next(it)
        except StopIteration as e:
            total = total + len(e.args) * 100
            break
        total = total + v
    return total


@pytest.mark.parametrize("items", [[], [1, 2, 3]])
def test_stop_iteration_from_next_is_caught(items):
    assert_whole(next_until_stop, torch.randn(3), items)


def _counter(n):
    for i in range(n):
        yield i


def next_of_generator(x, n):
    g = _counter(n)
    try:
        a = next(g)
        b = next(g)
    except StopIteration:
        a, b = -1, -1
    return x + a * 10 + b


@pytest.mark.parametrize("n", [0, 1, 2])
def test_stop_iteration_of_a_generator_is_caught(n):
    assert_whole(next_of_generator, torch.randn(3), n)


def _returns_value():
    yield 1
    return 5


def stop_iteration_value(x):
    g = _returns_value()
    try:
        next(g)
        next(g)
        n = 0
    except StopIteration as e:
        n = e.args[0] if e.args else -1
    return x + n


def test_stop_iteration_carrying_a_generators_return_value_is_not_modelled():
    got = tjc.compile(stop_iteration_value, backend="eager")(torch.zeros(2))
    torch.testing.assert_close(got, stop_iteration_value(torch.zeros(2)))
    torch.testing.assert_close(got, torch.zeros(2) + 5)


def _callee_finally(log, flag):
    try:
        if flag:
            raise OtherError("through finally")
    finally:
        log.append("callee finally")
    return 1


def uncaught_through_callee(x, flag, log):
    y = x + 1
    n = _callee_finally(log, flag)
    return y * n


def test_an_uncaught_raise_from_a_callee_handler_breaks_at_the_call():
    # Not caught anywhere: the frame is cut at the call, which eager runs again and raises.
    cnt = CompileCounter()
    compiled = tjc.compile(uncaught_through_callee, backend=cnt)
    got, want = [], []
    with pytest.raises(OtherError, match="through finally"):
        compiled(torch.ones(2), True, got)
    with pytest.raises(OtherError):
        uncaught_through_callee(torch.ones(2), True, want)
    assert got == want
    assert cnt.frame_count >= 1   # the graph before the call
    assert_same(uncaught_through_callee(torch.ones(2), False, want), compiled(torch.ones(2), False, got))
    assert got == want


def index_or_default(x, items, text):
    try:
        v = items[3]
    except IndexError:
        v = -1
    try:
        w = int(text)
    except ValueError:
        w = 100
    return x + v + w


def test_inputs_that_decide_the_raise_are_guarded():
    # The list's length and the text decide whether each raise happens: another list or text
    # compiles again rather than reuse the path taken first.
    compiled = tjc.compile(index_or_default, backend="eager")
    x = torch.zeros(2)
    for items, text in (([1, 2], "4"), ([1, 2, 3, 9], "4"), ([1, 2, 3, 9], "four"), ([5], "four")):
        torch.testing.assert_close(compiled(x, items, text), index_or_default(x, items, text))


def _yields_in_handler(flag):
    try:
        if flag:
            raise OtherError("g")
        yield 1
    except OtherError:
        yield 2


def yield_in_except(x, flag):
    total = x
    for v in _yields_in_handler(flag):
        total = total + v
    return total


@pytest.mark.parametrize("flag", [True, False])
def test_a_yield_inside_an_except_block_is_refused_cleanly(flag):
    got = tjc.compile(yield_in_except, backend="eager")(torch.zeros(2), flag)
    torch.testing.assert_close(got, yield_in_except(torch.zeros(2), flag))


class Holder:
    def __init__(self):
        self.table = {"a": torch.ones(2)}
        self.items = [1, 2]


def _lookup_on(holder, key):
    return holder.table[key] + holder.items[5]


def catches_on_an_input(x, holder, key):
    try:
        y = _lookup_on(holder, key)
    except (KeyError, IndexError) as e:
        y = x + len(str(e))
    return y


@pytest.mark.parametrize("key", ["a", "b"])
def test_the_objects_a_caught_exception_crossed_are_freed_without_the_collector(no_gc, key):
    # The tracer's exception holds the frames it crossed (the trackers, the input object) in its
    # traceback: dropped when the trace handles it, nothing waits for the collector.
    compiled = tjc.compile(catches_on_an_input, backend="eager")
    holder = Holder()
    x = torch.zeros(2)
    torch.testing.assert_close(compiled(x, holder, key), catches_on_an_input(x, holder, key))
    ref = weakref.ref(holder)
    del holder
    assert ref() is None


# -- exception classes made by a class statement in the trace (class_statements.py) ------------------

def local_exception_class(x, flag, log):
    class Stop(Exception):
        """Raised to leave the block early."""

    class Harder(Stop):
        pass

    try:
        if flag:
            raise Harder("one dim", 2)
        y = x + 1
    except Stop as e:
        log.append((type(e).__name__, e.args, isinstance(e, Harder)))
        y = x * len(str(e))
    return y


@pytest.mark.parametrize("flag", [True, False])
def test_a_local_exception_class_raised_and_caught(flag):
    assert_whole(local_exception_class, torch.randn(3), flag, [])


def local_exception_leaves(x):
    class Stop(Exception):
        pass
    try:
        raise Stop("out")
    except Stop as e:
        return x + 1, e


def local_exception_uncaught(x):
    class Stop(Exception):
        pass
    y = x + 1
    raise Stop("boom", y.shape[0])


def test_a_local_exception_that_leaves_the_frame_is_that_calls_own():
    out, err = tjc.compile(local_exception_leaves)(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 2.0))
    assert type(err).__qualname__ == "local_exception_leaves.<locals>.Stop" and err.args == ("out",)
    with pytest.raises(Exception) as info:
        tjc.compile(local_exception_uncaught)(torch.ones(2))
    assert type(info.value).__qualname__ == "local_exception_uncaught.<locals>.Stop"
    assert info.value.args == ("boom", 2)
