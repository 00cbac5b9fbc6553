"""Turns the guards a trace relied on (GuardSpec, with their Sources) into a C++ guard tree.

The tree mirrors how each value is reached from the frame: one GuardManager node per source,
shared by every guard on that source. Identity guards hold their object weakly (C++), so a cached
entry never keeps a user module alive; its death evicts the entry.
"""
from __future__ import annotations

import sys

from . import runtime, shape_guards as _shape_guards
from .sources import Source
from .trace_result import GuardKind, GuardSpec

_NO_ARGUMENT = {GuardKind.NONE_MATCH, GuardKind.NOT_NONE, GuardKind.DICT_TAGS}
_RELATIONS = {GuardKind.DISTINCT_FROM, GuardKind.ALIAS_OF}


class GuardBuilder:
    """Builds one root GuardManager; `add` each GuardSpec, then take `root`."""

    def __init__(self, resolve=None):
        self.root = runtime.GuardManager()
        # resolve(source) -> the value it names in the frame being compiled (for SAME_AS).
        self._resolve = resolve
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
        # A RootSource hangs from the root; any other source from its base's node (sources.py).
        parent = self.root if source.base is None else self.node(source.base)
        node = source.guard_node(parent)
        self._nodes[source] = node
        return node

    def add(self, spec: GuardSpec) -> None:
        key = (spec.source, spec.kind, _identity_key(spec))
        if key in self._seen:
            return
        self._seen.add(key)
        if spec.kind is GuardKind.SAME_AS:
            # "This source reaches the same object as that one" (one tensor reached twice is one
            # graph input): both are pinned to the object by identity, held weakly. Stricter
            # than needed (a new pair of tied tensors recompiles) but never a wrong result.
            if self._resolve is None:
                raise ValueError(f"{spec.source}: SAME_AS needs the frame's values to build")
            obj = self._resolve(spec.value)
            self.node(spec.value).id_match(obj)
            self.node(spec.source).id_match(obj)
            return
        if spec.kind in _RELATIONS:
            # OBJECT_ALIASING on the root: identity compared at check time, nothing held.
            other = spec.value
            self.root.identity_relation([self.node(spec.source), self.node(other)],
                                        [0, 0 if spec.kind is GuardKind.ALIAS_OF else 1])
            return
        node = self.node(spec.source)
        if spec.kind is GuardKind.TENSOR_MATCH:
            sizes, strides = self._dynamic.get(spec.source, ((), ()))
            node.tensor_match(spec.value, dynamic_sizes=sizes, dynamic_strides=strides)
            self._tensor_matched.add(spec.source)
            return
        method = getattr(node, spec.kind.value)
        if spec.kind in _NO_ARGUMENT:
            method()
        elif spec.kind is GuardKind.ID_MATCH and _lives_for_the_process(spec.value):
            method(spec.value, strong=True)
        else:
            method(spec.value)


    def add_shape_guards(self, shape_guards: "_shape_guards.ShapeGuards") -> None:
        """One SYMBOLIC_SHAPES guard on the root for `shape_guards` (shape_guards.py), with a node
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


# torch's own singletons, made once per process and kept in torch's tables: guarded by identity,
# held strongly (they cannot be weakly referenced; holding them keeps nothing alive that would not
# live anyway). By (module, name) so that this module imports without torch.
_PROCESS_LIVED_TYPES = {("torch", "dtype"), ("torch", "layout"), ("torch", "memory_format")}


def _lives_for_the_process(value) -> bool:
    cls = type(value)
    return (getattr(cls, "__module__", None), cls.__name__) in _PROCESS_LIVED_TYPES and \
        getattr(sys.modules.get("torch"), cls.__name__, None) is cls


def _identity_key(spec: GuardSpec):
    # Values may be unhashable (tensors, modules): key them by identity, constants by value.
    if spec.kind in (GuardKind.EQUALS_MATCH, GuardKind.LENGTH, GuardKind.BOOL_MATCH, GuardKind.DICT_KEYS,
                     GuardKind.DISTINCT_FROM, GuardKind.ALIAS_OF):
        return ("value", spec.value)
    return ("id", id(spec.value))


def build_guards(specs, *, global_state: bool = True, resolve=None, shape_guards=None):
    """A root GuardManager checking every spec (and torch's global state).

    `resolve(source)` gives the value a source names in the frame being compiled; SAME_AS needs it.
    `shape_guards` (a shape_guards.ShapeGuards) adds the SYMBOLIC_SHAPES guard and makes the dims
    its symbols read dynamic in the TENSOR_MATCH specs.
    """
    builder = GuardBuilder(resolve)
    if shape_guards is not None:
        builder.add_shape_guards(shape_guards)
    for spec in specs:
        builder.add(spec)
    if global_state:
        builder.root.global_state()
    return builder.root
