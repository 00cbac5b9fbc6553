"""One dataclass of settings; environment variables override the defaults at import."""
import dataclasses
import os


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


@dataclasses.dataclass
class Config:
    # Entries per code object; at the limit the code turns run-only (entries keep serving hits,
    # misses run the original code) and one warning names the function and the failing guard.
    cache_limit: int = dataclasses.field(default_factory=lambda: _env_int("TJC_CACHE_LIMIT", 8))
    # A backend that raises or returns a non-callable: False (default) runs the frame's original
    # code, warning once with the backend's name and reason (FullGraphError under fullgraph=True);
    # True warns once and runs the traced graph eagerly (gm.forward) in the backend's place.
    fallback_to_eager: bool = dataclasses.field(
        default_factory=lambda: os.environ.get("TJC_FALLBACK_TO_EAGER", "0") not in ("", "0", "false", "False"))
    # Resume functions made from resume functions, at most (a graph break inside a loop makes
    # one per iteration): deeper, the resume function runs uncompiled, with the reason logged.
    max_resume_depth: int = dataclasses.field(default_factory=lambda: _env_int("TJC_MAX_RESUME_DEPTH", 32))
    # TJC_LOG=recompiles,guards,graph,bytecode,fallbacks,skips,graph_breaks,dynamic (log.TOPICS)
    log: frozenset = dataclasses.field(
        default_factory=lambda: frozenset(
            p.strip() for p in os.environ.get("TJC_LOG", "").split(",") if p.strip()
        )
    )

    def __setattr__(self, name, value):
        # A wrong type is a TypeError naming the setting (`config.fallback_to_eager = "no"` would
        # read as true); an int out of range a ValueError; a misspelt name an AttributeError.
        if name in ("cache_limit", "max_resume_depth"):
            if not isinstance(value, int) or isinstance(value, bool):
                raise TypeError(f"config.{name} must be an int >= 1, got {type(value).__name__} {value!r}")
            if value < 1:
                raise ValueError(f"config.{name} must be an int >= 1, got {value!r}")
        elif name == "fallback_to_eager" and type(value) is not bool:
            raise TypeError(f"config.fallback_to_eager must be True or False, got {type(value).__name__} {value!r}")
        elif name == "log":
            if not isinstance(value, (set, frozenset)) or not all(isinstance(t, str) for t in value):
                raise TypeError(f"config.log must be a set of topic names, got {value!r}")
            value = frozenset(value)
        elif name not in _FIELDS:
            raise AttributeError(f"config has no setting {name!r} (settings: {', '.join(sorted(_FIELDS))})")
        if name == "cache_limit":
            from . import _C

            _C._set_cache_limit(value)
        super().__setattr__(name, value)


_FIELDS = frozenset(f.name for f in dataclasses.fields(Config))
config = Config()
