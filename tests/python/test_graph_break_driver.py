"""graph_break/driver.py: the one loop that traces a frame again.

Behaviour through `trace_frame` on real frames, and the structure that keeps it the only loop: no
other module of the package runs a trace or plans a cut.
"""
import ast
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

from torch_jit_cache.frontend.dynamic import DynamicPolicy  # noqa: E402
from torch_jit_cache.graph_break import driver  # noqa: E402
from torch_jit_cache.guard.trace_result import BreakOutput, Unsupported  # noqa: E402

PACKAGE = pathlib.Path(driver.__file__).resolve().parents[1]


class _Frame:
    """What the driver reads of a frame."""

    def __init__(self, fn, *args):
        self.f_code = fn.__code__
        self.f_locals = dict(zip(fn.__code__.co_varnames, args))
        self.f_globals = fn.__globals__
        self.f_builtins = vars(__builtins__) if not isinstance(__builtins__, dict) else __builtins__
        self.closure = fn.__closure__


def _trace(fn, *args, fullgraph=False, dynamic=False):
    policy = DynamicPolicy(dynamic)
    frame = _Frame(fn, *args)
    plan = policy.plan(frame.f_code, frame.f_locals, lambda s: None)
    return driver.trace_frame(frame, plan, policy, fullgraph)


def _no_break(x):
    return x * 2


def _one_break(x):
    y = x + 1
    sys.stdout.write("")
    return y * 2


def _two_breaks(x):
    y = x + 1
    sys.stdout.write("")
    z = y * 2
    sys.stdout.write("")
    return z


def _counting():
    yield 1
    yield 2


def _generator_alive_at_break(x):
    gen = _counting()
    y = x + next(gen)
    sys.stdout.write("")
    return y + next(gen)


def test_a_frame_without_a_break_is_traced_once_to_its_return():
    traced = _trace(_no_break, torch.ones(2))
    assert not traced.cut and traced.break_reason is None and not traced.in_callee
    assert not isinstance(traced.result.output, BreakOutput)


def test_a_frame_is_cut_at_its_first_break_with_the_failure_named():
    traced = _trace(_one_break, torch.ones(2))
    assert traced.cut
    assert "write" in traced.break_reason
    assert traced.result.output.plan.instr.name in ("CALL", "PRECALL", "LOAD_METHOD", "LOAD_ATTR")


def test_a_generator_alive_at_the_break_moves_the_cut_to_where_it_was_made():
    traced = _trace(_generator_alive_at_break, torch.ones(2))
    assert traced.cut
    plan = traced.result.output.plan
    made_at = plan.instr.lineno
    assert made_at == _generator_alive_at_break.__code__.co_firstlineno + 1   # `gen = (...)`


def test_fullgraph_lists_every_break():
    with pytest.raises(driver.EveryBreak, match=r"2 graph breaks") as info:
        _trace(_two_breaks, torch.ones(2), fullgraph=True)
    lines = info.value.args[0].splitlines()
    assert [line[:5] for line in lines[1:]] == ["  1. ", "  2. "]
    assert lines[1].endswith(f":{_two_breaks.__code__.co_firstlineno + 2} (LOAD_METHOD write)") \
        or lines[1].endswith(f":{_two_breaks.__code__.co_firstlineno + 2} (LOAD_ATTR write)")


def test_fullgraph_with_one_break_raises_the_failure_itself():
    with pytest.raises(Unsupported, match="write"):
        _trace(_one_break, torch.ones(2), fullgraph=True)


def _calls(path: pathlib.Path) -> set:
    """The names of what `path` calls as `x.name(...)` or `name(...)`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None))
    return names


def test_only_the_driver_traces_again():
    """One loop re-runs the trace: no module but the driver calls the tracer's entry points (made in
    tracer/frame.py) or plans a cut. The disk cache's output codec is the one other caller of
    plan_break, and traces nothing: a stored break keeps its instruction's index, and the plan is a
    function of the code and it."""
    allowed = {"pipeline/disk_cache/output_codec.py": {"plan_break"}}
    callers = sorted(str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
                     if p.name not in ("driver.py", "frame.py") and
                     ({"trace", "root_translator", "plan_break", "list_breaks"} & _calls(p)) -
                     allowed.get(str(p.relative_to(PACKAGE)), set()))
    assert callers == []
