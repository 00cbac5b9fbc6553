"""The user API: compile(), compile_(), explain(), disable(), reset(), stats(), cache_entries().

    @tjc.compile                      # or tjc.compile(fn_or_module, backend=..., fullgraph=False,
    def f(x, y): ...                  #    dynamic=None, cache_limit=None, mode=None, options=None)

    for block in model.layers:        # a module compiled in place (as nn.Module.compile()),
        tjc.compile_(block)           #    with the same options

A compiled function runs its frames with this package's cache-miss callback installed (on this
thread, for the duration of the call); cache hits never re-enter Python-level tracing.
"""
from __future__ import annotations

import functools
import inspect
import types
import warnings
import weakref

from . import _C, runtime
from .runtime import counters, process_state
from .frontend import trace_rules
from .backends import modes
from .config import DEFAULT_BACKEND, resolve_backend
from .pipeline.convert_frame import FrameCompiler

_WRAPPED = "_torch_jit_cache_original"


def compile(fn=None, *, backend=DEFAULT_BACKEND, fullgraph: bool = False, dynamic=None, cache_limit=None, mode=None,
            options=None):
    """Compile a function, method or torch.nn.Module; usable as @compile and @compile(...).

    `dynamic`: None (default), shapes start static and a dimension whose size changes between
    compiles is traced as a symbol from then on; True, every dimension of the tensors the frame
    is called with is a symbol from the first compile; False, shapes are always static (each new
    size compiles anew). mark_dynamic / maybe_mark_dynamic / mark_static (frontend/dynamic.py) refine it.

    `mode` ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs") or
    `options` (inductor config names to values), not both, with backend="inductor": as
    torch.compile's (backends/modes.py).

    `backend`: "inductor" (default, as torch.compile's; config.default_backend replaces the default),
    "eager", "aot_eager" or a callable(gm, example_inputs)."""
    backend = resolve_backend(backend)
    if fn is None:   # the decorator form: bad options fail here, not at decoration
        _check_options(fullgraph=fullgraph, dynamic=dynamic, cache_limit=cache_limit)
        _check_backend(backend)
        modes.patches(backend, mode, options, dynamic)
        return lambda f: compile(f, backend=backend, fullgraph=fullgraph, dynamic=dynamic, cache_limit=cache_limit,
                                 mode=mode, options=options)
    module_type = _module_type()
    make = _module_compiler if module_type is not None and isinstance(fn, module_type) else _compiler
    return _compiled(fn, make(fn, backend, fullgraph, dynamic, cache_limit, mode, options))


def compile_(module, *, backend=DEFAULT_BACKEND, fullgraph: bool = False, dynamic=None, cache_limit=None, mode=None,
             options=None):
    """Compile an nn.Module in place, as `nn.Module.compile()` does for torch.compile: calling it,
    directly or from its parent, runs its forward compiled (on this call's own cache), so
    `for b in model.layers: tjc.compile_(b)` needs no reassignment. Returns the module. Options as
    for compile(). Copies and pickles of the module are uncompiled (nn.Module drops the compiled
    call from its state, as for torch's); compile(module) gives a compiled module that copies as one."""
    backend = resolve_backend(backend)
    module_type = _module_type()
    if module_type is None or not isinstance(module, module_type):
        raise TypeError(f"torch_jit_cache.compile_ needs an nn.Module, got {type(module).__name__}")
    from .frontend import module_wrapper

    module_wrapper.compile_in_place(module, _module_compiler(module, backend, fullgraph, dynamic, cache_limit, mode,
                                                             options))
    return module


# The compiler of each (forward's code, options) that modules were compiled with, while a module
# compiled with it lives. Modules of one class compiled one by one with the same options
# (`for b in model.layers: tjc.compile_(b)`, torchtitan's per-block compile, or each wrapped with
# compile()) share it, and so one cache, as under torch.compile, whose cache is per code: the
# blocks are traced once, the first block's entry serving every block equal in what the trace read
# (convert_frame._pins_modules), instead of one trace per block. A function's compile() calls keep
# a cache each.
_MODULE_COMPILERS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def forget_module_compilers() -> None:
    """Modules compiled from now on get a new compiler (tjc.reset()): a module compiled before
    keeps its own, forgetting what it decided (convert_frame.forget_compilers)."""
    _MODULE_COMPILERS.clear()


def _module_compiler(module, backend, fullgraph, dynamic, cache_limit, mode, options):
    """The FrameCompiler for compiling `module`: the one modules with its forward and these options
    already share, else a new one (then shared)."""
    compiler = _compiler(module, backend, fullgraph, dynamic, cache_limit, mode, options)
    try:
        key = (compiler.target_code, backend, fullgraph, dynamic, cache_limit, mode,
               None if options is None else tuple(sorted(options.items())))
        hash(key)
    except TypeError:   # an option value that is not hashable: a cache of its own
        return compiler
    if compiler.target_code is None:   # DDP(model): its forward runs as written
        return compiler
    return _MODULE_COMPILERS.setdefault(key, compiler)


def _compiler(fn, backend, fullgraph, dynamic, cache_limit, mode=None, options=None):
    """The FrameCompiler of one compile() call, its options checked."""
    _check_options(fullgraph=fullgraph, dynamic=dynamic, cache_limit=cache_limit)
    _check_backend(backend)
    backend_patches = modes.patches(backend, mode, options, dynamic)
    # The compiler owns this call's cache (entries, skip/run-only decisions, cache limit): another
    # compile() of the same function never sees or changes it.
    return FrameCompiler(backend=backend, fullgraph=fullgraph, target_code=_target_code(fn),
                         cache_limit=cache_limit, dynamic=dynamic, mode=mode,
                         options=None if options is None else dict(options), backend_patches=backend_patches)


def explain(fn, *, backend="eager"):
    """`explain(fn)(*args, **kwargs)` runs `fn` once, compiled, and returns an ExplainOutput: the
    graphs, graph count, ops per graph, each graph break with its reason and place, the frames that
    ran uncompiled, and the guards. It compiles under its own cache, dropped when it returns.
    `backend` is "eager" whatever config.default_backend says: like torch._dynamo.explain, it reports
    graphs and compiles none (an inductor compile would add seconds and change no graph)."""
    _check_backend(backend)
    from .frontend.explanation import ExplainOutput

    def run(*args, **kwargs):
        report = ExplainOutput()
        callback = FrameCompiler(backend=backend, target_code=_target_code(fn), observer=report.record)
        _compiled(fn, callback)(*args, **kwargs)
        return report
    return run


def _check_options(*, fullgraph, dynamic, cache_limit):
    """A wrong type is a TypeError naming the option (`fullgraph="yes"` would otherwise read as
    true and compile silently); a value of the right type out of range is a ValueError."""
    if type(fullgraph) is not bool:
        raise TypeError(f"fullgraph must be True or False, got {type(fullgraph).__name__} {fullgraph!r}")
    if dynamic is not None and type(dynamic) is not bool:
        raise TypeError(f"dynamic must be None, True or False, got {type(dynamic).__name__} {dynamic!r}")
    if cache_limit is not None:
        if not isinstance(cache_limit, int) or isinstance(cache_limit, bool):
            raise TypeError(f"cache_limit must be an int >= 1 or None, got {type(cache_limit).__name__} "
                            f"{cache_limit!r}")
        if cache_limit < 1:
            raise ValueError(f"cache_limit must be an int >= 1 or None, got {cache_limit!r}")


def _check_backend(backend):
    if isinstance(backend, str):
        from . import backends

        backends.lookup(backend)  # unknown names fail here, not at the first call
    elif not callable(backend):
        raise TypeError(f"backend must be a name or a callable(gm, example_inputs), got {type(backend).__name__}")


def _compiled(fn, callback):
    """`fn` (a function, method or module) run under `callback`, the compile() call's compiler."""
    module_type = _module_type()
    if module_type is not None and isinstance(fn, module_type):
        from .frontend import module_wrapper

        return module_wrapper.wrap(fn, callback, rebuild_compiled_module)
    if not callable(fn):
        raise TypeError(f"torch_jit_cache.compile needs a function, method or nn.Module, got {type(fn).__name__}")
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if not isinstance(target, types.FunctionType):
        warnings.warn(f"torch_jit_cache.compile: {fn!r} is not a Python function (a builtin or C function); "
                      "it runs uncompiled", RuntimeWarning, stacklevel=3)
        return fn
    if inspect.isgeneratorfunction(target) or inspect.iscoroutinefunction(target):
        warnings.warn(f"torch_jit_cache.compile: {fn!r} is a generator or coroutine function; it runs uncompiled",
                      RuntimeWarning, stacklevel=3)
        return fn

    # A C callable: installs the callback, calls fn, restores the previous callback (tens of ns).
    compiled = _C.CompiledFunction(fn, callback)
    functools.update_wrapper(compiled, fn)
    return compiled


def rebuild_compiled_module(module, options):
    """compile(module, **options): what copies and unpickling of a CompiledModule call."""
    return compile(module, **options)


def _target_code(fn):
    module_type = _module_type()
    if module_type is not None and isinstance(fn, module_type):
        from .frontend import module_wrapper

        forward = type(module_wrapper.unwrap(fn)).forward
        if trace_rules.is_wrapper_forward(forward):
            return None   # DDP(model): its forward runs as written, the model's frames compile
        return getattr(forward, "__code__", None)
    target = fn.__func__ if isinstance(fn, types.MethodType) else fn
    return getattr(target, "__code__", None)


def _module_type():
    try:
        import torch
    except ImportError:
        return None
    return torch.nn.Module


def disable(fn):
    """Never compile `fn` (its frames run uncompiled even inside compiled calls), across reset()."""
    target = getattr(fn, _WRAPPED, fn)
    target = target.__func__ if isinstance(target, types.MethodType) else target
    runtime.set_skip(target)
    return fn


def reset():
    """Restore a fresh process's state for everything the compiler decides from: drop every cache
    entry and what each compile() call remembers per code (automatic-dynamic sizes, skip and
    run-only decisions), zero every counter, turn guard collectives off (runtime/process_state.py lists
    what is dropped and what is kept: the user's settings and the disk cache). Safe while compiled
    frames run."""
    process_state.reset()


def stats() -> dict:
    """hits, misses, compiles, recompiles, evictions, fallbacks, graphs, graph_breaks, ...
    (each counter's meaning: torch_jit_cache/runtime/counters.py)."""
    return counters.snapshot()


def _code_target(fn_or_wrapper):
    module_type = _module_type()
    if module_type is not None and isinstance(fn_or_wrapper, module_type):
        from .frontend import module_wrapper

        return type(module_wrapper.unwrap(fn_or_wrapper)).forward
    return getattr(fn_or_wrapper, _WRAPPED, fn_or_wrapper)


def cache_entries(fn_or_wrapper):
    """The live cache entries of a compiled function, a compiled module or a module compiled in
    place (that compile() call's own), or of a function or code object (every compile's)."""
    module_type = _module_type()
    if module_type is not None and isinstance(fn_or_wrapper, module_type):
        from .frontend import module_wrapper

        callback = module_wrapper.compiler_of(fn_or_wrapper)
    else:
        callback = getattr(fn_or_wrapper, "_torch_jit_cache_callback", None)
    owner = getattr(callback, "cache_owner", None)
    return runtime.cache_entries(_code_target(fn_or_wrapper), owner=owner)
