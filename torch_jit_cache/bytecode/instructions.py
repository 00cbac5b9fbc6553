"""The instruction model shared by the tracer and codegen: each CPython version's bytecode in one form.

Three layers, each with an explicit conversion:

1. raw code (`types.CodeType`);
2. the `bytecode` library's symbolic instructions (`bytecode.Bytecode.from_code`): it undoes
   EXTENDED_ARG, inline caches and jump offsets, and decodes arguments (names, constants, Labels,
   CellVar/FreeVar, the BinaryOp/Compare/intrinsic enums, `(flag, name)` pairs). Codegen emits
   through the same library, so code cut from a traced function can be re-emitted as it was read;
3. `Inst`s (this module): what the tracer's handlers read. The differences between 3.11, 3.12 and
   3.13 are data (versions.py's rows, `_RENAMES`, `_EXPANSIONS`), applied here once; a handler never reads
   a raw argument bit or a version number.

What must stay true of the decoded form:
- The tracer's stack is the interpreter's stack. A raw instruction becomes one or more `Inst`s whose
  combined stack effect is exactly the raw instruction's (BINARY_SLICE is BUILD_SLICE 2 then
  BINARY_SUBSCR; 3.12's END_FOR is two POP_TOPs), so at every raw-instruction boundary (`Inst.first`)
  the tracked stack and locals match what CPython would hold there. A graph break cuts at those
  boundaries only.
- Where a version puts NULL differs (3.11/3.12: `[NULL, callable, args]`; 3.13: `[callable, NULL,
  args]`): decoding keeps the version's order (PUSH_NULL before or after LOAD_GLOBAL), and the call
  handlers read `FACTS.null_before_callable`.
- Jump targets are indices into the decoded list (`Inst.target`), always the first `Inst` of a raw
  instruction.

No torch here: codegen and the runtime's torch-free tests import this module.
"""
from __future__ import annotations

import dis
import enum
import types
import weakref
from typing import Any, Callable

import bytecode
from bytecode import CellVar, FreeVar, Instr, Label, TryBegin, TryEnd

from .analysis import SUPERINSTRUCTIONS
from .versions import FACTS, PYTHON, VERSIONS

__all__ = ["Inst", "decode", "next_raw", "DecodeError"]


class DecodeError(ValueError):
    """The code cannot be decoded for this Python (an unsupported version, a malformed argument)."""




class Inst:
    """One decoded instruction.

    op      the normalized opname (the vocabulary handlers are registered for)
    arg     the normalized argument: a name, a count, a constant, an operator symbol, a flag tuple
    target  index of the jump target in the decoded list (jumps and FOR_ITER), else None
    lineno  the source line (0 when the instruction has none)
    instr   the bytecode.Instr it came from (several Insts may share one)
    first   True on the first Inst of its raw instruction: a boundary where stack and locals are
            the interpreter's
    handler the enclosing exception-table entry, as (handler index, stack depth, push_lasti), or None
    """

    __slots__ = ("op", "arg", "target", "lineno", "instr", "first", "handler", "index")

    def __init__(self, op: str, arg: Any, instr: Instr, first: bool, handler):
        self.op = op
        self.arg = arg
        self.target = None
        self.instr = instr
        self.lineno = instr.lineno if isinstance(instr.lineno, int) else 0
        self.first = first
        self.handler = handler
        self.index = -1

    def describe(self) -> str:
        """`OPNAME arg` of the raw instruction, as users read it in a fallback reason."""
        arg = self.instr.arg
        if arg is bytecode.UNSET or isinstance(arg, Label):
            return self.instr.name
        if isinstance(arg, enum.Enum):   # BinaryOp, Compare, intrinsics: the symbol or the name
            arg = _ENUM_TEXT.get(self.instr.name, lambda a: a.name)(arg)
        elif isinstance(arg, (CellVar, FreeVar)):
            arg = arg.name
        elif isinstance(arg, tuple) and arg and isinstance(arg[-1], str) and isinstance(arg[0], bool):
            arg = arg[-1]   # (flag, ..., name)
        elif isinstance(arg, types.CodeType):
            arg = f"<code {arg.co_name}>"
        text = arg if isinstance(arg, str) and self.instr.name != "LOAD_CONST" else repr(arg)
        return f"{self.instr.name} {text}"

    def __repr__(self):
        tail = f" -> {self.target}" if self.target is not None else ""
        return f"Inst({self.index}: {self.op} {self.arg!r}{tail})"


# -- decoding rules ------------------------------------------------------------------------------
# A rule maps one raw instruction to [(op, arg), ...]; a jump's Label stays the argument until the
# targets are resolved. Raw names not listed decode to themselves with `_plain_arg`.

def _plain_arg(arg):
    if arg is bytecode.UNSET:
        return None
    if isinstance(arg, (CellVar, FreeVar)):
        return arg.name
    return arg


def _same(op):
    return lambda i: [(op, _plain_arg(i.arg))]


def _nothing(i):
    return [("NOP", None)]


def _load_global(i):
    push_null, name = i.arg
    if not push_null:
        return [("LOAD_GLOBAL", name)]
    if FACTS.null_before_callable:
        return [("PUSH_NULL", None), ("LOAD_GLOBAL", name)]
    return [("LOAD_GLOBAL", name), ("PUSH_NULL", None)]


def _load_attr(i):
    if FACTS.load_attr_method_flag:
        is_method, name = i.arg
        return [("LOAD_METHOD" if is_method else "LOAD_ATTR", name)]
    return [("LOAD_ATTR", i.arg)]


def _load_super_attr(i):
    # (is_method, two-argument form, name): both forms pop the global `super`, the class and self.
    is_method, _two_args, name = i.arg
    return [("LOAD_SUPER_METHOD" if is_method else "LOAD_SUPER_ATTR", name)]


_NB_SYMBOLS = [symbol for _, symbol in dis._nb_ops]
_COMPARE_SYMBOLS = {"LT": "<", "LE": "<=", "EQ": "==", "NE": "!=", "GT": ">", "GE": ">="}


_ENUM_TEXT = {
    "BINARY_OP": lambda a: _NB_SYMBOLS[int(a)],
    "COMPARE_OP": lambda a: _COMPARE_SYMBOLS[a.name.removesuffix("_CAST")],
}


def _binary_op(i):
    return [("BINARY_OP", _NB_SYMBOLS[int(i.arg)])]


def _compare_op(i):
    # 3.13 sets a bit when the result goes straight to a conditional jump: compare, then bool().
    symbol = _COMPARE_SYMBOLS[i.arg.name.removesuffix("_CAST")]
    if i.arg.name.endswith("_CAST"):
        return [("COMPARE_OP", symbol), ("TO_BOOL", None)]
    return [("COMPARE_OP", symbol)]


_CONVERSIONS = {0: None, 1: "str", 2: "repr", 3: "ascii"}


def _format_value(i):
    # 3.11/3.12: one instruction with flags; 3.13's three-instruction vocabulary has the same effect.
    conversion, has_spec = _CONVERSIONS[i.arg & 0x03], bool(i.arg & 0x04)
    if not has_spec:
        out = [("CONVERT_VALUE", conversion)] if conversion else []
        return out + [("FORMAT_SIMPLE", None)]
    if not conversion:
        return [("FORMAT_WITH_SPEC", None)]
    # [value, spec]: convert the value below the spec.
    return [("SWAP", 2), ("CONVERT_VALUE", conversion), ("SWAP", 2), ("FORMAT_WITH_SPEC", None)]


def _convert_value(i):
    return [("CONVERT_VALUE", _CONVERSIONS[int(i.arg)])]


# 3.12+: a generator's body is wrapped in a handler that turns StopIteration into RuntimeError
# (PEP 479) and re-raises the rest; 3.11 does that outside the bytecode.
_INTRINSICS = {"INTRINSIC_LIST_TO_TUPLE": "LIST_TO_TUPLE", "INTRINSIC_UNARY_POSITIVE": "UNARY_POSITIVE",
               "INTRINSIC_STOPITERATION_ERROR": "STOPITERATION_ERROR"}


def _intrinsic_1(i):
    op = _INTRINSICS.get(i.arg.name)
    return [(op, None)] if op else [("CALL_INTRINSIC_1", i.arg.name)]


def _pair(first_op, second_op):
    def rule(i):
        a, b = i.arg
        return [(first_op, a), (second_op, b)]
    return rule


def _unpack_ex(i):
    return [("UNPACK_EX", (i.arg & 0xFF, i.arg >> 8))]


def _call(i):
    return [("CALL", i.arg)]


def _call_kw(i):
    # 3.13: the keyword names are a tuple on the stack, above the arguments.
    return [("CALL_KW", i.arg)]


def _make_function(i):
    # 3.11/3.12 pop the optional parts by flag; 3.13 pops the code alone and sets the parts with
    # SET_FUNCTION_ATTRIBUTE.
    return [("MAKE_FUNCTION", 0 if i.arg is bytecode.UNSET else i.arg)]


def _end_for(i):
    return [("POP_TOP", None)] * _END_FOR_POPS[PYTHON]


_END_FOR_POPS = {(3, 12): 2, (3, 13): 1}


def _return_const(i):
    return [("LOAD_CONST", i.arg), ("RETURN_VALUE", None)]


def _load_classderef(i):
    # 3.11: a class body's read of a name the enclosing function binds (the namespace first, then
    # the cell); 3.12+ write it as LOAD_LOCALS, LOAD_FROM_DICT_OR_DEREF.
    return [("LOAD_LOCALS", None), ("LOAD_FROM_DICT_OR_DEREF", _plain_arg(i.arg))]


def _binary_slice(i):
    return [("BUILD_SLICE", 2), ("BINARY_SUBSCR", None)]


def _store_slice(i):
    return [("BUILD_SLICE", 2), ("STORE_SUBSCR", None)]


# Raw names that mean the same as a normalized one, per the versions that have them.
_RENAMES = {
    "POP_JUMP_FORWARD_IF_TRUE": "POP_JUMP_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE": "POP_JUMP_IF_TRUE",
    "POP_JUMP_FORWARD_IF_FALSE": "POP_JUMP_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE": "POP_JUMP_IF_FALSE",
    "POP_JUMP_FORWARD_IF_NONE": "POP_JUMP_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE": "POP_JUMP_IF_NONE",
    "POP_JUMP_FORWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "POP_JUMP_BACKWARD_IF_NOT_NONE": "POP_JUMP_IF_NOT_NONE",
    "JUMP_FORWARD": "JUMP", "JUMP_BACKWARD": "JUMP", "JUMP_BACKWARD_NO_INTERRUPT": "JUMP",
    "LOAD_FAST_CHECK": "LOAD_FAST",          # 3.12+: LOAD_FAST that may find the local unbound
}

# Raw names whose decoding is more than a rename.
_EXPANSIONS: dict[str, Callable] = {
    "RESUME": _nothing, "PRECALL": _nothing, "COPY_FREE_VARS": _nothing, "NOP": _nothing,
    "LOAD_GLOBAL": _load_global,
    "LOAD_ATTR": _load_attr,
    "LOAD_SUPER_ATTR": _load_super_attr,
    "BINARY_OP": _binary_op,
    "COMPARE_OP": _compare_op,
    "FORMAT_VALUE": _format_value,
    "CONVERT_VALUE": _convert_value,
    "CALL_INTRINSIC_1": _intrinsic_1,
    **{name: _pair(*ops) for name, ops in SUPERINSTRUCTIONS.items()},
    "UNPACK_EX": _unpack_ex,
    "CALL": _call,
    "CALL_KW": _call_kw,
    "MAKE_FUNCTION": _make_function,
    "END_FOR": _end_for,
    "RETURN_CONST": _return_const,
    "LOAD_CLASSDEREF": _load_classderef,
    "BINARY_SLICE": _binary_slice,
    "STORE_SLICE": _store_slice,
}


def _decode_one(instr: Instr, cells: frozenset) -> list:
    name = instr.name
    if name == "LOAD_FAST" and FACTS.load_fast_of_cell_is_load_closure:
        arg = _plain_arg(instr.arg)   # a CellVar/FreeVar, or the name of an argument that is a cell
        if arg in cells:
            return [("LOAD_CLOSURE", arg)]
    rule = _EXPANSIONS.get(name)
    if rule is not None:
        return rule(instr)
    return [(_RENAMES.get(name, name), _plain_arg(instr.arg))]


class Decoded:
    """A code object's decoded instructions: `insts`, and `bytecode` (the library's view, kept so
    that a later step can cut and re-emit the code)."""

    __slots__ = ("insts", "bytecode", "__weakref__")

    def __init__(self, insts: list, bc: bytecode.Bytecode):
        self.insts = insts
        self.bytecode = bc


# Decoding is pure in the code object, and every inlined call of a function reads the same code:
# keep the result while the code lives. Keyed by identity (hashing a code object hashes its
# constants: tens of microseconds for a large forward), held through a weakref whose callback drops
# the entry, so a dropped function's code takes its decoding along.
_CACHE: dict = {}   # id(code) -> (weakref to code, Decoded)


def _forget(ref, key):
    entry = _CACHE.get(key)
    if entry is not None and entry[0] is ref:
        del _CACHE[key]


def decode(code: types.CodeType) -> Decoded:
    """The decoded instructions of `code` for the running Python (cached per code object)."""
    entry = _CACHE.get(id(code))
    if entry is not None and entry[0]() is code:
        return entry[1]
    if FACTS is None:
        raise DecodeError(f"the tracer reads the bytecode of CPython {sorted(VERSIONS)}, not {PYTHON}")
    # The exception table's stack depths are kept (Inst.handler): a graph break reads where a with
    # block's exit lies on the stack from them (analysis.with_block_exits).
    bc = bytecode.Bytecode.from_code(code, conserve_exception_block_stackdepth=True)
    cells = frozenset(code.co_cellvars) | frozenset(code.co_freevars)
    insts: list[Inst] = []
    label_at: dict[Label, int] = {}
    pending: list[tuple[Inst, Label]] = []
    try_stack: list = []
    for item in bc:
        if isinstance(item, Label):
            label_at[item] = len(insts)
            continue
        if isinstance(item, TryBegin):
            try_stack.append(item)
            continue
        if isinstance(item, TryEnd):
            if try_stack:
                try_stack.pop()
            continue
        if not isinstance(item, Instr):
            continue  # SetLineno
        handler = try_stack[-1] if try_stack else None
        for n, (op, arg) in enumerate(_decode_one(item, cells)):
            inst = Inst(op, arg, item, n == 0, handler)
            if isinstance(arg, Label):
                pending.append((inst, arg))
                inst.arg = None
            inst.index = len(insts)
            insts.append(inst)
    for inst, label in pending:
        inst.target = label_at[label]
        if inst.op == "FOR_ITER":
            inst.target = _past(insts, inst.target, FACTS.for_iter_skips)
    for inst in insts:
        if isinstance(inst.handler, TryBegin):
            tb = inst.handler
            inst.handler = (label_at[tb.target], tb.stack_depth, tb.push_lasti)
    decoded = Decoded(insts, bc)
    key = id(code)
    _CACHE[key] = (weakref.ref(code, lambda ref: _forget(ref, key)), decoded)
    return decoded


def next_raw(insts: list, index: int) -> int:
    """The index of the first Inst after the raw instruction that Inst `index` belongs to."""
    raw = insts[index].instr
    index += 1
    while index < len(insts) and insts[index].instr is raw:
        index += 1
    return index


def _past(insts: list, index: int, names: tuple) -> int:
    """The index after the raw instructions `names` that start at `index` (FOR_ITER's exit)."""
    for name in names:
        if index >= len(insts) or insts[index].instr.name != name:
            raise DecodeError(f"FOR_ITER's target is not followed by {names} (at {index})")
        index = next_raw(insts, index)
    return index
