"""Shared pytest set-up for tests/python and its scenarios/ folder.

Layout: a module's tests are `test_<module>.py` here (`test_variables_<module>.py` for
tracer/variables/); end-to-end suites over models and programs are under scenarios/. The shared
helpers (jit_helpers.py, context_helpers.py) live here and are imported by name from both folders:
this file puts its own folder on sys.path, as pytest's default import mode does only for the
folder of the test file being imported.

The `torch` marker (declared in pyproject.toml) labels tests that need PyTorch. Every environment of
scripts/setup.sh (.venv, .venv-3.12, .venv-3.13) has torch 2.13.0 and runs them all; they are skipped
with a reason where torch is not installed, which is the debug interpreter's .venv-dbg: kept torch-free
on purpose, it runs the hunt-leaks stage with `-m "not torch"` and so shows that the runtime works
without torch (test_torch_free.py shows it everywhere else, with torch blocked). A module that imports
torch at the top should read:

    torch = pytest.importorskip("torch")
    pytestmark = pytest.mark.torch
"""
import importlib.util
import logging
import os
import sys

import pytest

# The suite's default backend is "eager" (config.default_backend; a user's is "inductor", as
# torch.compile's): a compile with no backend argument traces and runs the graph as traced, in
# milliseconds where inductor takes seconds. Tests that test a backend name it. The user's default
# runs for real in scenarios/test_warm_start.py (its child processes drop every TJC_* variable).
#
# The on-disk cache (docs/cache.md) is off for the suite, and for the processes its tests start
# (they inherit the environment): no test writes into the user's cache folder, and no test loads
# what another run stored. test_disk_cache.py and test_disk_cache_keys.py turn it on, in a temporary
# folder, where they test it. The default a user gets (no TJC_* variable: the cache on, the default
# backend and folder) is tested by name in scenarios/test_warm_start.py, whose child processes drop
# every TJC_* variable and point XDG_CACHE_HOME at a temporary folder.
# The environment is set for child processes, and for config where this file imports the package
# first; config.disk_cache is set below for where the package was imported before.
os.environ["TJC_DISABLE_DISK_CACHE"] = "1"
os.environ["TJC_DEFAULT_BACKEND"] = "eager"
os.environ.pop("TJC_CACHE_DIR", None)
os.environ.pop("TJC_TRACE_DIR", None)   # the structured trace too: test_trace_log.py turns it on where it tests it

from torch_jit_cache.config import config as _config  # noqa: E402 - after the environment is set
from torch_jit_cache.testing import pytest_plugin  # noqa: E402

# Where the package is installed, pytest imports it through the plugin's entry point before this
# file runs, so config has read the environment already: the setting itself is turned off too.
_config.disk_cache = False
_config.default_backend = "eager"
_config.trace_dir = ""

HAVE_TORCH = importlib.util.find_spec("torch") is not None

_HELPERS = os.path.dirname(os.path.abspath(__file__))
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)

# pytest attaches its log-capture handlers to every logger, torch's structured-trace logger
# (torch.__trace) included, and torch builds a record (with a payload) for every tensor a trace
# converts to a fake tensor once that logger has a handler; pytest keeps the records until the test
# ends (36 MB over the 100 compiles of scenarios/test_compiled_lifetimes.py). Outside pytest the
# logger has no handler and torch builds nothing. Off for the tests: the log is torch's, for its
# own tlparse tool.
logging.getLogger("torch.__trace").disabled = True

# `pytest --refleaks`: where the package is installed (.venv, by scripts/setup.sh) pytest loads the
# plugin through the pytest11 entry point, and naming it here too would register it twice. The other
# environments (.venv-3.12, .venv-3.13, .venv-dbg) build in place without installing.
pytest_plugins = [] if pytest_plugin.is_autoloaded() else [pytest_plugin.MODULE]


@pytest.fixture
def fresh_runtime():
    """fresh_caches, and no eval-frame callback left installed by the test (the runtime tests)."""
    import torch_jit_cache
    from torch_jit_cache import runtime

    torch_jit_cache.reset()
    yield
    assert runtime.set_eval_frame(None) is None, "a test left a callback installed"
    torch_jit_cache.reset()


@pytest.fixture
def no_hook_left(fresh_runtime):
    """fresh_runtime, and the hook uninstalled once the test is over (the fault tests)."""
    from torch_jit_cache import runtime

    yield
    assert not runtime.hook_installed()


@pytest.fixture
def fresh_caches():
    """Every cache dropped and the counters zeroed before and after the test (tjc.reset()); a module
    asks for it in its pytestmark (`pytest.mark.usefixtures("fresh_caches")`)."""
    import torch_jit_cache

    torch_jit_cache.reset()
    yield
    torch_jit_cache.reset()


@pytest.fixture
def seeded_fresh_caches(fresh_caches):
    """fresh_caches, and torch's global generator seeded with 0: inputs made with torch.randn are
    the same in every run."""
    import torch

    torch.manual_seed(0)
    yield


@pytest.fixture
def no_gc():
    """The cycle collector stays off: whatever is freed in the test is freed by reference counting."""
    import gc

    was = gc.isenabled()
    gc.collect()
    gc.disable()
    yield
    if was:
        gc.enable()


def pytest_addoption(parser):
    parser.addoption(
        "--tiers", default=None, metavar="TIER,...",
        help="run only the tests of these tiers (tests/python/tiers.py: core, versions, once); "
             "scripts/test.sh gives each stage its tiers")


def _select_tiers(config, items):
    """--tiers: keep the tests of the tiers named, deselect the others. A test of no tier stops the
    run: it would otherwise silently leave the stages that select by tier."""
    import tiers

    wanted = set(filter(None, config.getoption("--tiers").split(",")))
    unknown = wanted - set(tiers.TIERS)
    if unknown:
        raise pytest.UsageError(f"--tiers: unknown tier(s) {sorted(unknown)}; the tiers are {tiers.TIERS}")
    kept, dropped, orphans = [], [], set()
    for item in items:
        relative = os.path.relpath(str(item.path), _HELPERS).replace(os.sep, "/")
        tier = tiers.tier_of(f"{relative}::{item.name}")
        if tier is None:
            orphans.add(relative)
        (kept if tier in wanted else dropped).append(item)
    if orphans:
        raise pytest.UsageError(
            f"test files in no tier (add them to tests/python/tiers.py): {sorted(orphans)}")
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_collection_modifyitems(config, items):
    if config.getoption("--tiers") is not None:
        _select_tiers(config, items)
    if HAVE_TORCH:
        return
    skip = pytest.mark.skip(reason="needs torch, which is not installed for this Python")
    for item in items:
        if item.get_closest_marker("torch") is not None:
            item.add_marker(skip)


# Once every cache is dropped, no C++ cache entry or guard-tree node may be left. A leaked
# C++ object can hold no Python reference at all, so only the runtime's own counters can see it.
def pytest_sessionfinish(session, exitstatus):
    import gc

    import torch_jit_cache
    from torch_jit_cache import _C

    torch_jit_cache.reset()
    gc.collect()
    live = _C._live_objects()
    leftover = {k: v for k, v in live.items() if k != "extra_states" and v != 0}
    if leftover:
        print(f"\ntorch_jit_cache: C++ objects left after reset() and gc.collect(): {leftover}")
        session.exitstatus = 1


@pytest.fixture
def disk_cache_on(tmp_path, monkeypatch):
    """The on-disk cache on, as a user has it by default, in the test's temporary folder (the suite
    runs with it off: see the top of this file)."""
    from torch_jit_cache.config import config

    monkeypatch.setattr(config, "disk_cache", True)
    monkeypatch.setattr(config, "cache_dir", str(tmp_path))
    return tmp_path
