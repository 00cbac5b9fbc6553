"""Which tensor dimensions are traced as symbols: the user's marks and automatic dynamic.

    tjc.mark_dynamic(x, 1, min=2, max=4096)  # dim 1 is a symbol from the first compile; a size
                                             # outside [min, max] is refused (here) or misses
    tjc.maybe_mark_dynamic(x, 0)             # a symbol if the trace allows it, else static
    tjc.mark_static(x, 0)                    # never a symbol, even under dynamic=True

The marks live on the tensor (a set of dims per kind, as torch.compiler's do), so they travel with
it into any compiled call; torch._dynamo.mark_dynamic's marks are honoured too.

Automatic dynamic (compile(dynamic=None), the default): a frame is first traced with static
shapes. Each compile records the sizes of the tensors it read, by source. When the frame is
compiled again and a recorded tensor now has another size in some dimension, that dimension is
traced as a symbol from then on (as torch.compile's automatic_dynamic_shapes does): the new entry
serves every later size, and the static entry keeps serving the first. `dynamic=True` makes every
dimension of every tensor the frame reads from its arguments a symbol from the first compile
(parameters and buffers of modules stay static); `dynamic=False` never makes one.

Sizes are remembered per code and per instance shape: the shapes of the parameters of the modules
among the frame's locals (`instance_key`). Identical blocks at other widths (ConvNeXt's
or ResNet's stages, a UNet's down and up paths) are other instances, not a size that changed: each
width's first compile is static, as its first call alone would be, instead of the second width
turning every block symbolic in the middle of the first call; a size that changes for one width
(the batch) is automatic dynamic as before.

What is held: per code object (weakly keyed, so it dies with the function) and instance shape, a
dict of source text -> sizes (ints, None once a dimension changed). No tensor, fake tensor or ShapeEnv outlives the
trace that made it (tracer/fake_shapes.py).
"""
from __future__ import annotations

import dataclasses
import weakref

from ..runtime import log

# Attribute names on the tensor: ours, then torch._dynamo's (decorators.mark_dynamic and friends).
_DYNAMIC = "_tjc_dynamic_dims"          # {dim: (min, max)}
_MAYBE = "_tjc_maybe_dynamic_dims"      # {dim}
_STATIC = "_tjc_static_dims"            # {dim}
_TORCH_DYNAMIC = "_dynamo_dynamic_indices"
_TORCH_MAYBE = "_dynamo_weak_dynamic_indices"
_TORCH_STATIC = "_dynamo_static_indices"


def _dims(t, dim, what: str) -> list:
    import torch

    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{what}: expected a tensor, got {type(t).__name__}")
    dims = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    out = []
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool):
            raise TypeError(f"{what}: a dimension is an int, got {type(d).__name__}")
        if not -t.dim() <= d < t.dim():
            raise IndexError(f"{what}: dimension {d} is out of range for a tensor of "
                             f"{t.dim()} dimension(s) (shape {tuple(t.shape)})")
        out.append(d % t.dim())
    return out


def mark_dynamic(t, dim, *, min: int | None = None, max: int | None = None) -> None:
    """Trace dimension(s) `dim` of `t` as a symbol from the first compile, with the size's range
    [min, max] guarded (a size outside it misses the entry). Raises when the tensor's size is
    already outside the range, or, at compile time, when the traced code needs the size to be one
    value (FullGraph-style: the mark cannot be honoured)."""
    for d in _dims(t, dim, "mark_dynamic"):
        lo = 2 if min is None else min
        for name, bound in (("min", min), ("max", max)):
            if bound is not None and (not isinstance(bound, int) or isinstance(bound, bool)):
                raise TypeError(f"mark_dynamic: {name} is an int, got {type(bound).__name__}")
        if min is not None and min < 0:
            raise ValueError(f"mark_dynamic: min={min} is negative")
        if max is not None and max < lo:
            raise ValueError(f"mark_dynamic: max={max} is below min={lo}")
        size = t.size(d)
        if (min is not None and size < min) or (max is not None and size > max):
            raise ValueError(f"mark_dynamic: dimension {d} of the tensor has size {size}, outside "
                             f"the range [{min if min is not None else 0}, "
                             f"{max if max is not None else 'inf'}] it is marked with")
        marks = dict(getattr(t, _DYNAMIC, None) or {})
        marks[d] = (min, max)
        setattr(t, _DYNAMIC, marks)
        _discard(t, _STATIC, d)


def maybe_mark_dynamic(t, dim) -> None:
    """Trace dimension(s) `dim` of `t` as a symbol if the code allows it; where the code needs one
    value, the dimension is static without an error."""
    for d in _dims(t, dim, "maybe_mark_dynamic"):
        setattr(t, _MAYBE, set(getattr(t, _MAYBE, None) or ()) | {d})


def mark_static(t, dim) -> None:
    """Never trace dimension(s) `dim` of `t` as a symbol (wins over dynamic=True and automatic
    dynamic; a later mark_dynamic of the same dim wins over it)."""
    for d in _dims(t, dim, "mark_static"):
        setattr(t, _STATIC, set(getattr(t, _STATIC, None) or ()) | {d})
        marks = getattr(t, _DYNAMIC, None)
        if marks and d in marks:
            marks = dict(marks)
            del marks[d]
            setattr(t, _DYNAMIC, marks)


def _discard(t, attr, d) -> None:
    marks = getattr(t, attr, None)
    if marks and d in marks:
        setattr(t, attr, set(marks) - {d})


def _marks(t):
    """(dynamic {dim: (min, max)}, maybe {dim}, static {dim}) from ours and torch's marks."""
    dynamic = dict(getattr(t, _DYNAMIC, None) or {})
    for d in getattr(t, _TORCH_DYNAMIC, None) or ():
        dynamic.setdefault(d, (None, None))
    maybe = set(getattr(t, _MAYBE, None) or ()) | set(getattr(t, _TORCH_MAYBE, None) or ())
    static = set(getattr(t, _STATIC, None) or ()) | set(getattr(t, _TORCH_STATIC, None) or ())
    return dynamic, maybe, static


def is_marked(t) -> bool:
    """Whether `t` carries a dynamic mark (of either kind): a frame that reads it traces with
    symbolic shapes from the first compile."""
    return bool(getattr(t, _DYNAMIC, None) or getattr(t, _MAYBE, None)
                or getattr(t, _TORCH_DYNAMIC, None) or getattr(t, _TORCH_MAYBE, None))


class DynamicMarkError(RuntimeError):
    """A dimension marked with mark_dynamic had to be one value in the traced code (as
    torch.compile's ConstraintViolationError): raised to the caller, never a silent fallback."""


@dataclasses.dataclass(frozen=True)
class DimChoice:
    """How one dimension of one tensor is traced."""
    dynamic: bool
    # Why, for TJC_LOG=dynamic and errors: "mark_dynamic", "maybe_mark_dynamic", "dynamic=True",
    # "automatic" (its size changed between compiles).
    why: str = ""
    min: int | None = None
    max: int | None = None

    @property
    def strict(self) -> bool:
        """A dimension the user required to be dynamic: specializing it is an error."""
        return self.why == "mark_dynamic"


_STATIC_CHOICE = DimChoice(False)


class DynamicPolicy:
    """One compile() call's answer to "which dims are symbols", and its memory of sizes per code.

    `mode`: None (automatic), True (all dims of argument tensors), False (none)."""

    def __init__(self, mode):
        self.mode = mode
        # code -> {instance_key: {source text: [size or None]}} (None: the size changed between
        # compiles).
        self._sizes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        # Codes whose symbolic trace broke where the static one did not (refuse()).
        self._refused: weakref.WeakSet = weakref.WeakSet()
        # Codes whose trace guarded on a float argument traced as a symbol (refuse_floats()).
        self._floats_refused: weakref.WeakSet = weakref.WeakSet()

    def plan(self, code, f_locals, resolve) -> "FramePlan":
        """What the next trace of `code` uses. Before it, every tensor (and int argument) an earlier
        compile of `code` read is read again (`resolve(source)`) and compared with its recorded
        sizes: a changed dimension is dynamic in this trace, which then runs on fake tensors."""
        instance = instance_key(f_locals) if self.mode is None else ()
        if self.mode is None:
            for key, (source, sizes) in list(self.recorded(code, instance).items()):
                try:
                    value = resolve(source)
                except Exception:  # noqa: BLE001 - not reachable now: nothing to compare
                    continue
                if type(value) in (int, float) and key.startswith(f"{type(value).__name__}:"):
                    self.record(code, source, (value,), kind=type(value).__name__, instance=instance)
                elif isinstance(getattr(value, "shape", None), tuple):
                    self.record(code, source, tuple(value.shape), instance=instance)
        symbolic = self.mode is True or (self.mode is None and (
            self.has_dynamic(code, instance) or any(_any_marked(v) for v in f_locals.values())))
        if code in self._refused and not any(_any_marked(v) for v in f_locals.values()):
            symbolic = False
        return FramePlan(self, code, symbolic, instance)

    def refuse(self, code, why: str) -> None:
        """`code` traces with static shapes from now on: its symbolic trace broke where the static
        one did not (graph_break/driver.py `trace_frame`)."""
        self._refused.add(code)
        if log.enabled("dynamic"):
            log.log("dynamic", f"{code.co_qualname}: traced with static shapes (symbolic sizes made a "
                               f"graph break the static trace does not have: {why})")

    def refuse_floats(self, code, why: str) -> None:
        """`code`'s float arguments are constants from now on (guarded by value): its trace or its
        backend guarded on one traced as a symbol, which the shape guard cannot check."""
        self._floats_refused.add(code)
        if log.enabled("dynamic"):
            log.log("dynamic", f"{code.co_qualname}: float arguments traced as constants ({why})")

    def recorded(self, code, instance: tuple = ()) -> dict:
        return (self._sizes.get(code) or {}).get(instance) or {}

    def has_dynamic(self, code, instance: tuple = ()) -> bool:
        floats_off = code in self._floats_refused
        return any(None in sizes for key, (_, sizes) in self.recorded(code, instance).items()
                   if not (floats_off and key.startswith("float:")))

    def record(self, code, source, sizes: tuple, kind: str = "tensor", instance: tuple = ()) -> list:
        """Remember `sizes` for the tensor at `source` (or `(value,)` for an int); return the dims
        whose size differs from an earlier compile (they stay dynamic from then on). A change of
        rank, or of kind, starts afresh."""
        tables = self._sizes.get(code)
        if tables is None:
            tables = self._sizes[code] = {}
        table = tables.setdefault(instance, {})
        key = f"{kind}:{source}"
        old = table.get(key)
        if old is None or len(old[1]) != len(sizes):
            table[key] = (source, list(sizes))
            return []
        recorded = old[1]
        changed = [d for d, (a, b) in enumerate(zip(recorded, sizes)) if a is not None and a != b]
        for d in changed:
            recorded[d] = None
        if changed and log.enabled("dynamic"):
            what = (f"{source}: the {kind} changed since the last compile (now {sizes[0]})" if kind != "tensor" else
                    f"{source}: dimension(s) {changed} changed size since the last compile (now {list(sizes)})")
            log.log("dynamic", f"{what}; traced as a symbol from now on")
        return changed


class FramePlan:
    """The dims one trace of one frame makes symbolic (tracer/variables/builder.py asks `choose`).
    `symbolic`: whether the trace runs on fake tensors with a ShapeEnv at all."""

    def __init__(self, policy: DynamicPolicy, code, symbolic: bool, instance: tuple = ()):
        self.policy, self.code, self.symbolic, self.instance = policy, code, symbolic, instance
        # Whether a tensor this trace read carries a mark_dynamic dimension (never given up).
        self.strict = False

    def as_static(self) -> "FramePlan":
        """The same frame traced with static shapes (sizes are still recorded)."""
        return FramePlan(self.policy, self.code, False, self.instance)

    def choose(self, source, tensor, *, is_argument: bool) -> list:
        """A DimChoice per dimension of `tensor`, read from `source`."""
        mode = self.policy.mode
        sizes = tuple(tensor.shape)
        if mode is not False:
            self.policy.record(self.code, source, sizes, instance=self.instance)
        recorded = (self.policy.recorded(self.code, self.instance).get(f"tensor:{source}") or (None, []))[1]
        dynamic, maybe, static = _marks(tensor)
        out = []
        for d in range(len(sizes)):
            if d in dynamic:
                lo, hi = dynamic[d]
                out.append(DimChoice(True, "mark_dynamic", lo, hi))
                self.strict = True
            elif d in static or mode is False:
                out.append(_STATIC_CHOICE)
            elif d in maybe:
                out.append(DimChoice(True, "maybe_mark_dynamic"))
            elif mode is True and is_argument:
                out.append(DimChoice(True, "dynamic=True"))
            elif d < len(recorded) and recorded[d] is None:
                out.append(DimChoice(True, "automatic"))
            else:
                out.append(_STATIC_CHOICE)
        return out

    def scalar_is_dynamic(self, source, value, *, is_argument: bool, is_attribute: bool = False) -> bool:
        """Whether the int or float `value` read from `source` is a symbol (a graph input) in this
        trace: an argument whose value changed between compiles (a position, a step counter; the
        float a resume function gets from `s = t.sum().item()` before the break, anew on every
        call), any argument under dynamic=True (as torch.compile's unspecialized floats), or an int
        attribute of a plain object (not an nn.Module) whose value changed between compiles (HF's
        cache `cumulative_length`, a counter on a state object). Other values (a module's sizes, a
        config's constants) stay constants, and so do the floats of a code whose trace guarded on
        one (refuse_floats)."""
        mode, kind = self.policy.mode, type(value).__name__
        readable = is_argument or (is_attribute and kind == "int")
        if mode is False or not readable or (kind == "float" and self.code in self.policy._floats_refused):
            return False
        self.policy.record(self.code, source, (value,), kind=kind, instance=self.instance)
        if mode is True and is_argument:
            return True
        recorded = (self.policy.recorded(self.code, self.instance).get(f"{kind}:{source}") or (None, [value]))[1]
        return recorded[0] is None


def instance_key(f_locals) -> tuple:
    """What a module's first call specialises on beyond its arguments: for each module among the
    frame's locals (`self`, a block passed in), the shapes of its parameters. Not its buffers: a
    buffer that grows (a cache reassigned per step) is a size that changes, automatic dynamic's to
    find, not another instance. Read through nn.Module's own method (a subclass's override never
    runs); a module it cannot walk adds its name alone, and so does one whose class has its own
    __getattribute__ (the walk's reads of the module would run it, with its effects, at compile)."""
    import torch

    module = torch.nn.Module
    key = []
    for name, value in f_locals.items():
        if not issubclass(type(value), module):
            continue
        if type(value).__getattribute__ is not object.__getattribute__:
            key.append((name, ()))
            continue
        try:
            shapes = tuple(tuple(t.shape) for t in module.parameters(value))
        except Exception:  # noqa: BLE001 - an unusual module: keyed by its name alone
            shapes = ()
        key.append((name, shapes))
    return tuple(key)


def _any_marked(value, depth: int = 0) -> bool:
    import torch

    # By type(value), never isinstance: that asks a user object's own __getattribute__ for
    # __class__, running user code at every compile (object_protocol.py traces those hooks).
    if issubclass(type(value), torch.Tensor):
        return is_marked(value)
    if depth < 2 and issubclass(type(value), (tuple, list)):
        return any(_any_marked(v, depth + 1) for v in value)
    if depth < 2 and type(value) is dict:
        return any(_any_marked(v, depth + 1) for v in value.values())
    return False
