"""What compiled calls do, process-wide: tjc.set_stance(), as torch.compiler.set_stance.

    tjc.set_stance("fail_on_recompile")          # from now on (a function call)
    with tjc.set_stance("force_eager"): ...      # for a block, the previous stance restored after
    @tjc.set_stance("eager_on_recompile")        # while the decorated function runs
    def serve(batch): ...

Stances:
  default             compile on a miss, as usual.
  force_eager         every compiled function and module runs as written, uncompiled, and frames
                      are not intercepted (caches are kept for when the stance changes back). The C++
                      CompiledFunction reads the flag on each call (_C._set_force_eager).
  eager_on_recompile  an entry that passes still runs; a frame that would compile again (it has
                      entries, none passes) runs its original code instead. First compiles happen.
  fail_on_recompile   such a frame raises RecompileError naming it and the guard that failed, for
                      production services that must never recompile after warm-up. First compiles
                      happen.

The stance is process-wide (as torch's); reading it costs a global lookup on a miss only.
"""
from __future__ import annotations

import functools

from .. import _C

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")

_current = "default"


class RecompileError(RuntimeError):
    """A frame had to compile again under set_stance("fail_on_recompile")."""


def current() -> str:
    """The stance in force."""
    return _current


def _apply(stance: str) -> str:
    """Makes `stance` the one in force; returns the previous one."""
    global _current
    previous, _current = _current, stance
    _C._set_force_eager(stance == "force_eager")
    return previous


class set_stance:
    """Sets the stance now; as a context manager restores the previous one on exit; as a decorator
    (`@set_stance(...)`) leaves the stance as it was and applies it while the function runs."""

    def __init__(self, stance: str = "default"):
        if not isinstance(stance, str):
            raise TypeError(f"set_stance: the stance is a str, one of {', '.join(STANCES)}; "
                            f"got {type(stance).__name__}")
        if stance not in STANCES:
            raise ValueError(f"set_stance: unknown stance {stance!r}; one of {', '.join(STANCES)}")
        self.stance = stance
        self.previous = _apply(stance)

    def __enter__(self):
        _apply(self.stance)
        return self

    def __exit__(self, *exc_info):
        _apply(self.previous)
        return False

    def __call__(self, fn):
        _apply(self.previous)   # a decorator changes nothing until the function runs
        return functools.wraps(fn)(functools.partial(_call_with, self.stance, fn))

    def __repr__(self) -> str:
        return f"set_stance({self.stance!r})"


def _call_with(stance, fn, *args, **kwargs):
    previous = _apply(stance)
    try:
        return fn(*args, **kwargs)
    finally:
        _apply(previous)


# Changing the stance is never traced: a compiled caller runs these as they are.
for _fn in (_apply, _call_with, set_stance.__init__, set_stance.__enter__, set_stance.__exit__, set_stance.__call__):
    _C.set_skip(_fn)
del _fn
