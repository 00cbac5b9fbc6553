"""A tiny hand-written JIT for the runtime tests: no tracer, no torch.

`ConstantJit` answers every cache miss with the function's own code whose integer constant
`old` is replaced by `new` (so a result tells which code ran), guarded by the type and value of
the arguments it is told to guard.
"""
import dataclasses
import time
import types
import weakref

from torch_jit_cache import runtime


def replace_constant(code: types.CodeType, old, new) -> types.CodeType:
    consts = tuple(new if (type(c) is type(old) and c == old) else c for c in code.co_consts)
    assert consts != code.co_consts, f"{code.co_name} has no constant {old!r}"
    return code.replace(co_consts=consts)


@dataclasses.dataclass
class ConstantJit:
    old: int
    new: int
    guard_args: tuple = ()           # argument names guarded by type + value
    guard_types: tuple = ()          # argument names guarded by type only
    misses: list = dataclasses.field(default_factory=list)
    reasons: list = dataclasses.field(default_factory=list)

    def __call__(self, frame, entries):
        # Frames this JIT was not written for (helpers the block calls, __init__ of a Thread,
        # warnings machinery) run uncompiled.
        f_locals = frame.f_locals
        names = self.guard_args + self.guard_types
        if self.old not in frame.f_code.co_consts or any(n not in f_locals for n in names):
            return runtime.RUN_ORIGINAL
        self.misses.append(frame.f_code.co_name)
        self.reasons.append([e.explain(frame) for e in entries])
        g = runtime.GuardManager()
        for name in self.guard_args:
            child = g.local(name)
            child.type_match(type(f_locals[name]))
            child.equals_match(f_locals[name])
        for name in self.guard_types:
            g.local(name).type_match(type(f_locals[name]))
        return runtime.GuardedCode(replace_constant(frame.f_code, self.old, self.new), g)


def call_compiled(callback, fn, *args, **kwargs):
    with runtime.eval_frame(callback):
        return fn(*args, **kwargs)


def wait_until(predicate, timeout=10.0):
    """Poll `predicate` (sleeping, so other threads run) until it holds; False on timeout."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def watch(obj):
    """A list that receives True when obj is freed (weakref.finalize holds obj weakly)."""
    freed = []
    weakref.finalize(obj, freed.append, True)
    return freed


def outcome(fn, *args):
    """Call fn; return ('ok', result) or (exception type, message), keeping no traceback alive."""
    try:
        return "ok", fn(*args)
    except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt is one of the cases
        return type(e), str(e)
