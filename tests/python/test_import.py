"""Smoke test of the package and its build: torch_jit_cache imports, and _C matches it."""
import ast
import sys
import tomllib
from pathlib import Path

import pytest

import torch_jit_cache

ROOT = Path(__file__).resolve().parents[2]


def test_c_version_matches_package():
    assert torch_jit_cache._C.__version__ == torch_jit_cache.__version__


def test_c_built_for_this_python():
    assert tuple(torch_jit_cache._C.python_version) == sys.version_info[:2]


def test_package_version_matches_pyproject():
    text = (ROOT / "pyproject.toml").read_text()
    assert f'version = "{torch_jit_cache.__version__}"' in text


def test_unsupported_python_message_is_clear():
    # Read, not run: the check must come before `_C` is imported, so that on 3.10 or 3.14 the user
    # sees which Pythons are supported rather than a missing-extension error.
    source = (ROOT / "torch_jit_cache" / "__init__.py").read_text()
    tree = ast.parse(source)
    version_check = next(
        node for node in tree.body
        if isinstance(node, ast.If) and "sys.version_info" in ast.unparse(node.test)
    )
    c_import = next(
        node for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and any(alias.name == "_C" for alias in node.names)
    )
    assert version_check.lineno < c_import.lineno
    raise_node = version_check.body[0]
    assert isinstance(raise_node, ast.Raise)
    message = ast.unparse(raise_node.exc)
    assert "ImportError" in message
    for version in ("3.11", "3.12", "3.13"):
        assert version in message


def test_declared_torch_range_is_the_tested_one():
    # pyproject.toml's [torch] extra, README's first paragraph and torch_compat.TESTED say the
    # same releases; the set-up still pins 2.13.0 (requirements-dev.txt) for every venv but one.
    from torch_jit_cache.torch_compat import TESTED

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["torch"]
    major, last = TESTED[1].split(".")
    assert extra == [f"torch>={TESTED[0]},<{major}.{int(last) + 1}"], extra
    assert f"torch {TESTED[0]} or {TESTED[1]}" in (ROOT / "README.md").read_text()
    assert "torch==2.13.0" in (ROOT / "requirements-dev.txt").read_text().splitlines()


@pytest.mark.torch
def test_torch_is_in_the_declared_range():
    torch = pytest.importorskip("torch")
    from torch_jit_cache.torch_compat import TESTED, _minor

    assert _minor(TESTED[0]) <= _minor(torch.__version__) <= _minor(TESTED[1]), torch.__version__
