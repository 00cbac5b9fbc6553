"""The trace budget (config.trace_budget): a trace that interprets more instructions than the budget,
over the root frame and every call it inlines, gives up; the frame runs its original code with the
reason logged once, so a long Python loop costs at most a bounded number of instructions to compile
instead of being unrolled one instruction at a time. Compared with eager."""
import logging
import time

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
import torch_jit_cache.tracer as tracer_pkg  # noqa: E402
from torch_jit_cache.pipeline.convert_frame import FullGraphError  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(tjc.config, "trace_budget", 2_000)


@pytest.fixture
def traces(monkeypatch):
    """The number of root-frame traces made (each one attempt of the graph-break driver)."""
    count = [0]
    real = tracer_pkg.trace

    def counting(*args, **kwargs):
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(tracer_pkg, "trace", counting)
    return count


def _long_loop(x, n):
    total = 0
    for i in range(n):
        total = (total * 31 + i) % 1_000_003
    return x + total


def _step(total, i):
    return (total * 31 + i) % 1_000_003


def _long_loop_inlined(x, n):
    total = 0
    for i in range(n):
        total = _step(total, i)
    return x * 2 + total


def _short_loop(x, n):
    for i in range(n):
        x = x + i
    return x


@pytest.mark.parametrize("fn", [_long_loop, _long_loop_inlined])
def test_a_frame_past_the_budget_runs_uncompiled_with_eager_result(small_budget, fn, caplog):
    x = torch.randn(3)
    before = tjc.stats()["fallbacks"]
    compiled = tjc.compile(fn, backend="eager")
    with caplog.at_level(logging.WARNING, logger="torch_jit_cache"):
        got = compiled(x, 5_000)
        again = compiled(x, 5_000)
    expected = fn(x, 5_000)
    assert torch.equal(got, expected) and torch.equal(again, expected)
    assert tjc.stats()["fallbacks"] > before
    warnings = [r.getMessage() for r in caplog.records if "budget of 2000 instructions" in r.getMessage()]
    assert len(warnings) == 1, warnings   # logged once, not per call


def test_the_budget_counts_inlined_calls(small_budget):
    # 300 iterations: under the budget in the root frame alone (a dozen instructions each), past
    # it with the instructions of the inlined helper counted too.
    explanation = tjc.explain(_long_loop_inlined)(torch.randn(3), 300)
    reasons = [f.fallback_reason for f in explanation.frames if f.fallback_reason]
    assert any("budget" in r for r in reasons), reasons


def test_under_the_budget_the_frame_compiles(small_budget):
    x = torch.randn(3)
    counter = tjc.testing.CompileCounter()
    got = tjc.compile(_short_loop, backend=counter)(x, 20)
    assert torch.allclose(got, _short_loop(x, 20))
    assert counter.frame_count == 1


def test_past_the_budget_the_frame_is_traced_once_not_cut_or_retraced(small_budget, traces):
    # Not a graph break (a cut would trace the loop again up to it, and its resume function after
    # it), and no second, static-shape attempt (it runs the same loop).
    x = torch.randn(3)
    got = tjc.compile(_long_loop, backend="eager", dynamic=True)(x, 5_000)
    assert torch.equal(got, _long_loop(x, 5_000))
    assert traces[0] == 1


def test_the_frame_is_not_traced_again_on_later_calls(small_budget, traces):
    compiled = tjc.compile(_long_loop, backend="eager")
    x = torch.randn(3)
    for n in (5_000, 5_000, 5_001):
        assert torch.equal(compiled(x, n), _long_loop(x, n))
    assert traces[0] == 1


def _inner(total, m):
    for j in range(m):
        total = (total * 31 + j) % 1_000_003
    return total


def _nested_loops(x, n, m):
    total = 0
    for i in range(n):
        total = _inner(total, m)
    return x + total


def test_compiling_nested_loops_costs_a_bounded_time(monkeypatch):
    # 4,000,000 inner iterations (tens of millions of instructions unrolled, each call's loop short
    # enough on its own): the budget counts them all, and the trace gives up after 100,000.
    monkeypatch.setattr(tjc.config, "trace_budget", 100_000)
    x = torch.randn(3)
    start = time.perf_counter()
    got = tjc.compile(_nested_loops, backend="eager")(x, 2_000, 2_000)
    took = time.perf_counter() - start
    assert torch.equal(got, _nested_loops(x, 2_000, 2_000))
    assert took < 60, took


def test_fullgraph_names_the_budget(small_budget):
    with pytest.raises(FullGraphError, match="budget of 2000 instructions"):
        tjc.compile(_long_loop, backend="eager", fullgraph=True)(torch.randn(3), 5_000)


def test_the_budget_is_a_setting(monkeypatch):
    with pytest.raises(ValueError, match="trace_budget"):
        tjc.config.trace_budget = 0
    with pytest.raises(TypeError, match="trace_budget"):
        tjc.config.trace_budget = 1.5
    monkeypatch.setenv("TJC_TRACE_BUDGET", "1234")
    assert type(tjc.config)().trace_budget == 1234


def _zipped_lengths(x, n):
    return x + len(list(zip(range(n), range(n))))


def test_the_budget_counts_items_a_builtin_computes(small_budget):
    # list(zip(...)) runs no instruction per item: the items it computes count against the
    # budget too, so no model of a builtin loops without bound.
    x = torch.randn(3)
    explanation = tjc.explain(_zipped_lengths)(x, 5_000)
    reasons = [f.fallback_reason for f in explanation.frames if f.fallback_reason]
    assert any("budget" in r for r in reasons), reasons
    assert torch.equal(tjc.compile(_zipped_lengths, backend="eager")(x, 5_000), _zipped_lengths(x, 5_000))
