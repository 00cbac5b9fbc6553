"""Symbolic shape guards: sympy facts over size symbols -> the C++ SYMBOLIC_SHAPES guard.

A trace with dynamic shapes leaves, in torch's ShapeEnv, symbols (`s0`, `s1`) that stand for some
tensor dims, strides, storage offsets or int arguments, and boolean facts the trace relied on
(`Eq(s0, s1)`, `s0 <= 1024`, `Ne(Mod(s1, 2), 0)`) plus a value range per symbol. `ShapeGuards` is
that, free of the ShapeEnv: which source each symbol reads (`SymbolBinding`), the ranges, and the
expressions. `GuardBuilder.add_shape_guards` (guard/tree.py) turns it into one SYMBOLIC_SHAPES guard on
the root, whose expressions are the postfix programs `compile_expr` makes, evaluated in C++ on
int64 with Python semantics (csrc/guards/shape_program.h): never a Python callable on the hit path.

sympy (and torch's sympy functions) are imported inside the functions that need them, so that
guard/tree.py, which imports this module, stays importable without torch.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from .sources import Source

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_KINDS = ("size", "stride", "storage_offset", "int")


class UnsupportedShapeGuard(ValueError):
    """A guard this module cannot compile (a node type, a non-integer constant, ...): the caller
    falls back to static shapes."""


@dataclasses.dataclass(frozen=True)
class SymbolBinding:
    """What a symbol reads: `source`'s size(dim), stride(dim) or storage_offset() (a tensor), or the
    value of `source` itself ("int": an exact int, never a bool)."""
    source: Source
    kind: str                 # "size" | "stride" | "storage_offset" | "int"
    dim: int | None = None

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"SymbolBinding.kind must be one of {_KINDS}, not {self.kind!r}")
        needs_dim = self.kind in ("size", "stride")
        if needs_dim and (not isinstance(self.dim, int) or isinstance(self.dim, bool) or self.dim < 0):
            raise ValueError(f"SymbolBinding({self.source}, {self.kind!r}): dim must be an int >= 0, not {self.dim!r}")
        if not needs_dim and self.dim is not None:
            raise ValueError(f"SymbolBinding({self.source}, {self.kind!r}) takes no dim")

    def name(self) -> str:
        """As the guard prints it: `L['x'].size()[1]`, `L['n']` (the C++ text is the same)."""
        if self.kind == "int":
            return self.source.name()
        if self.kind == "storage_offset":
            return f"{self.source.name()}.storage_offset()"
        return f"{self.source.name()}.{self.kind}()[{self.dim}]"


@dataclasses.dataclass(frozen=True)
class ShapeGuards:
    """Everything one SYMBOLIC_SHAPES guard checks. A symbol may be bound more than once (the same
    size reached through two sources): its reads must then agree. Every symbol in `ranges` and
    `exprs` must be bound."""
    bindings: tuple[tuple[Any, SymbolBinding], ...]            # (sympy.Symbol, SymbolBinding)
    ranges: tuple[tuple[Any, int | None, int | None], ...] = ()  # (symbol, min, max or None)
    exprs: tuple[Any, ...] = ()                                 # boolean sympy expressions

    def symbols(self) -> tuple:
        """The bound symbols, each once, in binding order (their indices in the programs)."""
        return tuple(dict.fromkeys(symbol for symbol, _ in self.bindings))

    def dynamic_dims(self) -> dict[Source, tuple[tuple[int, ...], tuple[int, ...]]]:
        """Per tensor source, (dims whose size, dims whose stride) a symbol reads: TENSOR_MATCH must
        leave those unchecked, or it would pin what the symbols let vary."""
        out: dict[Source, tuple[set, set]] = {}
        for _, b in self.bindings:
            if b.kind in ("size", "stride"):
                sizes, strides = out.setdefault(b.source, (set(), set()))
                (sizes if b.kind == "size" else strides).add(b.dim)
        return {source: (tuple(sorted(s)), tuple(sorted(t))) for source, (s, t) in out.items()}


def pinning(shape_guards: ShapeGuards | None, reads) -> ShapeGuards | None:
    """`shape_guards` (None: none) plus, for each (SymbolBinding, int) in `reads`, a symbol of its
    own bound there and guarded equal to the int: a value the trace read that neither TENSOR_MATCH
    nor a symbol checks (a static trace's storage_offset()). None when there is nothing at all."""
    if not reads:
        return shape_guards
    import sympy

    bindings = list(shape_guards.bindings) if shape_guards is not None else []
    exprs = list(shape_guards.exprs) if shape_guards is not None else []
    for i, (binding, value) in enumerate(reads):
        symbol = sympy.Symbol(f"_tjc_read{i}", integer=True)
        bindings.append((symbol, binding))
        exprs.append(sympy.Eq(symbol, int(value)))
    return ShapeGuards(tuple(bindings), shape_guards.ranges if shape_guards is not None else (), tuple(exprs))


# ---------------------------------------------------------------------------------------------
# sympy -> postfix program: a tuple of (op, operand) pairs, ops named as in C++'s kShapeOps.

def _int_constant(value) -> int:
    import sympy

    if isinstance(value, sympy.Integer):
        v = int(value)
    elif isinstance(value, (sympy.Rational, sympy.Float)) and value.is_finite and (value - int(value)).is_zero:
        v = int(value)  # an exact integer spelled as a float (sympy's Float(3.0) != 3 structurally)
    else:
        raise UnsupportedShapeGuard(f"non-integer constant {value} ({type(value).__name__})")
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise UnsupportedShapeGuard(f"constant {v} does not fit in int64")
    return v


def _tables():
    """(class, handler name) pairs, most specific first: sympy's own classes, then torch's when
    torch is importable. Built on each call; compile_expr is not on any hot path."""
    import sympy
    from sympy.logic import boolalg

    table: list[tuple[type, str]] = [
        (boolalg.BooleanTrue, "true"), (boolalg.BooleanFalse, "false"),
        (sympy.Symbol, "symbol"),
        (sympy.Add, "add"), (sympy.Mul, "mul"), (sympy.Pow, "pow"),
        (sympy.Eq, "eq"), (sympy.Ne, "ne"), (sympy.StrictLessThan, "lt"), (sympy.LessThan, "le"),
        (sympy.StrictGreaterThan, "gt"), (sympy.GreaterThan, "ge"),
        (sympy.And, "and"), (sympy.Or, "or"), (sympy.Not, "not"),
        (sympy.Mod, "mod"), (sympy.Max, "max"), (sympy.Min, "min"), (sympy.Abs, "abs"),
    ]
    try:
        from torch.utils._sympy import functions as tf
    except ImportError:
        return table
    torch_table = [
        # CleanDiv subclasses FloorDiv: an exact division, evaluated the same way.
        ("FloorDiv", "floordiv"), ("PythonMod", "mod"), ("Mod", "mod_nonneg"),
        ("ModularIndexing", "modular_indexing"), ("Max", "max"), ("Min", "min"),
        ("PowByNatural", "pow"), ("Identity", "identity"), ("Where", "where"),
    ]
    return [(getattr(tf, name), kind) for name, kind in torch_table if hasattr(tf, name)] + table


def operands(expr) -> tuple:
    """The operands of an n-ary node in the order the program folds them (left to right)."""
    return tuple(expr.args)


def compile_expr(expr, symbol_index: Mapping[Any, int]) -> tuple[tuple[str, int], ...]:
    """The postfix program for the boolean sympy `expr`, symbols numbered by `symbol_index`.

    n-ary Add/Mul/And/Or/Max/Min fold left to right over `operands(expr)`. Raises
    UnsupportedShapeGuard for a node type, constant or symbol it cannot compile."""
    import sympy
    from sympy.logic import boolalg

    if not isinstance(expr, (boolalg.Boolean, bool)):
        raise UnsupportedShapeGuard(f"a shape guard must be boolean, got {type(expr).__name__}: {expr}")
    table = _tables()
    code: list[tuple[str, int]] = []
    depth = [0, 0]  # current, max

    def emit(op: str, operand: int = 0, pops: int = 0):
        code.append((op, operand))
        depth[0] += 1 - pops
        depth[1] = max(depth[1], depth[0])

    def fold(args, op: str):
        walk(args[0])
        for arg in args[1:]:
            walk(arg)
            emit(op, pops=2)

    def walk(e):
        if isinstance(e, bool):
            emit("const", int(e))
            return
        if isinstance(e, sympy.Number):
            emit("const", _int_constant(e))
            return
        kind = next((k for cls, k in table if isinstance(e, cls)), None)
        if kind is None:
            raise UnsupportedShapeGuard(f"unsupported node {type(e).__name__} in a shape guard: {e}")
        if kind in ("true", "false"):
            emit("const", 1 if kind == "true" else 0)
        elif kind == "symbol":
            if e not in symbol_index:
                raise UnsupportedShapeGuard(f"symbol {e} has no binding")
            emit("sym", symbol_index[e])
        elif kind in ("add", "mul", "and", "or", "max", "min"):
            fold(operands(e), kind)
        elif kind == "pow" and isinstance(e, sympy.Pow):
            base, exp = e.args
            if not isinstance(exp, sympy.Integer) or exp < 0:
                raise UnsupportedShapeGuard(f"power with a non-natural exponent: {e}")
            walk(base)
            emit("const", _int_constant(exp))
            emit("pow", pops=2)
        elif kind in ("eq", "ne", "lt", "le", "gt", "ge"):
            walk(e.lhs)
            walk(e.rhs)
            emit(kind, pops=2)
        elif kind in ("not", "abs"):
            walk(e.args[0])
            emit(kind, pops=1)
        elif kind == "identity":
            walk(e.args[0])
        elif kind == "modular_indexing":  # (a // b) % c, but 0 when a == 0 or c == 1 (torch's eval)
            for arg in e.args:
                walk(arg)
            emit("modular_indexing", pops=3)
        elif kind == "where":
            for arg in e.args:
                walk(arg)
            emit("where", pops=3)
        else:  # binary: floordiv, mod, mod_nonneg, pow (PowByNatural)
            if len(e.args) != 2:
                raise UnsupportedShapeGuard(f"{type(e).__name__} with {len(e.args)} arguments: {e}")
            walk(e.args[0])
            walk(e.args[1])
            emit(kind, pops=2)

    walk(expr)
    from .. import _C

    if depth[1] > _C._shape_program_max_depth:
        raise UnsupportedShapeGuard(f"shape guard too deeply nested ({depth[1]} > {_C._shape_program_max_depth}): {expr}")
    return tuple(code)


def add_to_root(root, node_of, shape_guards: ShapeGuards) -> None:
    """Adds one SYMBOLIC_SHAPES guard for `shape_guards` to `root`; `node_of(source)` gives the
    tree node of a source (made on demand). Nothing is added when a part fails to compile."""
    symbols = shape_guards.symbols()
    index = {symbol: i for i, symbol in enumerate(symbols)}
    programs = [list(compile_expr(expr, index)) for expr in shape_guards.exprs]
    ranges = []
    for symbol, lo, hi in shape_guards.ranges:
        if symbol not in index:
            raise UnsupportedShapeGuard(f"range of symbol {symbol}, which has no binding")
        ranges.append((index[symbol], _bound(lo, symbol, upper=False), _bound(hi, symbol, upper=True)))
    bindings = [(node_of(b.source), b.kind, -1 if b.dim is None else b.dim, index[symbol])
                for symbol, b in shape_guards.bindings]
    root.symbolic_shapes(bindings, len(symbols), ranges, programs)


def _bound(value, symbol, *, upper: bool) -> int | None:
    """A range end as int64, or None when it bounds nothing an int64 can hold (None, sympy's
    oo / int_oo on its own side, or an end beyond int64 on its own side)."""
    if value is None:
        return None
    import sympy

    if value in (sympy.oo, -sympy.oo) or getattr(value, "is_infinite", False):
        if (value > 0) == upper:
            return None
        raise UnsupportedShapeGuard(f"range of {symbol}: {'max' if upper else 'min'} is {value}")
    if isinstance(value, bool) or not isinstance(value, (int, sympy.Integer)):
        raise UnsupportedShapeGuard(f"range of {symbol}: {value!r} is not an integer")
    v = int(value)
    if upper and v > _INT64_MAX or not upper and v < _INT64_MIN:
        return None
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise UnsupportedShapeGuard(f"range of {symbol}: {v} excludes every int64")
    return v
