"""compile(..., mode=, options=): inductor's settings for one compile() call, as torch.compile's.

    tjc.compile(model, backend="inductor", mode="max-autotune-no-cudagraphs")
    tjc.compile(model, backend="inductor", options={"max_autotune": True, "epilogue_fusion": False})

A mode stands for the inductor config it sets (`torch._inductor.list_mode_options(mode)`:
"reduce-overhead" turns on CUDA graphs, "max-autotune" autotuning and CUDA graphs,
"max-autotune-no-cudagraphs" autotuning alone, "default" nothing); options are inductor config
names (`torch._inductor.list_options()`; "a-b" reads as "a_b") and values. Either may be given,
not both, and only with backend="inductor": another backend has no such settings (a callable
backend is configured by whoever wrote it). What they resolve to is `patches`: sorted
(name, value) pairs the inductor backend compiles under (compile_fx's config_patches), part of
the backend-sharing key and of the on-disk cache's key, so compiles with other settings never
share a compiled graph.

Checked when compile() is called: a wrong mode, an unknown option or a value of the wrong type is a
ValueError or TypeError naming it, not a failure at the first call.
"""
from __future__ import annotations

import difflib

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
# Values an on-disk key and a sharing key can hold by value (a callable option, a custom pass,
# is compared by identity: nothing compiled under it is shared or stored).
_PLAIN = (str, int, float, bool, type(None))


def patches(backend, mode, options, dynamic) -> tuple:
    """The inductor config patches `mode` or `options` stand for, as sorted (name, value) pairs;
    () when neither is given (or mode is "default"). Raises on bad input."""
    if mode is not None and options is not None:
        raise ValueError("give mode= or options=, not both (as torch.compile)")
    if mode is not None and (not isinstance(mode, str) or mode not in MODES):
        raise ValueError(f"mode must be one of {', '.join(repr(m) for m in MODES)} or None, got {mode!r}")
    if options is not None and not isinstance(options, dict):
        raise TypeError(f"options must be a dict of inductor config names to values, got {type(options).__name__}")
    if (mode in (None, "default")) and not options:
        return ()
    if backend != "inductor":
        name = backend if isinstance(backend, str) else getattr(backend, "__name__", type(backend).__name__)
        raise ValueError(f"mode= and options= are inductor's settings; backend {name!r} takes none "
                         "(use backend=\"inductor\", or configure your own backend callable)")
    import torch._inductor
    import torch._inductor.config as inductor_config

    if mode is not None:
        return tuple(sorted(torch._inductor.list_mode_options(mode, dynamic).items()))
    known = inductor_config.get_config_copy()
    out = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise TypeError(f"options keys must be inductor config names (str), got {type(key).__name__} {key!r}")
        name = key.replace("-", "_")
        if name not in known:
            near = difflib.get_close_matches(name, known, n=3)
            hint = f"; did you mean {', '.join(near)}?" if near else "; see torch._inductor.list_options()"
            raise ValueError(f"options: {key!r} is not an inductor config option{hint}")
        expected = inductor_config.get_type(name)
        # A generic type (Optional[str], list[str]) cannot be checked with isinstance: as torch.compile.
        if isinstance(expected, type) and not isinstance(value, expected):
            raise TypeError(f"options: {key!r} must be {expected.__name__}, got {type(value).__name__} {value!r}")
        out[name] = value
    return tuple(sorted(out.items()))


def plain(patches_: tuple) -> bool:
    """Whether every value of `patches_` is a constant compared by value (none is a callable)."""
    return all(isinstance(v, _PLAIN) for _, v in patches_)
