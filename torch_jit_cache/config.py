"""One dataclass of settings; environment variables override the defaults at import."""
import dataclasses
import os

from . import _C


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if raw.strip().lower() in ("1", "true", "yes", "on"):
        return True
    if raw.strip().lower() in ("", "0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={raw!r}: expected 1/0, true/false, yes/no or on/off")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r}: expected an integer") from None
    if value < 1:
        raise ValueError(f"{name}={raw!r}: must be at least 1")
    return value


def _default_cache_dir() -> str:
    if os.environ.get("TJC_CACHE_DIR"):
        return os.environ["TJC_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_jit_cache")


DEFAULT_TRACE_BUDGET = 1_000_000


class _DefaultBackend(str):
    """The `backend=` default of compile() and compile_(): equal to "inductor", torch.compile's
    default, which is what their signatures show; compile() tells it from a backend given by name by
    identity and uses config.default_backend in its place (resolve_backend)."""

    __slots__ = ()


DEFAULT_BACKEND = _DefaultBackend("inductor")


def resolve_backend(backend):
    """The backend a compile() call uses: `backend` as given, or config.default_backend where the
    caller gave none (DEFAULT_BACKEND)."""
    return config.default_backend if backend is DEFAULT_BACKEND else backend


@dataclasses.dataclass
class Config:
    # Entries per code object; at the limit the code turns run-only (entries keep serving hits,
    # misses run the original code) and one warning names the function and the failing guard.
    # The runtime holds the value in force (set here, read on every miss) and the default; a
    # compile() call's or a code's own limit overrides it (one ranking: resolve_cache_limit in
    # csrc/common/runtime_state.h, CacheOwner.effective_cache_limit from Python).
    cache_limit: int = dataclasses.field(
        default_factory=lambda: _env_int("TJC_CACHE_LIMIT", _C.DEFAULT_CACHE_LIMIT))
    # A backend that raises or returns a non-callable: False (default) runs the frame's original
    # code, warning once with the backend's name and reason (FullGraphError under fullgraph=True);
    # True warns once and runs the traced graph eagerly (gm.forward) in the backend's place.
    fallback_to_eager: bool = dataclasses.field(
        default_factory=lambda: os.environ.get("TJC_FALLBACK_TO_EAGER", "0") not in ("", "0", "false", "False"))
    # Resume functions made from resume functions, at most (a graph break inside a loop makes
    # one per iteration): deeper, the resume function runs uncompiled, with the reason logged.
    max_resume_depth: int = dataclasses.field(default_factory=lambda: _env_int("TJC_MAX_RESUME_DEPTH", 32))
    # Instructions one trace of a frame may interpret, counted over the calls it inlines: past it
    # the frame runs its original code, the reason logged once (a long Python loop is unrolled one
    # instruction at a time, each costing far more than the interpreter's). A frame's compile
    # traces at most a handful of times (graph_break/driver.py), so compiling costs at most a
    # bounded multiple of this budget. Read when a trace starts.
    trace_budget: int = dataclasses.field(default_factory=lambda: _env_int("TJC_TRACE_BUDGET", DEFAULT_TRACE_BUDGET))
    # Data-dependent values (docs/dynamic_shapes.md, "Data-dependent values"), named and defaulted
    # as torch.compile's (torch._dynamo.config). capture_scalar_outputs: `.item()`, `.tolist()` and a
    # tensor read as a number (`torch.arange(0, t.max())`) are traced as unbacked SymInts/SymFloats
    # the graph computes at run time; False (default) makes them a graph break naming this switch.
    # capture_dynamic_output_shape_ops: nonzero, masked_select, unique, bincount, a boolean mask,
    # repeat_interleave with tensor repeats give tensors with unbacked sizes; False (default) breaks.
    # Read when a frame is traced: entries already compiled keep what their trace saw.
    capture_scalar_outputs: bool = dataclasses.field(
        default_factory=lambda: _env_bool("TJC_CAPTURE_SCALAR_OUTPUTS", False))
    capture_dynamic_output_shape_ops: bool = dataclasses.field(
        default_factory=lambda: _env_bool("TJC_CAPTURE_DYNAMIC_OUTPUT_SHAPE_OPS", False))
    # The on-disk cache (pipeline/disk_cache/, docs/cache.md "On-disk cache"): compiled entries stored in
    # cache_dir and loaded by later processes without tracing. TJC_DISABLE_DISK_CACHE=1 turns it off;
    # TJC_CACHE_DIR moves it (default: $XDG_CACHE_HOME/torch_jit_cache, else ~/.cache/torch_jit_cache).
    disk_cache: bool = dataclasses.field(default_factory=lambda: not _env_bool("TJC_DISABLE_DISK_CACHE", False))
    cache_dir: str = dataclasses.field(default_factory=lambda: _default_cache_dir())
    # The structured trace (runtime/trace_log.py, docs/compile_report.md): every process writes
    # one JSON-lines file of its compiles into this folder; "" (default) writes nothing.
    # TJC_TRACE_DIR sets it; `python -m torch_jit_cache.report DIR` renders the folder as one page.
    trace_dir: str = dataclasses.field(default_factory=lambda: os.environ.get("TJC_TRACE_DIR", ""))
    # The backend compile() and compile_() use when called without `backend=` (a name or a
    # callable(gm, example_inputs)); "inductor", as torch.compile's (whose process-wide counterpart
    # is torch._dynamo.backends.registry.set_default_backend). Read when compile() is called.
    # TJC_DEFAULT_BACKEND sets it for a process and the processes it starts (the test suite's
    # conftest.py sets "eager", which compiles in milliseconds where inductor takes seconds).
    default_backend: object = dataclasses.field(
        default_factory=lambda: os.environ.get("TJC_DEFAULT_BACKEND") or "inductor")
    # TJC_LOG=recompiles,guards,graph,bytecode,fallbacks,skips,graph_breaks,dynamic (log.TOPICS)
    log: frozenset = dataclasses.field(
        default_factory=lambda: frozenset(
            p.strip() for p in os.environ.get("TJC_LOG", "").split(",") if p.strip()
        )
    )

    def __setattr__(self, name, value):
        # A wrong type is a TypeError naming the setting (`config.fallback_to_eager = "no"` would
        # read as true); an int out of range a ValueError; a misspelt name an AttributeError.
        if name in ("cache_limit", "max_resume_depth", "trace_budget"):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"config.{name} must be an int >= 1, got {type(value).__name__} {value!r}")
            if value < 1:
                raise ValueError(f"config.{name} must be an int >= 1, got {value!r}")
        elif name in _BOOLS and type(value) is not bool:
            raise TypeError(f"config.{name} must be True or False, got {type(value).__name__} {value!r}")
        elif name in ("cache_dir", "trace_dir") and not isinstance(value, (str, os.PathLike)):
            raise TypeError(f"config.{name} must be a path, got {type(value).__name__} {value!r}")
        elif name == "default_backend" and not (isinstance(value, str) or callable(value)):
            raise TypeError(f"config.default_backend must be a backend name or a callable(gm, example_inputs), "
                            f"got {type(value).__name__} {value!r}")
        elif name == "log":
            if not isinstance(value, (set, frozenset)) or not all(isinstance(t, str) for t in value):
                raise TypeError(f"config.log must be a set of topic names, got {value!r}")
            value = frozenset(value)
        elif name not in _FIELDS:
            raise AttributeError(f"config has no setting {name!r} (settings: {', '.join(sorted(_FIELDS))})")
        if name == "cache_limit":
            _C._set_cache_limit(value)
        super().__setattr__(name, value)
        if name == "trace_dir":
            from .runtime import trace_log

            trace_log.configure(value)


_FIELDS = frozenset(f.name for f in dataclasses.fields(Config))
_BOOLS = frozenset(("fallback_to_eager", "disk_cache", "capture_scalar_outputs", "capture_dynamic_output_shape_ops"))
config = Config()
