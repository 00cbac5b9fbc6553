"""convert_frame: what the cache-miss callback decides for frames that do no tensor work (they run
their original code, never an entry per value, never a cache-limit warning)."""
import bisect
import functools
import itertools
import operator
import warnings
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import runtime  # noqa: E402



def helper(i):
    return (i * 7) % 13


def outer(x):
    # bisect with a key is a C function calling Python that the tracer does not model (map(),
    # starmap() and groupby() are traced now), inside a try block, where no graph break can be
    # made: this frame falls back, so every call of `helper` is a frame of its own that the
    # runtime intercepts.
    try:
        return x + bisect.bisect_left(range(300), 400, key=helper)
    finally:
        pass


def test_python_helper_in_a_fallback_frame_is_not_cached():
    # Failed before: helper was traced per int value, took 8 entries, warned about the cache limit
    # and from then on checked 8 guard trees per call (9x slower than eager).
    compiled = tjc.compile(outer)
    x = torch.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no cache-limit warning
        for _ in range(3):
            assert torch.equal(compiled(x), outer(x))
    assert tjc.cache_entries(helper) == []
    assert runtime.frame_action(helper, owner=compiled) == "skip"
    stats = tjc.stats()
    assert stats["cache_limit_hits"] == 0
    assert stats["graphs"] == 0
    assert stats["misses"] < 10  # helper missed once, not once per value


def test_helper_skipped_alone_is_still_inlined_into_a_traced_caller():
    compiled_outer = tjc.compile(outer)
    for i in range(3):
        compiled_outer(torch.ones(2))
    assert runtime.frame_action(helper, owner=compiled_outer) == "skip"

    def traced(x):
        return x * helper(4)

    compiled = tjc.compile(traced)
    assert torch.equal(compiled(torch.ones(2)), torch.ones(2) * 2)
    assert tjc.stats()["graphs"] == 1


def scale_or_not(x, flag):
    return x * 2 if flag else x


def test_compiled_function_without_tensor_work_keeps_its_chance():
    # The function compile() was asked for is never marked skip: it gets one entry that runs its
    # original code for any int (not one per value: failed before, 8 entries and a warning), and a
    # later call with tensors misses it and compiles.
    def add(a, b):
        return a + b

    compiled = tjc.compile(add)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for i in range(10):
            assert compiled(i, 1) == i + 1
    [entry] = tjc.cache_entries(add)
    assert entry.code is add.__code__ and entry.hits == 9
    assert runtime.frame_action(add, owner=compiled) == "default"
    x = torch.ones(2)
    assert torch.equal(compiled(x, x), x + x)
    assert len(tjc.cache_entries(add)) == 2
    assert tjc.stats()["graphs"] == 1


def test_no_graph_frame_keeps_the_entries_it_has():
    compiled = tjc.compile(scale_or_not)
    x = torch.ones(2)
    assert torch.equal(compiled(x, True), x * 2)
    assert torch.equal(compiled(x, False), x)   # no tensor work: an entry that runs the original
    assert torch.equal(compiled(x, True), x * 2)
    assert torch.equal(compiled(x, False), x)
    graph_entry, original = sorted(tjc.cache_entries(scale_or_not), key=lambda e: e.code is scale_or_not.__code__)
    assert original.code is scale_or_not.__code__
    assert (graph_entry.hits, original.hits) == (1, 1)
    assert tjc.stats()["graphs"] == 1


def test_tensor_passed_through_a_no_graph_frame_is_freed(no_gc):
    def ident(t):
        return t

    compiled = tjc.compile(ident)
    x = torch.ones(4)
    ref = weakref.ref(x)
    assert compiled(x) is x
    del x
    assert ref() is None


def test_fallback_frame_with_only_python_below_it_runs_at_eager_speed():
    # Failed before: the fallback frame stayed a plain skip, so every helper it called went
    # through the hook and, on 3.11, lost inlined calls (the helper loop ran 25-50% slower).
    seen = []

    def probe(i):
        seen.append(runtime.hook_installed())
        return (i * 7) % 13

    def work(x):
        try:   # groupby inside a try block: the frame falls back
            return x + len(list(itertools.groupby(range(3), key=probe)))
        finally:
            pass

    compiled = tjc.compile(work)
    x = torch.ones(2)
    for _ in range(2):
        compiled(x)
    assert runtime.frame_action(work, owner=compiled) == "skip-tree"
    seen.clear()
    assert torch.equal(compiled(x), work(x))
    assert seen[:3] == [False, False, False]


def layer(x):
    return x * 2


def wrapper(x):
    try:   # no graph break is made inside a try block
        return functools.lru_cache(None)(layer)(x)  # falls back; the layer below it compiles
    finally:
        pass


def test_fallback_frame_whose_callees_compile_keeps_them_compiled():
    compiled = tjc.compile(wrapper)
    x = torch.ones(2)
    for _ in range(4):
        assert torch.equal(compiled(x), x * 2)
    assert runtime.frame_action(wrapper, owner=compiled) == "skip"
    [entry] = tjc.cache_entries(layer)
    assert entry.hits == 3


def matmul_relu(x, w):
    return (x @ w).relu().sum(0)


def test_code_a_backend_generated_is_never_intercepted(caplog):
    # Failed before: AOT-autograd's generated wrappers (exec'd code with no module name) were
    # intercepted, traced, and logged as falling back (2 fallbacks) on every compile.
    compiled = tjc.compile(matmul_relu, backend="aot_eager")
    x, w = torch.randn(4, 4), torch.randn(4, 4, requires_grad=True)
    for _ in range(3):
        out = compiled(x, w)
        out.sum().backward()
    torch.testing.assert_close(out, matmul_relu(x, w))
    stats = tjc.stats()
    assert (stats["graphs"], stats["compiles"], stats["hits"], stats["fallbacks"]) == (1, 1, 2, 0)
    assert not [r for r in caplog.records if "uncompiled" in r.getMessage()]


def test_a_user_backends_callable_runs_with_interception_off():
    seen = []

    def backend(gm, example_inputs):
        def run(*args):
            seen.append(runtime.hook_installed())
            return gm(*args)
        return run

    compiled = tjc.compile(scale_or_not, backend=backend)
    x = torch.ones(2)
    for _ in range(2):
        assert torch.equal(compiled(x, True), x * 2)
    assert seen == [False, False]
    assert tjc.stats()["graphs"] == 1


# -- interrupted compiles and the reasons fallbacks give -------------------------------------

def _plus_one(x):
    return x + 1


def test_interrupted_compiles_leave_no_mark():
    # A compile interrupted by KeyboardInterrupt (here: the backend, ten times) lets it reach the
    # user, as eager would; nothing is recorded, and the next call compiles and then hits.
    calls = []

    def backend(gm, example_inputs):
        calls.append(1)
        if len(calls) <= 10:
            raise KeyboardInterrupt
        return gm.forward

    compiled = tjc.compile(_plus_one, backend=backend)
    for _ in range(10):
        with pytest.raises(KeyboardInterrupt):
            compiled(torch.zeros(2))
    before = tjc.stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.testing.assert_close(compiled(torch.zeros(2)), torch.ones(2))
        torch.testing.assert_close(compiled(torch.zeros(2)), torch.ones(2))
    after = tjc.stats()
    assert len(calls) == 11
    assert (after["compiles"] - before["compiles"], after["hits"] - before["hits"]) == (1, 1)
    assert after["fallbacks"] == before["fallbacks"]


def test_a_compile_interrupted_while_tracing_leaves_no_mark(monkeypatch):
    from torch_jit_cache import tracer
    real, interrupted = tracer.trace, []

    def trace(*args, **kwargs):
        if len(interrupted) < 10:
            interrupted.append(1)
            raise KeyboardInterrupt   # as a signal arriving mid-trace would
        return real(*args, **kwargs)

    monkeypatch.setattr(tracer, "trace", trace)
    compiled = tjc.compile(_plus_one)
    for _ in range(10):
        with pytest.raises(KeyboardInterrupt):
            compiled(torch.zeros(2))
    before = tjc.stats()
    torch.testing.assert_close(compiled(torch.zeros(2)), torch.ones(2))
    torch.testing.assert_close(compiled(torch.zeros(2)), torch.ones(2))
    after = tjc.stats()
    assert (after["compiles"] - before["compiles"], after["hits"] - before["hits"]) == (1, 1)


class _PrintingBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = self.lin(x)
        print("", end="")
        return y.relu()


class _Stack(torch.nn.Module):
    def __init__(self, n=12):
        super().__init__()
        self.blocks = torch.nn.ModuleList(_PrintingBlock() for _ in range(n))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def _texts(seen, caplog):
    return [str(w.message) for w in seen] + [r.getMessage() for r in caplog.records]


def test_equal_resume_codes_are_distinct_caches(caplog):
    # Each block's forward entry (guarding its `self`) has a resume function of its own; they are
    # equal as code objects. Keyed by value, the 9th read as one code evicted 9 times ("an object
    # it guards by identity died") and ran uncompiled from then on, though nothing died.
    model = _Stack()
    x = torch.randn(2, 3)
    expected = model(x)
    compiled = tjc.compile(model)
    with warnings.catch_warnings(record=True) as seen, caplog.at_level("INFO", logger="torch_jit_cache"):
        warnings.simplefilter("always")
        for _ in range(3):
            torch.testing.assert_close(compiled(x), expected)
    assert not [t for t in _texts(seen, caplog) if "died" in t or "uncompiled" in t], _texts(seen, caplog)
    report = tjc.explain(_Stack.forward)(model, x)
    assert not report.fallbacks, report.fallbacks


def _breaks_on_a_float(x, n):
    y = x + n
    print("", end="")
    return y * 2


def test_cache_limit_names_the_limit_and_the_failing_guard(caplog):
    from torch_jit_cache.config import config
    # dynamic=False: floats stay constants guarded by value (a changing float is a symbol otherwise)
    compiled = tjc.compile(_breaks_on_a_float, cache_limit=3, dynamic=False)
    old = config.log
    config.log = frozenset({"recompiles"})
    try:
        with warnings.catch_warnings(record=True) as seen, caplog.at_level("INFO", logger="torch_jit_cache"):
            warnings.simplefilter("always")
            for i in range(12):
                torch.testing.assert_close(compiled(torch.zeros(2), float(i)), torch.full((2,), 2.0 * i))
    finally:
        config.log = old
    texts = _texts(seen, caplog)
    assert not [t for t in texts if "died" in t], texts
    limit = [t for t in texts if "reached the cache limit (3 entries)" in t]
    assert len(limit) == 1 and "L['n'] == 2.0 failed: got 3.0" in limit[0], texts
    assert any("recompiling '_breaks_on_a_float'" in t and "L['n'] == 0.0" in t for t in texts), texts


_FINDER_SCRIPT = '''
import sys, torch
import torch_jit_cache as tjc

class Finder:
    """A meta-path finder written in Python, as an editable install's: importlib calls it while
    holding the global import lock."""
    calls = 0

    def find_spec(self, name, path=None, target=None):
        Finder.calls += 1
        return None

sys.meta_path.insert(0, Finder())

class Net(torch.nn.Module):
    def forward(self, x):
        import xml.dom.minidom   # not imported yet: the finder runs inside the compiled call
        return x + 1

# DataParallel's forward runs as written (trace_rules.WRAPPER_FORWARDS) and imports as it opens
# its record_function range: the first frame the process traces is the finder's, under the lock.
f = tjc.compile(torch.nn.DataParallel(Net()))
print("RESULT", f(torch.ones(2)).tolist(), Finder.calls > 0, tjc.stats()["fallbacks"])
'''


def test_a_meta_path_finder_run_under_the_import_lock_is_not_traced(tmp_path):
    """A finder's frame, run while importlib holds the global import lock, was traced; the first
    trace of a process waits for the tracer's warm-up thread, whose own imports wait on that lock:
    the process hung (seen under DataParallel's forward, through an editable install's finder).
    Now such frames are skipped. In a fresh process, so that this trace is its first."""
    import subprocess
    import sys

    path = tmp_path / "finder.py"
    path.write_text(_FINDER_SCRIPT)
    import os
    import pathlib

    # This checkout's package, whichever environment runs the test (only .venv installs it).
    root = str(pathlib.Path(__file__).resolve().parents[2])
    env = dict(os.environ, TJC_DISABLE_DISK_CACHE="1",
               PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "RESULT [2.0, 2.0] True 0" in done.stdout, done.stdout + done.stderr[-2000:]


# -- a frame that the trace follows to an exception leaving it --------------------------------------
def _reraise_after_handling(flag):
    # The exception leaves by a bare raise from its except block (RERAISE): no graph break can be
    # made there, since the state at that point holds the exception itself.
    try:
        raise TypeError(f"outer {flag}")
    except TypeError:
        try:
            raise KeyError("inner")
        except KeyError:
            pass
        raise


def _reraise_after_tensor_work(x):
    y = x * 2
    try:
        raise ValueError(float(y.sum()))
    except ValueError:
        raise


def _calls_reraising_helpers(x, helper, arg, log):
    # The frame does no tensor work: it runs as written, so the helper is a frame of its own.
    try:
        helper(arg)
    except (TypeError, ValueError) as e:
        log.append(str(e))
    return x


@pytest.mark.parametrize("flag", [0, 1])
def test_a_helper_whose_trace_ends_in_a_reraise_without_tensor_work_is_no_fallback(flag):
    # Before: the helper's trace ended in the RERAISE and fell back ("TypeError('outer 0') at
    # RERAISE"), counted as a fallback each time it was traced. It does all the trace saw when run as
    # written: it is a frame without tensor work, skipped as such.
    compiled = tjc.compile(_calls_reraising_helpers)
    x = torch.ones(3)
    eager_log, log = [], []
    expected = _calls_reraising_helpers(x, _reraise_after_handling, flag, eager_log)
    before = tjc.stats()["fallbacks"]
    for _ in range(2):
        assert torch.equal(compiled(x, _reraise_after_handling, flag, log), expected)
    assert log == eager_log * 2 == [f"outer {flag}"] * 2
    assert tjc.stats()["fallbacks"] == before


def test_a_helper_that_reraises_after_tensor_work_still_falls_back_with_eager_results():
    compiled = tjc.compile(_calls_reraising_helpers)
    x = torch.ones(3)
    eager_log, log = [], []
    expected = _calls_reraising_helpers(x, _reraise_after_tensor_work, x, eager_log)
    before = tjc.stats()["fallbacks"]
    assert torch.equal(compiled(x, _reraise_after_tensor_work, x, log), expected)
    assert log == eager_log == ["6.0"]
    assert tjc.stats()["fallbacks"] > before   # the graph before the re-raise cannot be cut off


def test_the_compile_target_whose_trace_ends_in_a_reraise_raises_as_eager():
    compiled = tjc.compile(_reraise_after_handling)
    for flag in (0, 1):
        with pytest.raises(TypeError, match=f"outer {flag}") as info:
            compiled(flag)
        assert isinstance(info.value.__context__, KeyError) is False   # the inner one was handled


def _prints_in_a_try(value, log):
    # print() inside a try block: no graph break can be made there, so a trace of this frame fails.
    try:
        print("value", type(value).__name__)
    except ValueError:
        pass
    log.append(type(value).__name__)
    return value


def _calls_in_a_helper(x, value, log):
    y = x * 2   # the call below breaks in the callee: the helper is a frame of its own
    _prints_in_a_try(value, log)
    return y + 1


@pytest.mark.parametrize("value, fallbacks", [(3, 0), ([1, "a"], 0), ({"k": (torch.ones(1),)}, 1),
                                              (torch.ones(2), 1)])
def test_a_failed_frame_with_nothing_torch_related_is_skipped_not_a_fallback(value, fallbacks, capsys):
    # torch.compile skips a frame it reaches that holds no tensor, module or array (and names no
    # torch module) untraced; a frame whose trace fails runs as written either way, and one with
    # nothing torch-related in it is skipped so, not counted as a fallback (tracer/tensor_presence.py).
    compiled = tjc.compile(_calls_in_a_helper)
    x = torch.ones(3)
    eager_log, log = [], []
    expected = _calls_in_a_helper(x, value, eager_log)
    before = tjc.stats()["fallbacks"]
    for _ in range(2):
        assert torch.equal(compiled(x, value, log), expected)
    assert log == eager_log * 2
    assert tjc.stats()["fallbacks"] - before == fallbacks
    assert capsys.readouterr().out.count("value") == 3


def test_the_compile_target_with_nothing_torch_related_still_reports_its_fallback():
    before = tjc.stats()["fallbacks"]
    log = []
    assert tjc.compile(_prints_in_a_try)(5, log) == 5 and log == ["int"]
    assert tjc.stats()["fallbacks"] - before == 1


def test_fx_symbolic_tracing_through_a_compiled_function_runs_its_original_code():
    # Under torch.fx.symbolic_trace the arguments are proxies: the frame runs as written, so FX
    # records its ops, and nothing is traced or cached for them; later calls compile as before.
    def scaled(x):
        return x * 2 + 1

    compiled = tjc.compile(scaled, backend="eager")
    x = torch.randn(3)
    torch.testing.assert_close(compiled(x), scaled(x))
    before = tjc.stats()
    gm = torch.fx.symbolic_trace(lambda v: compiled(v))
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"] == [operator.mul, operator.add]
    assert tjc.stats()["graphs"] == before["graphs"] and tjc.stats()["graph_breaks"] == before["graph_breaks"]
    torch.testing.assert_close(gm(x), scaled(x))
    hits = tjc.stats()["hits"]
    torch.testing.assert_close(compiled(x), scaled(x))
    assert tjc.stats()["hits"] == hits + 1


def _returns_dicts_of_its_own_class(n, log):
    with torch._dynamo.error_on_graph_break(False):   # refused inlined: the call runs as a frame
        class Point:
            pass

    made = []
    for i in range(n):
        p = Point()
        p.x = i
        made.append(p.__dict__)   # dicts of objects of a class made in this frame: not rebuilt
    log.append(n)
    return made


def _calls_dict_maker(x, log):
    # No tensor work: runs as written, so the maker is a frame of its own.
    made = _returns_dicts_of_its_own_class(2, log)
    return x, [sorted(d.items()) for d in made]


def test_a_helper_traced_to_a_return_it_cannot_rebuild_without_tensor_work_is_no_fallback():
    # Before: the helper's trace reached its return and fell back ("... leaves the trace, and its
    # class was made in it"). Run as written it does all the trace saw: skipped as a frame without
    # tensor work, not counted as a fallback.
    compiled = tjc.compile(_calls_dict_maker)
    x = torch.ones(3)
    eager_log, log = [], []
    expected = _calls_dict_maker(x, eager_log)
    before = tjc.stats()["fallbacks"]
    for _ in range(2):
        got = compiled(x, log)
        assert torch.equal(got[0], expected[0]) and got[1] == expected[1]
    assert log == eager_log * 2
    assert tjc.stats()["fallbacks"] == before


def _returns_its_own_object_after_tensor_work(x):
    class Box:
        pass

    b = Box()
    b.v = x * 2
    return b


def test_a_return_it_cannot_rebuild_after_tensor_work_still_falls_back_with_eager_results():
    compiled = tjc.compile(_returns_its_own_object_after_tensor_work)
    before = tjc.stats()["fallbacks"]
    got = compiled(torch.ones(3))
    assert torch.equal(got.v, torch.full((3,), 2.0))
    assert tjc.stats()["fallbacks"] > before
