"""The C++ runtime with every kind of call: positional, keyword, *args and **kwargs arguments,
methods, closures and cells, recursion (one entry serves every level), exceptions raised from and
caught inside transformed code (the shadow frame in the traceback, no cycle), generators, coroutines
and throw() left alone, threads calling at once, reset() while a compiled frame runs, and a guard
that raises counted as a failed guard. Torch-free: runs on 3.11, 3.12 and 3.13.
"""
import gc
import threading
import weakref

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import ConstantJit, call_compiled, replace_constant


pytestmark = pytest.mark.usefixtures("fresh_runtime")


def test_positional_keyword_varargs_kwargs():
    def f(a, b=2, *args, c, d=4, **kwargs):
        return (a, b, args, c, d, sorted(kwargs.items()), 7)

    jit = ConstantJit(old=7, new=700, guard_types=("a",))
    expected = (1, 5, (6,), 3, 4, [("e", 9)], 700)
    assert call_compiled(jit, f, 1, 5, 6, c=3, e=9) == expected
    assert call_compiled(jit, f, 1, 5, 6, c=3, e=9) == expected
    assert call_compiled(jit, f, a=1, c=3) == (1, 2, (), 3, 4, [], 700)
    assert len(jit.misses) == 1


def test_methods():
    class Box:
        def __init__(self, v):
            self.v = v

        def get(self, k):
            return self.v + k + 1

    jit = ConstantJit(old=1, new=1000, guard_types=("self", "k"))
    b = Box(5)
    assert call_compiled(jit, b.get, 1) == 1006
    assert call_compiled(jit, Box(7).get, 2) == 1009
    assert jit.misses == ["get"]
    assert len(tjc.cache_entries(Box.get)) == 1
    assert tjc.cache_entries(b.get) == tjc.cache_entries(Box.get)


def test_closures_and_cells():
    def outer(base):
        scale = 3

        def f(x):
            return (x + base) * scale + 1
        return f

    f = outer(10)
    jit = ConstantJit(old=1, new=50, guard_types=("x",))
    assert call_compiled(jit, f, 1) == 83
    assert call_compiled(jit, f, 2) == 86

    def uses_cell(x, y):
        def inner():
            return x + y
        return inner() + 1

    jit2 = ConstantJit(old=1, new=20, guard_types=("x",))
    assert call_compiled(jit2, uses_cell, 1, 2) == 23, "an argument that is a cell is wrapped by MAKE_CELL"
    assert call_compiled(jit2, uses_cell, 5, 2) == 27


def test_recursion():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    calls = []

    def cb(frame, entries):
        calls.append(frame.f_locals["n"])
        g = runtime.GuardManager()
        g.local("n").type_match(int)
        return runtime.GuardedCode(frame.f_code, g)

    assert call_compiled(cb, fact, 10) == 3628800
    assert calls == [10], "one entry serves every level of the recursion"
    assert tjc.stats()["hits"] == 9


def test_exception_from_transformed_code_leaves_no_cycle():
    class Payload:
        pass

    def f(p, fail):
        if fail:
            raise ValueError("from compiled code")
        return 1

    jit = ConstantJit(old=1, new=2, guard_types=("p",))
    p = Payload()
    freed = []
    weakref.finalize(p, freed.append, True)
    gc.disable()
    try:
        with pytest.raises(ValueError, match="from compiled code") as info:
            call_compiled(jit, f, p, True)
        tb_names = []
        tb = info.value.__traceback__
        while tb.tb_next is not None:
            tb_names.append(tb.tb_frame.f_code.co_name)
            tb = tb.tb_next
        shadow = tb.tb_frame
        assert shadow.f_code.co_name == "f", "the shadow frame shows in the traceback"
        # The frame object outlived its interpreter frame: it took a copy of the data and links
        # to the caller (3.11: our take-ownership path; 3.12+: CPython's).
        assert shadow.f_locals["p"] is p and shadow.f_locals["fail"] is True
        assert shadow.f_back.f_code.co_name == "call_compiled"
        assert shadow.f_lineno == f.__code__.co_firstlineno + 2
        del info, tb, shadow
        del p
        assert freed == [True], "the argument is freed without gc.collect()"
    finally:
        gc.enable()


def test_exceptions_in_compiled_code_can_be_caught_inside():
    def f(x):
        try:
            raise KeyError(x)
        except KeyError as e:
            return e.args[0] + 1

    jit = ConstantJit(old=1, new=11, guard_types=("x",))
    assert call_compiled(jit, f, 1) == 12
    assert call_compiled(jit, f, 1) == 12


def test_generators_are_left_alone():
    def gen(n):
        for i in range(n):
            yield i + 1

    seen = []

    def cb(frame, entries):
        seen.append(frame.f_code.co_name)
        return runtime.RUN_ORIGINAL

    def consume(n):
        return list(gen(n))

    assert call_compiled(cb, consume, 3) == [1, 2, 3]
    assert seen == ["consume"], "generator frames never reach the callback"


def test_threads_calling_compiled_functions_at_once():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_types=("x",))
    lock = threading.Lock()
    results, errors = [], []
    barrier = threading.Barrier(4)

    def worker(k):
        try:
            barrier.wait()
            with runtime.eval_frame(jit):
                out = [f(i) for i in range(2000)]
            with lock:
                results.append(out == [i + 100 for i in range(2000)])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and results == [True] * 4
    assert 1 <= len(tjc.cache_entries(f)) <= 4
    assert not runtime.hook_installed()


def test_reset_during_a_running_compiled_frame():
    def f(x):
        tjc.reset()
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_types=("x",))
    assert call_compiled(jit, f, 1) == 101
    assert tjc.cache_entries(f) == []
    assert call_compiled(jit, f, 1) == 101
    assert len(jit.misses) == 2


def test_guard_that_raises_counts_as_failed():
    class Weird:
        def __eq__(self, other):
            raise RuntimeError("eq raised")

        __hash__ = object.__hash__

    def f(x):
        return 1

    def cb(frame, entries):
        g = runtime.GuardManager()
        g.local("x").type_match(int)
        return runtime.GuardedCode(replace_constant(frame.f_code, 1, 5), g)

    assert call_compiled(cb, f, 3) == 5
    assert call_compiled(cb, f, Weird()) == 5  # type guard fails, recompiles; no error leaks
    assert len(tjc.cache_entries(f)) == 2


def test_coroutines_and_throws_are_left_alone():
    async def coro_fn(x):
        return x + 1

    def gen():
        try:
            yield 1
        except KeyError:
            yield 2

    seen = []

    def cb(frame, entries):
        seen.append(frame.f_code.co_name)
        return runtime.RUN_ORIGINAL

    def drive():
        c = coro_fn(1)
        with pytest.raises(StopIteration) as stop:
            c.send(None)
        g = gen()
        next(g)
        return stop.value.value, g.throw(KeyError())

    with runtime.eval_frame(cb):
        assert drive() == (2, 2)
    assert "coro_fn" not in seen and "gen" not in seen, seen
