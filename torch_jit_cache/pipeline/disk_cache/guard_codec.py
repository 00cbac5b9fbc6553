"""Guards as data: the stored form of each guard kind's value.

Each row of guard.tree.GUARD_KINDS names one codec of CODECS here (its `codec`); an entry stores a
guard as the record (source, kind name, codec.encode(spec, context)) and rebuilds the GuardSpec on
load with codec.decode(source, encoded, resolve). encode_guard / decode_guard do the lookup. The
guard layer names codecs and never imports this module: storing is the pipeline's concern.

The contract, checked for every kind by tests/python/test_guard_codec.py: the guard built from a
decoded spec accepts exactly the values the live guard accepts. So a codec stores a value only
where decoding it in a later process gives the very same C++ leaf, and raises NotStored otherwise:
  - constants compare as the stored ones do (no NaN: the leaves compare by identity first, and a
    NaN equals only itself);
  - objects are re-bound by the name that reached them (names.py), enum members by their class's
    name and their own, the immortal singletons by themselves;
  - a tensor by the state of its TENSOR_MATCH leaf, read from the C++ leaf (`_C.tensor_match_state`:
    type, dispatch keys with this thread's include/exclude sets applied, dtype, device, layout,
    requires_grad, sizes, strides, dynamic dims): on load the frame's tensor must have the same
    type and an equal state, and the leaf is then built from it; otherwise the entry does not apply
    (Mismatch), and the live leaf rejects that tensor too.
Decoding never imports torch._dynamo; the tensor codec calls into _C only.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import sys
import types

from ...guard.sources import FrameCellSource
from ...guard.trace_result import GuardKind, GuardSpec
from ...guard.tree import GUARD_KINDS
from .keys import code_digest_hex
from .names import Mismatch, NotStored, is_constant, name_of, rebind


@dataclasses.dataclass
class StoreContext:
    """What encoding a trace's guards may consult: `files` collects the user source files that the
    stored names depend on; `identities` maps a source to its ID_MATCH object (a code object is
    stored as its owner's __code__); `dynamic` maps a tensor source to the (size dims, stride dims)
    its TENSOR_MATCH leaves to a SYMBOLIC_SHAPES guard (GuardBuilder.dynamic_dims)."""
    files: set
    identities: dict = dataclasses.field(default_factory=dict)
    dynamic: dict = dataclasses.field(default_factory=dict)


class Codec:
    """One stored form: `encode(spec, context)` gives picklable data (NotStored where that would not
    be exact); `decode(source, encoded, resolve)` gives the spec's value back in this process
    (Mismatch where the entry cannot apply to the frame `resolve` reads)."""
    name = "?"

    def encode(self, spec, context: StoreContext):
        raise NotImplementedError

    def decode(self, source, encoded, resolve):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<codec {self.name}>"


class _Nothing(Codec):
    """Kinds without a value (NONE_MATCH, NOT_NONE, DICT_TAGS)."""
    name = "nothing"

    def encode(self, spec, context):
        return None

    def decode(self, source, encoded, resolve):
        return None


def _compares_as_itself(value) -> bool:
    # A NaN (alone or in a tuple) equals only the very object: its copy would reject what the live
    # leaf accepts.
    if isinstance(value, float):
        return not math.isnan(value)
    if isinstance(value, complex):
        return not (math.isnan(value.real) or math.isnan(value.imag))
    if isinstance(value, (tuple, frozenset)):
        return all(_compares_as_itself(v) for v in value)
    return True


class _Constant(Codec):
    """An immutable builtin (EQUALS_MATCH, BOOL_MATCH, LENGTH, DICT_KEYS), stored as itself."""
    name = "constant"

    def encode(self, spec, context):
        if not is_constant(spec.value):
            raise NotStored(f"{spec.source}: {spec.kind.name} on a {type(spec.value).__name__}")
        if not _compares_as_itself(spec.value):
            raise NotStored(f"{spec.source}: {spec.kind.name} on a NaN (equal only to the very object)")
        return spec.value

    def decode(self, source, encoded, resolve):
        return encoded


_SINGLETONS = {"None": None, "True": True, "False": False, "Ellipsis": Ellipsis, "NotImplemented": NotImplemented}


class _Object(Codec):
    """An object by identity (TYPE_MATCH, ID_MATCH): what reaches the very object in a later process."""
    name = "object"

    def encode(self, spec, context):
        value = spec.value
        for name, singleton in _SINGLETONS.items():
            if value is singleton:
                return ("singleton", name)
        if isinstance(value, types.CodeType):
            # G['helper'].__code__: the code of a function the guards name (re-bound with it).
            owner = context.identities.get(getattr(spec.source, "base", None))
            if getattr(spec.source, "attr", None) == "__code__" and getattr(owner, "__code__", None) is value:
                return ("code_of", name_of(owner, context.files))
            # A function guarded by its code, not its identity (a closure made per call, a decorated
            # function a wrapper holds): on load the code the frame reaches must be this code again,
            # the same bytecode, names and constants at the same place of the same (unchanged) file.
            context.files.add(value.co_filename)
            return ("code", code_facts(value))
        family = _bound_family(value)
        if spec.kind is GuardKind.ID_MATCH and family is not None:
            return ("bound", family, _bound_group(value, context.identities))
        if isinstance(value, enum.Enum):
            cls = type(value)
            if cls.__members__.get(value.name) is not value:   # a composite Flag value, ...
                raise NotStored(f"{spec.source}: {cls.__qualname__} value {value!r} is not a named member")
            return ("enum", name_of(cls, context.files), value.name)
        try:
            return ("name", name_of(value, context.files))
        except NotStored as e:   # named by the guard's source and kind, so the refusal is actionable
            raise NotStored(f"{spec.source}: {spec.kind.name} on a {type(value).__name__}: {e}") from None

    def decode(self, source, encoded, resolve):
        tag = encoded[0]
        if tag == "singleton":
            return _SINGLETONS[encoded[1]]
        if tag == "name":
            return rebind(encoded[1])
        if tag == "enum":
            member = rebind(encoded[1]).__members__.get(encoded[2])
            if member is None:
                raise Mismatch(f"{source}: no member {encoded[2]!r}")
            return member
        if tag == "code_of":
            code = getattr(rebind(encoded[1]), "__code__", None)
            if not isinstance(code, types.CodeType):
                raise Mismatch(f"{encoded[1]} has no code")
            return code
        if tag == "bound":
            live = _reach(source, resolve)
            if _bound_family(live) != encoded[1]:
                raise Mismatch(f"{source}: not a {encoded[1]}")
            return live
        if tag == "code":
            live = _reach(source, resolve)
            if not isinstance(live, types.CodeType) or code_facts(live) != encoded[1]:
                raise Mismatch(f"{source}: another code")
            return live
        raise ValueError(f"unknown object record {tag!r}")


# --- identities bound on load ---------------------------------------------------------------
# A module's or a tensor's identity guard exists for one of three reasons: which sources reach one
# object (an `is` test, a walk that skips what it met, a BatchNorm's buffers updated in place, tied
# weights); the graph calls the module's proxy (graph_codec.submodule_sources), which the loaded
# graph makes again from the object the source reaches on load; or the entry is pinned to its
# modules to count the cache limit per object (convert_frame._module_local_identities). Every fact
# the trace read from such an object is guarded by value besides (its type, training flag, dict
# keys, attributes, tensors' state), and what an opaque call reads from its module is guarded by
# value by the trace itself (tracer/variables/modules/opaque_calls.py, _guard_module_tree: an LSTM of
# another hidden size does not load the entry). So it is stored as its group: which of the
# entry's bound identities are one object. On load each binds to what its source reaches then, and
# the entry applies only where the frame's objects fall into the same groups (check_bound_groups).
# Any other object's identity (a function made per call, a user object) is refused: nothing in the
# frame says which one it was.

def _bound_family(value):
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
        if not (isinstance(encoded, tuple) and encoded and encoded[0] == "bound"):
            continue
        group = encoded[2]
        first = by_group.setdefault(group, (source, spec.value))
        if first[1] is not spec.value:
            raise Mismatch(f"{first[0]} and {source} reach two objects; the stored entry's were one")
        other = by_object.setdefault(id(spec.value), (source, group))
        if other[1] != group:
            raise Mismatch(f"{other[0]} and {source} reach one object; the stored entry's were two")


def code_facts(code: types.CodeType) -> tuple:
    return (code.co_filename, code.co_qualname, code.co_firstlineno, code_digest_hex(code))


def _reach(source, resolve):
    try:
        return resolve(source)
    except Exception:  # noqa: BLE001 - the frame does not reach it: the entry does not apply
        raise Mismatch(f"{source} is not reachable") from None


def _dynamic_dims(state: dict) -> tuple[list, list]:
    sizes = [i for i, s in enumerate(state["sizes"]) if s is None]
    strides = [i for i, s in enumerate(state["strides"] or ()) if s is None]
    return sizes, strides


def tensor_state(tensor, dynamic=((), ())) -> dict:
    """The state of the TENSOR_MATCH leaf `tensor` makes here and now, its type by identity
    (csrc TensorMatchState, through _C.tensor_match_state)."""
    from ... import _C
    return _C.tensor_match_state(tensor, list(dynamic[0]), list(dynamic[1]))


class _Tensor(Codec):
    """TENSOR_MATCH: the leaf's state, its type by name (see the module docstring)."""
    name = "tensor"

    def encode(self, spec, context):
        try:
            state = tensor_state(spec.value, context.dynamic.get(spec.source, ((), ())))
        except ValueError as e:   # what tensor_match refuses cannot be stored either
            raise NotStored(f"{spec.source}: {e}") from None
        state["type"] = name_of(type(spec.value), context.files)
        return state

    def decode(self, source, encoded, resolve):
        live = _reach(source, resolve)
        # The type's own name record equals the stored one only where that name reaches type(live).
        try:
            same_type = name_of(type(live), set()) == encoded["type"]
        except NotStored:
            same_type = False
        if not same_type:
            raise Mismatch(f"{source}: type")
        try:
            state = tensor_state(live, _dynamic_dims(encoded))
        except ValueError:   # not a tensor the leaf can be made from (a fake, symbolic sizes, ...)
            raise Mismatch(f"{source}: not a real tensor") from None
        state["type"] = encoded["type"]
        if state != encoded:
            differ = sorted(k for k in encoded if state.get(k) != encoded[k])
            raise Mismatch(f"{source}: TENSOR_MATCH state differs ({', '.join(differ)})")
        # Equal type and state: the leaf built from the frame's tensor accepts exactly what the
        # stored one did.
        return live


class _Source(Codec):
    """A relation to another source (SAME_AS, DISTINCT_FROM, ALIAS_OF): the Source itself."""
    name = "source"

    def encode(self, spec, context):
        # A cell of the frame is read in frame mode only: the check of a loaded entry, which reads
        # the frame's values by name, would find it missing.
        if any(isinstance(s.root, FrameCellSource) for s in (spec.source, spec.value)):
            raise NotStored(f"{spec.source}: {spec.kind.name} on a cell of the frame")
        return spec.value

    def decode(self, source, encoded, resolve):
        return encoded


NOTHING, CONSTANT, OBJECT, TENSOR, SOURCE = _Nothing(), _Constant(), _Object(), _Tensor(), _Source()


CODECS = {codec.name: codec for codec in (NOTHING, CONSTANT, OBJECT, TENSOR, SOURCE)}


def encode_guard(spec: GuardSpec, context: StoreContext) -> tuple:
    """The on-disk record of `spec`: (source, kind name, its kind's encoding of the value);
    NotStored where that would not be exact."""
    return (spec.source, spec.kind.name, CODECS[GUARD_KINDS[spec.kind].codec].encode(spec, context))


def decode_guard(record, resolve) -> GuardSpec:
    """The GuardSpec `record` (encode_guard's) stands for in the frame `resolve(source)` reads;
    Mismatch where the stored guard cannot hold for that frame."""
    source, kind_name, encoded = record
    kind = GuardKind[kind_name]
    return GuardSpec(source, kind, CODECS[GUARD_KINDS[kind].codec].decode(source, encoded, resolve))
