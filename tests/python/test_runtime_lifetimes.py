"""What the C++ runtime keeps alive: closure and cell refcounts stable over many calls (free
variables copied on entry or not), an entry evicted when an object it guards dies or its code object
is freed, entry wrappers that outlive their entries, arguments freed on every error path of the
callback without the cycle collector, and a kept frame handle that does not keep its caller's frame.
Torch-free: runs on 3.11, 3.12 and 3.13.
"""
import gc
import sys
import weakref

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import ConstantJit, call_compiled, replace_constant


pytestmark = pytest.mark.usefixtures("fresh_runtime")


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
