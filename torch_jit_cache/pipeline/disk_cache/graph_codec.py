"""Graphs as data: an fx graph stored node by node and rebuilt without retracing, and the static
marks of its placeholders."""
from __future__ import annotations

from ...backends import static_inputs
from .names import NotStored, is_constant, name_of, rebind

# call_module: a module called opaquely, through the proxy the graph holds (frontend/proxies.py), made again
# on load from the frame (submodule_sources). get_attr (a constant tensor held by the graph) is not
# stored: nothing in the frame reaches it.
_GRAPH_OPS = frozenset(("placeholder", "call_function", "call_method", "call_module", "output"))


def submodule_sources(gm, identities: dict) -> dict:
    """{submodule name: the source reaching the module it proxies}: the proxy shares the module's
    instance dict, and the opaque call guarded the module by identity at that source. On load the
    graph calls a proxy of what the source reaches then (its identity guard bound to it:
    guard_codec's bound identities), never a stored object."""
    import torch
    sources = {}
    for name, proxy in gm._modules.items():
        found = [source for source, value in identities.items() if isinstance(value, torch.nn.Module)
                 and type(value) is type(proxy) and vars(value) is vars(proxy)]
        if not found:
            raise NotStored(f"submodule {name} of the graph: no identity guard names the module it calls")
        sources[name] = found[0]
    return sources


def graph_record(gm, files: set) -> list:
    """The graph's nodes as data: (op, name, target, args, kwargs), targets and constants named
    as guard values are, other nodes by name. Rebuilt node by node (rebuild_graph): no retrace,
    so the graph loaded is the graph stored."""
    bad = sorted({n.op for n in gm.graph.nodes} - _GRAPH_OPS)
    if bad:
        raise NotStored(f"graph nodes {', '.join(bad)} (tensors held by the graph)")
    if gm._parameters or gm._buffers:
        raise NotStored("the graph module holds parameters or buffers")
    nodes = []
    for node in gm.graph.nodes:
        try:
            target = name_of(node.target, files) if node.op == "call_function" else node.target
        except NotStored as e:
            raise NotStored(f"graph node {node.name} ({node.op}): {e}") from None
        if not isinstance(target, (str, tuple)):
            raise NotStored(f"graph node {node.name}'s target {target!r:.60}")
        nodes.append((node.op, node.name, target, _encode_arg(node.args), _encode_arg(node.kwargs)))
    return nodes


def _encode_arg(value):
    import torch
    import torch.fx
    if isinstance(value, torch.fx.Node):
        return ("node", value.name)
    from torch.fx.immutable_collections import immutable_dict, immutable_list
    if type(value) is tuple:
        return ("tuple", [_encode_arg(v) for v in value])
    if type(value) is torch.Size:
        return ("size", [_encode_arg(v) for v in value])
    if type(value) in (list, immutable_list):   # fx keeps node arguments in immutable_list/dict
        return ("list", [_encode_arg(v) for v in value])
    if type(value) in (dict, immutable_dict):
        return ("dict", [(k, _encode_arg(v)) for k, v in value.items() if is_constant(k) or _no_key(k)])
    if type(value) is slice:
        return ("slice", [_encode_arg(v) for v in (value.start, value.stop, value.step)])
    if value is Ellipsis:
        return ("ellipsis",)
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return ("torch", str(value).removeprefix("torch."))
    if is_constant(value):
        return ("const", value)
    raise NotStored(f"a {type(value).__name__} in the graph")


def _no_key(k):
    raise NotStored(f"a dict keyed by {type(k).__name__} in the graph")


def _decode_arg(value, env):
    import torch
    tag = value[0]
    if tag == "node":
        return env[value[1]]
    if tag == "tuple":
        return tuple(_decode_arg(v, env) for v in value[1])
    if tag == "size":
        return torch.Size(_decode_arg(v, env) for v in value[1])
    if tag == "list":
        return [_decode_arg(v, env) for v in value[1]]
    if tag == "dict":
        return {k: _decode_arg(v, env) for k, v in value[1]}
    if tag == "slice":
        return slice(*(_decode_arg(v, env) for v in value[1]))
    if tag == "ellipsis":
        return Ellipsis
    if tag == "device":
        return torch.device(value[1])
    if tag == "torch":
        return getattr(torch, value[1])
    if tag == "const":
        return value[1]
    raise ValueError(f"unknown graph argument tag {tag!r}")


def rebuild_graph(nodes, submodules: dict):
    """The GraphModule of `nodes`, its call_module targets the modules in `submodules` (by name)."""
    import torch
    import torch.fx
    graph = torch.fx.Graph()
    env = {}
    for op, name, target, args, kwargs in nodes:
        if op == "call_function":
            target = rebind(target)
        node = graph.create_node(op, target, _decode_arg(args, env), _decode_arg(kwargs, env), name=name)
        if node.name != name:
            raise ValueError(f"graph node {name!r} rebuilt as {node.name!r}")
        env[name] = node
    root = torch.nn.Module()
    for name, module in submodules.items():
        root.add_module(name, module)
    return torch.fx.GraphModule(root, graph)


def static_record(gm) -> dict:
    """{placeholder position: how it is static} (backends/static_inputs.py)."""
    placeholders = gm.graph.find_nodes(op="placeholder")
    return {i: node.meta[static_inputs.STATIC_INPUT] for i, node in enumerate(placeholders)
            if node.meta.get(static_inputs.STATIC_INPUT)}


def restore_static(gm, graph_inputs, record) -> None:
    """A loaded graph's placeholders as the trace left them: their sources and static marks."""
    for i, (node, source) in enumerate(zip(gm.graph.find_nodes(op="placeholder"), graph_inputs)):
        node.meta["source"] = source
        if i in record:
            node.meta[static_inputs.STATIC_INPUT] = record[i]

