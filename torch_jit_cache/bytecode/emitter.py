"""Emitting bytecode: the primitives every generated code object is written with.

An `Emitter` appends `bytecode.Instr`s for one code object that runs in a frame of `original` (the
transformed code, pipeline/codegen.py) or continues it (a resume function's prologue, resume.py). Every
version difference in what it emits is read from versions.FACTS, here only: where NULL goes in a
call, PRECALL, LOAD_ATTR's method flag, how a closure's cells are loaded, MAKE_FUNCTION's parts.
A caller says what to call or load; it never spells a version's instruction sequence itself.

Sources (guard/sources.py) load themselves through the `load_*` primitives (`Source.emit_load`).

No torch here: codegen and the runtime's torch-free tests import this module.
"""
from __future__ import annotations

import dis
import inspect
import types
from typing import TYPE_CHECKING, Any, Callable, Sequence

import bytecode
from bytecode import CellVar, FreeVar, Instr

from .versions import FACTS

if TYPE_CHECKING:
    from ..guard.sources import Source

__all__ = ["CodegenError", "Emitter", "argument_names", "attr_arg", "emitted_jump", "temps", "CLOSURE_FLAG",
           "DEFAULTS_FLAG", "KWDEFAULTS_FLAG", "ANNOTATIONS_FLAG"]


class CodegenError(ValueError):
    """The transformed code cannot be built (unsupported code, a source the frame cannot reach)."""


_CO_VARARGS = inspect.CO_VARARGS
_CO_VARKEYWORDS = inspect.CO_VARKEYWORDS

# MAKE_FUNCTION's flags (3.11/3.12), SET_FUNCTION_ATTRIBUTE's arguments (3.13).
DEFAULTS_FLAG, KWDEFAULTS_FLAG, ANNOTATIONS_FLAG, CLOSURE_FLAG = 0x01, 0x02, 0x04, 0x08


def argument_names(code: types.CodeType) -> tuple:
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & _CO_VARARGS) + bool(code.co_flags & _CO_VARKEYWORDS)
    return code.co_varnames[:n]


def attr_arg(name: str):
    """LOAD_ATTR's argument for a plain attribute load (never the method form)."""
    return (False, name) if FACTS.load_attr_method_flag else name


def emitted_jump(op: str) -> str:
    """The raw name that emits the normalized conditional jump `op` as a forward jump."""
    forward = op.replace("POP_JUMP_IF_", "POP_JUMP_FORWARD_IF_")
    return forward if forward in _OPNAMES else op


_OPNAMES = frozenset(dis.opmap)


def _fresh_name(base: str, taken: set) -> str:
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name


def temps(taken: set, made: list):
    """`temp(base)`: a local name not in `taken` (then taken), recorded in `made`."""
    def temp(base):
        name = _fresh_name(base, taken)
        taken.add(name)
        made.append(name)
        return name
    return temp


class Emitter:
    """Appends the body's instructions; every instruction carries the function's first line so
    tracebacks through the compiled call point at the `def`."""

    def __init__(self, original: types.CodeType, lineno: int):
        self.original = original
        self.lineno = lineno
        self.instrs: list = []
        self.temps_made: list = []   # every temporary `temp` named, in order
        self.args = set(argument_names(original))
        self.cellvars = set(original.co_cellvars)
        self.freevars = set(original.co_freevars)
        taken = set(original.co_varnames) | set(original.co_cellvars) | set(original.co_freevars)
        self.temp = temps(taken, self.temps_made)   # a fresh local's name: temp(base)

    def clear(self, names) -> None:
        """Unbind the temporaries `names` (each bound on every path reaching here)."""
        for name in dict.fromkeys(names):
            self.emit("DELETE_FAST", name)

    def emit(self, name: str, arg: Any = bytecode.UNSET, lineno: int | None = None) -> None:
        self.instrs.append(Instr(name, arg, lineno=self.lineno if lineno is None else lineno))

    def const(self, value: Any) -> None:
        self.emit("LOAD_CONST", value)

    # -- sources: each Source kind's emit_load (guard/sources.py) uses these primitives ---------------
    def load_source(self, source: Source) -> None:
        source.emit_load(self)

    def load_argument(self, source: Source, name: str) -> None:
        # Only arguments are bound when the (shadow) frame starts; anything else would be unbound.
        if name not in self.args:
            raise CodegenError(f"{source}: '{name}' is not an argument of {self.original.co_qualname}")
        # An argument that is also a cell variable holds its cell after MAKE_CELL.
        if name in self.cellvars:
            self.emit("LOAD_DEREF", CellVar(name))
        else:
            self.emit("LOAD_FAST", name)

    def load_global(self, name: str) -> None:
        self.emit("LOAD_GLOBAL", (False, name))

    def load_free(self, source: Source, name: str) -> None:
        if name not in self.freevars:
            raise CodegenError(f"{source}: '{name}' is not a free variable of "
                               f"{self.original.co_qualname} (free: {self.original.co_freevars})")
        self.emit("LOAD_DEREF", FreeVar(name))

    def load_free_cell(self, source: Source, name: str) -> None:
        """Push the cell of free variable `name` itself."""
        if name not in self.freevars:
            raise CodegenError(f"{source}: '{name}' is not a free variable of "
                               f"{self.original.co_qualname} (free: {self.original.co_freevars})")
        self.load_cell(name)

    def load_attr(self, name: str) -> None:
        """getattr(TOS, name), replacing TOS."""
        self.emit("LOAD_ATTR", attr_arg(name))

    def subscript_const(self, key: Any) -> None:
        """TOS[key], replacing TOS."""
        self.const(key)
        self.emit("BINARY_SUBSCR")

    # -- the call ----------------------------------------------------------------------------
    def call_const(self, fn: Callable, inputs: Sequence[Source]) -> None:
        self.call_const_with(fn, [lambda s=source: self.load_source(s) for source in inputs])

    def call_const_with(self, fn: Callable, emit_args: Sequence[Callable[[], None]]) -> None:
        """Call the constant `fn` with the arguments each of `emit_args` pushes."""
        self.call_with(lambda: self.const(fn), emit_args)

    def call_with(self, emit_fn: Callable[[], None], emit_args: Sequence[Callable[[], None]]) -> None:
        """Call what `emit_fn` pushes with the arguments each of `emit_args` pushes."""
        if FACTS.null_before_callable:
            self.emit("PUSH_NULL")
            emit_fn()
        else:
            emit_fn()
            self.emit("PUSH_NULL")
        for emit_arg in emit_args:
            emit_arg()
        self.precall(len(emit_args))
        self.emit("CALL", len(emit_args))

    def precall(self, argc: int, lineno: int | None = None) -> None:
        """What the version runs before CALL `argc` (3.11: PRECALL; later: nothing)."""
        if FACTS.precall:
            self.emit("PRECALL", argc, lineno)

    def cell(self, name: str):
        """The bytecode argument naming one of the frame's cells: its own, or a free variable."""
        if name in self.cellvars:
            return CellVar(name)
        if name in self.freevars:
            return FreeVar(name)
        raise CodegenError(f"{self.original.co_qualname} has no cell {name!r}")

    def make_closure(self, code: types.CodeType) -> None:
        """Push a new function of `code`, whose free variables are this frame's own cells and free
        variables."""
        self.make_function(code, {CLOSURE_FLAG: lambda: self.closure(code.co_freevars)})

    def closure(self, names: Sequence[str]) -> None:
        """Push the tuple of this frame's cells `names`."""
        for name in names:
            self.load_cell(name)
        self.emit("BUILD_TUPLE", len(names))

    def load_cell(self, name: str) -> None:
        """Push this frame's cell `name` itself (not its contents)."""
        self.emit("LOAD_FAST" if FACTS.load_fast_of_cell_is_load_closure else "LOAD_CLOSURE", self.cell(name))

    def make_function(self, code: types.CodeType, parts: dict) -> None:
        """Push a new function of `code`; `parts`: {MAKE_FUNCTION flag: what pushes that part}.
        3.11/3.12 take the parts by flag; 3.13 sets them one by one after MAKE_FUNCTION, the last
        pushed first."""
        flags = sorted(parts)
        for flag in flags:
            parts[flag]()
        self.const(code)
        if FACTS.set_function_attribute:
            self.emit("MAKE_FUNCTION")
            for flag in reversed(flags):
                self.emit("SET_FUNCTION_ATTRIBUTE", flag)
        else:
            self.emit("MAKE_FUNCTION", sum(flags))
