"""Faults and bad input: the runtime under errors, interrupts, recursion, resets and races.

Also: every error path frees the caller's arguments without the cycle collector, and introspection
wrappers that outlive what they describe fail cleanly instead of reading freed memory.

Torch-free (3.11, 3.12, 3.13). Faults in compiling, with torch: test_faults_compile.py.
"""
import gc
import sys
import threading
import time

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import ConstantJit, call_compiled, outcome, replace_constant, wait_until, watch

pytestmark = pytest.mark.usefixtures("no_hook_left")


class Payload:
    """A caller's argument whose death we watch."""


class RaisingEq:
    def __eq__(self, other):
        raise ValueError("eq raised")

    __hash__ = object.__hash__


class RaisingProperty:
    @property
    def attr(self):
        raise RuntimeError("property raised")


class HasAttr:
    attr = 1


def marked(code):
    """A transformed copy of code that computes the same thing (one extra, unused constant)."""
    return code.replace(co_consts=code.co_consts + ("<tjc test marker>",))


class SameJit:
    """Caches a behaviour-preserving copy of every frame of `names`, guarded on argument types."""

    def __init__(self, *names):
        self.names = names
        self.misses = []

    def __call__(self, frame, entries):
        code = frame.f_code
        if code.co_name not in self.names:
            return runtime.RUN_ORIGINAL
        self.misses.append(code.co_name)
        g = runtime.GuardManager()
        for name in code.co_varnames[:code.co_argcount]:
            g.local(name).type_match(type(frame.f_locals[name]))
        return runtime.GuardedCode(marked(code), g)


def assert_runtime_usable():
    """A fresh function compiles, caches and hits after whatever happened before."""
    def probe(x):
        return x + 1

    jit = ConstantJit(old=1, new=50, guard_types=("x",))
    assert call_compiled(jit, probe, 1) == 51
    assert call_compiled(jit, probe, 2) == 52
    assert jit.misses == ["probe"], "the second call hit the cache"
    assert runtime.set_eval_frame(None) is None
    assert not runtime.hook_installed()
    assert sys.exc_info() == (None, None, None)


# --- error paths free the caller's arguments without gc.collect() ---

def _user_raises(p, x):
    if x == 1:
        raise ValueError("user code raised")
    return 1


def _keyboard_interrupt(p, x):
    if x == 1:
        raise KeyboardInterrupt
    return 1


def _plain(p, x):
    return 1


ERROR_PATHS = {
    # name: (function, jit-guard builder, value for the first call, value for the second call,
    #        expected outcome type of the second call)
    "user code raises": (_user_raises, "type", 0, 1, ValueError),
    "KeyboardInterrupt in user code": (_keyboard_interrupt, "type", 0, 1, KeyboardInterrupt),
    "guard __eq__ raises": (_plain, "equals", (1,), lambda: (RaisingEq(),), "ok"),
    "guard property raises": (_plain, "attr", HasAttr(), RaisingProperty, "ok"),
    "callback raises": (_plain, "raise-on-second", 0, 1, RuntimeError),
}


@pytest.mark.parametrize("path", list(ERROR_PATHS))
def test_every_error_path_frees_the_arguments_without_gc(path, no_gc):
    fn, guard, first, second, expected = ERROR_PATHS[path]
    misses = []

    def cb(frame, entries):
        if frame.f_code is not fn.__code__:
            return runtime.RUN_ORIGINAL
        misses.append(type(frame.f_locals["x"]).__name__)
        if guard == "raise-on-second" and len(misses) == 2:
            raise RuntimeError("the JIT failed")
        g = runtime.GuardManager()
        g.local("p").type_match(Payload)
        if guard == "equals" and len(misses) == 1:
            g.local("x").equals_match(first)
        elif guard == "attr" and len(misses) == 1:
            g.local("x").attr("attr").equals_match(1)
        elif guard in ("type", "raise-on-second"):
            g.local("x").type_match(int)
            g.local("x").equals_match(frame.f_locals["x"])
        return runtime.GuardedCode(marked(frame.f_code), g)

    p = Payload()
    freed = watch(p)
    assert call_compiled(cb, fn, p, first) == 1
    value = second() if callable(second) else second
    target = value[0] if type(value) is tuple else value
    value_freed = watch(target) if type(value) is not int else None
    del target
    before = sys.getrefcount(p)
    kind, _ = outcome(call_compiled, cb, fn, p, value)
    assert kind == expected
    assert sys.exc_info() == (None, None, None), "no exception left set"
    assert sys.getrefcount(p) == before, "the failed call released its argument"
    del p
    assert freed == [True], f"{path}: the argument was freed without gc.collect()"
    if value_freed is not None:
        del value
        assert value_freed == [True], f"{path}: the failing value was freed too"
    assert_runtime_usable()


def test_guard_eq_raising_is_a_failed_guard_and_the_value_is_freed(no_gc):
    def f(x):
        return 1

    jit = ConstantJit(old=1, new=7, guard_args=("x",))
    assert call_compiled(jit, f, (1,)) == 7
    bad = (RaisingEq(),)
    inner = watch(bad[0])
    jit_types = ConstantJit(old=1, new=8, guard_types=("x",))
    # the tuple guard's == raises: the entry does not match, the callback is asked again
    assert call_compiled(jit_types, f, bad) == 8
    assert jit_types.reasons == [["L['x'] == (1,) raised ValueError: eq raised"]]
    assert sys.exc_info() == (None, None, None)
    # the new entry (type only) hits even though the old one keeps raising
    assert call_compiled(jit_types, f, bad) == 8
    del bad
    assert inner == [True]
    assert len(tjc.cache_entries(f)) == 2


# --- faults ---

def test_keyboard_interrupt_from_compiled_code_propagates_and_the_runtime_stays_usable():
    def f(x):
        if x < 0:
            raise KeyboardInterrupt("stop")
        return x + 1

    jit = ConstantJit(old=1, new=10, guard_types=("x",))
    assert call_compiled(jit, f, 1) == 11
    with pytest.raises(KeyboardInterrupt, match="stop"):
        call_compiled(jit, f, -1)
    assert runtime.set_eval_frame(None) is None, "eval_frame restored the callback"
    assert call_compiled(jit, f, 2) == 12
    assert jit.misses == ["f"], "the cached entry survived the interrupt"
    (entry,) = tjc.cache_entries(f)
    assert entry.hits == 2 and not entry.evicted
    assert_runtime_usable()


def test_recursion_past_the_limit_raises_recursion_error_and_the_runtime_keeps_working():
    def down(n):
        return down(n + 1) + 1

    jit = SameJit("down")
    old_limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    try:
        for _ in range(3):
            kind, msg = outcome(call_compiled, jit, down, 0)
            assert kind is RecursionError, (kind, msg)
    finally:
        sys.setrecursionlimit(old_limit)
    assert jit.misses == ["down"], "one entry served every level"
    assert len(tjc.cache_entries(down)) == 1

    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    jit2 = SameJit("fact")
    assert call_compiled(jit2, fact, 20) == 2432902008176640000
    assert_runtime_usable()


def test_recursion_error_inside_the_callback_is_an_error_not_a_crash():
    def f(x):
        return x + 1

    def cb(frame, entries):
        def deep(n):
            return deep(n + 1)
        deep(0)

    kind, msg = outcome(call_compiled, cb, f, 1)
    assert kind is RecursionError
    assert_runtime_usable()


def test_reset_from_inside_nested_compiled_frames():
    def f(n):
        if n == 3:
            tjc.reset()
        return 1 if n == 0 else n * f(n - 1)

    jit = SameJit("f")
    assert call_compiled(jit, f, 5) == 120
    # the entry was dropped while five of its frames ran; levels below 3 missed again
    assert jit.misses == ["f", "f"]
    assert call_compiled(jit, f, 2) == 2
    assert len(tjc.cache_entries(f)) == 1
    assert_runtime_usable()


def test_reset_from_another_thread_while_compiled_frames_run():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_types=("x",))
    stop = threading.Event()
    errors, results = [], []
    resets = [0]

    def runner():
        try:
            with runtime.eval_frame(jit):
                out = [f(i) for i in range(20_000)]
            results.append(out == [i + 100 for i in range(20_000)])
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def resetter():
        while not stop.is_set():
            tjc.reset()
            resets[0] += 1
            time.sleep(0)

    threads = [threading.Thread(target=runner) for _ in range(2)]
    r = threading.Thread(target=resetter)
    r.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    r.join()
    assert errors == [] and results == [True, True]
    assert resets[0] > 0
    assert 1 <= len(jit.misses) <= 20_000 * 2
    assert_runtime_usable()


def test_reset_from_another_thread_while_a_compiled_frame_is_parked_inside():
    entered, release = threading.Event(), threading.Event()

    def f(x):
        entered.set()
        assert release.wait(10)
        return x + 1

    jit = ConstantJit(old=1, new=100, guard_types=("x",))
    release.set()
    assert call_compiled(jit, f, 0) == 100  # cached; the next call runs the cached code
    entered.clear()
    release.clear()
    (entry,) = tjc.cache_entries(f)
    out, errors = [], []

    def worker():
        try:
            out.append(call_compiled(jit, f, 5))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    t = threading.Thread(target=worker)
    t.start()
    assert entered.wait(10), "the worker is inside the cached code"
    tjc.reset()  # the running entry is unlinked; its payload outlives the run
    assert entry.evicted and tjc.cache_entries(f) == []
    release.set()
    t.join()
    assert errors == [] and out == [105], "the parked frame finished on its (evicted) code"
    assert entry.code is None
    release.set()
    assert call_compiled(jit, f, 6) == 106
    assert jit.misses == ["f", "f"]
    assert_runtime_usable()


def test_two_threads_missing_the_same_cache_at_once():
    # One thread compiles; the other waits (without the GIL) and uses its entry.
    def f(p, x):
        return x + 1

    inside = []
    release = threading.Event()

    def cb(frame, entries):
        if frame.f_code is not f.__code__:
            return runtime.RUN_ORIGINAL
        inside.append(threading.get_ident())
        release.wait(10)  # until the other thread waits for this compile (or, before, compiled too)
        g = runtime.GuardManager()
        g.local("x").type_match(int)
        g.local("p").type_match(Payload)
        return runtime.GuardedCode(replace_constant(frame.f_code, 1, 1000), g)

    p = Payload()
    freed = watch(p)
    before = sys.getrefcount(p)
    out, errors = {}, []

    def worker(k):
        try:
            with runtime.eval_frame(cb):
                out[k] = [f(p, k), f(p, k + 10)]
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    threads[0].start()
    assert wait_until(lambda: len(inside) == 1)
    threads[1].start()
    assert wait_until(lambda: runtime.stats().get("compile_waits", 0) == 1 or len(inside) == 2)
    release.set()
    for t in threads:
        t.join()
    assert errors == []
    assert out == {0: [1000, 1010], 1: [1001, 1011]}
    assert len(inside) == 1, "the waiting thread used the first thread's entry instead of compiling"
    entries = tjc.cache_entries(f)
    assert len(entries) == 1
    assert entries[0].hits == 3
    assert sys.getrefcount(p) == before
    tjc.reset()
    assert all(e.evicted for e in entries)
    del entries, p
    gc.collect()
    assert freed == [True]
    assert_runtime_usable()


# --- wrappers that outlive what they describe ---

def test_stale_cache_entry_and_guard_manager_wrappers_never_revive():
    class Obj:
        pass

    def f(o, x):
        return x + 1

    def cb(frame, entries):
        g = runtime.GuardManager()
        g.local("o").id_match(frame.f_locals["o"])
        g.local("x").type_match(int)
        return runtime.GuardedCode(replace_constant(frame.f_code, 1, 5), g)

    old_entries, old_roots, old_nodes, old_ids = [], [], [], set()
    reused = 0
    for i in range(300):
        o = Obj()
        reused += id(o) in old_ids
        old_ids.add(id(o))
        assert call_compiled(cb, f, o, i) == i + 5
        (entry,) = tjc.cache_entries(f)
        assert tjc.cache_entries(f)[0] is entry, "one C++ entry, one Python object"
        root = entry.guard_manager
        assert entry.guard_manager is root
        assert all(entry is not e for e in old_entries), "a new entry never reuses a stale wrapper"
        assert all(root is not r for r in old_roots)
        assert not entry.evicted and entry.code is not None and not root.invalidated
        old_entries.append(entry)
        old_roots.append(root)
        old_nodes.append(root.local("o"))
        del o  # the guarded object dies: its entry is evicted at once
        assert entry.evicted and tjc.cache_entries(f) == []
    assert reused > 0, "addresses were reused (otherwise this test proves less)"
    for entry, root, node in zip(old_entries, old_roots, old_nodes):
        assert entry.evicted
        assert entry.eviction_reason == "a guarded object was deallocated"
        assert entry.code is None and entry.guards is None and entry.guard_manager is None
        assert entry.explain({"o": None, "x": 1}).startswith("entry was evicted")
        assert "evicted" in repr(entry)
        assert root.invalidated
        assert "invalidated: L['o'] died" in str(root)
        assert not root.check({"o": object(), "x": 1})
        assert root.explain({"o": object(), "x": 1}) == (
            "L['o']: the guarded object is gone (it was deallocated)")
        assert node.source == "L['o']" and node.num_guards() == 1
        with pytest.raises(RuntimeError, match="frozen"):
            node.not_none()
    assert tjc.stats()["evictions"] == 300
    # a live entry made after all that has a fresh, correct wrapper
    keep = Obj()
    assert call_compiled(cb, f, keep, 1) == 6
    (live,) = tjc.cache_entries(f)
    assert not live.evicted and live.code is not None and live.hits == 0
    assert all(live is not e for e in old_entries)
    assert live.guard_manager.check({"o": keep, "x": 3})


def test_wrappers_dropped_before_eviction_give_fresh_wrappers_after():
    def f(x):
        return x + 1

    jit = ConstantJit(old=1, new=3, guard_types=("x",))
    states = []
    for i in range(200):
        call_compiled(jit, f, i)
        (entry,) = tjc.cache_entries(f)
        states.append((entry.evicted, entry.hits))
        del entry
        tjc.reset()
    assert states == [(False, 0)] * 200
    assert tjc.cache_entries(f) == []


def test_entry_wrapper_outlives_its_code_object():
    ns = {}
    exec("def f(x):\n    return x + 1\n", ns)
    f = ns.pop("f")
    jit = ConstantJit(old=1, new=3, guard_types=("x",))
    call_compiled(jit, f, 1)
    (entry,) = tjc.cache_entries(f)
    root = entry.guard_manager
    node = root.local("x")
    del f
    gc.collect()
    assert entry.evicted and "code object was freed" in entry.eviction_reason
    assert entry.guard_manager is None and entry.code is None
    # the root wrapper still owns its tree: it answers and never crashes
    assert root.check({"x": 1}) and not root.check({"x": "s"})
    assert node.num_guards() == 1
    del entry, root
    assert node.source == "L['x']"
