"""Smoke test of the package and its build: torch_jit_cache imports, and _C matches it."""
import ast
import sys
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


@pytest.mark.torch
def test_torch_is_the_pinned_cpu_build():
    torch = pytest.importorskip("torch")
    assert torch.__version__.split("+")[0] == "2.13.0"
