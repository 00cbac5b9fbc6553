"""pytest --refleaks: run each test's body repeatedly and fail the test when memory keeps growing.

    pytest --refleaks                    # 3 warm-up runs + 3 measured runs per test
    pytest --refleaks --refleaks-runs 5 --refleaks-warmups 2
    @pytest.mark.no_refleaks             # a test that must not be repeated (or leaks on purpose)

Each test function is called through check_refleaks (refleaks.py); a leak fails the test with the
report (which types grew, by how much per run).

Fixtures are set up ONCE per test, not once per repetition: the repetitions reuse the same fixture
values, and teardown runs after the last one. So only the test body is measured; objects a fixture
creates are made before the first reading and do not count, and a leak in a fixture's own set-up or
teardown is not seen. (Setting function-scoped fixtures up per repetition would need pytest's
private fixture-request machinery and would count every fixture's caches as the test's growth.)
A test whose body is not idempotent (it mutates a fixture value and asserts on it) fails under
--refleaks for that reason; mark it no_refleaks.

Registered as the `torch_jit_cache` pytest11 entry point (pyproject.toml), so pytest loads it in
any environment where the package is installed. tests/python/conftest.py names it in pytest_plugins
only where pytest does not load it by itself (`is_autoloaded()`): the environments that build in
place without installing. Naming it twice makes pytest refuse to start.
"""
from __future__ import annotations

import inspect

import pytest

from .refleaks import check_refleaks

MODULE = "torch_jit_cache.testing.pytest_plugin"


def is_autoloaded() -> bool:
    """True where pytest loads this plugin through the pytest11 entry point: the package is
    installed in this environment and plugin autoloading is not switched off."""
    import importlib.metadata
    import os

    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value == MODULE for ep in importlib.metadata.entry_points(group="pytest11"))


def pytest_addoption(parser):
    group = parser.getgroup("torch_jit_cache", "reference leak checks (torch_jit_cache)")
    group.addoption("--refleaks", action="store_true", default=False,
                    help="repeat each test (warm-ups + runs) and fail it when memory keeps growing")
    group.addoption("--refleaks-runs", type=int, default=3, metavar="N",
                    help="measured runs per test under --refleaks (default 3)")
    group.addoption("--refleaks-warmups", type=int, default=3, metavar="N",
                    help="warm-up runs per test under --refleaks, not measured (default 3)")


def pytest_configure(config):
    config.addinivalue_line("markers", "no_refleaks: run this test once even under --refleaks")


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    config = pyfuncitem.config
    if not config.getoption("refleaks") or pyfuncitem.get_closest_marker("no_refleaks") is not None:
        return None
    test = pyfuncitem.obj
    if inspect.iscoroutinefunction(test) or inspect.isasyncgenfunction(test):
        return None      # an async plugin runs those; let it (one run)
    funcargs = pyfuncitem.funcargs
    kwargs = {name: funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}

    def body():
        test(**kwargs)   # the result is dropped: a test returns None

    check_refleaks(body, warmups=config.getoption("refleaks_warmups"),
                   runs=config.getoption("refleaks_runs"), name=pyfuncitem.nodeid)
    return True
