"""The worker process of upstream_tests.py: imports one upstream test file, runs the tests it is
given, and writes one JSON object a line to the file descriptor the parent reads (the worker's
stdout at start; the tests' own prints go to /dev/null).

A case is one compiled callable made inside one test: every torch.compile, torch._dynamo.optimize
or optimize_assert call (decorator forms included) while a test runs makes one, and a CPython suite's
test method is one case of its own (PyTorch runs those methods compiled whole). Each call of a case
runs the function three times, from the same RNG state: eagerly on a deep copy of the arguments,
under tjc (backend "eager", fullgraph=False) on another copy, and under torch.compile with the
test's own arguments on the test's own objects. The torch.compile result (or exception) is what the
test sees, so its own counters and assertions run as written.

Lines written: {"ev": "tests", "tests": [...]} (mode "first": the file's tests, then it runs the
first N of them; mode "run" runs the tests it is given), {"ev": "start", "test"},
{"ev": "running", "test", "case", "engine"} before each compiled run (a process that dies names
the case it was in), {"ev": "case", ...} after each call with the case's record so far,
{"ev": "done", "test", "outcome", "seconds"}.
"""
from __future__ import annotations

import copy
import importlib.util
import json
import math
import os
import random
import sys
import threading
import time
import traceback
import types
import unittest
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(_HERE.parent))   # the checkout's torch_jit_cache

_OUT = None          # the parent's channel
_STATE = threading.local()


def emit(**fields) -> None:
    _OUT.write(json.dumps(fields, default=repr) + "\n")
    _OUT.flush()


# -- comparing eager with a compiled run ----------------------------------------------------------
class Outcome:
    __slots__ = ("value", "exc")

    def __init__(self, value=None, exc=None):
        self.value, self.exc = value, exc


def run_outcome(fn) -> Outcome:
    try:
        return Outcome(value=fn())
    except Exception as e:   # noqa: BLE001 - any exception is an outcome to compare
        return Outcome(exc=e)


def same_value(a, b, depth=0) -> bool:
    """b is a's value: tensors close (as torch.testing compares, NaN equal to NaN), containers of
    one type item by item, floats close, objects of one class with equal __dict__, else ==."""
    import torch

    if depth > 20:
        return True
    if a is b:
        return True
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return False
        try:
            torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-5, equal_nan=True, check_stride=False,
                                       check_device=True, check_layout=True)
            return True
        except Exception:   # noqa: BLE001
            return False
    if type(a) is not type(b):
        return False
    if type(a).__module__ == "numpy" and hasattr(a, "dtype"):   # ndarray or numpy scalar
        import numpy as np

        try:
            return a.dtype == b.dtype and np.shape(a) == np.shape(b) and bool(
                np.all(np.isclose(a, b, rtol=1e-4, atol=1e-5, equal_nan=True)))
        except TypeError:   # not numbers: exact
            return bool(np.all(a == b))
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_value(x, y, depth + 1) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k], depth + 1) for k in a)
    if isinstance(a, torch.nn.Module):
        sa, sb = a.state_dict(), b.state_dict()
        return list(sa) == list(sb) and all(same_value(sa[k], sb[k], depth + 1) for k in sa)
    try:
        eq = a == b
        if isinstance(eq, bool) and (eq or type(a).__eq__ is not object.__eq__):
            return eq   # the class's own answer
    except Exception:   # noqa: BLE001 - an __eq__ that cannot answer (tensors inside): compare state
        pass
    if isinstance(a, (types.FunctionType, types.MethodType, type, types.ModuleType)):
        return True   # two runs make two closures: not a value difference
    if hasattr(a, "__dict__"):
        if not same_value(vars(a), vars(b), depth + 1):
            return False
    slots = [n for k in type(a).__mro__ for n in getattr(k, "__slots__", ()) if isinstance(n, str)]
    for name in slots:
        if hasattr(a, name) != hasattr(b, name):
            return False
        if hasattr(a, name) and not same_value(getattr(a, name), getattr(b, name), depth + 1):
            return False
    # State compared where it can be read; an object that shows none (an iterator, a C object
    # compared by identity) cannot be told apart from its copy and counts as equal.
    return True


def same_outcome(eager: Outcome, got: Outcome) -> str:
    """'' when equal, 'wrong' (a different value), 'crashed' (raised where eager returned)."""
    if eager.exc is not None:
        if got.exc is not None:
            return "" if type(got.exc) is type(eager.exc) else "crashed"
        return "wrong"
    if got.exc is not None:
        return "crashed"
    return "" if same_value(eager.value, got.value) else "wrong"


def exc_text(e) -> str:
    return f"{type(e).__name__}: {str(e)[:300]}"


# -- the three runs -------------------------------------------------------------------------------
def rng_state():
    import numpy as np
    import torch

    return torch.get_rng_state(), random.getstate(), np.random.get_state()


def set_rng(state) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(state[0])
    random.setstate(state[1])
    np.random.set_state(state[2])


def dynamo_counts():
    """(graph breaks, frames started, frames converted, the graph-break reasons, resume functions
    made). TorchDynamo's TestCase turns on `nested_graph_breaks`, under which a break (in the
    frame itself or inside an inlined function) is not counted in counters["graph_break"]; every
    break that goes on after it makes a resume function (counters["resumes"]), so a break is also
    counted by those."""
    from torch._dynamo.utils import counters

    return (sum(counters["graph_break"].values()), counters["frames"]["total"], counters["frames"]["ok"],
            dict(counters["graph_break"]), sum(counters["resumes"].values()))


def tc_cached_break(fn) -> bool:
    """Whether torch.compile's most recently used cache entry for `fn`'s code calls a resume
    function: a call that compiled nothing (a cache hit, also of an earlier torch.compile of the
    same function with the same backend) ran that entry, broken where it was compiled."""
    code = getattr(fn, "__code__", None)
    if not isinstance(code, types.CodeType):
        return False
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list

        entries = _debug_get_cache_entry_list(code)
    except Exception:   # noqa: BLE001 - no such reader in this torch: nothing known
        return False
    return bool(entries) and any(n.startswith("__resume_at_") for n in entries[0].code.co_names)


def no_modes():
    """Copies and comparisons run outside the test's torch dispatch modes (a mode that rewrites
    every op would rewrite the comparison too)."""
    from torch.utils._python_dispatch import _disable_current_modes

    return _disable_current_modes()


# Settings both compilers have, under the same name: a test that sets torch._dynamo.config's
# (config.patch on the test) compiles tjc's run with the same value.
SHARED_SETTINGS = ("capture_scalar_outputs", "capture_dynamic_output_shape_ops")


class same_capture_settings:
    def __enter__(self):
        import torch._dynamo.config as dynamo_config

        from torch_jit_cache.config import config

        self._saved = {k: getattr(config, k) for k in SHARED_SETTINGS}
        for k in SHARED_SETTINGS:
            setattr(config, k, bool(getattr(dynamo_config, k)))

    def __exit__(self, *exc):
        from torch_jit_cache.config import config

        for k, v in self._saved.items():
            setattr(config, k, v)


class uninitialized_memory_filled:
    """Within: torch fills the memory of new tensors no op wrote (torch.empty, a growing resize_)
    with NaN (the largest integer for integer dtypes), as torch.use_deterministic_algorithms does
    with fill_uninitialized_memory, warning only where an op has no deterministic kernel. Nothing
    changes where the test already set deterministic mode itself."""

    def __enter__(self):
        import torch

        self._saved = None
        if not torch.are_deterministic_algorithms_enabled():
            self._saved = torch.utils.deterministic.fill_uninitialized_memory
            torch.use_deterministic_algorithms(True, warn_only=True)
            torch.utils.deterministic.fill_uninitialized_memory = True
        return self

    def __exit__(self, *exc):
        import torch

        if self._saved is not None:
            torch.use_deterministic_algorithms(False)
            torch.utils.deterministic.fill_uninitialized_memory = self._saved


def busy() -> str | None:
    """The engine of the case run now in progress on this thread (None: none)."""
    return getattr(_STATE, "engine", None)


class Case:
    """One compiled callable of one test; `tc` is what torch.compile made of it with the test's
    arguments."""

    def __init__(self, fn, tc, kind):
        self.fn, self.tc, self.kind = fn, tc, kind
        self.test = _STATE.test
        self.index = _STATE.next_case
        _STATE.next_case += 1
        self._tjc = None
        self._report = None
        self.rec = {"test": self.test, "case": self.index, "kind": kind, "fn": _name(fn), "calls": 0,
                    "tjc": {"status": "whole", "breaks": 0, "fallbacks": 0, "reasons": []},
                    "tc": {"status": "whole", "breaks": 0, "fallbacks": 0, "reasons": []}}

    def _tjc_callable(self):
        if self._tjc is None:
            from torch_jit_cache.api import _compiled, _target_code
            from torch_jit_cache.pipeline.convert_frame import FrameCompiler
            from torch_jit_cache.frontend.explanation import ExplainOutput

            # What tjc.compile(fn, backend="eager", fullgraph=False) makes, with explain()'s observer
            # kept for the case's life: the break and fallback reasons of every frame it compiles.
            self._report = ExplainOutput()
            callback = FrameCompiler(backend=tjc_backend(), fullgraph=False, target_code=_target_code(self.fn),
                                     observer=self._report.record)
            self._tjc = _compiled(self.fn, callback)
        return self._tjc

    def call(self, tc_call, args, kwargs):
        engine = busy()
        if engine is not None:   # a compiled call inside another case's run: run as that run does
            return tc_call(*args, **kwargs) if engine == "tc" else self.fn(*args, **kwargs)
        self.rec["calls"] += 1
        with no_modes():
            state = rng_state()
            try:
                copies = [copy.deepcopy((args, kwargs)) for _ in range(5)]
                self.rec.setdefault("copied", True)
            except Exception:   # noqa: BLE001 - shared objects then; side effects show four times
                copies = [(args, kwargs)] * 5
                self.rec["copied"] = False
        self._asked = None   # the eager run with the compile-state queries answering True, once needed

        def as_compiled():
            if self._asked is None and not eager_asked[0]:
                self._asked = (None, False, None)   # it never asked: nothing to run
            if self._asked is None:
                _STATE.engine = "eager"
                try:
                    set_rng(state)
                    with compile_queries_true() as asked:
                        outcome = run_outcome(lambda: self.fn(*copies[3][0], **copies[3][1]))
                    self._asked = (outcome, asked[0] > 0, copies[3])
                finally:
                    _STATE.engine = None
            return self._asked

        self._filled = None   # an eager run with memory no op wrote filled with NaN, once needed

        def filled():
            if self._filled is None:
                _STATE.engine = "eager"
                try:
                    set_rng(state)
                    with uninitialized_memory_filled():
                        self._filled = run_outcome(lambda: self.fn(*copies[4][0], **copies[4][1]))
                finally:
                    _STATE.engine = None
            return self._filled
        try:
            _STATE.engine = "eager"
            set_rng(state)
            with compile_queries_true(answer=False) as eager_asked:
                eager = run_outcome(lambda: self.fn(*copies[0][0], **copies[0][1]))
            self._again = None
            if self.rec["copied"]:
                # A second eager run: a result that differs between two eager runs (torch.empty,
                # an id, a time) is not compared.
                set_rng(state)
                again = run_outcome(lambda: self.fn(*copies[2][0], **copies[2][1]))
                self._again = again
                with no_modes():
                    if same_outcome(eager, again) or not same_value(copies[0], copies[2]):
                        self.rec["nondeterministic"] = True
            emit(ev="running", test=self.test, case=self.index, engine="tjc")
            _STATE.engine = "tjc"
            set_rng(state)
            import torch_jit_cache as tjc

            before = tjc.stats()
            seen = len(self._report.frames) if self._report is not None else 0
            with same_capture_settings():
                got = run_outcome(lambda: self._tjc_callable()(*copies[1][0], **copies[1][1]))
            after = tjc.stats()
            tjc_run = (got, after["graph_breaks"] - before["graph_breaks"], after["fallbacks"] - before["fallbacks"],
                       self._tjc_reasons(seen))
            emit(ev="running", test=self.test, case=self.index, engine="tc")
            _STATE.engine = "tc"
            set_rng(state)
            c0 = dynamo_counts()
            result = run_outcome(lambda: tc_call(*args, **kwargs))
            c1 = dynamo_counts()
            reasons = [k.split("\n")[0] for k, v in c1[3].items() if v > c0[3].get(k, 0)]
            breaks = max(0, c1[0] - c0[0], 1 if c1[4] > c0[4] else 0)
            if breaks and not reasons and c1[4] > c0[4]:
                reasons = ["a resume function made (a break counters['graph_break'] did not count)"]
            if not breaks and c1[1] == c0[1] and tc_cached_break(self.fn):
                breaks, reasons = 1, ["ran cached code that calls a resume function (a break compiled earlier)"]
            # Both recorded after both ran: a run the verdicts may need (as_compiled) comes last,
            # so torch.compile's run sees the side effects it would see in the test.
            self._record("tjc", eager, tjc_run[0], tjc_run[1], tjc_run[2], tjc_run[3], copies[0], copies[1],
                         as_compiled, filled)
            self._record("tc", eager, result, breaks, max(0, (c1[1] - c1[2]) - (c0[1] - c0[2])),
                         reasons, copies[0], (args, kwargs) if self.rec["copied"] else None, as_compiled, filled)
        finally:
            _STATE.engine = None
        emit(ev="case", **self.rec)
        if result.exc is not None:
            raise result.exc
        return result.value

    def _tjc_reasons(self, seen):
        if self._report is None:
            return []
        out = []
        for frame in self._report.frames[seen:]:
            if frame.break_reason:
                out.append(f"break: {frame.break_reason}")
            if frame.fallback_reason:
                out.append(f"fallback: {frame.fallback_reason}")
        return out

    def _record(self, engine, eager, got, breaks, fallbacks, reasons, eager_args, got_args, as_compiled, filled):
        rec = self.rec[engine]
        refused = False
        with no_modes():
            verdict = same_outcome(eager, got)
            if not verdict and not self.rec.get("nondeterministic") and got_args is not None and \
                    eager.exc is None and got.exc is None and not same_value(eager_args, got_args):
                verdict = "wrong"
                reasons = reasons + ["arguments differ from eager's after the call"]
            if verdict == "crashed" and eager.exc is None and is_constraint_refusal(got.exc):
                # mark_dynamic asks the compiler to refuse a trace that makes the marked
                # dimension a constant: the error is the contract, and no graph was made.
                verdict, refused = "", True
                reasons = reasons + [f"refused as mark_dynamic asks: {exc_text(got.exc)}"]
        if verdict:
            # A function that asks whether it runs compiled differs from eager by design: the same
            # function run eagerly with those queries answering True is its reference (on shared
            # arguments where they could not be copied, whose state is then not compared).
            ref, asked, ref_args = as_compiled()
            with no_modes():
                if asked and not same_outcome(ref, got) and (
                        ref.exc is not None or got.exc is not None or not self.rec.get("copied")
                        or same_value(ref_args, got_args)):
                    verdict = ""
                    reasons = [r for r in reasons if not r.startswith("arguments differ")] + [
                        "differs from eager only where it asks is_compiling(): equal to the eager run "
                        "in which that answers True"]
        if verdict == "wrong" and self.rec.get("copied") and eager.exc is None and got.exc is None:
            # Memory no op wrote (torch.empty, a growing resize_) may hold the same bytes in both
            # eager runs and others in the compiled one: an eager run where it is NaN tells.
            again = filled()
            with no_modes():
                if again.exc is None and not same_value(eager.value, again.value):
                    verdict = ""
                    reasons = reasons + ["the result reads memory no op wrote (an eager run with it "
                                         "filled returns another value): not compared"]
        if self.rec.get("nondeterministic"):
            # eager differs from itself: only whether it raised, and what, is compared
            verdict = "" if verdict == "wrong" else verdict
            again = getattr(self, "_again", None)
            if verdict == "crashed" and again is not None and again.exc is not None and \
                    type(got.exc) is type(again.exc):
                # Eager's own second run raised the same: state the arguments' copies do not
                # hold (a closure's list) outlives a call, and this run, a later one, sees it
                # as eager's second run did. Not the compiler's crash.
                verdict = ""
                reasons = reasons + [f"raised {exc_text(got.exc)}, as eager's second run did"]
        rec["breaks"] += breaks
        rec["fallbacks"] += fallbacks
        if verdict == "crashed":
            reasons = reasons + [f"raised {exc_text(got.exc)}"
                                 + (f" (eager raised {exc_text(eager.exc)})" if eager.exc else "")]
        elif verdict == "wrong":
            reasons = reasons + ["returned a different value"
                                 + (f" (eager raised {exc_text(eager.exc)})" if eager.exc else "")]
        for r in reasons:
            if r not in rec["reasons"] and len(rec["reasons"]) < 10:
                rec["reasons"].append(str(r)[:500])
        order = ["whole", "broken", "wrong", "crashed"]
        status = verdict or ("broken" if breaks or fallbacks or refused else "whole")
        if order.index(status) > order.index(rec["status"]):
            rec["status"] = status


# Queries by which a function asks whether it runs compiled, as traced code sees them (True).
COMPILE_QUERIES = (("torch.compiler", "is_compiling"), ("torch.compiler", "is_dynamo_compiling"),
                   ("torch._dynamo", "is_compiling"), ("torch._dynamo.external_utils", "is_compiling"),
                   ("torch._utils", "is_compiling"))


class compile_queries_true:
    """Within: each of COMPILE_QUERIES, read from its module, answers True to any caller outside
    torch (`answer=False`: its real answer); `as asked`: a list whose item counts those calls."""

    def __init__(self, answer=True):
        self.answer = answer

    def __enter__(self):
        self.asked = [0]
        self._saved = []
        for module_name, attr in COMPILE_QUERIES:
            module = sys.modules.get(module_name)
            if module is None or not hasattr(module, attr):
                continue
            real = getattr(module, attr)
            self._saved.append((module, attr, real))

            def answer(*args, asked=self.asked, real=real, true=self.answer, **kwargs):
                # torch's own code gets the real answer: it would take its compiling paths (a
                # higher-order op calling the compiler) where no compiler runs.
                caller = sys._getframe(1).f_globals.get("__name__", "")
                if caller == "torch" or caller.startswith("torch."):
                    return real(*args, **kwargs)
                asked[0] += 1
                return True if true else real(*args, **kwargs)

            setattr(module, attr, answer)
        return self.asked

    def __exit__(self, *exc):
        for module, attr, real in reversed(self._saved):
            setattr(module, attr, real)


def is_constraint_refusal(exc) -> bool:
    """The compilers' own errors for a dimension marked dynamic that the trace specialized."""
    names = {"DynamicMarkError": "torch_jit_cache.", "ConstraintViolationError": "torch."}
    cls = type(exc)
    return any(k.__name__ in names and k.__module__.startswith(names[k.__name__]) for k in cls.__mro__)


def tjc_backend():
    """"eager", or TJC_UPSTREAM_BACKEND="module:attr" (a backend of the harness's own tests that
    fails on purpose)."""
    spec = os.environ.get("TJC_UPSTREAM_BACKEND")
    if not spec:
        return "eager"
    module, _, attr = spec.partition(":")
    return getattr(importlib.import_module(module), attr)


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


# -- intercepting the compile entry points --------------------------------------------------------
def _wrap_compiled(fn, compiled, kind):
    """What the test gets in place of `compiled` (torch's result for `fn`): the same object for a
    module (its class swapped for a subclass whose __call__ runs the case), else a function."""
    import torch

    if _STATE.test is None or not callable(compiled):
        return compiled
    case = Case(fn, compiled, kind)
    if isinstance(compiled, torch.nn.Module):
        base = type(compiled)

        def __call__(self, *args, **kwargs):
            return case.call(lambda *a, **k: base.__call__(self, *a, **k), args, kwargs)

        compiled.__class__ = type(base.__name__, (base,), {"__call__": __call__})
        return compiled

    def run_case(*args, **kwargs):
        return case.call(compiled, args, kwargs)

    try:
        run_case.__dict__.update(getattr(compiled, "__dict__", {}))
        for attr in ("__name__", "__qualname__", "__doc__", "__module__", "__wrapped__"):
            if hasattr(compiled, attr):
                setattr(run_case, attr, getattr(compiled, attr))
    except Exception:   # noqa: BLE001
        pass
    return run_case


class _Optimized:
    """torch._dynamo.optimize(...)'s result: a decorator and a context manager; as a decorator each
    use makes a case."""

    def __init__(self, real, kind):
        self._real, self._kind = real, kind

    def __call__(self, fn):
        return _wrap_compiled(fn, _passthrough(lambda: self._real(fn)), self._kind)

    def __enter__(self):
        return self._real.__enter__()

    def __exit__(self, *exc):
        return self._real.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._real, name)


def _passthrough(make):
    """Run torch's own compile entry point (which calls the others) without making cases."""
    depth = getattr(_STATE, "inside", 0)
    _STATE.inside = depth + 1
    try:
        return make()
    finally:
        _STATE.inside = depth


def install_interceptors() -> None:
    import torch
    import torch._dynamo
    import torch._dynamo.testing

    real_compile, real_optimize = torch.compile, torch._dynamo.optimize
    real_assert = torch._dynamo.optimize_assert

    def compile(model=None, **kwargs):   # noqa: A001 - torch.compile's own name
        if kwargs.get("backend", "inductor") == "inductor":
            # Capture is measured, not code generation: inductor's C++ builds take seconds a
            # graph and are the same graphs.
            kwargs["backend"] = "eager"
        if getattr(_STATE, "inside", 0) or busy():
            return real_compile(model, **kwargs) if model is not None else real_compile(**kwargs)
        if model is None:
            return lambda fn: compile(fn, **kwargs)
        return _wrap_compiled(model, _passthrough(lambda: real_compile(model, **kwargs)), "compile")

    def optimize(*args, **kwargs):
        if getattr(_STATE, "inside", 0) or busy():
            return real_optimize(*args, **kwargs)
        return _Optimized(_passthrough(lambda: real_optimize(*args, **kwargs)), "optimize")

    def optimize_assert(*args, **kwargs):
        if getattr(_STATE, "inside", 0) or busy():
            return real_assert(*args, **kwargs)
        return _Optimized(_passthrough(lambda: real_assert(*args, **kwargs)), "optimize_assert")

    torch.compile = compile
    torch._dynamo.optimize = optimize
    torch._dynamo.optimize_assert = optimize_assert
    torch._dynamo.testing.optimize_assert = optimize_assert


# -- loading a file's tests -----------------------------------------------------------------------
def cpython_alias(path: Path) -> Path:
    """A CPython suite's path as torch's CPythonTestCase wants it (cpython/v3_13/: it skips
    every test of a class whose file is not under a folder naming the Python version that way),
    through a symbolic link beside the folder the files were read into."""
    if path.parent.name != "3_13":
        return path
    alias = path.parent.parent / "v3_13"
    if not alias.exists():
        try:
            alias.symlink_to("3_13")
        except OSError:
            return path
    return alias / path.name


def setup_paths(root: Path) -> None:
    dyn = root / "test" / "dynamo"
    for p in (cpython_alias(dyn / "cpython" / "3_13" / "x").parent, dyn, root / "test"):
        sys.path.insert(0, str(p))
    sys.path.append(str(_HERE / "upstream_shims"))   # stand-ins for test-only packages not installed
    backfill_test_support()


def _colour_off_for_class(cls):
    """test.support.force_not_colorized_test_class for a CPython older than 3.13.1, which lacks
    it: the class's tests run with NO_COLOR set and _colorize.can_colorize answering False, set
    up once around the class so the test methods themselves stay as written."""
    try:
        import _colorize   # 3.13's
    except ImportError:
        _colorize = None
    own_setup = cls.__dict__.get("setUpClass")

    @classmethod
    def setUpClass(klass):
        saved = {k: os.environ.pop(k, None) for k in ("PYTHON_COLORS", "FORCE_COLOR", "NO_COLOR")}
        can_colorize = _colorize and _colorize.can_colorize

        def restore():
            if _colorize:
                _colorize.can_colorize = can_colorize
            os.environ.pop("NO_COLOR", None)
            os.environ.update({k: v for k, v in saved.items() if v is not None})

        os.environ["NO_COLOR"] = "1"
        if _colorize:
            _colorize.can_colorize = lambda *a, **k: False
        klass.addClassCleanup(restore)
        if own_setup is not None:
            own_setup.__func__(klass)
        else:
            super(cls, klass).setUpClass()

    cls.setUpClass = setUpClass
    return cls


def backfill_test_support() -> None:
    """Names the CPython suites import from test.support that this interpreter's copy predates."""
    try:
        from test import support
    except ImportError:
        return
    if not hasattr(support, "force_not_colorized_test_class"):
        support.force_not_colorized_test_class = _colour_off_for_class


def is_cpython(path: Path) -> bool:
    return "cpython" in path.parts


def load_classes(path: Path) -> list:
    """The file's TestCase classes; a mixin of tests (a class named *Test* with test_ methods that
    is no TestCase, as the split misc and repro files define) becomes one with dynamo's TestCase."""
    import torch._dynamo.test_case
    from torch.testing._internal.common_utils import instantiate_parametrized_tests

    spec = importlib.util.spec_from_file_location(path.stem, cpython_alias(path))
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    out = []
    for name, obj in list(vars(module).items()):
        if not isinstance(obj, type) or obj.__module__ != module.__name__:
            continue
        if issubclass(obj, unittest.TestCase):
            if any(n.startswith("test") for n in dir(obj)):
                out.append(obj)
        elif "Test" in name and any(n.startswith("test_") for n in vars(obj)):
            mixed = type(name, (obj, torch._dynamo.test_case.TestCase), {"__module__": module.__name__})
            try:
                mixed = instantiate_parametrized_tests(mixed) or mixed
            except Exception:   # noqa: BLE001
                pass
            out.append(mixed)
    return out


def list_tests(classes) -> list:
    loader = unittest.TestLoader()
    return [f"{cls.__name__}.{name}" for cls in classes for name in loader.getTestCaseNames(cls)]


def run_tests(path: Path, classes, ids: list) -> None:
    import torch
    import torch._dynamo

    import torch_jit_cache as tjc

    classes = {cls.__name__: cls for cls in classes}
    stem = str(path)
    for test_id in ids:
        cls_name, method = test_id.split(".", 1)
        emit(ev="start", test=test_id)
        t0 = time.perf_counter()
        torch._dynamo.reset()
        tjc.reset()
        _STATE.test, _STATE.next_case, _STATE.engine = test_id, 0, None
        result = unittest.TestResult()
        try:
            test = classes[cls_name](method)
            if is_cpython(path):
                _compile_method_whole(test, method)
            unittest.TestSuite([test]).run(result)
            outcome = ("error" if result.errors else "fail" if result.failures else
                       "skip" if result.skipped else "pass")
            detail = (result.errors or result.failures or result.skipped or [(None, "")])[0][1][-600:]
        except Exception:   # noqa: BLE001
            outcome, detail = "error", traceback.format_exc()[-600:]
        _STATE.test = None
        emit(ev="done", test=test_id, outcome=outcome, detail=detail, seconds=round(time.perf_counter() - t0, 3),
             file=stem)


def _compile_method_whole(test, method):
    """A CPython suite's test method is one case, as PyTorch compiles it whole (backend "eager")."""
    import torch

    bound = getattr(test, method)
    compiled = _passthrough(lambda: torch._dynamo.optimize("eager")(bound))
    setattr(test, method, _wrap_compiled(bound, compiled, "cpython_method"))


def main(argv) -> int:
    global _OUT
    root, path, mode = Path(argv[1]), Path(argv[2]), argv[3]
    _OUT = os.fdopen(os.dup(1), "w", buffering=1)
    if "--verbose" not in argv:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
    os.environ.setdefault("TJC_DISABLE_DISK_CACHE", "1")
    setup_paths(root)
    import warnings

    warnings.simplefilter("ignore")
    _STATE.test, _STATE.engine = None, None
    install_interceptors()
    request = json.loads(sys.stdin.read())
    try:
        classes = load_classes(path)
    except BaseException:   # noqa: BLE001 - an import failure is the file's result
        emit(ev="tests", tests=[], error=traceback.format_exc()[-1500:])
        return 0
    if mode == "first":   # the file's tests, then the first `request` of them
        ids = list_tests(classes)
        emit(ev="tests", tests=ids)
        ids = ids[:request]
    else:
        ids = request
    run_tests(path, classes, ids)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
