"""The C++ runtime through its Python face: hook installation and the callback contract (errors, bad
returns, incompatible code), the cache limit (the config's and per code), the frames handed to the
callback, guard trees checking that frame, CompiledFunction, a KeyboardInterrupt inside a guard.
Every kind of call: test_runtime_calls.py; what the runtime keeps alive: test_runtime_lifetimes.py.

Torch-free: runs on 3.11, 3.12 and 3.13.
"""
import gc
import threading
import warnings
import weakref

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import ConstantJit, call_compiled


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
