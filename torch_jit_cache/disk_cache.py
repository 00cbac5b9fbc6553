"""The on-disk cache (TJC_CACHE_DIR): what a compile made, stored so a later process loads it untraced.

convert_frame calls two functions: `load(compiler, frame, resolve)` on a miss before tracing, and
`store(compiler, frame, result, rewritten, shape_guards)` after an entry is made. Neither raises:
whatever goes wrong (an unreadable directory, a corrupt file, a backend failing on load) means the
frame is traced as if there were no disk cache, with a warning (corrupt or stale file, once per file)
or a `disk_cache` log line (what is not stored and why).

What an entry holds (one pickled dict per file, after a magic and a sha256 of the payload):
  - the graph as data, node by node (op, name, target, args, kwargs; functions by module + qualname),
    rebuilt into an fx Graph without retracing. No parameters, buffers or submodules: graphs with
    get_attr or call_module nodes are not stored;
  - the graph inputs (Sources) and the output spec (plain returns only: no graph break, no side
    effects); the transformed code is made again by codegen on load, with the new compiled callable
    (cheaper to reason about than patching constants of marshalled code, and as fast);
  - the guards as (source, kind, encoded value), the values by kind: constants as themselves; types,
    functions, modules and builtins by module + qualname (re-bound on load, only when that name
    reaches the very object at store time); tensors by their metadata (type, dtype, device,
    requires_grad, sizes, strides), compared with the frame's tensor on load; sources as themselves.
    Any other value (the identity of a live object, an nn.Module instance) is not stored;
  - torch's global state when compiled (grad mode, default dtype, deterministic, autocast);
  - a sha256 of every user source file whose objects the guards re-bind, and of the frame's own file:
    an edited file makes the entry stale (an inlined helper's body is not in any guard).

Keys: a directory per (code: file, qualname, first line, a digest of its bytecode, names and
constants, nested codes included), the backend's name, the trace settings, and the Python, torch and
torch_jit_cache versions. The versions are stored in the entry too and checked on load.

Concurrency: a file is written to a temporary name and moved in place with os.replace, so a reader
sees a whole file or none; two processes storing the same entry each write their own complete file.
Loading unpickles files from the cache directory: it must be writable by its user only, as inductor's.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import pickle
import sys
import tempfile
import types
import weakref

from . import __version__, codegen, counters, log, runtime
from .backends import modes, static_inputs
from .config import config
from .trace_result import (BreakOutput, ConstantOutput, DictOutput, GraphOutput, GuardKind, GuardSpec,
                           ListOutput, SourceOutput, TupleOutput, walk)

FORMAT = 2   # 2: which graph inputs are static (CUDA graphs)
_MAGIC = b"TJCDISK1"
BACKENDS = ("eager", "aot_eager", "inductor")
# Stored entries per key, at most (a code called with many shapes stops adding files).
MAX_ENTRIES = 8
_GRAPH_OPS = frozenset(("placeholder", "call_function", "call_method", "output"))
_CONSTANT_TYPES = (type(None), bool, int, float, complex, str, bytes)
# The last GraphModule loaded, weakly: tests check that it dies with its entry.
_last_loaded = None


class NotStored(Exception):
    """Why an entry is not stored (logged under the `disk_cache` topic)."""


def enabled() -> bool:
    return config.disk_cache and bool(config.cache_dir)


# --- keys -------------------------------------------------------------------------------------

def _versions() -> tuple:
    import torch
    return (FORMAT, sys.version, torch.__version__, __version__, sys.platform)


def _const_digest(value, h) -> None:
    if isinstance(value, types.CodeType):
        _code_digest(value, h)
    elif isinstance(value, (tuple, list)):
        h.update(f"{type(value).__name__}({len(value)}".encode())
        for item in value:
            _const_digest(item, h)
    elif isinstance(value, frozenset):   # str hashes (and so the order) differ per process
        h.update(f"frozenset({sorted(repr(v) for v in value)!r}".encode())
    else:
        h.update(f"{type(value).__name__}:{value!r};".encode())


def _code_digest(code, h) -> None:
    h.update(code.co_code)
    h.update(repr((code.co_qualname, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                   code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)).encode())
    for const in code.co_consts:
        _const_digest(const, h)


def _key(compiler, code) -> str:
    h = hashlib.sha256()
    h.update(repr((_versions(), code.co_filename, code.co_qualname, code.co_firstlineno, compiler.backend,
                   compiler.backend_patches, compiler.dynamic, config.capture_scalar_outputs,
                   config.capture_dynamic_output_shape_ops)).encode())
    _code_digest(code, h)
    return h.hexdigest()[:32]


def _key_dir(compiler, code) -> str:
    return os.path.join(config.cache_dir, f"v{FORMAT}", _key(compiler, code))


def _global_state() -> tuple:
    # What the GLOBAL_STATE guard compares (csrc/guards/tensor_text.h, GlobalStateFacts): the entry's
    # guard tree is built on load, where it records the state of that moment, so the state the graph
    # was compiled under is compared here first.
    import torch
    return (torch.is_grad_enabled(), str(torch.get_default_dtype()), torch.are_deterministic_algorithms_enabled(),
            torch.is_autocast_enabled("cpu"), str(torch.get_autocast_dtype("cpu")),
            torch.is_autocast_enabled("cuda"), str(torch.get_autocast_dtype("cuda")))


def _file_digest(path: str):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


# --- guard values -----------------------------------------------------------------------------

def _is_constant(value) -> bool:
    if isinstance(value, (tuple, frozenset)) and type(value) in (tuple, frozenset):
        return all(_is_constant(v) for v in value)
    return type(value) in _CONSTANT_TYPES


def _lookup_name(module: str, qualname: str):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _name_of(value, files: set):
    """("module", name), ("named", module, qualname, code digest or None) or ("attr", the class's
    record, name) for a C method, reaching `value` itself;
    NotStored otherwise. The digest (a function's code, nested codes and constants included) is
    compared on load with the code of what the name reaches then: a function reassigned under the
    name (a monkeypatch, an impostor given the same qualname) is another function.
    The user source files the name depends on are added to `files`."""
    import torch
    if isinstance(value, types.ModuleType):
        name = value.__name__
        if sys.modules.get(name) is not value:
            raise NotStored(f"module {name!r} is not the one imported under that name")
        _add_module_file(name, files)
        return ("module", name)
    if isinstance(value, torch.dtype):
        return ("named", "torch", str(value).removeprefix("torch."), None)
    if isinstance(value, type) and value.__module__ == "builtins":
        # function, method, ...: named only in the types module (types.FunctionType)
        for name, obj in vars(types).items():
            if obj is value:
                return ("named", "types", name, None)
    owner, attr = getattr(value, "__objclass__", None), getattr(value, "__name__", None)
    if isinstance(owner, type) and isinstance(attr, str) and owner.__dict__.get(attr) is value:
        # A C method (torch.Tensor.add_, a method_descriptor): the attribute of its named class.
        return ("attr", _name_of(owner, files), attr)
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<locals>" in qualname:
        raise NotStored(f"a {type(value).__name__} object has no importable name (identity of a live object)")
    # torch.sin's qualname is '_VariableFunctionsClass.sin': builtins are tried by __name__ too.
    for name in dict.fromkeys((qualname, getattr(value, "__name__", qualname))):
        try:
            found = _lookup_name(module, name)
        except Exception:  # noqa: BLE001 - any failure means: not reachable by that name
            continue
        if found is value:
            qualname = name
            break
    else:
        raise NotStored(f"{module}.{qualname} does not name the guarded object")
    for cls in (value.__mro__ if isinstance(value, type) else (value,)):
        _add_module_file(getattr(cls, "__module__", None), files)
    return ("named", module, qualname, _function_digest(value))


def _function_digest(value):
    code = getattr(value, "__code__", None)
    if not isinstance(code, types.CodeType):
        return None
    h = hashlib.sha256()
    _code_digest(code, h)
    return h.hexdigest()


def _add_module_file(module, files: set) -> None:
    # torch's and the standard library's files are covered by the versions in the key.
    if not isinstance(module, str):
        return
    top = module.split(".")[0]
    if top in ("torch", "builtins") or top in sys.stdlib_module_names:
        return
    path = getattr(sys.modules.get(module), "__file__", None)
    if path:
        files.add(path)


def _tensor_meta(t, files) -> tuple:
    """What TENSOR_MATCH compares, as data: stored for a guard, and computed again for the frame's
    tensor when the entry loads (NotStored where its type has no name)."""
    import torch
    strides = tuple(t.stride()) if t.layout == torch.strided else None
    return (_name_of(type(t), files), str(t.dtype), str(t.device), bool(t.requires_grad), tuple(t.shape), strides)


def _encode_guard(spec: GuardSpec, files: set, identities: dict):
    kind, value = spec.kind, spec.value
    if kind is GuardKind.ID_MATCH and isinstance(value, types.CodeType):
        # G['helper'].__code__: the code of a function the guards name (re-bound with it)
        base = getattr(spec.source, "base", None)
        owner = identities.get(base)
        if getattr(spec.source, "attr", None) != "__code__" or getattr(owner, "__code__", None) is not value:
            raise NotStored(f"{spec.source}: a code object not read as a named function's __code__")
        return (spec.source, kind.name, ("code_of", _name_of(owner, files)))
    if kind in (GuardKind.NONE_MATCH, GuardKind.NOT_NONE, GuardKind.DICT_TAGS):
        encoded = None
    elif kind in (GuardKind.EQUALS_MATCH, GuardKind.BOOL_MATCH, GuardKind.LENGTH, GuardKind.DICT_KEYS):
        if not _is_constant(value):
            raise NotStored(f"{spec.source}: {kind.name} on a {type(value).__name__}")
        encoded = ("const", value)
    elif kind in (GuardKind.TYPE_MATCH, GuardKind.ID_MATCH):
        encoded = _name_of(value, files)
    elif kind is GuardKind.TENSOR_MATCH:
        encoded = ("tensor", _tensor_meta(value, files))
    elif kind in (GuardKind.SAME_AS, GuardKind.DISTINCT_FROM, GuardKind.ALIAS_OF):
        encoded = ("source", value)
    else:
        raise NotStored(f"guard kind {kind.name}")
    return (spec.source, kind.name, encoded)


class _Mismatch(Exception):
    """A stored guard cannot hold for this frame (a re-bound name is gone, a tensor differs)."""


def _decode_guard(record, resolve) -> GuardSpec:
    source, kind_name, encoded = record
    kind = GuardKind[kind_name]
    if encoded is None:
        return GuardSpec(source, kind)
    tag = encoded[0]
    if tag in ("const", "source"):
        return GuardSpec(source, kind, encoded[1])
    if tag in ("module", "named", "attr"):
        return GuardSpec(source, kind, _rebind(encoded))
    if tag == "code_of":
        owner = _rebind(encoded[1])
        if not isinstance(getattr(owner, "__code__", None), types.CodeType):
            raise _Mismatch(f"{encoded[1]} has no code")
        return GuardSpec(source, kind, owner.__code__)
    if tag == "tensor":
        try:
            live = resolve(source)
        except Exception:  # noqa: BLE001 - the frame does not reach it: the entry does not apply
            raise _Mismatch(f"{source} is not reachable") from None
        import torch
        if not isinstance(live, torch.Tensor):
            raise _Mismatch(f"{source}: type")
        # The type by its name record: equal only where that name reaches type(live) itself.
        try:
            same = _tensor_meta(live, set()) == encoded[1]
        except NotStored:
            same = False
        if not same:
            raise _Mismatch(f"{source}: tensor type or metadata")
        # The guard is built from the frame's tensor, whose facts equal the stored ones.
        return GuardSpec(source, kind, live)
    raise ValueError(f"unknown guard value tag {tag!r}")


def _rebind(encoded):
    """The object `encoded` (a _name_of record) names in this process: one that names itself the
    same way, with the same code for a function; _Mismatch otherwise."""
    try:
        if encoded[0] == "module":
            found = sys.modules[encoded[1]]
        elif encoded[0] == "attr":
            found = _rebind(encoded[1]).__dict__[encoded[2]]
        else:
            found = _lookup_name(encoded[1], encoded[2])
        same = _name_of(found, set()) == tuple(encoded)
    except Exception:  # noqa: BLE001 - not found, or no longer nameable: not the stored object
        raise _Mismatch(f"{encoded[1]}.{encoded[2]} is not found") from None
    if not same:
        raise _Mismatch(f"{encoded[1]}.{encoded[2]} is another object (reassigned, or its code changed)")
    return found


# --- store ------------------------------------------------------------------------------------

def _check_output(spec, files: set) -> None:
    if isinstance(spec, BreakOutput):
        raise NotStored("a graph break (resume functions are not stored)")
    for part in walk(spec):
        if isinstance(part, (GraphOutput, SourceOutput, ListOutput, DictOutput)):
            continue
        if isinstance(part, TupleOutput) and (part.cls is None or _is_named_type(part.cls, files)):
            continue
        if isinstance(part, ConstantOutput) and _is_constant(part.value):
            continue
        raise NotStored(f"output {type(part).__name__}")
    for part in walk(spec):
        if isinstance(part, DictOutput) and not all(_is_constant(k) for k, _ in part.items):
            raise NotStored("a dict output with non-constant keys")


def _is_named_type(cls, files: set) -> bool:
    """A tuple subclass output (torch.return_types.max, a namedtuple) pickles by its name: only
    where the name reaches it."""
    try:
        return isinstance(cls, type) and _name_of(cls, files)[0] == "named"
    except NotStored:
        return False


def _graph_record(gm, files: set) -> list:
    """The graph's nodes as data: (op, name, target, args, kwargs), targets and constants named
    as guard values are, other nodes by name. Rebuilt node by node (_rebuild_graph): no retrace,
    so the graph loaded is the graph stored."""
    bad = sorted({n.op for n in gm.graph.nodes} - _GRAPH_OPS)
    if bad:
        raise NotStored(f"graph nodes {', '.join(bad)} (parameters or submodules held by the graph)")
    if gm._parameters or gm._buffers or gm._modules:
        raise NotStored("the graph module holds parameters, buffers or submodules")
    nodes = []
    for node in gm.graph.nodes:
        target = _name_of(node.target, files) if node.op == "call_function" else node.target
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
        return ("dict", [(k, _encode_arg(v)) for k, v in value.items() if _is_constant(k) or _no_key(k)])
    if type(value) is slice:
        return ("slice", [_encode_arg(v) for v in (value.start, value.stop, value.step)])
    if value is Ellipsis:
        return ("ellipsis",)
    if isinstance(value, torch.device):
        return ("device", str(value))
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return ("torch", str(value).removeprefix("torch."))
    if _is_constant(value):
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


def _rebuild_graph(nodes):
    import torch
    import torch.fx
    graph = torch.fx.Graph()
    env = {}
    for op, name, target, args, kwargs in nodes:
        if op == "call_function":
            target = _rebind(target)
        node = graph.create_node(op, target, _decode_arg(args, env), _decode_arg(kwargs, env), name=name)
        if node.name != name:
            raise ValueError(f"graph node {name!r} rebuilt as {node.name!r}")
        env[name] = node
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _static_record(gm) -> dict:
    """{placeholder position: how it is static} (backends/static_inputs.py)."""
    placeholders = gm.graph.find_nodes(op="placeholder")
    return {i: node.meta[static_inputs.STATIC_INPUT] for i, node in enumerate(placeholders)
            if node.meta.get(static_inputs.STATIC_INPUT)}


def _restore_static(gm, graph_inputs, record) -> None:
    """A loaded graph's placeholders as the trace left them: their sources and static marks."""
    for i, (node, source) in enumerate(zip(gm.graph.find_nodes(op="placeholder"), graph_inputs)):
        node.meta["source"] = source
        if i in record:
            node.meta[static_inputs.STATIC_INPUT] = record[i]


def _entry(compiler, frame, result, rewritten, shape_guards) -> dict:
    if compiler.backend not in BACKENDS:
        raise NotStored(f"backend {compiler.backend!r} is not one of {', '.join(BACKENDS)} by name")
    if not modes.plain(compiler.backend_patches):
        raise NotStored("options= holds a callable")
    if shape_guards is not None:
        raise NotStored("symbolic sizes")
    if result.side_effects:
        raise NotStored("side effects")
    files = {frame.f_code.co_filename}
    _check_output(result.output, files)
    import torch
    from .backends import has_symbolic_sizes
    for t in result.example_inputs:
        if not isinstance(t, torch.Tensor) or has_symbolic_sizes(t):
            raise NotStored("a non-tensor or symbolic graph input")
    identities = {g.source: g.value for g in rewritten.guards if g.kind is GuardKind.ID_MATCH}
    guards = [_encode_guard(g, files, identities) for g in rewritten.guards]
    graph = _graph_record(result.graph, files)
    digests = {path: _file_digest(path) for path in sorted(files)}
    unreadable = sorted(path for path, digest in digests.items() if digest is None)
    if unreadable:   # code from exec'd strings, notebooks: nothing vouches for what it was
        raise NotStored(f"source file {unreadable[0]} cannot be read")
    return {
        "versions": _versions(),
        "code": (frame.f_code.co_filename, frame.f_code.co_qualname, frame.f_code.co_firstlineno),
        "global_state": _global_state(),
        "guards": guards,
        "graph_inputs": list(rewritten.graph_inputs),
        "output": result.output,
        "graph": graph,
        "static_inputs": _static_record(result.graph),
        "files": digests,
    }


def store(compiler, frame, result, rewritten, shape_guards) -> None:
    """Write the entry just compiled for `frame`, when it can be stored; never raises."""
    if not enabled():
        return
    code = frame.f_code
    try:
        entry = _entry(compiler, frame, result, rewritten, shape_guards)
        try:
            payload = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
            # Unpickling must not need anything of this process's (a class only defined here).
            pickle.loads(payload)
        except Exception as e:  # noqa: BLE001 - a source or output that does not pickle
            raise NotStored(f"does not pickle: {type(e).__name__}: {e}") from None
        directory = _key_dir(compiler, code)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if len([n for n in os.listdir(directory) if n.endswith(".entry")]) >= MAX_ENTRIES:
            raise NotStored(f"{MAX_ENTRIES} entries stored for this code already")
        digest = hashlib.sha256(payload).digest()
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".partial")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(_MAGIC + digest + payload)
            os.replace(tmp, os.path.join(directory, digest.hex()[:24] + ".entry"))
        except BaseException:
            os.unlink(tmp)
            raise
    except NotStored as e:
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"not storing {_describe(code)}: {e}")
        return
    except OSError as e:   # a cache that cannot be written is no cache, not a failure
        log.warn_once(("disk_cache_store", config.cache_dir, type(e).__name__),
                      f"torch_jit_cache: cannot store compiled code in {config.cache_dir}: {type(e).__name__}: {e}")
        return
    except Exception as e:  # noqa: BLE001 - what the encoders did not foresee: not stored, logged
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"not storing {_describe(code)}: {type(e).__name__}: {e}")
        return
    counters.count("disk_cache_stores")
    if log.enabled("disk_cache"):
        log.log("disk_cache", f"stored {_describe(code)} in {directory}")


# --- load -------------------------------------------------------------------------------------

def _describe(code) -> str:
    return f"'{code.co_qualname}' ({code.co_filename}:{code.co_firstlineno})"


def _read(path: str):
    """The entry in `path`, or None with one warning for a corrupt or stale file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:len(_MAGIC)] != _MAGIC:
            raise ValueError("not a torch_jit_cache entry")
        digest, payload = data[len(_MAGIC):len(_MAGIC) + 32], data[len(_MAGIC) + 32:]
        if hashlib.sha256(payload).digest() != digest:
            raise ValueError("checksum mismatch")
        entry = pickle.loads(payload)
        if not isinstance(entry, dict) or entry.get("versions") != _versions():
            raise ValueError(f"stale: written by {entry.get('versions') if isinstance(entry, dict) else '?'}")
        for file, digest in entry["files"].items():
            if _file_digest(file) != digest:
                raise ValueError(f"stale: {file} changed since it was stored")
        return entry
    except FileNotFoundError:
        return None   # replaced or removed by another process meanwhile
    except Exception as e:  # noqa: BLE001 - corrupt or stale: ignored, never a failure
        log.warn_once(("disk_cache_read", path), f"torch_jit_cache: ignoring cache file {path}: "
                                                 f"{type(e).__name__}: {e}")
        # Removed, so that it warns once, not in every later process: a file is only ever visible
        # whole (os.replace), so a bad one is bad for every reader; a stale one (a source file
        # edited since) is stale for every process running that source.
        try:
            os.unlink(path)
        except OSError:
            pass
        return None


def load(compiler, frame, resolve):
    """A GuardedCode for `frame` from a stored entry whose guards pass, or None; never raises.
    Not under explain() (an observer): it reports the graph, which only a trace has."""
    if not enabled() or compiler.backend not in BACKENDS or compiler.observer is not None or \
            not modes.plain(compiler.backend_patches):
        return None
    try:
        return _load(compiler, frame, resolve)
    except Exception as e:  # noqa: BLE001 - an unusable cache is no cache (torch missing, say)
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"not loading {_describe(frame.f_code)}: {type(e).__name__}: {e}")
        return None


def _load(compiler, frame, resolve):
    code = frame.f_code
    try:
        directory = _key_dir(compiler, code)
        names = sorted(n for n in os.listdir(directory) if n.endswith(".entry"))
    except OSError:
        return None
    for name in names:
        path = os.path.join(directory, name)
        entry = _read(path)
        if entry is None or entry["code"] != (code.co_filename, code.co_qualname, code.co_firstlineno):
            continue
        try:
            guarded = _load_entry(compiler, frame, entry, resolve)
        except _Mismatch as e:
            if log.enabled("disk_cache"):
                log.log("disk_cache", f"{_describe(code)}: {name} does not apply: {e}")
            continue
        except Exception as e:  # noqa: BLE001 - see _read
            log.warn_once(("disk_cache_read", path), f"torch_jit_cache: ignoring cache file {path}: "
                                                     f"{type(e).__name__}: {e}")
            continue
        counters.count("disk_cache_hits")
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"loaded {_describe(code)} from {path}")
        return guarded
    return None


def _load_entry(compiler, frame, entry, resolve):
    global _last_loaded
    from .guards import build_guards

    if entry["global_state"] != _global_state():
        raise _Mismatch("torch's global state differs")
    specs = [_decode_guard(record, resolve) for record in entry["guards"]]
    guards = build_guards(specs, resolve=resolve)
    guards.bind(frame.f_code)
    if not guards.check(frame):
        raise _Mismatch(guards.explain(frame))
    gm = _rebuild_graph(entry["graph"])
    graph_inputs = entry["graph_inputs"]
    _restore_static(gm, graph_inputs, entry["static_inputs"])
    runtime.set_skip(type(gm).forward)
    # "eager" runs gm.forward and reads no example (making fakes imports torch._dynamo: 2 s).
    example_inputs = [] if compiler.backend == "eager" else _example_inputs(graph_inputs, resolve)
    # As a traced graph's: an identical graph's backend compile is shared (backends/sharing.py),
    # so N blocks compiled one by one, each loading the first one's entry, compile once.
    compiled = compiler.compile_graph(gm, example_inputs)
    del example_inputs
    _last_loaded = weakref.ref(gm)
    new_code = codegen.build_transformed_code(frame.f_code, compiled, graph_inputs, entry["output"], (), ())
    return runtime.GuardedCode(new_code, guards)


def _example_inputs(graph_inputs, resolve) -> list:
    """Fake tensors like the frame's graph inputs (equal, by the guards just checked, to the ones
    the graph was traced with): what a backend is given."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    # With a ShapeEnv, as a trace's fakes have: inductor's FX graph cache and AOTAutograd's cache
    # bypass graphs whose inputs come without one (a warm second process compiled again: 8.7 s).
    mode = FakeTensorMode(shape_env=ShapeEnv())
    return [mode.from_tensor(resolve(source), static_shapes=True) for source in graph_inputs]

