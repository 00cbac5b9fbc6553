"""Capture breadth (issue 25): graphs, breaks and frames run uncompiled, tjc against torch.compile.

Two parts, both with backend="eager" so that only capture is measured:
  programs  tests/python/scenarios/capture_programs.py: small programs of every kind (control flow,
            containers, builtins, iteration, closures, classes, context managers, exceptions,
            enums, dataclasses, numpy, built-in modules), each run eagerly and compiled by each
            compiler on equal fresh objects, twice (the second call runs the cached code).
            "whole": one graph, no break, no frame run uncompiled. "wrong": an output (side
            effects included: programs return what they change) differs from eager's, or the
            compiled call raised where eager did not.
  zoo       torch_jit_cache/testing/models.py: graphs/breaks of one run (tjc.explain,
            torch._dynamo.explain) and the frames tjc ran uncompiled.

Goal (issue 25): on every zoo model as many graphs and breaks as torch.compile or fewer; on the
programs, captured whole >= torch.compile's count; 0 wrong everywhere. The script prints whether
each is met, per-category counts and the programs where the two compilers differ.

Usage: python benchmarks/capture.py [--quick] [--only name,name] [--no-zoo]
"""
import logging
import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the in-place build in the checkout
# The programs live beside the tests that check them, outside the package (whose own code is never
# traced: frontend/trace_rules.py); outputs are compared as those tests compare them (context_helpers).
_TESTS = Path(__file__).resolve().parent.parent / "tests" / "python"
sys.path[:0] = [str(_TESTS), str(_TESTS / "scenarios")]
import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from capture_programs import PROGRAMS  # noqa: E402
from context_helpers import assert_same  # noqa: E402
from harness import options, print_head, write_results  # noqa: E402
from torch_jit_cache.testing import models as zoo  # noqa: E402


def same(a, b) -> bool:
    """Equal outputs, as test_capture_programs.py requires them (context_helpers.assert_same)."""
    try:
        assert_same(a, b)
    except AssertionError:
        return False
    return True


def run_twice(fn, args):
    """Two calls' outputs, or the exception the first raised (as a string)."""
    try:
        return [fn(*args), fn(*args)], None
    except Exception as e:  # noqa: BLE001 - a program may raise in eager too: then both must
        return None, f"{type(e).__name__}: {e}"


def measure_program(name) -> dict:
    make = PROGRAMS[name].make
    expected, expected_error = run_twice(*make())
    row = dict(program=name, category=PROGRAMS[name].category, eager_error=expected_error)

    tjc.reset()
    fn, args = make()
    report = tjc.explain(fn)(*args)
    tjc.reset()
    fn, args = make()
    got, error = run_twice(tjc.compile(fn, backend="eager"), args)
    row.update(tjc_graphs=report.graph_count, tjc_breaks=report.graph_break_count,
               tjc_uncompiled=len(report.fallbacks),
               tjc_whole=report.graph_count == 1 and report.graph_break_count == 0 and not report.fallbacks,
               tjc_wrong=(error != expected_error) or (error is None and not same(got, expected)),
               tjc_error=error, tjc_reasons=[str(r)[:160] for r in (*report.break_reasons, *report.fallbacks)][:3])
    tjc.reset()

    torch._dynamo.reset()
    fn, args = make()
    theirs = torch._dynamo.explain(fn)(*args)
    torch._dynamo.reset()
    fn, args = make()
    got, error = run_twice(torch.compile(fn, backend="eager"), args)
    row.update(tc_graphs=theirs.graph_count, tc_breaks=theirs.graph_break_count,
               tc_whole=theirs.graph_count == 1 and theirs.graph_break_count == 0,
               tc_wrong=(error != expected_error) or (error is None and not same(got, expected)))
    torch._dynamo.reset()
    return row


def measure_model(name) -> dict:
    model, inputs = zoo.build(name)
    model.eval()
    with torch.no_grad():
        tjc.reset()
        ours = tjc.explain(model)(*inputs.args, **inputs.kwargs)
        tjc.reset()
        torch._dynamo.reset()
        theirs = torch._dynamo.explain(model)(*inputs.args, **inputs.kwargs)
        torch._dynamo.reset()
    return dict(model=name, tjc_graphs=ours.graph_count, tjc_breaks=ours.graph_break_count,
                tjc_uncompiled=len(ours.fallbacks), tc_graphs=theirs.graph_count, tc_breaks=theirs.graph_break_count)


def main():
    opts = options(__doc__, "capture", extra=lambda p: (
        p.add_argument("--only", help="comma-separated program names"),
        p.add_argument("--no-zoo", action="store_true", help="programs only")))
    warnings.simplefilter("ignore")   # tjc's fallback warnings show as counts; HF config warnings
    logging.getLogger("torch._dynamo").setLevel(logging.ERROR)
    names = opts.only.split(",") if opts.only else list(PROGRAMS)
    print_head(f"{'program':<34}{'category':<14}{'tjc g/b/unc':>12}{'t.c g/b':>9}{'whole':>7}{'wrong':>7}")
    rows = []
    for name in names:
        r = measure_program(name)
        rows.append(r)
        whole = ("y" if r["tjc_whole"] else "-") + "/" + ("y" if r["tc_whole"] else "-")
        wrong = ("N" if r["tjc_wrong"] else "") + "/" + ("N" if r["tc_wrong"] else "")
        print(f"{name:<34}{r['category']:<14}{r['tjc_graphs']:>4}/{r['tjc_breaks']}/{r['tjc_uncompiled']:<5}"
              f"{r['tc_graphs']:>5}/{r['tc_breaks']:<3}{whole:>7}{wrong:>7}", flush=True)
    print("\nper category: programs, captured whole by tjc / torch.compile, wrong tjc / torch.compile")
    for category in dict.fromkeys(r["category"] for r in rows):
        rs = [r for r in rows if r["category"] == category]
        print(f"  {category:<14}{len(rs):>4}{sum(r['tjc_whole'] for r in rs):>6} /{sum(r['tc_whole'] for r in rs):>3}"
              f"{sum(r['tjc_wrong'] for r in rs):>6} /{sum(r['tc_wrong'] for r in rs):>3}")
    ours, theirs = sum(r["tjc_whole"] for r in rows), sum(r["tc_whole"] for r in rows)
    wrong = [r["program"] for r in rows if r["tjc_wrong"]]
    print(f"  {'all':<14}{len(rows):>4}{ours:>6} /{theirs:>3}{len(wrong):>6} /{sum(r['tc_wrong'] for r in rows):>3}")
    behind = [r for r in rows if r["tc_whole"] and not r["tjc_whole"]]
    if behind:
        print("\ncaptured whole by torch.compile only (tjc's first reasons):")
        for r in behind:
            print(f"  {r['program']}: {'; '.join(r['tjc_reasons']) or r['tjc_error']}")
    if wrong:
        print(f"\ntjc wrong: {', '.join(wrong)}")
    models = []
    if not opts.no_zoo and not opts.only:
        print()
        print_head(f"{'zoo model':<16}{'tjc g/b/unc':>12}{'t.c g/b':>9}{'<= t.c':>8}")
        for name in (n for n in zoo.MODELS if zoo.available(n)):
            m = measure_model(name)
            m["ok"] = m["tjc_graphs"] <= m["tc_graphs"] and m["tjc_breaks"] <= m["tc_breaks"]
            models.append(m)
            print(f"{name:<16}{m['tjc_graphs']:>6}/{m['tjc_breaks']}/{m['tjc_uncompiled']:<4}"
                  f"{m['tc_graphs']:>5}/{m['tc_breaks']:<3}{'y' if m['ok'] else 'N':>8}", flush=True)
    met = ours >= theirs and not wrong and all(m["ok"] for m in models)
    print(f"\ngoal: programs captured whole tjc {ours} >= torch.compile {theirs}, 0 wrong ({len(wrong)}), zoo "
          f"graphs and breaks <= torch.compile's: {'met' if met else 'NOT met'}")
    write_results(opts.json, torch.__version__, programs=rows, models=models, goal_met=met)


if __name__ == "__main__":
    main()
