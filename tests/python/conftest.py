"""Shared pytest set-up for tests/python.

The `torch` marker (declared in pyproject.toml) labels tests that need PyTorch. They are skipped with a
reason where torch is not installed (the 3.12 and 3.13 environments have none), and scripts/test.sh
deselects them there with `-m "not torch"`. A module that imports torch at the top should read:

    torch = pytest.importorskip("torch")
    pytestmark = pytest.mark.torch
"""
import importlib.util

import pytest

HAVE_TORCH = importlib.util.find_spec("torch") is not None


def pytest_collection_modifyitems(config, items):
    if HAVE_TORCH:
        return
    skip = pytest.mark.skip(reason="needs torch, which is not installed for this Python")
    for item in items:
        if item.get_closest_marker("torch") is not None:
            item.add_marker(skip)
