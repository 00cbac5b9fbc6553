"""check_refleaks and pytest --refleaks: leaks are caught with the type named, clean code passes."""
import ctypes
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from torch_jit_cache.testing import RefleakError, check_refleaks, pytest_plugin
from torch_jit_cache.testing.refleaks import live_counts

pytest_plugins = ["pytester"]


# These tests leak on purpose (and run pytester sessions): the hunt-leaks loop runs them once.
pytestmark = pytest.mark.no_refleaks
# These pin what the checker reports on a release interpreter (live-object counts and probes);
# on a debug interpreter it also judges sys.gettotalrefcount, whose own noise these small cases
# would trip (see test_debug_interpreter_counts_references for that path).
RELEASE_ONLY = pytest.mark.skipif(hasattr(sys, "gettotalrefcount"), reason="release-interpreter path")


class Leaky:
    pass


KEPT = []          # what the leaking functions below hold on to
LAST = {}


@pytest.fixture(autouse=True)
def _drop_kept():
    yield
    KEPT.clear()
    LAST.clear()


def keeps_one_per_run():
    KEPT.append(Leaky())


def clean():
    return [Leaky() for _ in range(10)]


def incref_one_per_run():
    obj = Leaky()
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))   # never decref'd: obj can never die


def test_leak_into_a_global_list_is_reported_with_the_type():
    with pytest.raises(RefleakError) as info:
        check_refleaks(keeps_one_per_run, warmups=1, runs=3, track_types=[Leaky])
    name = f"{__name__}.Leaky"
    assert info.value.report.deltas[f"live {name}"] == [1, 1, 1]
    assert f"live {name} grew by [1, 1, 1] per run (sum=3)" in str(info.value)
    assert "keeps_one_per_run keeps growing memory" in str(info.value)


def test_c_level_incref_is_reported():
    # The object is referenced by nothing the gc sees, yet it is found and counted (by type).
    with pytest.raises(RefleakError, match=r"Leaky grew by \[1, 1, 1\]"):
        check_refleaks(incref_one_per_run, warmups=1, runs=3, track_types=[Leaky])


def test_clean_function_passes_and_reports_no_growth():
    report = check_refleaks(clean, warmups=1, runs=3, track_types=[Leaky])
    assert not report.failed and report.leaking == [] and report.alive == []
    assert "is clean" in str(report)


@RELEASE_ONLY
def test_growth_in_some_runs_only_is_tolerated_as_regrtest_does():
    # [1, 0, 0]: a cache that filled during the first measured run, not a leak.
    calls = []

    def fills_a_cache_once():
        calls.append(None)
        if len(calls) == 2:
            KEPT.append(Leaky())

    report = check_refleaks(fills_a_cache_once, warmups=1, runs=3, track_types=[Leaky])
    assert report.deltas[f"live {__name__}.Leaky"] == [1, 0, 0]
    assert "tolerated" in str(report)


@RELEASE_ONLY
def test_weakref_probe_catches_an_object_kept_by_a_replaced_reference():
    # The live count stays flat (each run replaces the last object), only a probe sees the leak.
    def keeps_the_last():
        obj = Leaky()
        LAST["last"] = obj
        return obj

    with pytest.raises(RefleakError, match="outlived the run that created them") as info:
        check_refleaks(keeps_the_last, warmups=1, runs=2, track=lambda obj: [obj], track_types=[Leaky])
    assert info.value.report.leaking == []
    assert [a.split(" <")[0] for a in info.value.report.alive] == [
        f"run 2: {__name__}.Leaky", f"run 3: {__name__}.Leaky"]

    report = check_refleaks(Leaky, warmups=1, runs=2, track=lambda obj: [obj], track_types=[Leaky])
    assert not report.failed


def test_track_must_return_weakly_referenceable_objects():
    with pytest.raises(TypeError, match="cannot be weakly referenced"):
        check_refleaks(lambda: 1, warmups=0, runs=1, track=lambda n: [n], track_types=())


def test_arguments_are_checked():
    with pytest.raises(ValueError):
        check_refleaks(clean, runs=0)


def _debug_python():
    for name in (f"python{sys.version_info[0]}.{sys.version_info[1]}-dbg",
                 f"python{sys.version_info[0]}.{sys.version_info[1]}d"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_debug_interpreter_counts_references():
    """On a debug build a leaked reference to a long-lived object is caught by gettotalrefcount."""
    if hasattr(sys, "gettotalrefcount"):
        python = sys.executable
    else:
        python = _debug_python()
        if python is None:
            pytest.skip("no debug interpreter (python3.X-dbg) here")
    script = textwrap.dedent("""
        import ctypes, sys
        from torch_jit_cache.testing.refleaks import RefleakError, check_refleaks
        assert hasattr(sys, "gettotalrefcount")
        SENTINEL = object()
        def incref_sentinel():
            ctypes.pythonapi.Py_IncRef(ctypes.py_object(SENTINEL))
        print(check_refleaks(lambda: [object() for _ in range(5)], warmups=2, runs=3, track_types=()))
        try:
            check_refleaks(incref_sentinel, warmups=2, runs=3, track_types=())
        except RefleakError as e:
            print(e)
    """)
    import torch_jit_cache
    root = os.path.dirname(os.path.dirname(torch_jit_cache.__file__))
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, *site]))
    out = subprocess.run([python, "-c", script], env=env, capture_output=True, text=True, timeout=240)
    if "undefined symbol" in out.stderr or "No module named" in out.stderr:
        pytest.skip(f"the debug interpreter cannot load this build: {out.stderr.splitlines()[-1]}")
    assert out.returncode == 0, out.stderr
    assert "<lambda> is clean" in out.stdout
    assert "references (sys.gettotalrefcount) grew by [1, 1, 1] per run" in out.stdout, out.stdout


# --- compiled code (needs torch) ---

def _torch():
    return pytest.importorskip("torch")


@pytest.mark.torch
def test_tensors_kept_in_a_module_level_dict_are_reported():
    torch = _torch()

    def caches_tensors():
        LAST[len(LAST)] = torch.randn(4)

    with pytest.raises(RefleakError, match=r"live torch\.Tensor grew by \[1, 1, 1\]"):
        check_refleaks(caches_tensors, warmups=1, runs=3)


@pytest.mark.torch
def test_compiled_mlp_called_repeatedly_is_clean():
    torch = _torch()
    import torch_jit_cache as tjc

    tjc.reset()
    model = tjc.compile(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)))
    x = torch.randn(2, 8)
    report = check_refleaks(lambda: model(x))
    for counter, deltas in report.deltas.items():
        assert not any(d > 0 for d in deltas), report   # not even a one-off: no tensor, module, entry
    assert tjc.stats()["compiles"] == 1 and tjc.stats()["hits"] >= 5
    tjc.reset()


@pytest.mark.torch
def test_compiling_and_dropping_a_model_per_run_is_clean():
    torch = _torch()
    import torch_jit_cache as tjc

    def compile_and_run():
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        tjc.compile(model)(torch.randn(2, 8))
        return model

    report = check_refleaks(compile_and_run, track=lambda m: [m, *m.parameters()])
    assert not report.failed, report
    tjc.reset()


@pytest.mark.torch
def test_cache_entries_held_only_by_the_runtime_are_counted():
    torch = _torch()
    import torch_jit_cache as tjc

    tjc.reset()
    name = "live torch_jit_cache._C.CacheEntry"
    before = live_counts()[name[5:]]
    fn = tjc.compile(lambda x: x * 2)
    fn(torch.randn(3))
    assert live_counts()[name[5:]] == before + 1

    def compile_a_new_function():     # each compiled wrapper kept alive: one more entry per run
        f = tjc.compile(eval("lambda x: x + 1"))
        f(torch.randn(3))
        KEPT.append(f)

    with pytest.raises(RefleakError) as info:
        check_refleaks(compile_a_new_function, warmups=1, runs=3)
    assert info.value.report.deltas[name] == [1, 1, 1]
    assert name in info.value.report.leaking
    KEPT.clear()
    tjc.reset()


# --- the pytest plugin ---

# Named with -p only where the pytest11 entry point does not load it already (pytest refuses both).
PLUGIN = () if pytest_plugin.is_autoloaded() else ("-p", pytest_plugin.MODULE)

LEAKY_TESTS = """
    import pytest

    class Kept:
        pass

    KEPT = []
    SETUPS = []

    @pytest.fixture
    def counted():
        SETUPS.append(None)
        return len(SETUPS)

    def test_leaks():
        KEPT.append(lambda: None)          # functions are a tracked type

    def test_clean(counted):
        [Kept() for _ in range(3)]
        assert counted == 1                # the fixture was set up once for all repetitions

    @pytest.mark.no_refleaks
    def test_leaks_but_opted_out():
        KEPT.append(lambda: None)
"""


def test_plugin_fails_a_leaking_test_and_passes_a_clean_one(pytester):
    pytester.makepyfile(test_sample=LEAKY_TESTS)
    result = pytester.runpytest(*PLUGIN, "--refleaks", "--refleaks-runs", "2", "--refleaks-warmups", "1",
                                "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*RefleakError*test_sample.py::test_leaks keeps growing memory*",
                                 "*live function grew by [[]1, 1[]] per run (sum=2)*"])


def test_plugin_is_off_without_the_option(pytester):
    pytester.makepyfile(test_sample=LEAKY_TESTS)
    result = pytester.runpytest(*PLUGIN, "-p", "no:cacheprovider")
    result.assert_outcomes(passed=3)
