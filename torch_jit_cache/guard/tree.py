"""Turns the guards a trace relied on (GuardSpec, with their Sources) into a C++ guard tree.

The tree mirrors how each value is reached from the frame: one GuardManager node per source,
shared by every guard on that source. Identity guards hold their object weakly (C++), so a cached
entry never keeps a user module alive; its death evicts the entry.

How each GuardKind enters the tree is data: GUARD_KINDS has one row per kind. A leaf kind names
its C++ leaf (csrc/guards/leaf_kinds.h, `_C.LEAF_KINDS`), added on the source's node through the
one binding `GuardNode.add_leaf(name, value, **options)`; the other kinds (relations between two
sources, DICT_TAGS) name the builder function that adds them. Each row also names, as a string, the
codec of the kind's stored form (pipeline/disk_cache/guard_codec.py, whose encode_guard /
decode_guard turn a GuardSpec into the on-disk cache's record and back). Adding a guard kind: its
GuardKind, its row here, and for a leaf its row in the C++ table (tests/python/test_guard_kinds.py
checks that the two tables agree, and tests/python/test_guard_codec.py that each kind's decoded
guard accepts what the live one accepts).
"""
from __future__ import annotations

import dataclasses
import weakref
from typing import Callable

from .. import _C, runtime
from . import process_lived, shape_guards as _shape_guards
from .sources import Source
from .trace_result import GuardKind, GuardSpec


class GuardBuilder:
    """Builds one root GuardManager; `add` each GuardSpec, then take `root`."""

    def __init__(self):
        self.root = runtime.GuardManager()
        self._nodes: dict[Source, object] = {}
        self._seen: set = set()
        # Per tensor source, (size dims, stride dims) that SYMBOLIC_SHAPES checks, so TENSOR_MATCH
        # does not (add_shape_guards); and the sources TENSOR_MATCH was added on, to refuse making a
        # dim dynamic after it was pinned.
        self._dynamic: dict[Source, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._tensor_matched: set[Source] = set()

    def node(self, source: Source):
        node = self._nodes.get(source)
        if node is not None:
            return node
        # A RootSource hangs from the root; any other source from its base's node (guard/sources.py).
        parent = self.root if source.base is None else self.node(source.base)
        node = source.guard_node(parent)
        self._nodes[source] = node
        return node

    def add(self, spec: GuardSpec) -> None:
        rule = GUARD_KINDS[spec.kind]
        key = (spec.source, spec.kind, ("value", spec.value) if rule.keyed_by_value else ("id", id(spec.value)))
        if key in self._seen:
            return
        self._seen.add(key)
        if rule.leaf is None:
            rule.add(self, spec)
            return
        node = self.node(spec.source)
        options = rule.options(self, spec) if rule.options is not None else {}
        if rule.takes_value:
            node.add_leaf(rule.leaf, spec.value, **options)
        else:
            node.add_leaf(rule.leaf, **options)
        if spec.kind is GuardKind.TENSOR_MATCH:
            self._tensor_matched.add(spec.source)

    def dynamic_dims(self, source: Source) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(size dims, stride dims) of `source` that SYMBOLIC_SHAPES checks instead of TENSOR_MATCH."""
        return self._dynamic.get(source, ((), ()))

    def add_shape_guards(self, shape_guards: "_shape_guards.ShapeGuards") -> None:
        """One SYMBOLIC_SHAPES guard on the root for `shape_guards` (guard/shape_guards.py), with a node
        for each bound source. The dims a symbol reads are left out of those sources' TENSOR_MATCH,
        so call this before adding the TENSOR_MATCH specs (build_guards does). Raises
        UnsupportedShapeGuard (a ValueError) for what cannot be compiled, before changing the tree."""
        dynamic = shape_guards.dynamic_dims()
        pinned = sorted(str(s) for s in dynamic if s in self._tensor_matched)
        if pinned:
            raise ValueError(f"add_shape_guards after TENSOR_MATCH on {', '.join(pinned)}: those dims "
                             "are already pinned; add the shape guards first")
        _shape_guards.add_to_root(self.root, self.node, shape_guards)
        for source, (sizes, strides) in dynamic.items():
            old_sizes, old_strides = self._dynamic.get(source, ((), ()))
            self._dynamic[source] = (tuple(sorted({*old_sizes, *sizes})), tuple(sorted({*old_strides, *strides})))


def _same_as(builder: GuardBuilder, spec: GuardSpec) -> None:
    # "This source reaches the same object as that one" (one tensor reached twice is one graph
    # input): an identity relation compared at check time, holding nothing, so an entry neither
    # keeps the object alive nor dies with it (a model output made on every call, whose tensor is
    # read through two sources, hits the same entry).
    builder.root.identity_relation([builder.node(spec.source), builder.node(spec.value)], [0, 0])


def _identity_relation(builder: GuardBuilder, spec: GuardSpec) -> None:
    # OBJECT_ALIASING on the root: identity compared at check time, nothing held.
    builder.root.identity_relation([builder.node(spec.source), builder.node(spec.value)],
                                   [0, 0 if spec.kind is GuardKind.ALIAS_OF else 1])


def _dict_tags(builder: GuardBuilder, spec: GuardSpec) -> None:
    builder.node(spec.source).dict_tags()


def _id_match_options(builder: GuardBuilder, spec: GuardSpec) -> dict:
    # Held weakly wherever a weak reference can be made; strongly only what cannot be weakly
    # referenced and lives for the process anyway (guard/process_lived.py: torch.dtype, numpy's ufuncs).
    value = spec.value
    return {"strong": True} if not _weakrefable(value) and process_lived.lives_for_the_process(value) else {}


def _weakrefable(value) -> bool:
    try:
        weakref.ref(value)
    except TypeError:
        return False
    return True


def _tensor_match_options(builder: GuardBuilder, spec: GuardSpec) -> dict:
    sizes, strides = builder.dynamic_dims(spec.source)
    return {"dynamic_sizes": sizes, "dynamic_strides": strides}


@dataclasses.dataclass(frozen=True)
class KindRule:
    """How one GuardKind enters the tree: a leaf (`leaf`, the C++ leaf kind's name, with the spec's
    value as its operand when `takes_value`, and `options(builder, spec)` as keyword options), or a
    builder function `add(builder, spec)`. `keyed_by_value`: two specs on one source are one guard
    when their values are equal (hashable constants); otherwise when they are the same object
    (values may be unhashable: tensors, modules). `codec`: the name of the value's stored form
    (a key of pipeline/disk_cache/guard_codec.py's CODECS)."""
    codec: str
    leaf: str | None = None
    takes_value: bool = True
    options: Callable | None = None
    add: Callable | None = None
    keyed_by_value: bool = False


GUARD_KINDS = {
    GuardKind.TYPE_MATCH: KindRule("object", leaf="type_match"),
    GuardKind.ID_MATCH: KindRule("object", leaf="id_match", options=_id_match_options),
    GuardKind.EQUALS_MATCH: KindRule("constant", leaf="equals_match", keyed_by_value=True),
    GuardKind.NONE_MATCH: KindRule("nothing", leaf="none_match", takes_value=False),
    GuardKind.NOT_NONE: KindRule("nothing", leaf="not_none", takes_value=False),
    GuardKind.BOOL_MATCH: KindRule("constant", leaf="bool_match", keyed_by_value=True),
    GuardKind.LENGTH: KindRule("constant", leaf="length", keyed_by_value=True),
    GuardKind.DICT_KEYS: KindRule("constant", leaf="dict_keys", keyed_by_value=True),
    GuardKind.SET_ITEMS: KindRule("constant", leaf="set_items", keyed_by_value=True),
    GuardKind.TENSOR_MATCH: KindRule("tensor", leaf="tensor_match", options=_tensor_match_options),
    GuardKind.SAME_AS: KindRule("source", add=_same_as),
    GuardKind.DISTINCT_FROM: KindRule("source", add=_identity_relation, keyed_by_value=True),
    GuardKind.ALIAS_OF: KindRule("source", add=_identity_relation, keyed_by_value=True),
    GuardKind.DICT_TAGS: KindRule("nothing", add=_dict_tags),
}


def has_leaf(name: str) -> bool:
    """Whether this build's guard tree has the C++ leaf `name` (a row of _C.LEAF_KINDS)."""
    return name in _C.LEAF_KINDS


def has_accessor(name: str) -> bool:
    """Whether this build's guard tree has the frame accessor `name` (a builder of the root:
    csrc/guards/accessors.h kAccessorSpecs)."""
    return hasattr(_C.GuardManager, name)


def build_guards(specs, *, global_state: bool = True, shape_guards=None):
    """A root GuardManager checking every spec (and torch's global state).

    `shape_guards` (a shape_guards.ShapeGuards) adds the SYMBOLIC_SHAPES guard and makes the dims
    its symbols read dynamic in the TENSOR_MATCH specs.
    """
    builder = GuardBuilder()
    if shape_guards is not None:
        builder.add_shape_guards(shape_guards)
    for spec in specs:
        builder.add(spec)
    if global_state:
        builder.root.global_state()
    return builder.root
