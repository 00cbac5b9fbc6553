"""PLACEHOLDER (lead's branch): replaced by the helper's module at merge. Same dataclasses."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SymbolBinding:
    source: object
    kind: str
    dim: object = None


@dataclasses.dataclass(frozen=True)
class ShapeGuards:
    bindings: tuple
    ranges: tuple
    exprs: tuple
