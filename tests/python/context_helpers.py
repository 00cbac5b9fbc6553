"""Shared by the tests that run a function eagerly and compiled and compare: on copies of the same
inputs, what a context manager can change (the grad-mode and autocast tests); a compiled function's
counters (CompiledCalls; run_counting_breaks and check_graphs_and_breaks for the graph-break tests;
Recording, a backend that keeps its graphs weakly, for the opaque-call tests);
a result's structure and values (assert_same, compiled_like_eager; same, a bool, for the compile
tests, with rand for random inputs); user objects the traced-object tests build, pass in and copy
(NewCache, Holder, Slotted, Finalised) and same_object to compare them; tracer.trace() run without
the runtime (do_trace, run_compiled, check_trace, guard_kinds) for the tracer tests.
Imports torch: import it after `pytest.importorskip("torch")`."""
import builtins
import contextlib
import dataclasses
import inspect
import io
import types
import weakref

import torch

import torch_jit_cache as tjc
from torch_jit_cache import graph_break
from torch_jit_cache.guard.sources import load_source
from torch_jit_cache.testing import CompileCounter, CompileCounterWithBackend
from torch_jit_cache.guard.trace_result import (ConstantOutput, DictOutput, GraphOutput, ListOutput, SourceOutput,
                                                TupleOutput)
from torch_jit_cache.tracer import trace


def global_state():
    """What grad-mode and autocast blocks change: it must be eager's after every call."""
    return (torch.is_grad_enabled(), torch.is_autocast_enabled("cpu"), torch.get_autocast_dtype("cpu"),
            torch.is_autocast_cache_enabled())


def leaves(*shapes, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=generator, requires_grad=True) for s in shapes]


def clones(tensors):
    return [t.detach().clone().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t
            for t in tensors]


def flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def eager_and_compiled(fn, inputs, *, backend=None, calls=2, grad=True, grad_tol=None):
    """Run `fn` eagerly and compiled (`calls` times) on copies of `inputs`; check values, dtypes,
    requires_grad, gradients and `global_state()` after each call against eager's. `grad_tol`: a
    gradient may differ from eager's by that fraction of its largest element (low-precision
    rounding); None: the default closeness. Returns (graphs, breaks)."""
    cnt = CompileCounter() if backend is None else CompileCounterWithBackend(backend)
    compiled = tjc.compile(fn, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    runs = []
    with contextlib.redirect_stdout(io.StringIO()):
        for f in [fn] + [compiled] * calls:
            args = clones(inputs)
            out = flat(f(*args))
            runs.append((out, global_state(), args))
    expected, state_after, eager_args = runs[0]
    if grad:
        sum(o.float().sum() for o in expected if o.requires_grad).backward()
    for out, state, args in runs[1:]:
        assert state == state_after
        assert [getattr(o, "dtype", o) for o in out] == [getattr(o, "dtype", o) for o in expected]
        assert [getattr(o, "requires_grad", o) for o in out] == \
            [getattr(o, "requires_grad", o) for o in expected]
        for o, e in zip(out, expected):
            torch.testing.assert_close(o, e)
        if grad:
            sum(o.float().sum() for o in out if o.requires_grad).backward()
            for a, e in zip(args, eager_args):
                if isinstance(a, torch.Tensor):
                    tol = {} if grad_tol is None or e.grad is None else \
                        {"rtol": 0.0, "atol": grad_tol * e.grad.abs().max().item()}
                    torch.testing.assert_close(a.grad, e.grad, **tol)
    return cnt.frame_count, tjc.stats()["graph_breaks"] - before


def runs_on_fresh_arguments(fn, make_args, calls=2):
    """fn eagerly, then compiled `calls` times, each on fresh arguments from make_args(): the
    CompileCounter and, per run (eager's first), (result, args), an exception standing as its
    (type, args): what it raised is part of what must agree."""
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    runs = []
    for f in [fn] + [compiled] * calls:
        args = make_args()
        try:
            out = f(*args)
        except Exception as e:   # noqa: BLE001 - see the docstring
            out = (type(e), e.args)
        runs.append((out, args))
    return cnt, runs


def assert_break_frees_everything(fn, inputs: list):
    """Compile `fn` (which breaks once), call it on `inputs`, then drop everything: the entry's
    resume function, its code and the inputs must be freed (run it under the `no_gc` fixture).
    `inputs` is emptied: the caller must hold no other reference."""
    compiled = tjc.compile(fn, backend="eager")
    with contextlib.redirect_stdout(io.StringIO()):
        compiled(*inputs)
    (entry,) = tjc.cache_entries(compiled)
    resumes = [c for c in entry.code.co_consts if isinstance(c, type(fn))]
    assert [graph_break.is_resume_code(r.__code__) for r in resumes] == [True]
    refs = [weakref.ref(o) for o in (*inputs, resumes[0], resumes[0].__code__)]
    inputs.clear()
    del entry, resumes, compiled
    assert [r() for r in refs] == [None] * len(refs)


class CompiledCalls:
    """A function compiled with a CompileCounter, and tjc.stats() at its start: calls go to the
    compiled function; `delta(key)` is a counter's growth since, `check` asserts the usual ones."""

    def __init__(self, fn):
        self.cnt = CompileCounter()
        self.compiled = tjc.compile(fn, backend=self.cnt)
        self.before = tjc.stats()

    def __call__(self, *args, **kwargs):
        return self.compiled(*args, **kwargs)

    def delta(self, key):
        return tjc.stats()[key] - self.before[key]

    def check(self, *, graphs, breaks=0, recompiles=None):
        assert self.cnt.frame_count == graphs
        assert self.delta("graph_breaks") == breaks
        assert self.delta("fallbacks") == 0, "a frame ran uncompiled"
        if recompiles is not None:
            assert self.delta("recompiles") == recompiles


def rand(*shape):
    """A random float tensor of this shape (torch.randn)."""
    return torch.randn(*shape)


def same(a, b):
    """True where b is a's value: tensors of one shape and dtype, close (atol 1e-5, rtol 1e-4);
    sequences and dicts of one type, item by item (dict keys in the same order); else ==."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and a.dtype == b.dtype and torch.allclose(
            a, b, atol=1e-5, rtol=1e-4)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(b) is dict and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return a == b


def same_exactly(a, b):
    torch.testing.assert_close(a, b, rtol=0, atol=0)


def explain_counts(fn, *args):
    """One run of `fn(*args)` under tjc.explain: (graph count, graph-break count, fallbacks)."""
    rep = tjc.explain(fn)(*args)
    return rep.graph_count, rep.graph_break_count, rep.fallbacks


def run_counting_breaks(fn, *args):
    """fn eagerly, then compiled twice, stdout silenced: (eager result, compiled results of the two
    calls, graphs compiled, breaks made)."""
    cnt = CompileCounter()
    compiled = tjc.compile(fn, backend=cnt)
    before = tjc.stats()["graph_breaks"]
    with contextlib.redirect_stdout(io.StringIO()):
        expected = fn(*args)
        got = [compiled(*args), compiled(*args)]
    return expected, got, cnt.frame_count, tjc.stats()["graph_breaks"] - before


def check_graphs_and_breaks(fn, *args, graphs, breaks):
    """run_counting_breaks: both compiled results close to eager's, `graphs` graphs, `breaks` breaks."""
    expected, got, n_graphs, n_breaks = run_counting_breaks(fn, *args)
    for g in got:
        torch.testing.assert_close(g, expected)
    assert (n_graphs, n_breaks) == (graphs, breaks)


def assert_same(a, b):
    """Equal as eager's result: tensors close, sequences and dicts element by element (keys in the
    same order), anything else of the same type and ==."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor)
        torch.testing.assert_close(a, b)
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    elif dataclasses.is_dataclass(a) and not isinstance(a, type) or _plain_object(a):
        assert type(a) is type(b)
        assert_same(vars(a), vars(b))
    else:
        assert type(a) is type(b) and a == b, (a, b)


def _plain_object(value) -> bool:
    # An instance of a user's class, compared by its attributes (a copy made by each run).
    return hasattr(value, "__dict__") and not isinstance(value, (type, types.ModuleType, types.FunctionType,
                                                                 types.MethodType, torch.nn.Module))


def compiled_like_eager(fn, *args, graphs=1, breaks=0):
    """Call `fn` eagerly, then compiled twice (the compiling call and a cache hit), on the same
    arguments: each result must be of eager's type and equal it (assert_same), and the compile must have
    made `graphs` graphs with `breaks` graph breaks and no frame run uncompiled. Returns the result."""
    expected = fn(*args)
    calls = CompiledCalls(fn)
    for _ in range(2):
        got = calls(*args)
        assert type(got) is type(expected)
        assert_same(got, expected)
    calls.check(graphs=graphs, breaks=breaks, recompiles=0)
    return got


class Recording:
    """A backend that runs graphs eagerly and remembers them weakly (a test must not keep them)."""

    runs_graph_eagerly = True

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(weakref.ref(gm))
        return gm.forward

    def opaque_calls(self):
        """The modules the live graphs call opaquely (their call_module targets)."""
        return [gm.get_submodule(n.target) for ref in self.graphs if ref() is not None
                for gm in [ref()] for n in gm.graph.nodes if n.op == "call_module"]



# -- user objects for the traced-object tests (new objects, HuggingFace outputs, deepcopy) ---------
class NewLayer:
    """transformers' DynamicLayer, reduced: lazily initialised on the first update."""

    def __init__(self):
        self.keys = None
        self.is_initialized = False

    def lazy_init(self, k):
        self.dtype = k.dtype
        self.keys = torch.zeros(0, *k.shape[1:], dtype=k.dtype)
        self.is_initialized = True

    def update(self, k):
        if not self.is_initialized:
            self.lazy_init(k)
        self.keys = torch.cat([self.keys, k], dim=0)
        return self.keys


class NewCache:
    """transformers' DynamicCache, reduced: built in forward, a list of layers, __len__."""
    default_layers = 2

    def __init__(self, n=None):
        self.layers = [NewLayer() for _ in range(n or self.default_layers)]

    def __len__(self):
        return len(self.layers)

    def update(self, k, i):
        return self.layers[i].update(k)

    def seq_len(self):
        return self.layers[0].keys.shape[0] if self.layers[0].is_initialized else 0


class Holder:
    """A plain object to store attributes on."""


class Slotted:
    """No instance __dict__: rebuilding one after the graph would change it, so building one breaks."""
    __slots__ = ("v",)

    def __init__(self):
        self.v = 1


class Finalised:
    """Has __del__: rebuilding one after the graph would run it once more, so building one breaks."""

    def __init__(self):
        self.v = 1

    def __del__(self):
        pass


def same_object(got, want):
    """Same class, same instance __dict__ (keys in order, values compared), recursively."""
    assert type(got) is type(want)
    if isinstance(want, torch.Tensor):
        same_exactly(got, want)
    elif isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same_object(g, w)
    elif hasattr(want, "__dict__") and not isinstance(want, type):
        assert list(vars(got)) == list(vars(want))
        for g, w in zip(vars(got).values(), vars(want).values()):
            same_object(g, w)
    else:
        assert got == want


# -- tracer.trace() without the runtime: a frame made from arguments, the graph run on it ----------
def frame_of(f, *args, **kwargs):
    """(f_locals, f_globals, f_builtins) as the runtime would see f's frame."""
    bound = inspect.signature(f).bind(*args, **kwargs)
    bound.apply_defaults()
    f_locals = dict(bound.arguments)
    for name, cell in zip(f.__code__.co_freevars, f.__closure__ or ()):
        f_locals[name] = cell.cell_contents
    return f_locals, f.__globals__, builtins.__dict__


def evaluate_source(source, f_locals, f_globals, f_builtins):
    """The value `source` names in that frame."""
    return load_source(source, f_locals, f_globals, f_builtins)


def do_trace(f, *args, **kwargs):
    """trace() f's code on a frame made from these arguments (no runtime involved)."""
    f_locals, g, b = frame_of(f, *args, **kwargs)
    return trace(f.__code__, f_locals, g, b, f.__closure__)


def rebuild_output(spec, outs, frame):
    """The value an output spec describes, from the graph's outputs and the frame."""
    if isinstance(spec, GraphOutput):
        return outs[spec.index]
    if isinstance(spec, ConstantOutput):
        return spec.value
    if isinstance(spec, SourceOutput):
        return evaluate_source(spec.source, *frame)
    if isinstance(spec, TupleOutput):
        items = tuple(rebuild_output(s, outs, frame) for s in spec.items)
        if spec.cls is None:
            return items
        return spec.cls._make(items) if hasattr(spec.cls, "_make") else spec.cls(items)
    if isinstance(spec, ListOutput):
        return [rebuild_output(s, outs, frame) for s in spec.items]
    if isinstance(spec, DictOutput):
        return {k: rebuild_output(s, outs, frame) for k, s in spec.items}
    raise AssertionError(spec)


def run_compiled(result, f, *args, **kwargs):
    """Run a trace result's graph on inputs loaded from f's frame; rebuild what f returns."""
    frame = frame_of(f, *args, **kwargs)
    inputs = [evaluate_source(s, *frame) for s in result.graph_inputs]
    return rebuild_output(result.output, result.graph(*inputs), frame)


def check_trace(f, *arg_sets, trace_args=None):
    """Trace f on the first argument set, then compare graph and eager on every set."""
    result = do_trace(f, *(trace_args or arg_sets[0]))
    for args in arg_sets:
        assert_same(f(*args), run_compiled(result, f, *args))
    return result


def guard_kinds(result, source):
    """The kinds of the guards the trace put on `source`."""
    return {g.kind for g in result.guards if g.source == source}


class LayersInSeparateFrames(torch.nn.Module):
    """Calls its layers in turn from a forward that falls back (data-dependent, inside a try block
    where no graph break is made): each layer's forward is a frame of its own, compiled on its own
    (the cache-owner and instance-sharing tests)."""

    def __init__(self, layers):
        super().__init__()
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, x):
        try:
            if x.sum() > -1e9:
                for layer in self.layers:
                    x = layer(x)
        finally:
            pass
        return x


def compile_layers_in_separate_frames(make_layer, n: int = 12, calls: int = 3, grad: bool = True):
    """`n` layers from `make_layer` in LayersInSeparateFrames, compiled and called `calls` times
    (under no_grad unless `grad`: then every layer's input is alike), each result compared with
    eager's; no cache-limit warning. Returns (compiled, model)."""
    import warnings

    torch.manual_seed(0)
    model = LayersInSeparateFrames(make_layer() for _ in range(n))
    x = torch.randn(4, 8)
    expected = model(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt = tjc.compile(model)
        with contextlib.nullcontext() if grad else torch.no_grad():
            for _ in range(calls):
                torch.testing.assert_close(opt(x), expected)
    assert not [w for w in caught if "cache limit" in str(w.message)], "no layer reached the limit"
    return opt, model
