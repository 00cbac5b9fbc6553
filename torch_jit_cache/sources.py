"""Sources: where a value the tracer read came from, relative to the frame.

Every value read from the frame keeps its source, so that (1) each fact the trace relied on becomes
a guard on that source (guards.py), and (2) the transformed code can load graph inputs from the
frame at call time (codegen.py). Sources are immutable, hashable and print as users read them:
`L['x']`, `G['SCALE']`, `C['scale']` (a closure variable), `L['self'].fc1.weight`, `L['xs'][2]`.
"""
from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Source:
    def name(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name()

    @property
    def root(self) -> "Source":
        """The frame-level source (LocalSource, GlobalSource, ...) this one hangs from."""
        return self


@dataclasses.dataclass(frozen=True)
class LocalSource(Source):
    """An argument of the frame (only arguments are bound when a frame starts)."""
    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"


@dataclasses.dataclass(frozen=True)
class GlobalSource(Source):
    """A name in the function's globals."""
    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"


@dataclasses.dataclass(frozen=True)
class BuiltinSource(Source):
    """A name found in the function's builtins (not shadowed by a global)."""
    builtin_name: str

    def name(self) -> str:
        return f"B[{self.builtin_name!r}]"


@dataclasses.dataclass(frozen=True)
class ClosureSource(Source):
    """The contents of a free variable's cell (the function's __closure__)."""
    free_name: str

    def name(self) -> str:
        return f"C[{self.free_name!r}]"


@dataclasses.dataclass(frozen=True)
class AttrSource(Source):
    base: Source
    attr: str

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    @property
    def root(self) -> Source:
        return self.base.root


@dataclasses.dataclass(frozen=True)
class ItemSource(Source):
    """base[key] for an immutable builtin key (int, str, ...)."""
    base: Source
    key: Any

    def name(self) -> str:
        return f"{self.base.name()}[{self.key!r}]"

    @property
    def root(self) -> Source:
        return self.base.root


def load_source(source: Source, f_locals, f_globals, f_builtins) -> Any:
    """The value `source` names in a frame given by its locals (arguments and, for free variables,
    their cell contents, by name), globals and builtins. Used by tests and by codegen's checks."""
    if isinstance(source, LocalSource):
        return f_locals[source.local_name]
    if isinstance(source, ClosureSource):
        return f_locals[source.free_name]
    if isinstance(source, GlobalSource):
        return f_globals[source.global_name]
    if isinstance(source, BuiltinSource):
        b = f_builtins if isinstance(f_builtins, dict) else vars(f_builtins)
        return b[source.builtin_name]
    if isinstance(source, AttrSource):
        return getattr(load_source(source.base, f_locals, f_globals, f_builtins), source.attr)
    if isinstance(source, ItemSource):
        return load_source(source.base, f_locals, f_globals, f_builtins)[source.key]
    raise TypeError(f"cannot load {source!r}")


def unreachable_root(source: Source, arguments, freevars, f_globals, f_builtins) -> str | None:
    """Why the transformed code or a guard could not reach `source` from the frame, or None.

    Both start from the frame: its arguments (the only locals bound when it starts), its free
    variables, its globals and builtins. A source rooted anywhere else (a module the user's code
    never imported, say) would raise NameError or fail its guard on every call.
    """
    root = source.root
    if isinstance(root, LocalSource):
        return None if root.local_name in arguments else f"{source}: {root.local_name!r} is not an argument"
    if isinstance(root, ClosureSource):
        return None if root.free_name in freevars else f"{source}: {root.free_name!r} is not a free variable"
    if isinstance(root, GlobalSource):
        return None if root.global_name in f_globals else f"{source}: {root.global_name!r} is not a global"
    if isinstance(root, BuiltinSource):
        b = f_builtins if isinstance(f_builtins, dict) else vars(f_builtins)
        if root.builtin_name in f_globals or root.builtin_name not in b:
            return f"{source}: {root.builtin_name!r} is not an unshadowed builtin"
        return None
    return f"{source}: no frame-level root"
