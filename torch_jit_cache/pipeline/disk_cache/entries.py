"""Entry files: what store() writes for a compiled frame and what load() reads back, checks
against the frame and turns into a GuardedCode."""
from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import time
import weakref

from .. import codegen
from ...runtime import counters, log, trace_log
from ... import graph_break, runtime
from ...frontend import proxies
from ...backends import modes
from ...config import config
from ...guard.sources import Source
from ...guard.trace_result import BreakOutput, GuardKind, has_tensor_work
from . import guard_codec, graph_codec, keys, output_codec
from .names import Mismatch, NotStored

MAGIC = b"TJCDISK1"
BACKENDS = ("eager", "aot_eager", "inductor")
# Stored entries per key, at most: a key that is full loses its least recently used entry (one code
# serves every model it is called for: transformers' output wrappers, a block of many shapes).
MAX_ENTRIES = 8
# The last GraphModule loaded, weakly: tests check that it dies with its entry.
last_loaded = None


def enabled() -> bool:
    return config.disk_cache and bool(config.cache_dir)


def _entry(compiler, frame, result, rewritten, shape_guards, made) -> dict:
    if compiler.backend not in BACKENDS:
        raise NotStored(f"backend {compiler.backend!r} is not one of {', '.join(BACKENDS)} by name")
    if not modes.plain(compiler.backend_patches):
        raise NotStored("options= holds a callable")
    files = {frame.f_code.co_filename}
    outputs = output_codec.encode(result.output, result.side_effects, frame.f_code, files)
    import torch
    from ...backends import has_symbolic_sizes
    for t in result.example_inputs:
        if not isinstance(t, torch.Tensor):
            raise NotStored(f"a {type(t).__name__} graph input (a symbolic int)")
        if has_symbolic_sizes(t) and shape_guards is None:
            raise NotStored("a symbolic graph input without shape guards")
    # Sources are pickled as they are: only those made of names and constants (a ComputedSource's
    # function would be pickled by reference, unchecked).
    for source in [*rewritten.graph_inputs, *(s for g in rewritten.guards for s in (g.source, g.value)
                                              if isinstance(s, Source))]:
        output_codec.check_source(source)
    identities = {g.source: g.value for g in rewritten.guards if g.kind is GuardKind.ID_MATCH}
    dynamic = shape_guards.dynamic_dims() if shape_guards is not None else {}
    context = guard_codec.StoreContext(files, identities, dynamic)
    guards = [guard_codec.encode_guard(g, context) for g in rewritten.guards]
    # A break with no tensor work before it calls no graph (convert_frame: compiled is None).
    graph = graph_codec.graph_record(result.graph, files) if has_tensor_work(result.graph) else None
    submodules = graph_codec.submodule_sources(result.graph, identities) if graph is not None else {}
    digests = {path: keys.file_digest(path) for path in sorted(files)}
    unreadable = sorted(path for path, digest in digests.items() if digest is None)
    if unreadable:   # code from exec'd strings, notebooks: nothing vouches for what it was
        raise NotStored(f"source file {unreadable[0]} cannot be read")
    return {
        "versions": keys.versions(),
        "code": (frame.f_code.co_filename, frame.f_code.co_qualname, frame.f_code.co_firstlineno),
        "global_state": keys.global_state(),
        "guards": guards,
        "graph_inputs": list(rewritten.graph_inputs),
        # As the live entry's (guard/shape_guards.py): sympy over sources, pickled as they are; TENSOR_MATCH
        # leaves the dims they read to them.
        "shape_guards": shape_guards,
        "outputs": outputs,
        "graph": graph,
        "submodules": submodules,
        "static_inputs": graph_codec.static_record(result.graph),
        "files": digests,
        # What stats() counted of the trace, counted again on load (counters.MadeEntry).
        "made": (made.has_graph, made.break_reason, made.counted_break),
    }


# The marker of a code that a trace found without tensor work (convert_frame._no_graph), in its
# key's folder: a later process skips it untraced. SKIP is never a wrong result (the code runs as
# written, and a traced caller still inlines it), so it needs no guards: the key alone (the code's
# bytecode digest, the versions, the backend and settings) says which code it was made for.
SKIP_MARKER = "skip"


def store_skip(compiler, code) -> None:
    """Note that `code` is skipped (no tensor work); never raises."""
    if not enabled():
        return
    try:
        directory = keys.key_dir(compiler, code)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        _write(directory, SKIP_MARKER, b"")
    except Exception as e:  # noqa: BLE001 - a marker that cannot be written is no marker
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"not storing the skip of {log.describe_code(code)}: {type(e).__name__}: {e}")
        return
    if log.enabled("disk_cache"):
        log.log("disk_cache", f"stored: {log.describe_code(code)} is skipped (no tensor work)")


def _skipped(directory: str, code) -> bool:
    """Whether an earlier process skipped `code` (store_skip; `directory`: its key's folder)."""
    found = os.path.exists(os.path.join(directory, SKIP_MARKER))
    if found:
        counters.count("disk_cache_skips")
        trace_log.disk_cache("skip", "an earlier process found no tensor work")
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"skipping {log.describe_code(code)} untraced: an earlier process found no tensor work")
    return found


def _write(directory: str, name: str, data: bytes) -> str:
    """`data` as the file `name` in `directory`, written under a temporary name and moved in place
    (os.replace): a reader sees a whole file or none. Returns its path."""
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".partial")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        path = os.path.join(directory, name)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path


def store(compiler, frame, result, rewritten, shape_guards, made) -> None:
    """Write the entry just compiled for `frame` (`made`: what stats() counted of it), when it can
    be stored; never raises."""
    if not enabled():
        return
    code = frame.f_code
    try:
        entry = _entry(compiler, frame, result, rewritten, shape_guards, made)
        try:
            payload = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
            # Unpickling must not need anything of this process's (a class only defined here).
            pickle.loads(payload)
        except Exception as e:  # noqa: BLE001 - a source or output that does not pickle
            raise NotStored(f"does not pickle: {type(e).__name__}: {e}") from None
        directory = keys.key_dir(compiler, code)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        stored = _by_recent_use(directory)
        for old in stored[MAX_ENTRIES - 1:]:   # room for this one: the least recently used go
            _remove(old)
            if log.enabled("disk_cache"):
                log.log("disk_cache", f"{log.describe_code(code)}: {MAX_ENTRIES} entries stored, removed {old}")
        digest = hashlib.sha256(payload).digest()
        path = _write(directory, digest.hex()[:24] + ".entry", MAGIC + digest + payload)
        _mark_used(path, stored)
    except NotStored as e:
        trace_log.disk_cache("not stored", e)
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"not storing {log.describe_code(code)}: {e}")
        return
    except OSError as e:   # a cache that cannot be written is no cache, not a failure
        log.warn_once(("disk_cache_store", config.cache_dir, type(e).__name__),
                      f"torch_jit_cache: cannot store compiled code in {config.cache_dir}: {type(e).__name__}: {e}")
        return
    except Exception as e:  # noqa: BLE001 - what the encoders did not foresee: not stored, logged
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"not storing {log.describe_code(code)}: {type(e).__name__}: {e}")
        return
    counters.count("disk_cache_stores")
    trace_log.disk_cache("store", path)
    if log.enabled("disk_cache"):
        log.log("disk_cache", f"stored {log.describe_code(code)} in {directory}")


# --- load -------------------------------------------------------------------------------------

def _read(path: str):
    """The entry in `path`, or None with one warning for a corrupt or stale file."""
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:len(MAGIC)] != MAGIC:
            raise ValueError("not a torch_jit_cache entry")
        digest, payload = data[len(MAGIC):len(MAGIC) + 32], data[len(MAGIC) + 32:]
        if hashlib.sha256(payload).digest() != digest:
            raise ValueError("checksum mismatch")
        entry = pickle.loads(payload)
        if not isinstance(entry, dict) or entry.get("versions") != keys.versions():
            raise ValueError(f"stale: written by {entry.get('versions') if isinstance(entry, dict) else '?'}")
        for file, digest in entry["files"].items():
            if keys.file_digest(file) != digest:
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
        _remove(path)
        return None


def load(compiler, frame, resolve, skippable: bool = False):
    """A GuardedCode for `frame` from a stored entry whose guards pass, runtime.SKIP where
    `skippable` and an earlier process skipped the code (store_skip), or None; never raises.
    Entries are not loaded under explain() (an observer): it reports the graph, which only a trace
    has."""
    if not enabled():
        return None
    try:
        directory = keys.key_dir(compiler, frame.f_code)
        if skippable and _skipped(directory, frame.f_code):
            return runtime.SKIP
        if compiler.backend not in BACKENDS or compiler.observer is not None or \
                not modes.plain(compiler.backend_patches):
            return None
        return _load(compiler, frame, resolve, directory)
    except Exception as e:  # noqa: BLE001 - an unusable cache is no cache (torch missing, say)
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"not loading {log.describe_code(frame.f_code)}: {type(e).__name__}: {e}")
        return None


def _load(compiler, frame, resolve, directory: str):
    code = frame.f_code
    try:
        paths = _by_recent_use(directory)
    except OSError:
        return None
    read = [(path, _read(path)) for path in paths]
    # Static entries first, each group by recent use: a trace makes a code's static entry first
    # and a symbolic one only once a size changed, so a process that loads ends with the entries a
    # process that traces makes (a symbolic entry tried first would serve the first size too).
    read.sort(key=lambda item: item[1] is not None and item[1].get("shape_guards") is not None)
    for path, entry in read:
        name = os.path.basename(path)
        if entry is None or entry["code"] != (code.co_filename, code.co_qualname, code.co_firstlineno):
            continue
        try:
            guarded = _load_entry(compiler, frame, entry, resolve)
        except Mismatch as e:
            if log.enabled("disk_cache"):
                log.log("disk_cache", f"{log.describe_code(code)}: {name} does not apply: {e}")
            continue
        except Exception as e:  # noqa: BLE001 - see _read
            log.warn_once(("disk_cache_read", path), f"torch_jit_cache: ignoring cache file {path}: "
                                                     f"{type(e).__name__}: {e}")
            continue
        counters.count("disk_cache_hits")
        trace_log.disk_cache("load", path)
        counters.count_entry(code, counters.MadeEntry(*entry["made"]))
        _mark_used(path, paths)
        if log.enabled("disk_cache"):
            log.log("disk_cache", f"loaded {log.describe_code(code)} from {path}")
        return guarded
    return None


def _by_recent_use(directory: str) -> list:
    """The entry files of a key, the most recently stored or loaded first (tried first on load,
    removed last when the key is full); OSError where the directory cannot be listed."""
    found = []
    for name in os.listdir(directory):
        if name.endswith(".entry"):
            path = os.path.join(directory, name)
            try:
                found.append((os.stat(path).st_mtime_ns, name, path))
            except OSError:   # removed by another process meanwhile
                pass
    return [path for _, _, path in sorted(found, key=lambda f: (-f[0], f[1]))]


def _mark_used(path: str, others) -> None:
    """Make `path` the key's most recently used entry: its mtime now, and past every other entry's
    of the key (`others`: their paths). A file's mtime comes from a clock a few ms coarse, so two
    uses within one tick would tie, and a full key would remove the entry just used."""
    try:
        newest = max((os.stat(p).st_mtime_ns for p in others if p != path and os.path.exists(p)), default=0)
        now = max(time.time_ns(), newest + 1)
        os.utime(path, ns=(now, now))
    except OSError:   # removed by another process meanwhile: nothing to order
        pass


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:   # removed by another process meanwhile
        pass


def _load_entry(compiler, frame, entry, resolve):
    global last_loaded
    from ...guard.tree import build_guards

    if entry["global_state"] != keys.global_state():
        raise Mismatch("torch's global state differs")
    specs = [guard_codec.decode_guard(record, resolve) for record in entry["guards"]]
    guard_codec.check_bound_groups(entry["guards"], specs)
    shape_guards = entry["shape_guards"]
    guards = build_guards(specs, shape_guards=shape_guards)
    guards.bind(frame.f_code)
    if not guards.check(frame):
        raise Mismatch(guards.explain(frame))
    output, side_effects = output_codec.decode(entry["outputs"], frame.f_code)
    graph_inputs = entry["graph_inputs"]
    compiled = None
    if entry["graph"] is not None:
        # The modules the graph calls opaquely, as proxies of what the frame holds (bound by the guards).
        gm = graph_codec.rebuild_graph(entry["graph"], {name: proxies.module_proxy(resolve(source))
                                                        for name, source in entry["submodules"].items()})
        graph_codec.restore_static(gm, graph_inputs, entry["static_inputs"])
        runtime.set_skip(type(gm).forward)
        # "eager" runs gm.forward and reads no example (making fakes imports torch._dynamo: 2 s).
        example_inputs = [] if compiler.backend == "eager" else \
            _example_inputs(graph_inputs, resolve, shape_guards)
        # As a traced graph's: an identical graph's backend compile is shared (backends/sharing.py),
        # so N blocks compiled one by one, each loading the first one's entry, compile once.
        compiled = compiler.compile_graph(gm, example_inputs)
        del example_inputs
        last_loaded = weakref.ref(gm)
    # Made again as convert_frame._transformed_code makes them: deterministic codes, registered as
    # resume codes, whose own entries are keyed by their own code.
    resume_fns = graph_break.resume_functions(frame.f_code, frame.f_globals, output, config.max_resume_depth) \
        if isinstance(output, BreakOutput) else ()
    new_code = codegen.build_transformed_code(frame.f_code, compiled, graph_inputs, output, resume_fns,
                                              side_effects)
    return runtime.GuardedCode(new_code, guards)


def _example_inputs(graph_inputs, resolve, shape_guards) -> list:
    """Fake tensors like the frame's graph inputs (equal, by the guards just checked, to the ones
    the graph was traced with): what a backend is given. The dims the shape guards read are fresh
    symbols: the backend's answers from them are the trace's for every size the stored guards
    accept (they hold the trace's and the first compile's answers, and the ranges); what the fresh
    ShapeEnv does not know only makes a compile more conservative (docs/cache.md)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import DimDynamic, ShapeEnv, StatelessSymbolicContext
    # With a ShapeEnv, as a trace's fakes have: inductor's FX graph cache and AOTAutograd's cache
    # bypass graphs whose inputs come without one (a warm second process compiled again: 8.7 s).
    dynamic = shape_guards.dynamic_dims() if shape_guards is not None else {}
    # Symbols as the tracer makes them (tracer/fake_shapes.py): one per dim, never shared because
    # two sizes happen to be equal here (duck shaping would compile for x.size(0) == y.size(0)).
    mode = FakeTensorMode(shape_env=ShapeEnv(specialize_zero_one=True, duck_shape=False) if dynamic else ShapeEnv())
    fakes = []
    for source in graph_inputs:
        t = resolve(source)
        if source not in dynamic:
            fakes.append(mode.from_tensor(t, static_shapes=True))
            continue
        sizes = dynamic[source][0]
        context = StatelessSymbolicContext(dynamic_sizes=[DimDynamic.DYNAMIC if i in sizes else DimDynamic.STATIC
                                                          for i in range(t.dim())])
        fakes.append(mode.from_tensor(t, symbolic_context=context))
    return fakes

