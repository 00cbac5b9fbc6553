"""benchmarks/upstream_tests.py on a small test file of our own, laid out as the upstream files are:
each kind of case (whole, broken, wrong, raising, a worker that dies) lands in its column, through
the same parent and worker processes the real run uses. The tjc side compiles with a backend that
misbehaves on purpose (TJC_UPSTREAM_BACKEND): wrong values for graphs with `mul`, a raise for
`div`, the process ending for `cos`."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch   # the harness's workers import torch

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "upstream_tests.py"

FAKE_BACKEND = '''
import os
import torch


def misbehave(gm, example_inputs):
    names = {getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes}
    if "cos" in names:
        os._exit(3)

    def run(*args):
        out = gm(*args)
        if "mul" in names:
            return tuple(o + 1 for o in out) if isinstance(out, (tuple, list)) else out + 1
        if "truediv" in names or "div" in names:
            raise RuntimeError("the backend failed on purpose")
        return out

    return run
'''

TESTS = '''
import torch
import torch._dynamo.testing


class MiscTestsPart1:
    def test_a_whole(self):
        cnt = torch._dynamo.testing.CompileCounter()
        opt = torch.compile(lambda x: x.sin() + 1, backend=cnt)
        opt(torch.ones(3))
        self.assertEqual(cnt.frame_count, 1)   # the test's own counter sees torch.compile's run

    def test_b_breaks(self):
        @torch.compile(backend="eager")
        def f(x):
            y = x + 1
            torch._dynamo.graph_break()
            return y - 2

        f(torch.ones(3))

    def test_c_wrong(self):
        torch._dynamo.optimize("eager")(lambda x: x * 3)(torch.ones(3))

    def test_d_raises(self):
        torch.compile(lambda x: x / 3, backend="eager")(torch.ones(3))

    def test_e_dies(self):
        torch.compile(lambda x: x.cos(), backend="eager")(torch.ones(3))

    def test_f_after_restart(self):
        torch.compile(lambda x: x.sin() - 1, backend="eager")(torch.ones(3))

    def test_g_state_outlives_a_call(self):
        calls = []

        def f(x):
            calls.append(1)
            if len(calls) > 1:
                raise AssertionError("called again")
            return x.sin() + 2

        torch.compile(f, backend="eager")(torch.ones(3))

    def test_h_asks_whether_compiled(self):
        def f(x):
            return x + (1 if torch.compiler.is_compiling() else 0)

        torch.compile(f, backend="eager")(torch.ones(3))

    def test_i_refuses_a_specialized_mark(self):
        def f(x):
            if x.shape[0] == 3:
                return x.sin()
            return x - 1

        y = torch.ones(3, 2)
        torch._dynamo.mark_dynamic(y, 0)
        try:
            torch.compile(f, backend="eager")(y)
        except Exception:
            pass

    def test_j_asks_and_is_wrong(self):
        torch.compile(lambda x: x * (3 if torch.compiler.is_compiling() else 2), backend="eager")(torch.ones(3))
'''


def run_harness(root, out, *extra):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TJC_UPSTREAM_BACKEND="fake_backend:misbehave")
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(root), "--json", str(out), *extra],
                          capture_output=True, text=True, env=env, timeout=300)


def test_each_kind_of_case_is_counted_in_its_column(tmp_path):
    dynamo = tmp_path / "up" / "test" / "dynamo"
    dynamo.mkdir(parents=True)
    (dynamo / "_test_misc_part1.py").write_text(textwrap.dedent(TESTS))
    (dynamo / "fake_backend.py").write_text(textwrap.dedent(FAKE_BACKEND))
    out = tmp_path / "result.json"
    proc = run_harness(tmp_path / "up", out)
    assert proc.returncode == 0, proc.stderr

    result = json.loads(out.read_text())
    status = {c["test"].split(".")[1]: (c["tjc"]["status"], c["tc"]["status"]) for c in result["cases"]}
    assert status == {
        "test_a_whole": ("whole", "whole"),
        "test_b_breaks": ("broken", "broken"),
        "test_c_wrong": ("wrong", "whole"),
        "test_d_raises": ("crashed", "whole"),
        "test_e_dies": ("crashed", "not run"),
        "test_f_after_restart": ("whole", "whole"),
        # eager's second run raised as the compiled runs (the third and fourth) do: no crash
        "test_g_state_outlives_a_call": ("broken", "broken"),
        # is_compiling() answers True in compiled code: the eager run where it does is the reference
        "test_h_asks_whether_compiled": ("whole", "whole"),
        # mark_dynamic's contract: both compilers refuse the trace (no graph), which is no crash
        "test_i_refuses_a_specialized_mark": ("broken", "broken"),
        # ... and a value that differs from that reference too is still wrong
        "test_j_asks_and_is_wrong": ("wrong", "whole"),
    }
    # The worker died inside tjc's run of test_e: the case is marked crashed (torch.compile's run
    # never came), the test too, and a new worker ran the test after it.
    assert result["tests"]["_test_misc_part1.py::MiscTestsPart1.test_e_dies"]["outcome"] == "crashed"
    assert result["tests"]["_test_misc_part1.py::MiscTestsPart1.test_a_whole"]["outcome"] == "pass"

    misc = result["groups"]["misc"]
    assert misc["cases"] == 10 and misc["tests"] == 10
    assert misc["tjc"] == {"whole": 3, "broken": 3, "wrong": 2, "crashed": 2}
    assert misc["tc_only"] == 3   # c, d, j: torch.compile whole, tjc not
    reasons = {r["sample"] for r in result["top_reasons"]}
    assert "MiscTestsPart1.test_d_raises" in reasons
    # the table names the group and the totals
    assert "misc" in proc.stdout and "total" in proc.stdout

    # --compare with the same result: no case changed
    again = subprocess.run([sys.executable, "-c", "import sys, json; sys.path.insert(0, sys.argv[1]); "
                            "import upstream_tests as u; r = json.load(open(sys.argv[2])); "
                            "print(len(u.compare(sys.argv[2], r)))", str(ROOT / "benchmarks"), str(out)],
                           capture_output=True, text=True, timeout=60)
    assert again.stdout.strip() == "2", again.stderr   # the two heading lines only


def test_without_the_files_it_says_not_fetched(tmp_path):
    proc = run_harness(tmp_path / "nothing", tmp_path / "out.json")
    assert proc.returncode == 0
    assert "not fetched" in proc.stdout
    assert not (tmp_path / "out.json").exists()


def test_reasons_group_across_names_numbers_and_places():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import upstream_tests
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    a = upstream_tests.reason_group("break: attribute 'x' of ListVariable([ConstantVariable(1)]) at /a/b.py:12 (CALL 2)")
    b = upstream_tests.reason_group("break: attribute 'x' of ListVariable([ConstantVariable(7), "
                                    "ConstantVariable(8)]) at /c/d.py:99 (CALL 0)")
    assert a == b
    assert upstream_tests.reason_group("break: attribute 'y' of X at /a.py:1") != a


def test_the_filled_eager_run_fills_memory_no_op_wrote():
    """The eager run that tells a result read from memory never written (torch.empty, resize_
    growing a tensor): there that memory is NaN, whatever block the allocator hands out."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import upstream_worker
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    import torch

    with upstream_worker.uninitialized_memory_filled():
        grown = torch.zeros(2).resize_(16)
        assert torch.isnan(torch.empty(8)).all() and torch.isnan(grown[2:]).all()
        assert (torch.empty(4, dtype=torch.int64) == torch.iinfo(torch.int64).max).all()
    assert not torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)   # a test's own setting is left as it is
    try:
        with upstream_worker.uninitialized_memory_filled():
            assert torch.is_deterministic_algorithms_warn_only_enabled() is False
        assert torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


# torch.compile's breaks that counters["graph_break"] misses: one inside an inlined function
# (TorchDynamo's TestCase turns on nested_graph_breaks), and a second torch.compile of a function
# whose broken code is already cached for the same backend (nothing is compiled again). Only
# sin, tan, exp, add and sub: the tjc side's backend misbehaves on cos, mul and div.
HIDDEN_BREAKS = '''
import torch


def inner(x):
    y = x + 1
    torch._dynamo.graph_break()
    return y - 2


def outer(x):
    return inner(x) - 1


def broken_here(x):
    y = x.sin()
    torch._dynamo.graph_break()
    return y.tan()


class MiscTestsPart1:
    def test_nested(self):
        torch.compile(outer, backend="eager")(torch.ones(3))

    def test_cached(self):
        torch.compile(broken_here, backend="eager")(torch.ones(3))
        torch.compile(broken_here, backend="eager")(torch.ones(3))

    def test_cached_whole(self):
        f = lambda x: x.exp() + 3   # noqa: E731
        torch.compile(f, backend="eager")(torch.ones(3))
        torch.compile(f, backend="eager")(torch.ones(3))
'''


def test_torch_compile_breaks_the_counter_misses_are_counted(tmp_path):
    dynamo = tmp_path / "up" / "test" / "dynamo"
    dynamo.mkdir(parents=True)
    (dynamo / "_test_misc_part1.py").write_text(textwrap.dedent(HIDDEN_BREAKS))
    (dynamo / "fake_backend.py").write_text(textwrap.dedent(FAKE_BACKEND))
    out = tmp_path / "result.json"
    proc = run_harness(tmp_path / "up", out)
    assert proc.returncode == 0, proc.stderr
    cases = {(c["test"].split(".")[1], c["case"]): c["tc"] for c in json.loads(out.read_text())["cases"]}
    assert cases[("test_nested", 0)]["status"] == "broken"
    assert cases[("test_cached", 0)]["status"] == "broken"
    assert cases[("test_cached", 1)]["status"] == "broken"
    assert "resume function" in cases[("test_cached", 1)]["reasons"][0]
    assert cases[("test_cached_whole", 0)]["status"] == "whole"
    assert cases[("test_cached_whole", 1)]["status"] == "whole"


def test_colour_off_for_class_backfills_what_older_test_support_lacks(monkeypatch):
    # CPython 3.13.0's test.support predates force_not_colorized_test_class, which the 3.13
    # suites apply to a class: without it a whole file fails to import (0 cases counted).
    import unittest
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import upstream_worker
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.delenv("NO_COLOR", raising=False)
    seen = []

    class Case(unittest.TestCase):
        @classmethod
        def setUpClass(cls):
            seen.append(("own setUpClass", os.environ.get("NO_COLOR")))

        def test_a(self):
            seen.append((os.environ.get("NO_COLOR"), os.environ.get("FORCE_COLOR")))

    upstream_worker._colour_off_for_class(Case)
    result = unittest.TestResult()
    unittest.TestSuite([Case("test_a")]).run(result)
    assert result.wasSuccessful(), result.errors
    assert seen == [("own setUpClass", "1"), ("1", None)]
    assert os.environ.get("FORCE_COLOR") == "1" and "NO_COLOR" not in os.environ

    from test import support
    monkeypatch.delattr(support, "force_not_colorized_test_class", raising=False)
    upstream_worker.backfill_test_support()
    assert support.force_not_colorized_test_class is upstream_worker._colour_off_for_class
