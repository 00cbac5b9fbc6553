"""Guards as data: each GuardSpec stored as (source, kind, encoded value), decoded on load into
a GuardSpec the guard tree is built from."""
from __future__ import annotations

import types

from ..trace_result import GuardKind, GuardSpec
from .names import Mismatch, NotStored, is_constant, name_of, rebind


def tensor_meta(t, files) -> tuple:
    """What TENSOR_MATCH compares, as data: stored for a guard, and computed again for the frame's
    tensor when the entry loads (NotStored where its type has no name)."""
    import torch
    strides = tuple(t.stride()) if t.layout == torch.strided else None
    return (name_of(type(t), files), str(t.dtype), str(t.device), bool(t.requires_grad), tuple(t.shape), strides)


def encode_guard(spec: GuardSpec, files: set, identities: dict):
    kind, value = spec.kind, spec.value
    if kind is GuardKind.ID_MATCH and isinstance(value, types.CodeType):
        # G['helper'].__code__: the code of a function the guards name (re-bound with it)
        base = getattr(spec.source, "base", None)
        owner = identities.get(base)
        if getattr(spec.source, "attr", None) != "__code__" or getattr(owner, "__code__", None) is not value:
            raise NotStored(f"{spec.source}: a code object not read as a named function's __code__")
        return (spec.source, kind.name, ("code_of", name_of(owner, files)))
    if kind in (GuardKind.NONE_MATCH, GuardKind.NOT_NONE, GuardKind.DICT_TAGS):
        encoded = None
    elif kind in (GuardKind.EQUALS_MATCH, GuardKind.BOOL_MATCH, GuardKind.LENGTH, GuardKind.DICT_KEYS):
        if not is_constant(value):
            raise NotStored(f"{spec.source}: {kind.name} on a {type(value).__name__}")
        encoded = ("const", value)
    elif kind in (GuardKind.TYPE_MATCH, GuardKind.ID_MATCH):
        try:
            encoded = name_of(value, files)
        except NotStored as e:   # named by the guard's source and kind, so the refusal is actionable
            raise NotStored(f"{spec.source}: {kind.name} on a {type(value).__name__}: {e}") from None
    elif kind is GuardKind.TENSOR_MATCH:
        encoded = ("tensor", tensor_meta(value, files))
    elif kind in (GuardKind.SAME_AS, GuardKind.DISTINCT_FROM, GuardKind.ALIAS_OF):
        encoded = ("source", value)
    else:
        raise NotStored(f"guard kind {kind.name}")
    return (spec.source, kind.name, encoded)



def decode_guard(record, resolve) -> GuardSpec:
    source, kind_name, encoded = record
    kind = GuardKind[kind_name]
    if encoded is None:
        return GuardSpec(source, kind)
    tag = encoded[0]
    if tag in ("const", "source"):
        return GuardSpec(source, kind, encoded[1])
    if tag in ("module", "named", "attr"):
        return GuardSpec(source, kind, rebind(encoded))
    if tag == "code_of":
        owner = rebind(encoded[1])
        if not isinstance(getattr(owner, "__code__", None), types.CodeType):
            raise Mismatch(f"{encoded[1]} has no code")
        return GuardSpec(source, kind, owner.__code__)
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
            same = tensor_meta(live, set()) == encoded[1]
        except NotStored:
            same = False
        if not same:
            raise Mismatch(f"{source}: tensor type or metadata")
        # The guard is built from the frame's tensor, whose facts equal the stored ones.
        return GuardSpec(source, kind, live)
    raise ValueError(f"unknown guard value tag {tag!r}")
