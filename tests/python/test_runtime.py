"""The C++ runtime through its Python face: hook, cache, shadow frames, eviction, introspection.

Torch-free: runs on 3.11, 3.12 and 3.13.
"""
import gc
import sys
import threading
import warnings
import weakref

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import ConstantJit, call_compiled, replace_constant


pytestmark = pytest.mark.usefixtures("fresh_runtime")


# --- hook installation and the callback contract ---

def test_set_eval_frame_returns_previous_and_installs_only_while_active():
    def cb(frame, entries):
        return runtime.RUN_ORIGINAL

    assert not runtime.hook_installed()
    assert runtime.set_eval_frame(cb) is None
    assert runtime.hook_installed()
    assert runtime.set_eval_frame(None) is cb
    assert not runtime.hook_installed()


def test_set_eval_frame_rejects_non_callables():
    with pytest.raises(TypeError, match="callable or None"):
        runtime.set_eval_frame(42)
    assert not runtime.hook_installed()


def test_callback_state_is_per_thread():
    seen = []

    def cb(frame, entries):
        seen.append((threading.get_ident(), frame.f_code.co_name))
        return runtime.RUN_ORIGINAL

    def work(x):
        return x + 1

    other_result = []
    with runtime.eval_frame(cb):
        t = threading.Thread(target=lambda: other_result.append(work(1)))
        t.start()
        t.join()
        assert work(2) == 3
    assert other_result == [2]
    work_calls = [tid for tid, name in seen if name == "work"]
    assert work_calls == [threading.get_ident()], "only this thread's call of work() was intercepted"


def test_transformed_code_runs_and_is_cached():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_args=("x",))
    assert call_compiled(jit, f, 1) == 101
    assert call_compiled(jit, f, 1) == 101
    assert jit.misses == ["f"]
    assert f(1) == 2, "outside the hook the original code runs"
    s = tjc.stats()
    assert (s["hits"], s["misses"], s["compiles"]) == (1, 1, 1)
    (entry,) = tjc.cache_entries(f)
    assert entry.hits == 1 and not entry.evicted
    assert entry.code.co_consts != f.__code__.co_consts


def test_guard_failure_recompiles_and_explains():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_args=("x",))
    assert call_compiled(jit, f, 1) == 101
    assert call_compiled(jit, f, 2) == 102
    assert call_compiled(jit, f, 1) == 101
    assert call_compiled(jit, f, 2) == 102
    assert len(jit.misses) == 2
    assert jit.reasons[1] and "L['x']" in jit.reasons[1][0], jit.reasons
    assert len(tjc.cache_entries(f)) == 2
    assert tjc.stats()["hits"] == 2


def test_skip_and_run_original():
    calls = []

    def f(x):
        return x * 2

    def cb_run(frame, entries):
        calls.append("run")
        return runtime.RUN_ORIGINAL

    assert call_compiled(cb_run, f, 3) == 6
    assert call_compiled(cb_run, f, 3) == 6
    assert calls == ["run", "run"], "RUN_ORIGINAL asks again next time"
    assert runtime.frame_action(f) == "default"

    def cb_skip(frame, entries):
        calls.append("skip")
        return runtime.SKIP

    assert call_compiled(cb_skip, f, 3) == 6
    assert call_compiled(cb_skip, f, 3) == 6
    assert calls[2:] == ["skip"], "SKIP is remembered on the code"
    assert runtime.frame_action(f) == "skip"
    tjc.reset()
    assert runtime.frame_action(f) == "default"


def test_callback_errors_propagate_and_bad_returns_are_type_errors():
    def f(x):
        return x

    def raising(frame, entries):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        call_compiled(raising, f, 1)

    def garbage(frame, entries):
        return 42

    with pytest.raises(TypeError, match="expected GuardedCode, SKIP or RUN_ORIGINAL"):
        call_compiled(garbage, f, 1)
    assert tjc.cache_entries(f) == []


def test_incompatible_code_is_refused_when_created():
    def f(x, y):
        return x + y

    def other(a, b):
        return a - b

    def closure_maker():
        z = 1

        def g(x, y):
            return x + y + z
        return g

    errors = []

    def cb(frame, entries):
        for bad in (other.__code__, closure_maker().__code__):
            try:
                runtime.GuardedCode(bad, runtime.GuardManager())
            except ValueError as e:
                errors.append(str(e))
        return runtime.RUN_ORIGINAL

    assert call_compiled(cb, f, 1, 2) == 3
    assert len(errors) == 2
    assert "argument 0 is named 'a'" in errors[0]
    assert "co_freevars differ" in errors[1]
    with pytest.raises(TypeError, match="code must be a code object"):
        runtime.GuardedCode("nope", runtime.GuardManager())
    with pytest.raises(TypeError, match="root GuardManager"):
        runtime.GuardedCode(f.__code__, object())


def test_incompatible_code_made_outside_a_callback_fails_at_return():
    def f(x):
        return x

    def g(y):
        return y

    made = runtime.GuardedCode(g.__code__, runtime.GuardManager())
    with pytest.raises(ValueError, match="argument 0 is named 'y'"):
        call_compiled(lambda frame, entries: made, f, 1)


# --- calling conventions ---

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


# --- cache limit ---

def test_cache_limit_turns_run_only_with_one_warning():
    def f(x):
        return x + 1

    old = tjc.config.cache_limit
    tjc.config.cache_limit = 3
    try:
        jit = ConstantJit(old=1, new=100, guard_args=("x",))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for x in range(3):
                assert call_compiled(jit, f, x) == x + 100
            assert call_compiled(jit, f, 10) == 11, "past the limit the original runs"
            assert call_compiled(jit, f, 11) == 12
            assert call_compiled(jit, f, 1) == 101, "the cached entries keep serving"
        assert len(jit.misses) == 3
        messages = [str(w.message) for w in caught if "cache limit" in str(w.message)]
        assert len(messages) == 1, messages
        assert "'test_cache_limit_turns_run_only_with_one_warning.<locals>.f'" in messages[0]
        assert "test_runtime.py:" in messages[0]
        assert "L['x']" in messages[0]
        assert runtime.frame_action(f) == "run-only"
        assert tjc.stats()["cache_limit_hits"] == 1
    finally:
        tjc.config.cache_limit = old


# --- frames handed to the callback ---

def test_frame_attributes_and_lifetime():
    kept = []

    def outer():
        y = 7

        def f(a, b=2, *rest, **kw):
            return a + b + y
        return f

    f = outer()

    def cb(frame, entries):
        kept.append(frame)
        assert frame.valid
        assert frame.f_code is f.__code__
        assert frame.f_globals is f.__globals__
        assert frame.f_func is f
        assert frame.f_locals == {"a": 1, "b": 2, "rest": (3,), "kw": {"k": 4}, "y": 7}
        assert frame.closure is f.__closure__
        assert frame.f_back.f_code.co_name == "call_compiled"
        assert entries == []
        return runtime.RUN_ORIGINAL

    assert call_compiled(cb, f, 1, 2, 3, k=4) == 10
    (frame,) = kept
    assert not frame.valid
    with pytest.raises(RuntimeError, match="valid only while the eval-frame callback runs"):
        frame.f_code


# --- lifetimes ---

def _closure_fn():
    payload = object()

    def f(x):
        return payload is not None and x + 1
    return f, payload


@pytest.fixture
def free_vars_copied_on_entry():
    """Every intercepted frame gets its free-variable slots filled first, as FastToLocals does."""
    from torch_jit_cache import _C

    _C._set_testing_copy_free_vars_on_entry(True)
    yield
    _C._set_testing_copy_free_vars_on_entry(False)


@pytest.mark.parametrize("copied", [False, True], ids=["plain", "free-vars-copied-on-entry"])
def test_closure_refcounts_stable_over_10000_calls(copied, request):
    if copied:
        request.getfixturevalue("free_vars_copied_on_entry")
    f, payload = _closure_fn()
    cell = f.__closure__[0]

    def cb(frame, entries):
        g = runtime.GuardManager()
        g.local("x").type_match(int)
        return runtime.GuardedCode(replace_constant(frame.f_code, 1, 2), g)

    with runtime.eval_frame(cb):
        assert f(1) == 3
    before = (sys.getrefcount(payload), sys.getrefcount(cell))
    with runtime.eval_frame(cb):
        for i in range(10_000):
            assert f(i) == i + 2
    assert (sys.getrefcount(payload), sys.getrefcount(cell)) == before
    assert tjc.stats()["hits"] == 10_000


def test_refcounts_stable_when_free_vars_were_copied_on_every_miss():
    f, payload = _closure_fn()
    before = sys.getrefcount(payload)

    def cb(frame, entries):
        frame._copy_free_vars_for_test()
        return runtime.RUN_ORIGINAL

    with runtime.eval_frame(cb):
        for i in range(1000):
            assert f(i) == i + 1
    assert sys.getrefcount(payload) == before


def test_entry_evicted_when_guarded_object_dies():
    class Model:
        pass

    def f(m, x):
        return x + 1

    evicted_code = []

    def cb(frame, entries):
        g = runtime.GuardManager()
        g.local("m").id_match(frame.f_locals["m"])
        code = replace_constant(frame.f_code, 1, 9)
        return runtime.GuardedCode(code, g)

    m = Model()
    m_ref = weakref.ref(m)
    assert call_compiled(cb, f, m, 1) == 10
    (entry,) = tjc.cache_entries(f)
    code_ref = entry.code
    evicted_code.append(weakref.ref(lambda: None))
    assert not entry.evicted
    del m
    assert m_ref() is None, "the cache does not keep the guarded object alive"
    assert entry.evicted, "the entry died with the object"
    assert "deallocated" in entry.eviction_reason
    assert entry.code is None and entry.guards is None
    assert tjc.cache_entries(f) == []
    assert tjc.stats()["evictions"] == 1
    assert sys.getrefcount(code_ref) == 2, "only this test holds the transformed code now"


def test_cache_entry_wrappers_outlive_their_entries():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=3, guard_types=("x",))
    call_compiled(jit, f, 1)
    (entry,) = tjc.cache_entries(f)
    assert tjc.cache_entries(f)[0] is entry, "the same C++ entry gives the same Python object"
    assert "L['x']" in entry.guards
    tjc.reset()
    assert entry.evicted and entry.code is None and entry.guards is None
    assert entry.explain({"x": 1}).startswith("entry was evicted")
    assert "evicted" in repr(entry)


def test_entries_die_with_their_code_object():
    src = "def f(x):\n    return x + 1\n"
    ns = {}
    exec(src, ns)
    f = ns.pop("f")
    jit = ConstantJit(old=1, new=3, guard_types=("x",))
    call_compiled(jit, f, 1)
    (entry,) = tjc.cache_entries(f)
    code_ref = weakref.ref(entry.code)
    del f
    assert entry.evicted and "code object was freed" in entry.eviction_reason
    assert code_ref() is None


def test_cache_entries_rejects_other_objects():
    with pytest.raises(TypeError, match="function, method or code object"):
        tjc.cache_entries(42)


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


@pytest.mark.parametrize("failure", ["callback raises", "bad return", "incompatible code"])
def test_arguments_are_freed_on_every_error_path(failure):
    class Payload:
        pass

    def f(p):
        return 1

    def g(q):
        return 1

    def cb(frame, entries):
        if frame.f_code is not f.__code__:
            return runtime.RUN_ORIGINAL
        if failure == "callback raises":
            raise RuntimeError("callback failed")
        if failure == "bad return":
            return "garbage"
        return runtime.GuardedCode(g.__code__, runtime.GuardManager())

    p = Payload()
    freed = []
    weakref.finalize(p, freed.append, True)
    before = sys.getrefcount(p)
    gc.disable()
    try:
        with pytest.raises((RuntimeError, TypeError, ValueError)):
            call_compiled(cb, f, p)
        assert sys.getrefcount(p) == before, "the unevaluated frame released its argument"
        del p
        assert freed == [True], "freed without gc.collect()"
    finally:
        gc.enable()


def test_guard_trees_check_the_callbacks_frame():
    def f(x, y=2):
        return x

    out = []

    def cb(frame, entries):
        if frame.f_code is not f.__code__:
            return runtime.RUN_ORIGINAL
        g = runtime.GuardManager()
        g.local("x").equals_match(3)
        g.local("y").equals_match(2)
        out.append((g.check(frame), g.explain(frame)))
        kept.append(frame)
        return runtime.RUN_ORIGINAL

    kept = []
    assert call_compiled(cb, f, 4) == 4
    assert out == [(False, "L['x'] == 3 failed: got 4")]
    with pytest.raises(RuntimeError, match="valid only while"):
        runtime.GuardManager().check(kept[0])


def test_per_code_cache_limit_overrides_the_config():
    def f(x):
        return x + 1

    runtime.set_cache_limit(f, 2)
    try:
        jit = ConstantJit(old=1, new=100, guard_args=("x",))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            results = [call_compiled(jit, f, x) for x in range(4)]
        assert results == [100, 101, 3, 4]
        assert len(tjc.cache_entries(f)) == 2
        assert any("cache limit (2 entries)" in str(w.message) for w in caught)
        with pytest.raises(ValueError):
            runtime.set_cache_limit(f, -1)
    finally:
        runtime.set_cache_limit(f, 0)


def test_compiled_function_type_installs_the_callback_for_the_call_only():
    from torch_jit_cache import _C

    def f(x):
        return x + 1

    seen = []

    def cb(frame, entries):
        seen.append(frame.f_code.co_name)
        return runtime.RUN_ORIGINAL

    c = _C.CompiledFunction(f, cb)
    assert c(1) == 2 and seen == ["f"]
    assert not runtime.hook_installed(), "restored after the call"

    def boom(x):
        raise KeyError(x)

    with pytest.raises(KeyError):
        _C.CompiledFunction(boom, cb)(3)
    assert not runtime.hook_installed(), "restored after an exception"

    class A:
        m = _C.CompiledFunction(lambda self, y: y * 2, cb)

    assert A().m(3) == 6, "binds as a method"
    with pytest.raises(TypeError, match="must be callable"):
        _C.CompiledFunction(1, cb)
    ref = weakref.ref(c)
    c.__dict__["cycle"] = c  # a cycle through the instance dict is collected
    del c
    gc.collect()
    assert ref() is None


def test_keyboard_interrupt_inside_a_guard_is_not_swallowed():
    class Cfg:
        def __init__(self):
            self.armed = False

        @property
        def k(self):
            if self.armed:
                raise KeyboardInterrupt  # as if SIGINT arrived while the guard ran
            return 1

    def f(cfg):
        return 1

    def cb(frame, entries):
        if frame.f_code is not f.__code__:
            return runtime.RUN_ORIGINAL
        g = runtime.GuardManager()
        g.local("cfg").attr("k").equals_match(1)
        return runtime.GuardedCode(frame.f_code, g)

    cfg = Cfg()
    assert call_compiled(cb, f, cfg) == 1
    cfg.armed = True
    with pytest.raises(KeyboardInterrupt):
        call_compiled(cb, f, cfg)
        for _ in range(1000):  # the interrupt is delivered at the interpreter's next check
            pass
    cfg.armed = False
    assert call_compiled(cb, f, cfg) == 1, "the runtime keeps working"


def test_a_kept_frame_handle_does_not_keep_the_callers_frame_alive():
    class Payload:
        pass

    def f(x):
        return x

    kept = []

    def cb(frame, entries):
        if frame.f_code is f.__code__:
            assert frame.f_back.f_code.co_name == "caller"
            kept.append(frame)
        return runtime.RUN_ORIGINAL

    def caller(payload, callback):
        with runtime.eval_frame(callback):
            return f(1)

    p = Payload()
    freed = []
    weakref.finalize(p, freed.append, True)
    assert caller(p, cb) == 1 and len(kept) == 1
    del p
    assert freed == [True], "the handle dropped the caller's frame (and its locals) when the callback returned"
