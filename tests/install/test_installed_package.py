"""Smoke test of an installed torch_jit_cache, outside the checkout (scripts/check_install.sh).

check_install.sh copies this file into an empty folder and runs it with a virtual environment that
got the package from a wheel or from `pip install --no-build-isolation <checkout>`, as
`python -m pytest --refleaks test_installed_package.py`. It is not collected from tests/python.
"""
import os
import subprocess
import sys
import sysconfig

import pytest


def test_the_installed_package_is_imported_not_the_checkout():
    import torch_jit_cache

    site = os.path.realpath(sysconfig.get_paths()["purelib"])
    assert os.path.realpath(torch_jit_cache.__file__).startswith(site + os.sep), torch_jit_cache.__file__


def test_compiled_function_traces_once_then_hits():
    import torch

    import torch_jit_cache as tjc

    tjc.reset()

    @tjc.compile(backend="eager")   # the installed runtime, not inductor (seconds per compile, 6 runs under --refleaks)
    def f(x, y):
        return torch.relu(x @ y) + 1

    x, y = torch.randn(4, 8), torch.randn(8, 8)
    for _ in range(3):
        assert torch.equal(f(x, y), torch.relu(x @ y) + 1)
    stats = tjc.stats()
    assert stats["graphs"] == 1 and stats["hits"] == 2, stats
    assert len(tjc.cache_entries(f)) == 1


def test_tensor_guards_are_built_against_libtorch():
    from torch_jit_cache import _C_torch  # noqa: F401  (built where torch imports at build time)


def test_runtime_declares_its_dependencies():
    from importlib.metadata import requires

    declared = requires("torch_jit_cache")
    assert any(r.startswith("bytecode") for r in declared), declared
    torch_reqs = [r for r in declared if r.startswith("torch") and not r.startswith("torch_")]
    # The tested range (torch_compat.TESTED), never a pin that would replace the user's torch.
    assert torch_reqs and all(">=2.13" in r and "<2.15" in r and "extra" in r for r in torch_reqs), declared


def test_refleaks_plugin_is_discovered(request):
    # Run with --refleaks: the option exists only if pytest loaded the pytest11 entry point.
    assert request.config.getoption("refleaks") is True
    out = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "--refleaks" in out
