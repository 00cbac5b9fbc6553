"""tracer/variables/builtin_functions/builtins_paths.py end to end: os.fspath of a str or bytes constant and of an
object whose class writes __fspath__ in Python stays in the graph; the __fspath__ read is guarded
(replacing it recompiles); a C __fspath__ (pathlib) or one returning another type breaks and keeps
eager's result or error. Each case compares with eager."""
import os
import pathlib

import pytest

torch = pytest.importorskip("torch")

from context_helpers import CompiledCalls, same_exactly  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]


class Where:
    def __init__(self, name):
        self.name = name

    def __fspath__(self):
        return "/data/" + self.name


def _constants(x):
    return x + len(os.fspath(".")) + len(os.fspath(b"ab"))


def test_fspath_of_a_constant_is_the_constant():
    x = torch.zeros(2)
    calls = CompiledCalls(_constants)
    same_exactly(calls(x), _constants(x))
    calls.check(graphs=1)
    assert calls.delta("compiles") == 1


def _of_object(x, where):
    built = Where("built")
    return x + len(os.fspath(where)) + len(os.fspath(built))


def test_fspath_of_an_object_runs_its_python_fspath_and_is_guarded():
    x = torch.zeros(2)
    calls = CompiledCalls(_of_object)
    for name in ("a", "a", "longer"):
        same_exactly(calls(x, Where(name)), _of_object(x, Where(name)))
    calls.check(graphs=2)
    old = Where.__fspath__
    Where.__fspath__ = lambda self: "/" + self.name
    try:
        same_exactly(calls(x, Where("a")), _of_object(x, Where("a")))
    finally:
        Where.__fspath__ = old
    assert calls.cnt.frame_count == 3


class Wrong:
    def __fspath__(self):
        return 3


def _pathlib_or_wrong(x, p):
    try:
        return x + len(os.fspath(p))
    except TypeError:
        return x - 1


def test_fspath_that_python_would_not_fold_keeps_eager_result():
    x = torch.zeros(2)
    calls = CompiledCalls(_pathlib_or_wrong)
    for p in (pathlib.PurePosixPath("/tmp/q"), Wrong()):
        same_exactly(calls(x, p), _pathlib_or_wrong(x, p))
