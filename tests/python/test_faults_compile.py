"""Faults in compiling, with torch: a backend that raises at compile time or returns what cannot be
called runs the frame uncompiled (fallback_to_eager runs the traced graph instead), and every step
between a cache miss and a cached entry (trace, graph finishing, fx recompile, source rewriting,
backend, codegen, guards, the cache entry) fails into a logged fallback, a FullGraphError under
fullgraph, or a KeyboardInterrupt that is not swallowed; each frees the caller's arguments without
the cycle collector. The tests are marked `torch` and import it inside; the runtime's own faults:
test_faults.py.
"""
import sys

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import outcome, watch

pytestmark = pytest.mark.usefixtures("no_hook_left")


# --- torch: backends that fail ---

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.torch
def test_backend_raising_at_compile_time_runs_the_frame_uncompiled(caplog):
    torch = _torch()

    def bad_backend(gm, example_inputs):
        raise RuntimeError("backend exploded")

    def fn(x):
        return x * 2 + 1

    opt = tjc.compile(fn, backend=bad_backend)
    with caplog.at_level("WARNING", logger="torch_jit_cache"):
        for _ in range(2):  # the second call runs uncompiled too (nothing half-cached)
            kind, out = outcome(opt, torch.ones(3))
            assert kind == "ok" and torch.equal(out, torch.full((3,), 3.0)), (kind, out)
            assert sys.exc_info() == (None, None, None)
    assert any("backend 'test_backend_raising_at_compile_time_runs_the_frame_uncompiled.<locals>.bad_backend' "
               "failed: RuntimeError: backend exploded" in r.getMessage() for r in caplog.records)
    assert tjc.cache_entries(fn) == []
    y = torch.ones(3)
    assert torch.equal(tjc.compile(fn)(y), y * 2 + 1), "another compile still works"


@pytest.mark.torch
def test_backend_raising_at_compile_time_frees_arguments_without_gc(no_gc):
    torch = _torch()

    def bad_backend(gm, example_inputs):
        raise RuntimeError("backend exploded")

    def fn(x):
        return x * 2 + 1

    for fullgraph in (False, True):
        opt = tjc.compile(fn, backend=bad_backend, fullgraph=fullgraph)
        x = torch.ones(3)
        freed = watch(x)
        kind, msg = outcome(opt, x)
        if fullgraph:
            assert kind.__name__ == "FullGraphError" and "backend exploded" in msg, (kind, msg)
        else:
            assert kind == "ok", (kind, msg)
        assert sys.exc_info() == (None, None, None)
        del x, msg
        assert freed == [True], "the argument was freed without gc.collect()"
        tjc.reset()
    y = torch.ones(3)
    assert torch.equal(tjc.compile(fn)(y), y * 2 + 1), "another compile still works"


@pytest.mark.torch
def test_backend_returning_a_non_callable_runs_the_frame_uncompiled(caplog):
    torch = _torch()

    def fn(x):
        return x + 1

    opt = tjc.compile(fn, backend=lambda gm, example_inputs: 42)
    with caplog.at_level("WARNING", logger="torch_jit_cache"):
        kind, out = outcome(opt, torch.ones(2))
    assert kind == "ok" and torch.equal(out, torch.full((2,), 2.0)), (kind, out)
    assert any("returned int, not a callable" in r.getMessage() for r in caplog.records)
    assert tjc.cache_entries(fn) == []
    assert torch.equal(tjc.compile(fn)(torch.ones(2)), torch.full((2,), 2.0))


@pytest.mark.torch
def test_fallback_to_eager_runs_the_traced_graph_when_the_backend_fails():
    torch = _torch()
    from torch_jit_cache import backends, config

    def bad_backend(gm, example_inputs):
        raise RuntimeError("backend exploded")

    def fn(x):
        return x * 2 + 1

    tjc.reset()   # the body is repeated under pytest --refleaks: start without fn's entry
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(config, "fallback_to_eager", True)
        mp.setattr(backends, "_WARNED_FALLBACK", set())
        opt = tjc.compile(fn, backend=bad_backend)
        with pytest.warns(RuntimeWarning, match="running the graph eagerly"):
            assert torch.equal(opt(torch.ones(3)), torch.full((3,), 3.0))
        assert len(tjc.cache_entries(fn)) == 1, "the graph (run by gm.forward) is cached"
        assert torch.equal(opt(torch.ones(3)), torch.full((3,), 3.0))
        assert tjc.cache_entries(fn)[0].hits == 1


# --- torch: every step between a cache miss and a cached entry fails into a logged fallback ---

def _fresh_function(tmp_path, name):
    """A new `fn(x) = x * 2 + 1` with its own code object (and file), so no skip mark, cache
    entry or once-only warning of another test applies to it."""
    path = tmp_path / f"{name}.py"
    path.write_text("def fn(x):\n    return x * 2 + 1\n")
    ns = {}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return ns["fn"]


def _inject(monkeypatch, step, exc):
    """Make `step` of FrameCompiler raise `exc` (returns the backend to compile with)."""
    from torch_jit_cache.pipeline import codegen, convert_frame
    from torch_jit_cache.guard import fast_sources
    from torch_jit_cache import tracer as tracer_pkg
    from torch_jit_cache.tracer import output_graph

    def boom(*args, **kwargs):
        raise type(exc)(*exc.args)   # a fresh exception each time, as real failures are

    if step == "trace":
        monkeypatch.setattr(tracer_pkg, "trace", boom)
    elif step == "graph finishing":
        monkeypatch.setattr(output_graph.OutputGraph, "finish", boom)
    elif step == "fx recompile":   # GraphModule() and the backends' tuple rewrite both call it
        import torch
        monkeypatch.setattr(torch.fx.GraphModule, "recompile", boom)
    elif step == "source rewriting":
        monkeypatch.setattr(fast_sources.SourceRewriter, "rewrite", boom)
    elif step == "backend compile":
        return lambda gm, example_inputs: boom()
    elif step == "backend result":
        return lambda gm, example_inputs: 42 if not isinstance(exc, KeyboardInterrupt) else boom()
    elif step == "codegen":
        monkeypatch.setattr(codegen, "build_transformed_code", boom)
    elif step == "guard building":
        monkeypatch.setattr(convert_frame, "build_guards", boom)
    elif step == "guard binding":
        real = convert_frame.build_guards

        def unbindable(specs, **kwargs):
            if isinstance(exc, KeyboardInterrupt):
                boom()
            root = real(specs, **kwargs)
            root.local("not_an_argument").not_none()   # bind() refuses it (C++)
            return root
        monkeypatch.setattr(convert_frame, "build_guards", unbindable)
    elif step == "cache entry":
        if isinstance(exc, KeyboardInterrupt):
            monkeypatch.setattr(runtime, "GuardedCode", boom)
        else:   # code the runtime refuses to run in the original's place (other argument names)
            monkeypatch.setattr(codegen, "build_transformed_code", lambda *a, **k: (lambda y: y).__code__)
    else:
        raise AssertionError(step)
    return "eager"


FAULT_STEPS = ["trace", "graph finishing", "fx recompile", "source rewriting", "backend compile", "backend result",
               "codegen", "guard building", "guard binding", "cache entry"]


@pytest.mark.torch
@pytest.mark.parametrize("step", FAULT_STEPS)
def test_a_failing_compile_step_runs_the_frame_uncompiled_and_logs_why(step, tmp_path, caplog, no_gc):
    torch = _torch()
    fn = _fresh_function(tmp_path, "fallback")
    x = torch.ones(3)
    freed = watch(x)
    # The patch is undone when each run of the body ends (pytest --refleaks repeats the body).
    with pytest.MonkeyPatch.context() as mp, caplog.at_level("WARNING", logger="torch_jit_cache"):
        backend = _inject(mp, step, RuntimeError(f"injected failure in {step}"))
        opt = tjc.compile(fn, backend=backend)
        kind, out = outcome(opt, x)
        assert kind == "ok", (step, kind, out)
        assert torch.equal(out, x * 2 + 1), "the eager result"
        assert torch.equal(opt(x), x * 2 + 1), "and again (the frame runs uncompiled)"
    logged = [r.getMessage() for r in caplog.records if "uncompiled" in r.getMessage()]
    assert len(logged) == 1, logged
    assert "'fn'" in logged[0] and ("injected failure" in logged[0] or "not a callable" in logged[0]
                                    or "not_an_argument" in logged[0] or "differs" in logged[0]
                                    or "argument" in logged[0]), logged
    assert tjc.cache_entries(fn) == []
    assert tjc.stats()["fallbacks"] >= 1
    assert sys.exc_info() == (None, None, None)
    del out, x
    assert freed == [True], f"{step}: the argument was freed without gc.collect()"


@pytest.mark.torch
@pytest.mark.parametrize("step", FAULT_STEPS)
def test_a_failing_compile_step_under_fullgraph_raises_full_graph_error(step, tmp_path, no_gc):
    torch = _torch()
    from torch_jit_cache.pipeline.convert_frame import FullGraphError

    fn = _fresh_function(tmp_path, "fullgraph")
    x = torch.ones(3)
    freed = watch(x)
    with pytest.MonkeyPatch.context() as mp:
        backend = _inject(mp, step, RuntimeError(f"injected failure in {step}"))
        kind, msg = outcome(tjc.compile(fn, backend=backend, fullgraph=True), x)
    assert kind is FullGraphError, (step, kind, msg)
    assert msg.startswith("fullgraph=True: cannot compile 'fn'"), msg
    assert sys.exc_info() == (None, None, None)
    del x
    assert freed == [True], f"{step}: the argument was freed without gc.collect()"


@pytest.mark.torch
@pytest.mark.parametrize("step", FAULT_STEPS)
def test_keyboard_interrupt_in_a_compile_step_is_not_swallowed(step, tmp_path):
    torch = _torch()
    fn = _fresh_function(tmp_path, "interrupt")
    with pytest.MonkeyPatch.context() as mp:
        backend = _inject(mp, step, KeyboardInterrupt("injected"))
        kind, _ = outcome(tjc.compile(fn, backend=backend), torch.ones(3))
    assert kind is KeyboardInterrupt, (step, kind)
    assert tjc.cache_entries(fn) == []
    assert torch.equal(tjc.compile(_fresh_function(tmp_path, "after"))(torch.ones(2)), torch.full((2,), 3.0))
