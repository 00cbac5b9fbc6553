"""Static graph inputs: the parameters and buffers CUDA graphs neither copy nor skip over.

    model = tjc.compile(model, backend="inductor", mode="reduce-overhead")

A CUDA graph replays fixed memory addresses, so inductor's CUDA graphs copy every graph input into
memory they own at each call, except the inputs it is told are static: those it reads in place,
and a graph that mutates an input (a KV cache written at a position, BatchNorm's running stats) is
recorded only when that input is static. torch.compile calls static what it marks so, and so do we:
  - a tensor attribute of an nn.Module: a parameter, a buffer, a plain tensor attribute;
  - an nn.Parameter reached any other way;
  - a tensor marked with `torch._dynamo.mark_static_address` (HF's StaticCache marks its tensors).
If a static input's address changes later (a parameter replaced, a cache reallocated), inductor's
CUDA graph trees record the graph again for the new address, as under torch.compile.

The tracer marks such placeholders (`node.meta[STATIC_INPUT]`, tracer/variables/torch_objects/tensor.py). With
CUDA graphs on, `announce` hands the marks to AOTAutograd in the form it reads from Dynamo's graphs
(a compile id in gm.meta, `_param_name_to_source`, each placeholder's `_dynamo_source` and
`tensor_dict`), and inductor receives them as its `static_input_idxs`. Without CUDA graphs nothing
is announced: the marks change nothing else, and the graph goes to AOTAutograd as before.

Inputs that share storage (views of one tensor) are not announced: AOTAutograd would then decide
their overlap under suppressed shape guards and record the decision in a guard for Dynamo to check,
which our entries would not carry. Such graphs run with every input copied, as before.
"""
from __future__ import annotations

# The placeholder's meta key; its value is how the input is static ("unguarded" or "guarded",
# the values of torch's `_dynamo_static_input_type`).
STATIC_INPUT = "tjc_static_input"


def static_kind(value, module_state: bool) -> str | None:
    """How the real tensor `value` read by the trace is a static input, or None. `module_state`:
    it was read as an attribute of an nn.Module."""
    import torch

    marked = getattr(value, "_dynamo_static_input_type", None)
    if marked is not None:
        return marked
    if module_state or isinstance(value, torch.nn.Parameter):
        return "unguarded"
    return None


def positions(gm) -> tuple:
    """The positions of gm's static placeholders."""
    return tuple(i for i, node in enumerate(gm.graph.find_nodes(op="placeholder"))
                 if node.meta.get(STATIC_INPUT))


def cudagraphs_on(config_patches) -> bool:
    """Whether inductor compiles with CUDA graphs under `config_patches` (mode="reduce-overhead",
    "max-autotune", options={"triton.cudagraphs": True}, or the global config)."""
    import torch._inductor.config as inductor_config

    patches = config_patches or {}
    if "triton.cudagraphs" in patches:
        return bool(patches["triton.cudagraphs"])
    return bool(inductor_config.triton.cudagraphs)


def announce(gm, example_inputs) -> bool:
    """Mark gm's static placeholders as AOTAutograd reads them from a Dynamo graph; False (nothing
    changed) where gm has none or two inputs share storage (see the module's docstring)."""
    import torch

    placeholders = list(gm.graph.find_nodes(op="placeholder"))
    if not any(node.meta.get(STATIC_INPUT) for node in placeholders):
        return False
    storages = [t.untyped_storage()._cdata for t in example_inputs if isinstance(t, torch.Tensor)]
    if len(set(storages)) != len(storages):
        return False
    gm.meta["dynamo_compile_id"] = None
    # Parameters the graph module itself holds (none: ours are placeholders) by name.
    gm._param_name_to_source = {}
    seen = set()
    for node in placeholders:
        source = node.meta.get("source")
        # Names inputs in AOTAutograd's messages; each must be distinct (None is allowed).
        node._dynamo_source = source if source is not None and source not in seen else None
        seen.add(source)
        kind = node.meta.get(STATIC_INPUT)
        node.meta["tensor_dict"] = {"_dynamo_static_input_type": kind} if kind else {}
    return True
