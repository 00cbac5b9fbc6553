"""Backends: what turns a traced torch.fx.GraphModule into the callable the transformed code calls.

A backend is `backend(gm, example_inputs) -> callable(*inputs)`; `example_inputs` are the fake
tensors the trace ran on (sizes, strides, dtypes, devices; no data), as torch.compile's backends
get them. Built-ins: "eager" (gm.forward),
"aot_eager" (AOTAutograd with no-op compilers: checks the forward/backward split without
compiling), "inductor" (torch._inductor). Any callable is a backend too.

`compile_graph` is what the JIT calls. Two promises the codegen relies on:
- the callable it returns gives a tuple (or list) of outputs, so the transformed code can index
  it (GraphOutput(i)): a graph whose output is not already a tuple is rewritten to return a
  1-tuple *before* the backend sees it, so every backend compiles a tuple-returning graph and
  no per-call wrapper is needed on the hot path;
- a backend that raises, or returns something not callable, becomes `BackendCompilerFailed`
  naming the backend and the reason (or, with fallback_to_eager, one warning and gm.forward).

torch is imported lazily, inside the functions that need it: importing this package (and the
registry) costs nothing for torch-free users of the runtime.
"""
from __future__ import annotations

import contextlib
import contextvars
import warnings
from typing import Any, Callable, Sequence

__all__ = ["BackendCompilerFailed", "compile_graph", "list_backends", "lookup", "register", "backend_name"]

# name -> backend. Backends are module-level functions the user chose to register, looked up by
# name; nothing here is keyed on a user object.
_REGISTRY: dict[str, Callable] = {}
# Backend names that already warned about falling back to eager ("warn once" per backend).
_WARNED_FALLBACK: set[str] = set()
# The backend the frame being traced will be compiled by, set around the trace (tracing_for): what
# the tracer lets into a graph may depend on what compiles it. Held only while tracing.
_TRACING_FOR: contextvars.ContextVar = contextvars.ContextVar("tjc_tracing_for", default="eager")


def forget_warnings() -> None:
    """Warn again about falling back to eager (tjc.reset())."""
    _WARNED_FALLBACK.clear()


@contextlib.contextmanager
def tracing_for(backend):
    token = _TRACING_FOR.set(backend)
    try:
        yield
    finally:
        _TRACING_FOR.reset(token)


def tracing_for_eager() -> bool:
    """Whether the graph being traced will run as traced (runs_eagerly)."""
    return runs_eagerly(_TRACING_FOR.get())


def tracing_for_min_cut() -> bool:
    """Whether the graph being traced will be split by AOTAutograd's min-cut partitioner (the
    inductor backend), which recomputes nodes tagged for it, collectives too; the default
    partitioner (aot_eager) refuses a tagged collective, and a user's callable is not known."""
    return _TRACING_FOR.get() == "inductor"


def runs_eagerly(backend) -> bool:
    """Whether `backend` runs a graph as traced: the "eager" backend, or a callable that says so
    (`runs_graph_eagerly`, testing.CompileCounter), rather than through AOTAutograd."""
    return backend == "eager" or getattr(backend, "runs_graph_eagerly", False) is True


class BackendCompilerFailed(RuntimeError):
    """A backend raised while compiling a graph, or returned something that is not callable."""

    def __init__(self, backend: str, reason: str):
        self.backend = backend
        self.reason = reason
        super().__init__(f"backend {backend!r} failed: {reason}")


def register(name: str, fn: Callable | None = None):
    """Register `fn` as backend `name` (later registrations replace earlier ones).

    Usable as a decorator: `@register("mine")`.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"a backend name must be a non-empty str, got {name!r}")

    def add(f: Callable) -> Callable:
        if not callable(f):
            raise TypeError(f"backend {name!r} must be callable, got {type(f).__name__}")
        _REGISTRY[name] = f
        return f

    return add if fn is None else add(fn)


def list_backends() -> list:
    return sorted(_REGISTRY)


def lookup(backend: str | Callable) -> Callable:
    """The backend callable for a registered name, or `backend` itself when it is callable."""
    if callable(backend):
        return backend
    if isinstance(backend, str):
        try:
            return _REGISTRY[backend]
        except KeyError:
            raise ValueError(f"unknown backend {backend!r}; known backends: {', '.join(list_backends())}") from None
    raise TypeError(f"a backend is a name or a callable(gm, example_inputs), got {type(backend).__name__}")


def backend_name(backend: str | Callable) -> str:
    """How messages name a backend: its registered name, else the callable's name."""
    if isinstance(backend, str):
        return backend
    for name, fn in _REGISTRY.items():
        if fn is backend:
            return name
    return getattr(backend, "__qualname__", None) or getattr(backend, "__name__", None) or type(backend).__name__


def ensure_tuple_output(gm) -> None:
    """Rewrite gm (in place) so that it returns a tuple; a list or tuple output is made a tuple.

    AOTAutograd insists on tuple outputs, and the codegen indexes the result; doing it once on the
    graph keeps every backend's callable free of a per-call wrapper.
    """
    output = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    (value,) = output.args
    if type(value) is tuple:
        return
    output.args = (tuple(value) if isinstance(value, (list, tuple)) else (value,),)
    gm.recompile()


def compile_graph(backend: str | Callable, gm, example_inputs: Sequence[Any],
                  fallback_to_eager: bool = False, patches: tuple = ()) -> Callable:
    """Compile gm with `backend`; the result returns a tuple (or list) of the graph's outputs.
    `patches`: inductor config (name, value) pairs of mode=/options= (backends/modes.py).

    Raises BackendCompilerFailed when the backend raises or returns a non-callable, unless
    `fallback_to_eager`: then one warning per backend and gm.forward is used instead.
    """
    fn = lookup(backend)   # unknown names are a usage error, not a compile failure: never fall back
    name = backend_name(backend)
    ensure_tuple_output(gm)
    reason = None
    try:
        compiled = fn(gm, list(example_inputs), config_patches=dict(patches)) if patches else \
            fn(gm, list(example_inputs))
    except Exception as e:  # noqa: BLE001 - any backend failure is reported the same way
        # Only the text is kept: holding `e` would keep the backend's frames (and with them the
        # graph and example tensors) alive for as long as the failure is remembered.
        reason = f"{type(e).__name__}: {e}"
        if not fallback_to_eager:
            raise BackendCompilerFailed(name, reason) from e
    else:
        if not callable(compiled):
            reason = f"returned {type(compiled).__name__}, not a callable"
            compiled = None
            if not fallback_to_eager:
                raise BackendCompilerFailed(name, reason)
    if reason is None:
        return compiled
    if name not in _WARNED_FALLBACK:
        _WARNED_FALLBACK.add(name)
        warnings.warn(f"backend {name!r} failed ({reason}); running the graph eagerly instead",
                      RuntimeWarning, stacklevel=2)
    return gm.forward


# --- built-in backends ------------------------------------------------------------------------

@register("eager")
def eager(gm, example_inputs):
    """Run the graph as traced: checks the tracer and codegen without any compiler in the way."""
    return gm.forward


@register("aot_eager")
def aot_eager(gm, example_inputs):
    """AOTAutograd's forward/backward split with no-op compilers (no code generation)."""
    from torch._functorch.aot_autograd import aot_module_simplified
    from torch._functorch.compilers import nop   # already boxed (make_boxed_compiler)

    # Non-boxed calling convention: the result is called as fn(*inputs), like every backend's.
    return aot_module_simplified(gm, example_inputs, fw_compiler=nop, bw_compiler=nop)


@register("inductor")
def inductor(gm, example_inputs, config_patches=None):
    import torch
    from torch._inductor.compile_fx import compile_fx

    from . import static_inputs

    if static_inputs.cudagraphs_on(config_patches):
        static_inputs.announce(gm, example_inputs)   # parameters and buffers: not copied each call
    if not any(isinstance(t, torch.Tensor) and has_symbolic_sizes(t) for t in example_inputs):
        noted = _note_example_values(gm, example_inputs)
        try:
            return compile_fx(gm, example_inputs, config_patches=config_patches)
        finally:
            for node in noted:
                node.meta.pop("example_value", None)
    # With symbolic sizes, the sizes inductor specialises while it compiles (a convolution's channel
    # count) are replacements in the ShapeEnv, which convert_frame reads back into the entry's
    # guards. A compiled graph loaded from inductor's FX graph cache (or AOTAutograd's)
    # brings the cached compile's guards but not its replacements: an entry made from it would
    # serve sizes its code asserts against (`expected size 240==96`). So symbolic graphs compile
    # without those caches.
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False, fx_graph_remote_cache=False), \
            functorch_config.patch(enable_autograd_cache=False):
        return compile_fx(gm, example_inputs, config_patches=config_patches)


def _note_example_values(gm, example_inputs) -> list:
    """Each node's example value (a fake tensor) in its meta, as a trace leaves it, for the nodes
    that had none; returns those nodes. AOTAutograd's cache takes a graph only where every tensor a
    method is called on carries one (autograd_cache.check_node_safe); without, every compile
    bypassed it, a graph loaded from the disk cache included, and a warm process traced the joint
    graph again. The trace drops its own (they hold its ShapeEnv), so they are made again here by
    running the graph on fresh fakes with the inputs' metadata (never the inputs themselves: an
    in-place op would change what the backend is given). Where that fails, nothing is noted and
    the cache is bypassed as before."""
    import torch
    from torch._guards import detect_fake_mode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = detect_fake_mode(example_inputs)
    if mode is None or not any(n.op == "call_method" for n in gm.graph.nodes):
        return []
    had_val = {n for n in gm.graph.nodes if "val" in n.meta}
    try:
        with mode:
            fresh = [torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device,
                                         requires_grad=t.requires_grad)
                     if isinstance(t, torch.Tensor) else t for t in example_inputs]
        FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*fresh)
    except Exception:  # noqa: BLE001 - an optimisation only: the graph compiles without it
        for node in gm.graph.nodes:
            if node not in had_val:
                node.meta.pop("val", None)
        return []
    noted = []
    for node in gm.graph.nodes:
        value = node.meta.get("val") if node in had_val else node.meta.pop("val", None)
        if value is not None and "example_value" not in node.meta:
            node.meta["example_value"] = value
            noted.append(node)
    return noted


def has_symbolic_sizes(t) -> bool:
    """Whether a (fake) tensor's sizes or strides hold a symbol (a SymInt)."""
    import torch

    return any(isinstance(d, torch.SymInt) for d in (*t.shape, *t.stride()))
