"""No Python-visible side effect happens while tracing: the tracer never runs what the
graph cannot keep; such a call breaks the graph *before* it runs and then runs once, at run time.

Each kind is proven by counting, eager against compiled over several calls (the first, which
traces, and a recompile): RNG draws (torch's global generator, a user torch.Generator passed as
generator=, Python's `random`, numpy's), I/O (print, a file write, logging, warnings), counters
kept by C extensions (itertools.count, heapq.heappush, an lru_cache's statistics; a deque is traced and replayed),
and torch functions with global effects (torch.manual_seed, set_num_threads, set_flush_denormal,
set_default_dtype, ...). `Calls` counts calls of C and Python callables through sys.setprofile,
and how many of them happened while a tracer frame was on the stack: that number must be 0.
"""
import collections
import functools
import heapq
import inspect
import io
import itertools
import logging
import os
import random
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
import torch_jit_cache.tracer  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

_PACKAGE_DIR = os.path.dirname(tjc.__file__) + os.sep
_TRACER_DIR = os.path.dirname(torch_jit_cache.tracer.__file__) + os.sep


class Calls:
    """Counts calls of `targets` while active: a Python function (by its code), a C function (by
    identity) or (object, method name) for a C method, whose bound method is made anew per call.
    `during_trace`: the calls made while a frame of the tracer was on the stack. Calls the
    compiler makes for itself outside the tracer are not the program's and are not counted."""

    def __init__(self, *targets):
        # torch wraps some functions (torch.manual_seed) in a wrapper whose code many share.
        targets = [inspect.unwrap(t) if callable(t) else t for t in targets]
        self.codes = {t.__code__ for t in targets if hasattr(t, "__code__")}
        self.functions = {id(t) for t in targets if not isinstance(t, tuple) and not hasattr(t, "__code__")}
        self.methods = [t for t in targets if isinstance(t, tuple)]
        self.total = self.during_trace = 0

    def __enter__(self):
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc):
        sys.setprofile(None)

    def _profile(self, frame, event, arg):
        if event == "call":
            hit = frame.f_code in self.codes
            frame = frame.f_back
        elif event == "c_call":
            hit = id(arg) in self.functions or any(
                getattr(arg, "__self__", None) is obj and arg.__name__ == name for obj, name in self.methods)
        else:
            return
        if hit:
            caller = frame.f_code.co_filename
            if caller.startswith(_PACKAGE_DIR) and not caller.startswith(_TRACER_DIR):
                return   # the compiler's own bookkeeping (convert_frame saves the generator's state)
            self.total += 1
            while frame is not None:
                if frame.f_code.co_filename.startswith(_TRACER_DIR):
                    self.during_trace += 1
                    break
                frame = frame.f_back


tjc.disable(Calls._profile)   # it runs inside compiled calls: never a frame to trace


def counted(fn, targets, inputs, reset=lambda: None, backend=None):
    """Run fn eagerly on each input, then compiled on each (after `reset()` each time): (eager
    results, compiled results, eager's Calls, compiled's Calls, the compiled frames)."""
    cnt = CompileCounter() if backend is None else backend
    compiled = tjc.compile(fn, backend=cnt)
    runs = []
    for f in (fn, compiled):
        reset()
        with Calls(*targets) as calls:
            out = [f(*args) for args in inputs]
        runs.append((out, calls))
    (eager, eager_calls), (ours, our_calls) = runs
    return eager, ours, eager_calls, our_calls, getattr(cnt, "frame_count", None)


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def inputs_with_recompile():
    """Three calls on (4,) (the first traces), then two on (6,): a new shape recompiles."""
    return [(torch.ones(4),)] * 3 + [(torch.ones(6),)] * 2


def states_after(fn, seed, get_state, inputs=None):
    """(the state get_state() reads after eager's calls, after the compiled ones): each run starts
    from seed() and makes every call of `inputs` (the first compiles, a later one recompiles)."""
    states = []
    for f in (fn, None):
        if f is None:
            tjc.reset()
            f = tjc.compile(fn, backend=CompileCounter())
        seed()
        for args in inputs or inputs_with_recompile():
            f(*args)
        states.append(get_state())
    return states


def check(fn, targets, reset=lambda: None, inputs=None, graphs=None):
    eager, ours, eager_calls, our_calls, frames = counted(fn, targets, inputs or inputs_with_recompile(), reset)
    assert same(ours, eager)
    assert our_calls.during_trace == 0, f"{our_calls.during_trace} calls while tracing"
    assert our_calls.total == eager_calls.total
    if graphs is not None:
        assert frames == graphs
    return frames


# -- RNG ------------------------------------------------------------------------------------------
def _global_draws(x):
    y = x + torch.rand(x.shape) + torch.randn(x.shape)
    z = torch.nn.functional.dropout(y, 0.5, training=True)
    return z * torch.randint(0, 10, x.shape) + torch.empty_like(x).uniform_()


def test_global_generator_draws_as_eager_over_compile_and_recompile():
    eager, ours, _, _, frames = counted(_global_draws, [], inputs_with_recompile(), reset=lambda: torch.manual_seed(0))
    assert same(ours, eager)
    assert frames == 2   # the first call compiled, the new shape recompiled
    eager_state, our_state = states_after(_global_draws, lambda: torch.manual_seed(0), torch.get_rng_state)
    assert torch.equal(our_state, eager_state)


def _draw_dropped_at_a_break():
    out = torch.randn(2)     # the graph before the break reads no input and returns nothing ...
    print("between")         # ... but its draw moves the generator the next draw reads
    out = torch.randn(2)
    return out


def test_a_graph_whose_only_work_is_a_draw_still_runs():
    eager, ours, _, _, frames = counted(_draw_dropped_at_a_break, [], [()] * 2, reset=lambda: torch.manual_seed(0))
    assert same(ours, eager)
    eager_state, our_state = states_after(_draw_dropped_at_a_break, lambda: torch.manual_seed(0),
                                          torch.get_rng_state, inputs=[()] * 2)
    assert torch.equal(our_state, eager_state)


class _StateAtCompile(CompileCounter):
    """A backend that also records the global generator's state when each graph reaches it: after
    the trace, before the graph ever ran."""

    def __init__(self):
        super().__init__()
        self.states = []

    def __call__(self, gm, example_inputs):
        self.states.append(torch.get_rng_state())
        return super().__call__(gm, example_inputs)


def test_tracing_draws_nothing_from_the_global_generator():
    """The generator is never advanced while tracing, not even and then restored: checked
    after each RNG op the trace runs (failed before every trace ran on fake tensors)."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily
    seen = []

    def watch(frame, event, arg):
        if event == "c_return" and arg in (torch.rand, torch.randn, torch.randint) and \
                frame.f_code.co_filename.startswith(_TRACER_DIR):
            with unset_fake_temporarily():   # the trace's ops run under its FakeTensorMode
                seen.append(torch.equal(torch.get_rng_state(), start))
    tjc.disable(watch)
    compiled = tjc.compile(_global_draws, backend=CompileCounter())
    torch.manual_seed(0)
    start = torch.get_rng_state()
    sys.setprofile(watch)
    try:
        compiled(torch.ones(4))
    finally:
        sys.setprofile(None)
    assert seen and all(seen), seen


def test_the_generator_state_when_the_backend_compiles_is_the_state_before_the_call():
    backend = _StateAtCompile()
    compiled = tjc.compile(_global_draws, backend=backend)
    torch.manual_seed(0)
    start = torch.get_rng_state()
    compiled(torch.ones(4))
    assert backend.frame_count == 1 and torch.equal(backend.states[0], start)


def _user_generator(x, g):
    return x + torch.randn(x.shape, generator=g) + torch.rand(x.shape, generator=g)


def test_user_generator_passed_as_generator_draws_as_eager():
    g = torch.Generator()
    eager, ours, *_ = counted(_user_generator, [], [(a[0], g) for a in inputs_with_recompile()],
                              reset=lambda: g.manual_seed(3))
    assert same(ours, eager)
    global_before = torch.get_rng_state()
    eager_state, our_state = states_after(_user_generator, lambda: g.manual_seed(3), g.get_state,
                                          [(a[0], g) for a in inputs_with_recompile()])
    assert torch.equal(our_state, eager_state)
    assert torch.equal(torch.get_rng_state(), global_before)   # the user's generator, never the global one


def _python_random(x):
    return x * random.random() + random.randint(0, 9)


def test_python_random_draws_as_eager_and_never_while_tracing():
    check(_python_random, [random.random, random.randint], reset=lambda: random.seed(5))
    eager_state, our_state = states_after(_python_random, lambda: random.seed(5), random.getstate)
    assert our_state == eager_state


def test_numpy_random_draws_as_eager_and_never_while_tracing():
    np = pytest.importorskip("numpy")

    def fn(x):
        return x * float(np.random.rand()) + int(np.random.randint(0, 9))
    check(fn, [np.random.rand, np.random.randint], reset=lambda: np.random.seed(5))
    eager_state, our_state = states_after(fn, lambda: np.random.seed(5), lambda: np.random.get_state()[1].tolist())
    assert our_state == eager_state


def _seed_inside(x):
    torch.manual_seed(7)
    return x + torch.rand(x.shape)


def test_manual_seed_inside_runs_once_per_call_never_while_tracing():
    check(_seed_inside, [torch.manual_seed], reset=lambda: torch.manual_seed(0))


def _initial_seed(x):
    return x + torch.initial_seed()


def test_initial_seed_is_read_at_run_time_not_while_tracing():
    compiled = tjc.compile(_initial_seed, backend=CompileCounter())
    for seed in (1, 2, 2, 3):
        torch.manual_seed(seed)
        assert same(compiled(torch.zeros(2)), _initial_seed(torch.zeros(2)))
    check(_initial_seed, [torch.initial_seed], reset=lambda: torch.manual_seed(4))


def _rng_state_roundtrip(x):
    state = torch.get_rng_state()
    a = torch.rand(x.shape)
    torch.set_rng_state(state)
    return x + a + torch.rand(x.shape)   # the same numbers twice


def test_get_and_set_rng_state_run_at_run_time_only():
    check(_rng_state_roundtrip, [torch.get_rng_state, torch.set_rng_state], reset=lambda: torch.manual_seed(0))


# -- I/O ------------------------------------------------------------------------------------------
def test_print_happens_as_often_as_in_eager():
    out = io.StringIO()

    def fn(x):
        print("step", x.shape[0], file=out)
        return x + 1
    check(fn, [print])
    lines = out.getvalue().splitlines()
    assert len(lines) == 10 and lines[:5] == lines[5:]


def test_file_write_happens_as_often_as_in_eager(tmp_path):
    path = tmp_path / "log.txt"
    with open(path, "w") as f:
        def fn(x):
            f.write("w")
            return x * 2
        check(fn, [(f, "write")])
    assert path.read_text() == "w" * 10


def test_logging_emits_as_often_as_in_eager():
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())
    logger = logging.getLogger("tjc.test_trace_side_effects")
    logger.propagate = False
    handler = Keep()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        def fn(x):
            logger.info("size %d", x.shape[0])
            return x - 1
        check(fn, [])
    finally:
        logger.removeHandler(handler)
    assert records == ["size 4"] * 3 + ["size 6"] * 2 + ["size 4"] * 3 + ["size 6"] * 2


def test_warnings_are_issued_as_often_as_in_eager():
    def fn(x):
        warnings.warn("careful")
        return x + 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check(fn, [warnings.warn])
    assert [str(w.message) for w in caught] == ["careful"] * 10


# -- counters kept by C extensions -----------------------------------------------------------------
def test_itertools_count_advances_as_in_eager():
    counters = []

    def reset():
        counters.append(itertools.count())

    def fn(x):
        return x + next(counters[-1])
    eager, ours, *_ = counted(fn, [], inputs_with_recompile(), reset)
    assert same(ours, eager)
    assert next(counters[0]) == next(counters[1]) == 5


def test_deque_append_and_heappush_count_as_in_eager():
    # heappush runs once per call, never while tracing; the deque is traced (deques.py) and its
    # final items replayed on it after each graph, so it ends as eager's.
    d, h = collections.deque(), []

    def fn(x):
        d.append(1)
        heapq.heappush(h, x.shape[0])
        return x + len(d)
    check(fn, [heapq.heappush], reset=lambda: (d.clear(), h.clear()))
    assert len(d) == 5 and sorted(h) == [4, 4, 4, 6, 6]


@functools.lru_cache(maxsize=None)
def _cached(k):
    return k * 2


def test_lru_cache_statistics_as_in_eager():
    def fn(x):
        return x + _cached(x.shape[0])
    infos = []

    def reset():
        infos.append(_cached.cache_info())
        _cached.cache_clear()
    eager, ours, *_ = counted(fn, [], inputs_with_recompile(), reset)
    infos.append(_cached.cache_info())
    assert same(ours, eager)
    assert infos[1][:2] == infos[2][:2] == (3, 2)   # (hits, misses) of eager, then compiled


# -- torch functions with global effects ------------------------------------------------------------
@pytest.fixture
def restore_torch_globals():
    threads, dtype, precision = torch.get_num_threads(), torch.get_default_dtype(), \
        torch.get_float32_matmul_precision()
    warn_always = torch.is_warn_always_enabled()
    yield
    torch.set_num_threads(threads)
    torch.set_default_dtype(dtype)
    torch.set_float32_matmul_precision(precision)
    torch.set_warn_always(warn_always)
    torch.set_flush_denormal(False)
    torch.set_default_device(None)


def _set_threads(x):
    torch.set_num_threads(1)
    return x + torch.ones(x.shape)


def test_set_num_threads_runs_once_per_call_never_while_tracing(restore_torch_globals):
    check(_set_threads, [torch.set_num_threads], reset=lambda: torch.set_num_threads(2))
    torch.set_num_threads(2)
    tjc.compile(_set_threads, backend=CompileCounter())(torch.ones(3))
    assert torch.get_num_threads() == 1


def test_get_num_threads_is_read_at_run_time(restore_torch_globals):
    def fn(x):
        return x + torch.get_num_threads()
    compiled = tjc.compile(fn, backend=CompileCounter())
    for n in (1, 2, 1):
        torch.set_num_threads(n)
        assert same(compiled(torch.zeros(2)), fn(torch.zeros(2)))


def test_profiler_enabled_is_read_at_run_time():
    """Read while tracing, it was a constant: the graph made outside a profiler block answered
    False inside one."""
    def fn(x):
        return x + 1 if torch.autograd._profiler_enabled() else x - 1
    compiled = tjc.compile(fn, backend=CompileCounter())
    assert same(compiled(torch.zeros(2)), fn(torch.zeros(2)))
    with torch.autograd.profiler.profile():
        assert same(compiled(torch.zeros(2)), fn(torch.zeros(2)))
    assert same(compiled(torch.zeros(2)), fn(torch.zeros(2)))


def test_set_flush_denormal_runs_at_run_time(restore_torch_globals):
    """Its bool result made it look like a pure function: it ran once while tracing, never again."""
    def fn(x):
        ok = torch.set_flush_denormal(True)
        return x + 1, ok
    check(fn, [torch.set_flush_denormal], reset=lambda: torch.set_flush_denormal(False))


def test_set_default_dtype_runs_once_per_call(restore_torch_globals):
    def fn(x):
        torch.set_default_dtype(torch.float64)
        y = torch.ones(x.shape)
        torch.set_default_dtype(torch.float32)
        return x + y
    check(fn, [torch.set_default_dtype])


@pytest.mark.parametrize("setter, value", [
    ("set_warn_always", False),
    ("set_float32_matmul_precision", "high"),
    ("set_default_device", "cpu"),
    ("use_deterministic_algorithms", False),
])
def test_global_setters_run_once_per_call_never_while_tracing(restore_torch_globals, setter, value):
    fn_setter = getattr(torch, setter)

    def fn(x):
        fn_setter(value)
        return x * 2
    check(fn, [fn_setter])


def test_cuda_calls_run_once_per_call_never_while_tracing():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")

    def fn(x):
        torch.cuda.manual_seed_all(3)
        y = x + torch.rand(x.shape, device=x.device)
        torch.cuda.synchronize()
        return y
    inputs = [(torch.ones(4, device="cuda"),)] * 3 + [(torch.ones(6, device="cuda"),)] * 2
    check(fn, [torch.cuda.manual_seed_all, torch.cuda.synchronize], inputs=inputs)
    eager_state, our_state = states_after(fn, lambda: torch.cuda.manual_seed_all(0), torch.cuda.get_rng_state, inputs)
    assert torch.equal(our_state, eager_state)


def test_cuda_generator_untouched_while_tracing():
    """A CUDA random op drawn while tracing was never restored: the compiled call's numbers then
    differ from eager's. (Passes once every trace runs on fake tensors.)"""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    inputs = [(torch.ones(4, device="cuda"),)] * 3 + [(torch.ones(6, device="cuda"),)] * 2
    eager, ours, *_ = counted(lambda x: x + torch.rand(x.shape, device=x.device), [], inputs,
                              reset=lambda: torch.cuda.manual_seed(0))
    assert same(ours, eager)
