"""Guards as data: each GuardSpec stored as (source, kind, encoded value), decoded on load into
a GuardSpec the guard tree is built from."""
from __future__ import annotations

import types

from ..trace_result import GuardKind, GuardSpec
from .keys import code_digest
from .names import Mismatch, NotStored, is_constant, name_of, rebind


def tensor_meta(t, files, dynamic=((), ())) -> tuple:
    """What TENSOR_MATCH compares, as data: stored for a guard, and computed again for the frame's
    tensor when the entry loads (NotStored where its type has no name). `dynamic`: the (size dims,
    stride dims) the entry's shape guards check instead (None here; the dim count stays)."""
    import torch
    sizes = tuple(None if i in dynamic[0] else s for i, s in enumerate(t.shape))
    strides = tuple(None if i in dynamic[1] else s for i, s in enumerate(t.stride())) \
        if t.layout == torch.strided else None
    return (name_of(type(t), files), str(t.dtype), str(t.device), bool(t.requires_grad), sizes, strides)


def code_record(code) -> tuple:
    """A code object as data: where it is defined, its exception table and a digest of the rest
    (keys.code_digest: bytecode, names, flags, constants and nested codes)."""
    import hashlib
    h = hashlib.sha256()
    code_digest(code, h)
    return (code.co_filename, code.co_qualname, code.co_firstlineno, code.co_exceptiontable, h.hexdigest())


def encode_guard(spec: GuardSpec, files: set, identities: dict, dynamic_dims=None):
    """`dynamic_dims`: ShapeGuards.dynamic_dims() of the entry's shape guards, or None."""
    kind, value = spec.kind, spec.value
    if kind is GuardKind.ID_MATCH and isinstance(value, types.CodeType):
        # G['helper'].__code__: the code of a function the guards name (re-bound with it)
        base = getattr(spec.source, "base", None)
        owner = identities.get(base)
        if getattr(spec.source, "attr", None) != "__code__":
            raise NotStored(f"{spec.source}: a code object not read as a function's __code__")
        if getattr(owner, "__code__", None) is value:
            return (spec.source, kind.name, ("code_of", name_of(owner, files)))
        # A function guarded by its contents (its cells, defaults and globals each by their own
        # guards), its code by identity: stored as what the code is. Another process's code object
        # is the same code where its digest, name and place are, and its file is unchanged.
        files.add(value.co_filename)
        return (spec.source, kind.name, ("code", code_record(value)))
    if kind in (GuardKind.NONE_MATCH, GuardKind.NOT_NONE, GuardKind.DICT_TAGS):
        encoded = None
    elif kind in (GuardKind.EQUALS_MATCH, GuardKind.BOOL_MATCH, GuardKind.LENGTH, GuardKind.DICT_KEYS):
        if not is_constant(value):
            raise NotStored(f"{spec.source}: {kind.name} on a {type(value).__name__}")
        encoded = ("const", value)
    elif kind is GuardKind.ID_MATCH and _bound_family(value) is not None:
        encoded = ("bound", _bound_family(value), _bound_group(value, identities))
    elif kind in (GuardKind.TYPE_MATCH, GuardKind.ID_MATCH):
        try:
            encoded = name_of(value, files)
        except NotStored as e:   # named by the guard's source and kind, so the refusal is actionable
            raise NotStored(f"{spec.source}: {kind.name} on a {type(value).__name__}: {e}") from None
    elif kind is GuardKind.TENSOR_MATCH:
        dynamic = (dynamic_dims or {}).get(spec.source, ((), ()))
        encoded = ("tensor", tensor_meta(value, files, dynamic), dynamic)
    elif kind in (GuardKind.SAME_AS, GuardKind.DISTINCT_FROM, GuardKind.ALIAS_OF):
        encoded = ("source", value)
    else:
        raise NotStored(f"guard kind {kind.name}")
    return (spec.source, kind.name, encoded)



# --- identities bound on load ---------------------------------------------------------------
# A module's or a tensor's identity guard exists for one of two reasons (the tracer's
# require_identity, opaque_calls, _module_local_identities): which sources reach one object (an `is`
# test, a walk that skips what it met, a BatchNorm's buffers updated in place, tied weights), or
# the graph calls the module's proxy (graph_codec.submodule_sources), which the loaded graph makes
# again from the object the source reaches on load. Every fact the trace read from such an object
# is guarded by value besides (its type, training flag, dict keys, attributes, tensors' metadata).
# So it is stored as its group: which of the entry's bound identities are one object. On load each
# binds to what its source reaches then, and the entry applies only where the frame's objects fall
# into the same groups (check_bound_groups): as strict as the live entry, which a trace of this
# frame's objects would have made. Any other object's identity (a function made per call, a user
# object) is refused: nothing in the frame says which one it was.

def _bound_family(value):
    import sys
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if isinstance(value, torch.nn.Module):
        return "module"
    if isinstance(value, torch.Tensor):
        return "tensor"
    return None


def _bound_group(value, identities: dict) -> int:
    """The index of `value` among the distinct objects of the bound identities, in guard order."""
    seen = []
    for other in identities.values():
        if _bound_family(other) is not None and not any(o is other for o in seen):
            seen.append(other)
        if other is value:
            return next(i for i, o in enumerate(seen) if o is value)
    raise NotStored(f"a {type(value).__name__} guarded by identity outside the entry's identity guards")


def check_bound_groups(records, specs) -> None:
    """Mismatch unless the objects the bound identities reach on load are one where the stored
    entry's were one, and distinct where they were distinct."""
    by_group, by_object = {}, {}
    for (source, _, encoded), spec in zip(records, specs):
        if encoded is None or encoded[0] != "bound":
            continue
        group = encoded[2]
        first = by_group.setdefault(group, (source, spec.value))
        if first[1] is not spec.value:
            raise Mismatch(f"{first[0]} and {source} reach two objects; the stored entry's were one")
        other = by_object.setdefault(id(spec.value), (source, group))
        if other[1] != group:
            raise Mismatch(f"{other[0]} and {source} reach one object; the stored entry's were two")


def decode_guard(record, resolve) -> GuardSpec:
    source, kind_name, encoded = record
    kind = GuardKind[kind_name]
    if encoded is None:
        return GuardSpec(source, kind)
    tag = encoded[0]
    if tag in ("const", "source"):
        return GuardSpec(source, kind, encoded[1])
    if tag in ("module", "named", "attr", "member"):
        return GuardSpec(source, kind, rebind(encoded))
    if tag == "code_of":
        owner = rebind(encoded[1])
        if not isinstance(getattr(owner, "__code__", None), types.CodeType):
            raise Mismatch(f"{encoded[1]} has no code")
        return GuardSpec(source, kind, owner.__code__)
    if tag == "code":
        try:
            live = resolve(source)
        except Exception:  # noqa: BLE001 - the frame does not reach it: the entry does not apply
            raise Mismatch(f"{source} is not reachable") from None
        if not isinstance(live, types.CodeType) or code_record(live) != encoded[1]:
            raise Mismatch(f"{source}: another code")
        return GuardSpec(source, kind, live)
    if tag == "bound":
        try:
            live = resolve(source)
        except Exception:  # noqa: BLE001 - the frame does not reach it: the entry does not apply
            raise Mismatch(f"{source} is not reachable") from None
        if _bound_family(live) != encoded[1]:
            raise Mismatch(f"{source}: not a {encoded[1]}")
        return GuardSpec(source, kind, live)
    if tag == "tensor":
        try:
            live = resolve(source)
        except Exception:  # noqa: BLE001 - the frame does not reach it: the entry does not apply
            raise Mismatch(f"{source} is not reachable") from None
        import torch
        if not isinstance(live, torch.Tensor):
            raise Mismatch(f"{source}: type")
        # The type by its name record: equal only where that name reaches type(live) itself.
        try:
            same = tensor_meta(live, set(), encoded[2]) == encoded[1]
        except NotStored:
            same = False
        if not same:
            raise Mismatch(f"{source}: tensor type or metadata")
        # The guard is built from the frame's tensor, whose facts equal the stored ones.
        return GuardSpec(source, kind, live)
    raise ValueError(f"unknown guard value tag {tag!r}")
