"""Two threads that miss the same code for the same owner at once compile it
once; the others wait without holding the GIL, then run its entry. A compile that raises wakes
them (they compile themselves); a thread never waits for its own compile.

Deterministic: the compiling callback (or backend) blocks on an Event until the second thread is
seen waiting (`stats()["compile_waits"]`) or, without the fix, inside the callback itself.
"""
import os
import subprocess
import sys
import threading

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import call_compiled, replace_constant, wait_until


@pytest.fixture(autouse=True)
def fresh():
    tjc.reset()
    yield
    assert runtime.set_eval_frame(None) is None
    tjc.reset()


def waits():
    return runtime.stats().get("compile_waits", 0)


class BlockingJit:
    """Compiles `f` (constant 1 -> 100, guarded on type(x)); the first compile blocks on `release`
    and raises when `fail_first`."""

    def __init__(self, target, fail_first=False):
        self.target = target
        self.fail_first = fail_first
        self.release = threading.Event()
        self.calls = []
        self.cache_owner = runtime.CacheOwner()

    def __call__(self, frame, entries):
        if frame.f_code is not self.target.__code__:
            return runtime.RUN_ORIGINAL
        self.calls.append(threading.get_ident())
        if len(self.calls) == 1:
            self.release.wait(10)
            if self.fail_first:
                raise RuntimeError("compile failed")
        g = runtime.GuardManager()
        g.local("x").type_match(int)
        return runtime.GuardedCode(replace_constant(frame.f_code, 1, 100), g)


def run_two(jit, f):
    out = {}

    def worker(k):
        try:
            out[k] = ("ok", call_compiled(jit, f, k))
        except Exception as e:  # noqa: BLE001 - reported in `out`
            out[k] = (type(e).__name__, str(e))

    first = threading.Thread(target=worker, args=(0,))
    second = threading.Thread(target=worker, args=(1,))
    first.start()
    assert wait_until(lambda: len(jit.calls) == 1)
    second.start()
    assert wait_until(lambda: waits() == 1 or len(jit.calls) == 2), "the second thread neither waited nor compiled"
    jit.release.set()
    first.join(10)
    second.join(10)
    assert not first.is_alive() and not second.is_alive(), "deadlock"
    return out


def test_the_second_thread_waits_for_the_first_compile_and_uses_it():
    def f(x):
        return x + 1

    jit = BlockingJit(f)
    out = run_two(jit, f)
    assert out == {0: ("ok", 100), 1: ("ok", 101)}
    assert len(jit.calls) == 1, "compiled once"
    assert waits() == 1
    (entry,) = runtime.cache_entries(f)
    assert entry.hits == 1, "the waiting thread ran the first thread's entry"


def test_a_compile_that_raises_wakes_the_waiter_which_compiles_itself():
    def f(x):
        return x + 1

    jit = BlockingJit(f, fail_first=True)
    out = run_two(jit, f)
    assert out[0] == ("RuntimeError", "compile failed")
    assert out[1] == ("ok", 101)
    assert waits() == 1, "the second thread waited for the first compile"
    assert len(jit.calls) == 2
    assert len(runtime.cache_entries(f)) == 1


def test_recursion_into_the_code_being_compiled_does_not_wait_for_itself():
    # The compiled entry runs after the compile ended: a recursive call hits it or compiles anew,
    # and never waits for its own thread.
    def f(x):
        return x + 1 if x <= 0 else f(x - 1) + 1

    calls = []

    def cb(frame, entries):
        if frame.f_code is not f.__code__:
            return runtime.RUN_ORIGINAL
        calls.append(frame.f_locals["x"])
        g = runtime.GuardManager()
        g.local("x").equals_match(frame.f_locals["x"])
        return runtime.GuardedCode(frame.f_code, g)

    assert call_compiled(cb, f, 3) == 4
    assert waits() == 0
    assert calls == [3, 2, 1, 0]


def test_other_threads_do_not_wait_for_a_compiled_entry_to_finish_running():
    running = threading.Event()
    release = threading.Event()

    def f(x):
        if x == 0:
            running.set()
            release.wait(10)
        return x + 1

    jit = BlockingJit(f)
    jit.release.set()  # the compile itself does not block
    first = threading.Thread(target=call_compiled, args=(jit, f, 0))
    first.start()
    assert running.wait(10)
    assert call_compiled(jit, f, 5) == 105, "the entry serves another thread while the first still runs it"
    assert waits() == 0
    release.set()
    first.join(10)
    assert len(jit.calls) == 1


@pytest.mark.torch
def test_two_threads_calling_one_compiled_function_compile_once():
    torch = pytest.importorskip("torch")

    def f(x):
        return torch.sin(x) * 2

    release = threading.Event()
    compiled = []

    def backend(gm, example_inputs):
        compiled.append(threading.get_ident())
        release.wait(10)
        return gm.forward

    opt = tjc.compile(f, backend=backend)
    x = torch.randn(5)
    out, errors = {}, []

    def worker(k):
        try:
            out[k] = opt(x)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    threads[0].start()
    assert wait_until(lambda: len(compiled) == 1)
    threads[1].start()
    assert wait_until(lambda: waits() == 1 or len(compiled) == 2)
    release.set()
    for t in threads:
        t.join(10)
    assert errors == []
    assert len(compiled) == 1, "the backend was called once"
    assert torch.allclose(out[0], f(x)) and torch.allclose(out[1], f(x))
    (entry,) = tjc.cache_entries(opt)
    assert entry.hits == 1


DAEMON_CHILD = '''
import threading, time
from torch_jit_cache import runtime

def spin():
    while True:
        time.sleep(0.0001)   # gives the GIL up and takes it back, again and again

def start():
    threading.Thread(target=spin, daemon=True).start()

with runtime.eval_frame(lambda frame, entries: runtime.RUN_ORIGINAL):
    start()   # the thread's frames are entered through the hook
print("done")
'''


def test_a_daemon_thread_started_under_the_hook_does_not_abort_the_exit():
    # CPython ends a daemon thread that wakes during finalization with pthread_exit, a forced
    # unwind through every C frame of the thread: the hook's frame on it was noexcept, and each run
    # aborted ("terminate called without an active exception", 10 of 10 before the fix).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", DAEMON_CHILD], env=env, capture_output=True, text=True,
                              timeout=120)
        assert (done.returncode, done.stdout.strip()) == (0, "done"), done.stderr[-2000:]
