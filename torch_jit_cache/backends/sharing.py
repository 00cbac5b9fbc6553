"""One backend compile for identical graphs.

N identical blocks compiled one by one (`model.layers[i] = tjc.compile(block)`, or each layer's
forward compiled as its own frame) trace N graphs that differ only in which module's parameters
they read, and parameters are graph inputs: the graphs are the same program. The first one's
compiled callable serves them all, so inductor (or AOTAutograd) runs once, and a backward is
compiled once too (AOTAutograd compiles it at the first backward of the shared callable).

The key says everything the backend's output depends on:
  - the backend: a built-in compiling backend's name (SHARED_BACKENDS); never a user's callable,
    which may count, record or differ per call (each graph is its own call, as before);
  - the graph's structure, name-free: per node its kind, its target (the function object itself,
    or the method name), and its arguments with nodes replaced by their position and constants by
    their repr (only constants whose repr is their whole value: numbers, strings, None, slices,
    dtypes, devices, layouts, memory formats; any other constant, a tensor's included, and the
    graph is not shared);
  - per input: shape, stride, storage offset, dtype, device, layout, requires_grad, which
    earlier input shares its storage (aliasing), and whether it is a static input for CUDA graphs
    (a parameter or buffer: backends/static_inputs.py);
  - the global state a compile reads: grad mode, inference mode, autocast per device and its dtype,
    deterministic algorithms, the default dtype, and the configs of inductor and functorch
    (their own hashes);
  - where the graph is cut for DDP's gradient buckets (backends/ddp_split.py): per node the piece
    it goes to, none for a graph compiled whole. Two graphs compiled under DDPs with different
    bucket caps, or one under DDP and one not, are different programs for the backend (one
    compile per piece); caps that cut alike share. The cap alone would do, less precisely.
No key (nothing shared) under inductor's `freezing` (it may fold parameters' values into the
code), for a symbolic trace (the backend adds guards to that trace's ShapeEnv while it compiles,
and they belong to that trace's entry: a symbolic size or stride of an input, an int symbol, which
is an input that is not a tensor, or an unbacked symbol made inside the graph, which the caller
passes as `unbacked`), a graph holding module state (get_attr, call_module: a constant tensor or a
module called opaquely), or an input that is not a tensor.

Lifetimes: the memo holds its callables weakly (runtime.without_interception's CompiledFunction
takes weak references); a key goes when the last cache entry using its callable dies. The key
holds the graph's call targets (functions, which the callable holds anyway) and no tensor.
"""
from __future__ import annotations

import weakref

from . import has_symbolic_sizes, modes, static_inputs

# Built-in backends whose output is a pure function of the key above and costs enough to share.
SHARED_BACKENDS = frozenset({"inductor", "aot_eager"})
_PURE_OPS = frozenset({"placeholder", "call_function", "call_method", "output"})

# key -> weakref to the callable made for it.
_MEMO: dict = {}


def key(backend, gm, example_inputs, *, unbacked: bool = False, patches: tuple = (),
        pieces: dict | None = None) -> tuple | None:
    """The sharing key of compiling `gm` on `example_inputs` with `backend`, or None where nothing
    may be shared (see the module's docstring). `unbacked`: the trace made an unbacked symbol.
    `patches`: the compile() call's mode=/options= (backends/modes.py), part of the key. `pieces`:
    {node: piece} where gm is cut for DDP (ddp_split.partitions), None where it is compiled whole."""
    if unbacked or not isinstance(backend, str) or backend not in SHARED_BACKENDS or not modes.plain(patches):
        return None
    import torch

    if backend == "inductor":
        import torch._inductor.config as inductor_config

        if inductor_config.freezing:   # parameters' values may be folded into the code
            return None

    inputs = []
    storages: dict = {}
    for i, t in enumerate(example_inputs):
        if not isinstance(t, torch.Tensor) or t.is_sparse or has_symbolic_sizes(t) or \
                isinstance(t.storage_offset(), torch.SymInt):
            return None
        storage = t.untyped_storage()._cdata
        inputs.append((tuple(t.shape), tuple(t.stride()), t.storage_offset(), t.dtype, t.device.type,
                       t.device.index, t.layout, t.requires_grad, storages.setdefault(storage, i)))
    position = {}
    nodes = []
    for i, node in enumerate(gm.graph.nodes):
        if node.op not in _PURE_OPS:
            return None
        position[node] = i
        target = node.target if node.op == "call_function" else \
            str(node.target) if node.op == "call_method" else None
        try:
            nodes.append((node.op, target, _args_key(node.args, position), _args_key(node.kwargs, position),
                          None if pieces is None else pieces.get(node)))
        except _NotShared:
            return None
    # Hashable: torch.fx itself keeps a graph's call targets in a dict; constants are their repr.
    return (backend, patches, tuple(nodes), tuple(inputs), static_inputs.positions(gm), _global_state(backend))


def lookup(k):
    """The callable compiled for key `k`, if it is still alive."""
    ref = _MEMO.get(k) if k is not None else None
    return ref() if ref is not None else None


def remember(k, compiled) -> None:
    """`compiled` serves key `k` while it lives."""
    if k is None:
        return
    _MEMO[k] = weakref.ref(compiled, lambda _ref, k=k: _forget(k, _ref))


def _forget(k, ref) -> None:
    if _MEMO.get(k) is ref:
        del _MEMO[k]


def clear() -> None:
    """Forget every shared callable (tjc.reset())."""
    _MEMO.clear()


class _NotShared(Exception):
    """A graph whose key cannot be written: a constant whose repr may not be its whole value."""


_EXACT_REPR_TYPES = None


def _exact_repr_types() -> frozenset:
    """The constant types whose repr is their whole value (what an fx graph's arguments hold)."""
    global _EXACT_REPR_TYPES
    if _EXACT_REPR_TYPES is None:
        import torch

        _EXACT_REPR_TYPES = frozenset({int, float, bool, complex, str, bytes, type(None), type(...), slice,
                                       torch.dtype, torch.device, torch.layout, torch.memory_format})
    return _EXACT_REPR_TYPES


def _args_key(value, position):
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return ("node", position[value])
    if isinstance(value, (tuple, list)):
        return (type(value).__name__, tuple(_args_key(v, position) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _args_key(v, position)) for k, v in value.items()))
    if type(value) not in _exact_repr_types():
        # A tensor's repr is a summary, a user object's may leave out what the code depends on:
        # only constants whose repr is their whole value may decide that two graphs are equal.
        raise _NotShared
    return ("const", type(value), repr(value))


def _global_state(backend) -> tuple:
    import torch

    autocast = tuple((device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
                     for device in ("cpu", "cuda"))
    configs = []
    if backend == "inductor":
        import torch._inductor.config as inductor_config

        configs.append(inductor_config.get_hash())
    import torch._functorch.config as functorch_config

    configs.append(functorch_config.get_hash())
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(), autocast,
            torch.are_deterministic_algorithms_enabled(), torch.get_default_dtype(), tuple(configs))
