"""The guard-complete hook (csrc/runtime/guard_complete_hook.h): asked after each lookup of a code
that has entries, it can turn a hit into a miss (guard collectives build on it). When it is asked
and with what, hits it refuses recompiling (or running the original code at the cache limit), None
disabling it, its errors reaching the caller, and the runtime releasing it.

Torch-free: runs on 3.11, 3.12 and 3.13.
"""
import os
import pathlib
import subprocess
import sys
import textwrap
import warnings
import weakref

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import ConstantJit, call_compiled


pytestmark = pytest.mark.usefixtures("fresh_runtime")

ROOT = pathlib.Path(__file__).resolve().parents[2]   # the package the subprocess imports


class Recorder:
    """A hook that records what it is asked and answers `answer` (a bool, or a function of `hit`)."""

    def __init__(self, answer=None):
        self.seen = []
        self.answer = answer

    def __call__(self, hit):
        self.seen.append(hit)
        if self.answer is None:
            return hit
        return self.answer(hit) if callable(self.answer) else self.answer


def test_set_returns_the_previous_hook_and_refuses_non_callables():
    first, second = Recorder(), Recorder()
    assert runtime.set_guard_complete_hook(first) is None
    assert runtime.set_guard_complete_hook(second) is first
    assert runtime.set_guard_complete_hook(None) is second
    assert runtime.set_guard_complete_hook(None) is None
    with pytest.raises(TypeError, match="callable or None"):
        runtime.set_guard_complete_hook(42)


def test_hook_is_asked_after_lookups_of_codes_with_entries_only():
    def f(x):
        return x + 1

    def skipped(x):
        return x + 1

    runtime.set_skip(skipped)
    hook = Recorder()
    runtime.set_guard_complete_hook(hook)
    jit = ConstantJit(old=1, new=100, guard_args=("x",))
    assert call_compiled(jit, f, 1) == 101        # first call: no entry yet, not asked
    assert hook.seen == []
    assert call_compiled(jit, f, 1) == 101        # a hit
    assert call_compiled(jit, f, 2) == 102        # a miss: asked, then compiled
    assert call_compiled(jit, skipped, 1) == 2    # a skipped code: never asked
    assert call_compiled(jit, skipped, 1) == 2
    assert hook.seen == [True, False]
    assert jit.misses == ["f", "f"]
    s = runtime.stats()
    assert (s["hits"], s["misses"], s["compiles"], s["forced_misses"]) == (1, 2, 2, 0)


def test_refused_hits_recompile_like_misses():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_args=("x",))
    assert call_compiled(jit, f, 1) == 101
    hook = Recorder(answer=False)                 # another rank missed, every time
    runtime.set_guard_complete_hook(hook)
    assert call_compiled(jit, f, 1) == 101
    assert call_compiled(jit, f, 1) == 101
    assert hook.seen == [True, True]
    assert jit.misses == ["f", "f", "f"], "each refused hit recompiled"
    assert len(runtime.cache_entries(f)) == 3
    assert jit.reasons[1] == [None], "the entry's guards passed: the hook alone made it a miss"
    s = runtime.stats()
    assert (s["hits"], s["misses"], s["compiles"], s["forced_misses"]) == (0, 3, 3, 2)

    runtime.set_guard_complete_hook(None)         # None disables: the hits run again
    assert call_compiled(jit, f, 1) == 101
    assert len(jit.misses) == 3 and runtime.stats()["hits"] == 1
    assert hook.seen == [True, True]


def test_a_refused_hit_at_the_cache_limit_runs_the_original_code():
    def f(x):
        return x + 1

    runtime.set_cache_limit(f, 1)
    jit = ConstantJit(old=1, new=100, guard_args=("x",))
    assert call_compiled(jit, f, 1) == 101
    runtime.set_guard_complete_hook(Recorder(answer=False))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert call_compiled(jit, f, 1) == 2, "at the limit a miss runs the original code"
        assert call_compiled(jit, f, 1) == 2
    assert len([w for w in caught if "cache limit" in str(w.message)]) == 1, "warned once at the limit"
    assert jit.misses == ["f"] and len(runtime.cache_entries(f)) == 1
    runtime.set_guard_complete_hook(Recorder(answer=True))
    assert call_compiled(jit, f, 1) == 101, "the entry still serves the hits the hook lets run"


def test_a_miss_stays_a_miss_whatever_the_hook_answers():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_args=("x",))
    assert call_compiled(jit, f, 1) == 101
    hook = Recorder(answer=True)
    runtime.set_guard_complete_hook(hook)
    assert call_compiled(jit, f, 2) == 102
    assert hook.seen == [False] and jit.misses == ["f", "f"]


def test_hook_errors_reach_the_caller_and_the_runtime_recovers():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_args=("x",))
    assert call_compiled(jit, f, 1) == 101

    def raising(hit):
        raise ValueError("the collective timed out")

    runtime.set_guard_complete_hook(raising)
    with pytest.raises(ValueError, match="the collective timed out"):
        call_compiled(jit, f, 1)
    runtime.set_guard_complete_hook(lambda hit: None)
    with pytest.raises(TypeError, match="guard-complete hook must return True or False, got NoneType"):
        call_compiled(jit, f, 1)
    runtime.set_guard_complete_hook(None)
    assert call_compiled(jit, f, 1) == 101
    assert jit.misses == ["f"], "a failed hook compiled nothing"


def test_a_hook_that_unsets_itself_is_safe():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_args=("x",))
    assert call_compiled(jit, f, 1) == 101

    class Once:
        def __call__(self, hit):
            runtime.set_guard_complete_hook(None)   # drops the runtime's reference during the call
            return hit

    ref = weakref.ref(hook := Once())
    runtime.set_guard_complete_hook(hook)
    del hook
    assert call_compiled(jit, f, 1) == 101
    assert ref() is None
    assert runtime.set_guard_complete_hook(None) is None


@pytest.mark.parametrize("release", ["set_none", "reset"])
def test_hook_is_released(release):
    hook = Recorder()
    ref = weakref.ref(hook)
    runtime.set_guard_complete_hook(hook)
    del hook
    assert ref() is not None, "the runtime holds the hook"
    if release == "set_none":
        assert runtime.set_guard_complete_hook(None) is ref()
    else:
        tjc.reset()
    assert ref() is None


def test_hook_is_released_before_the_interpreter_exits():
    # Module globals outlive atexit; a hook only the runtime holds is freed by its atexit callback.
    script = textwrap.dedent("""
        from torch_jit_cache import runtime

        class Hook:
            def __call__(self, hit):
                return hit

            def __del__(self):
                print("hook freed", flush=True)

        runtime.set_guard_complete_hook(Hook())
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "hook freed" in out.stdout
