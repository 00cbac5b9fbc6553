"""Hunt reference and memory leaks like CPython's `regrtest -R WARMUPS:RUNS`, one pytest test at a time.

Run it with a debug interpreter (sys.gettotalrefcount exists only there) and pytest's arguments:

    .venv-dbg/bin/python scripts/hunt_leaks.py [-R 3:3] tests/python -m "not torch"

How it works: a pytest plugin (below) takes over `pytest_runtest_protocol`. Each test item runs
WARMUPS + RUNS times in this process (setup, call, teardown each time; fixtures of wider scope stay
alive between repetitions and are torn down after the last). Before the first run and after each,
the plugin clears the interpreter's caches that a test may fill legitimately (the list is
`clean_caches`, after regrtest's `dash_R_cleanup`), collects garbage, and reads
`sys.gettotalrefcount()` and `sys.getallocatedblocks()`. The warm-up runs fill whatever fills once
(interned strings, pybind11's type caches, lazily imported modules, the code-extra index); the
deltas of the last RUNS runs must then show no growth:

  references   a leak when every one of the RUNS deltas is positive, or their sum is. Zero in
               every run is what a leak-free test gives on a debug build; a test that leaks one
               reference per run shows [1, 1, 1].
  blocks       a leak when every one of the RUNS deltas is positive. Tolerance, as regrtest's
               (bpo-30776): pymalloc's free lists and a dict resizing on the 5th insert make single
               runs show +1/+2 blocks then -2 in the next ([0, 2, -2]); only growth on every run is
               a leak. Blocks are not summed for the same reason.

Only the last run is reported to pytest (its junit XML and terminal line), so a test counts once.
A test that fails on any repetition is reported with that repetition's result and not measured.
A leak is reported as its own failure after the test's line:

    LEAK tests/python/test_runtime.py::test_x: references [1, 1, 1] (sum 3), blocks [1, 1, 1]

and the exit status is 1 when any test leaked (pytest's own status otherwise).
"""
from __future__ import annotations

import argparse
import gc
import sys
import warnings
from pathlib import Path

import pytest
from _pytest.runner import runtestprotocol


def clean_caches() -> None:
    """Empty the caches that a test fills legitimately and that would otherwise read as a leak
    (regrtest's dash_R_cleanup, the parts that apply to pytest runs of this project)."""
    # Warnings: every module's __warningregistry__ grows by one entry per new warning text, and
    # `warnings.filters` is reset by pytest's catch_warnings around each test (the registries are
    # invalidated by _filters_mutated, as regrtest does).
    warnings._filters_mutated()  # type: ignore[attr-defined]
    for module in list(sys.modules.values()):
        registry = getattr(module, "__warningregistry__", None)
        if isinstance(registry, dict):
            registry.clear()
    import re
    re.purge()
    import linecache
    linecache.clearcache()
    import struct
    struct._clearcache()  # type: ignore[attr-defined]
    typing = sys.modules.get("typing")
    if typing is not None:
        for cleanup in typing._cleanups:  # type: ignore[attr-defined]
            cleanup()
    # abc caches of every ABC seen so far (collections.abc registrations stay).
    for cls in _abcs():
        cls._abc_caches_clear()
    # threading keeps the lock of each finished non-daemon thread in _shutdown_locks until the next
    # thread starts (3.11), so a test that starts a thread frees the previous run's lock: a lag, not
    # a leak.
    threading = sys.modules.get("threading")
    if threading is not None and hasattr(threading, "_maintain_shutdown_locks"):
        with threading._shutdown_locks_lock:  # type: ignore[attr-defined]
            threading._maintain_shutdown_locks()  # type: ignore[attr-defined]
    # The runtime's caches: a test's nested functions share one code object across repetitions (a
    # constant of the test), so without this the 2nd run would find the 1st run's entries cached
    # and behave differently. Dropping them is part of every run; what reset() cannot reach is a
    # leak.
    tjc = sys.modules.get("torch_jit_cache")
    if tjc is not None:
        tjc.reset()
    sys._clear_type_cache()
    gc.collect()
    gc.collect()


def _abcs():
    import collections.abc
    for name in dir(collections.abc):
        obj = getattr(collections.abc, name)
        if isinstance(obj, type) and hasattr(obj, "_abc_impl"):
            yield obj
            yield from (sub for sub in obj.__subclasses__() if hasattr(sub, "_abc_impl"))


def counts() -> tuple[int, int]:
    clean_caches()
    return sys.gettotalrefcount(), sys.getallocatedblocks()


class _Sibling:
    """Stands for a next item in the same collector: pytest's teardown (SetupState.teardown_exact)
    keeps the nodes of nextitem.listchain() set up, so this keeps the item's parents and tears the
    item itself down. (nextitem=item would keep the item itself up: no fresh function fixtures.)"""

    def __init__(self, item):
        self._chain = item.listchain()[:-1]

    def listchain(self):
        return self._chain


class HuntLeaks:
    def __init__(self, warmups: int, runs: int):
        self.warmups, self.runs = warmups, runs
        self.leaks: list[str] = []

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        ihook = item.ihook
        ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        # Tests that leak on purpose or cannot repeat (they test the leak checkers themselves) carry
        # no_refleaks, and hypothesis tests draw new examples and grow hypothesis' own example
        # database on every run: those run once, not measured.
        once = item.get_closest_marker("no_refleaks") is not None or \
            getattr(getattr(item, "obj", None), "is_hypothesis_test", False)
        total = 0 if once else self.warmups + self.runs
        # Deltas only, in lists allocated up front, as regrtest does: a delta is a small int (cached
        # by CPython), whereas keeping every total would allocate an object per run and show up as
        # +2 references and blocks in each (the list slot's int and its block).
        ref_deltas, block_deltas = [0] * total, [0] * total
        measured = 0
        sibling = _Sibling(item)
        refs_before, blocks_before = counts()
        for i in range(total + 1):
            if i:
                item._initrequest()  # fresh fixture values, as pytest-rerunfailures does
                # pytest appends each run's captured output and log records to the item's report
                # sections ("Captured log call"): kept across runs they read as a leak of the test
                # (13 references per logged message); a fresh item starts with none.
                item._report_sections.clear()
            last = i == total
            # Measured runs tear down only what the item itself set up (its function-scoped
            # fixtures); fixtures of wider scope stay up, so every run does the same work. One more run, the
            # one reported, then tears down towards the real next item.
            reports = runtestprotocol(item, nextitem=nextitem if last else sibling, log=False)
            if last or any(r.failed or r.skipped for r in reports):
                break
            refs_after, blocks_after = counts()
            ref_deltas[i] = refs_after - refs_before
            block_deltas[i] = blocks_after - blocks_before
            refs_before, blocks_before = refs_after, blocks_after
            measured += 1
        if not last:
            # A repetition failed or skipped: report it as it is, and tear down towards the next
            # item (pytest's own teardown, the part runtestprotocol skipped with nextitem=item).
            item.session._setupstate.teardown_exact(nextitem)
        for report in reports:
            ihook.pytest_runtest_logreport(report=report)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        if total and measured == total:
            self.check(item.nodeid, ref_deltas[self.warmups:], block_deltas[self.warmups:])
        return True

    def check(self, nodeid: str, ref_deltas: list[int], block_deltas: list[int]) -> None:
        ref_leak = all(d > 0 for d in ref_deltas) or sum(ref_deltas) > 0
        block_leak = all(d > 0 for d in block_deltas)
        if ref_leak or block_leak:
            line = (f"LEAK {nodeid}: references {ref_deltas} (sum {sum(ref_deltas)}), "
                    f"blocks {block_deltas} (sum {sum(block_deltas)})")
            self.leaks.append(line)
            print(f"\n{line}", file=sys.stderr, flush=True)

    def pytest_terminal_summary(self, terminalreporter):
        tr = terminalreporter
        tr.section(f"hunt-leaks -R {self.warmups}:{self.runs}")
        if self.leaks:
            for line in self.leaks:
                tr.write_line(line, red=True)
            tr.write_line(f"{len(self.leaks)} test(s) leaked", red=True)
        else:
            tr.write_line("no leaks: every test's reference and block deltas were flat", green=True)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], add_help=False)
    parser.add_argument("-R", default="3:3", help="WARMUPS:RUNS (default 3:3)")
    args, pytest_args = parser.parse_known_args(argv)
    warmups, runs = (int(x) for x in args.R.split(":"))
    if not hasattr(sys, "gettotalrefcount"):
        print("hunt_leaks.py needs a debug CPython (sys.gettotalrefcount); e.g. .venv-dbg/bin/python",
              file=sys.stderr)
        return 2
    if warmups < 1 or runs < 1:
        print("-R: need at least one warm-up and one measured run", file=sys.stderr)
        return 2
    # As `python -m pytest` from the repository root: the package imports from the checkout.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    plugin = HuntLeaks(warmups, runs)
    rc = pytest.main(pytest_args, plugins=[plugin])
    if plugin.leaks and rc == 0:
        rc = 1
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
