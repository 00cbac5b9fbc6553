"""Transformed bytecode: the code the runtime caches and runs in place of a traced function.

`build_transformed_code(original, compiled_fn, graph_inputs, output_spec)` returns a code object
that, run in a shadow frame of the original (csrc/cpython/shadow_frame.cpp), loads every graph
input from the frame by its Source, calls `compiled_fn` with them positionally, and rebuilds the
original's return value from the output spec (guard/trace_result.py). Side effects the trace recorded
(trace_result.SideEffect, tracer/side_effects.py) are replayed after the call: every target and
value is loaded into a temporary first, together with what is returned (or the state at a graph
break), then the effects are applied in program order (`_REPLAY`), then the frame returns (or runs
the break instruction). Loading first keeps an effect from changing what another loads.

What must stay true (csrc/cpython/frame.cpp `check_shadow_compatible` refuses code otherwise):
- the original's argument names are a prefix of co_varnames, with the same kinds (cell or not);
  co_cellvars and co_freevars are the same, in the same order; arg counts, *args/**kwargs flags,
  name, qualname, filename and first line are kept;
- the original's prologue (COPY_FREE_VARS, MAKE_CELL, RESUME) is kept exactly, so COPY_FREE_VARS
  stays instruction 0 (the runtime may start the shadow frame just past it) and cell arguments
  are wrapped by MAKE_CELL exactly as the original would;
- `compiled_fn` lives in the code's co_consts, never in the user's globals: the code object owns
  it, and dropping the code (the cache entry) frees it.

Built with the `bytecode` library through the primitives of bytecode/emitter.py, which alone read
the differences between CPython versions (bytecode/versions.py); the code after a graph break is
graph_break/emit.py's. No torch here: the runtime's torch-free tests use it.
"""
from __future__ import annotations

import collections
import copy
import functools
import inspect
import re
import sys
import types
from typing import Any, Callable, Sequence

import bytecode
from bytecode import CellVar, FreeVar, Instr

from .. import runtime
from ..bytecode.emitter import (ANNOTATIONS_FLAG, CLOSURE_FLAG, DEFAULTS_FLAG, KWDEFAULTS_FLAG, CodegenError, Emitter,
                                argument_names)
from ..bytecode.versions import FACTS, PYTHON, VERSIONS
from ..graph_break.emit import emit_break
from ..guard.sources import Source
from ..guard.trace_result import (AttrOutput, BreakOutput, CallOutput, ConstantOutput, DictOutput, EffectKind,
                                  EnteredContext, FrameCellOutput, FunctionOutput, GraphOutput, IterOutput, ListOutput,
                                  ObjectOutput,
                                  SourceOutput, SuperOutput, TupleOutput, call_with, parts, replay_set_method, walk)

__all__ = ["build_transformed_code", "format_code", "CodegenError", "argument_names"]


# Shadow frames cannot run these (the runtime refuses them); say so before building anything.
_GENERATOR_LIKE = (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
                   | inspect.CO_ITERABLE_COROUTINE)

_RESULT_LOCAL = "___tjc_graph_out"


class _Emitter(Emitter):
    """The primitives (bytecode/emitter.py), plus building output specs (guard/trace_result.py) and
    every instruction at the function's first line, so tracebacks through the compiled call
    point at the `def`."""

    def __init__(self, original: types.CodeType, lineno: int, shared: set = frozenset()):
        super().__init__(original, lineno)
        # Specs reached more than once (`_shared_specs`: ids) are built once: id(spec) -> the
        # temporary holding the object, loaded wherever the same spec object appears again. The
        # body is straight-line code up to the resume calls, so the first build runs first. A spec
        # reached once is built in place, with no temporary.
        self.shared = shared
        self._built: dict = {}
        self._constants: dict = {}   # (type, value) of each constant built -> the first object

    # -- outputs -----------------------------------------------------------------------------
    def build_output(self, spec: Any, result_local: str | None) -> None:
        if id(spec) not in self.shared:
            self._build_one(spec, result_local)
        elif id(spec) in self._built:
            self.emit("LOAD_FAST", self._built[id(spec)])
        else:
            self._build_one(spec, result_local)
            name = self._built[id(spec)] = self.temp("___tjc_made")
            self.emit("COPY", 1)
            self.emit("STORE_FAST", name)

    def _build_one(self, spec: Any, result_local: str | None) -> None:
        if isinstance(spec, GraphOutput):
            if result_local is None:
                raise CodegenError("GraphOutput in an output spec but no compiled graph is called")
            self.emit("LOAD_FAST", result_local)
            self.const(spec.index)
            self.emit("BINARY_SUBSCR")
        elif isinstance(spec, ConstantOutput):
            self.build_constant(spec.value)
        elif isinstance(spec, SourceOutput):
            self.load_source(spec.source)
        elif isinstance(spec, TupleOutput) and spec.cls is not None:
            plain = TupleOutput(spec.items)
            self.call_const_with(_rebuild_tuple, [lambda: self.const(spec.cls),
                                                  lambda: self.build_output(plain, result_local)])
        elif isinstance(spec, TupleOutput):
            for item in spec.items:
                self.build_output(item, result_local)
            self.emit("BUILD_TUPLE", len(spec.items))
        elif isinstance(spec, ListOutput):
            for item in spec.items:
                self.build_output(item, result_local)
            self.emit("BUILD_LIST", len(spec.items))
        elif isinstance(spec, DictOutput):
            for key, item in spec.items:
                self.const(key)
                self.build_output(item, result_local)
            self.emit("BUILD_MAP", len(spec.items))
        elif isinstance(spec, AttrOutput):
            self.build_output(spec.base, result_local)
            self.load_attr(spec.name)
        elif isinstance(spec, FunctionOutput):
            parts = {}
            if spec.defaults is not None:
                parts[DEFAULTS_FLAG] = lambda: self.build_output(spec.defaults, result_local)
            if spec.kwdefaults is not None:
                parts[KWDEFAULTS_FLAG] = lambda: self.build_output(spec.kwdefaults, result_local)
            if spec.annotations is not None:
                parts[ANNOTATIONS_FLAG] = lambda: self.build_output(spec.annotations, result_local)
            if spec.cells:
                parts[CLOSURE_FLAG] = lambda: self.closure(spec.cells)
            self.make_function(spec.code, parts)
        elif isinstance(spec, FrameCellOutput):
            self.load_cell(spec.name)
        elif isinstance(spec, SuperOutput):
            self.call_const_with(super, [lambda: self.build_output(spec.cls, result_local),
                                         lambda: self.build_output(spec.obj, result_local)])
        elif isinstance(spec, IterOutput) and spec.base is not None and spec.skip == 0:
            self.build_output(spec.base, result_local)   # iter(base), with no helper frame
            self.emit("GET_ITER")
        elif isinstance(spec, IterOutput) and spec.base is not None:
            self.call_const_with(_advanced_iter, [lambda: self.build_output(spec.base, result_local),
                                                  lambda: self.const(spec.skip)])
        elif isinstance(spec, IterOutput):
            self.build_output(TupleOutput(spec.items), result_local)
            self.emit("GET_ITER")
        elif isinstance(spec, (ObjectOutput, CallOutput)):
            self._build_made(spec, result_local)
        else:
            raise CodegenError(f"unknown output spec {spec!r}")

    def _build_made(self, spec, result_local) -> None:
        """An object the trace constructed: `cls.__new__` plus its __dict__, or a call."""
        positional = _positional_call(spec)
        if positional is not None:
            # fn(*args) called here: no helper frame (a partial, zip, map, a generator function).
            fn, args = positional
            self.call_with(lambda: self.build_output(fn, result_local),
                           [functools.partial(self.build_output, a, result_local) for a in args])
            return
        helper = _rebuild_object if isinstance(spec, ObjectOutput) else _call_with_keywords
        values = TupleOutput(spec.values)
        self.call_const_with(helper, [
            lambda: self.build_output(spec.cls if isinstance(spec, ObjectOutput) else spec.fn, result_local),
            lambda: self.const(spec.names), lambda: self.build_output(values, result_local)])

    def build_constant(self, value: Any) -> None:
        # A mutable constant is rebuilt on every call: LOAD_CONST would hand every caller the same
        # list, and one caller's append would show in the next call's result.
        if type(value) is list:
            for v in value:
                self.build_constant(v)
            self.emit("BUILD_LIST", len(value))
        elif type(value) is dict:
            for k, v in value.items():
                self.const(k)
                self.build_constant(v)
            self.emit("BUILD_MAP", len(value))
        elif type(value) is set:
            for v in value:
                self.build_constant(v)
            self.emit("BUILD_SET", len(value))
        elif type(value) is tuple and any(type(v) in (list, dict, set) for v in value):
            for v in value:
                self.build_constant(v)
            self.emit("BUILD_TUPLE", len(value))
        elif isinstance(value, BaseException):
            # `raise KeyError(k)` at a break: a new exception per call, as eager makes; raising the
            # constant itself would chain every call's traceback (and its frames) onto it.
            self.call_const_with(copy.copy, [lambda: self.const(value)])
        else:
            self._distinct_const(value)

    def _distinct_const(self, value: Any) -> None:
        """LOAD_CONST of `value`, itself: equal constants become one object in a code object (the
        bytecode library merges co_consts by value, and CPython interns every name-like string
        among them), so a second object equal to one already built (`c = a[:3] + a[3:]` beside
        `a`: `a is c` is False in eager), or a string that is not the interned one, is loaded
        out of a one-item list, which nothing merges."""
        try:
            first = self._constants.setdefault((type(value), value), value)
        except TypeError:   # unhashable: the library keys it by identity
            first = value
        if first is value and (type(value) is not str or sys.intern(value) is value):
            self.const(value)
            return
        self.const([value])
        self.const(0)
        self.emit("BINARY_SUBSCR")


def _positional_call(spec):
    """(fn spec, arg specs) where `spec` is trace_result.call_with with positional arguments only,
    which the transformed code calls directly; else None."""
    if not isinstance(spec, CallOutput) or type(spec.fn) is not ConstantOutput or spec.fn.value is not call_with \
            or spec.names != _CALL_WITH:
        return None
    fn, args, kwargs = spec.values
    if type(args) is not TupleOutput or args.cls is not None or type(kwargs) is not DictOutput or kwargs.items:
        return None
    return fn, args.items


_CALL_WITH = ("fn", "args", "kwargs")


def _rebuild_tuple(cls: type, items: tuple) -> tuple:
    """A tuple subclass from its items: namedtuples take them as arguments (`_make`), structseqs
    (torch.return_types.*) and torch.Size as one sequence."""
    make = getattr(cls, "_make", None)
    return make(items) if make is not None else cls(items)


def _rebuild_object(cls: type, names: tuple, values: tuple):
    """An object the trace constructed (trace_result.ObjectOutput): made by object's __new__ (a
    class's own Python __new__ ran in the trace, new_object.py), and its __dict__ and slots are filled directly (its class's own __setattr__, if any, was
    run in the trace), so this is the object eager code made."""
    obj = object.__new__(cls)
    for name, value in zip(names, values):
        # A __slots__ member is set through its class's slot; any other name goes to the __dict__.
        slot = next((vars(k)[name] for k in cls.__mro__ if name in vars(k)), None)
        if type(slot) is types.MemberDescriptorType:
            slot.__set__(obj, value)
        else:
            object.__getattribute__(obj, "__dict__")[name] = value
    return obj


def _call_keywords(fn, names: tuple, values: tuple):
    return fn(**dict(zip(names, values)))


# `fn(**dict(zip(names, values)))` (trace_result.CallOutput), with interception off: the call only
# remakes an object the trace already followed (a ModelOutput's __init__ and __post_init__, no
# tensor work), and each frame it runs would otherwise pass through the eval-frame callback
# (measured: a compiled forward returning a ModelOutput took 46 us against eager's 35.5 us).
_call_with_keywords = runtime.without_interception(_call_keywords)


def _advanced_iter(iterable: Any, skip: int):
    """`iter(iterable)` past its first `skip` items: a loop's iterator at a graph break, over the
    very object the frame iterates."""
    it = iter(iterable)
    for _ in range(skip):
        next(it)
    return it


def _replace_list(target, items: list) -> None:
    """A list (or deque) the trace mutated gets its final contents; it stays the same object."""
    if type(target) is collections.deque:   # no slice assignment
        target.clear()
        target.extend(items)
        return
    target[:] = items


def _replace_dict(target: dict, items: dict) -> None:
    """A dict the trace mutated gets its final items, in the trace's order; the same object. A
    subclass of dict itself gets them through dict's own methods (the trace modelled dict's, not
    the subclass's overrides of clear and update); an OrderedDict through its own, which keep
    its order."""
    if isinstance(target, collections.OrderedDict):
        target.clear()
        target.update(items)
        return
    dict.clear(target)
    dict.update(target, items)


def _advance_iterator(target, steps: int) -> None:
    """A builtin iterator from the frame takes the steps the trace took on it (frame_iterators.py)."""
    for _ in range(steps):
        next(target, None)


def _set_state(setter, value):
    setter(value)


def _replay_call(helper):
    def replay(em, name, target, value):
        em.call_const_with(helper, [lambda: em.emit("LOAD_FAST", target),
                                    lambda: em.emit("LOAD_FAST", value)])
        em.emit("POP_TOP")
    return replay


# How each kind of side effect is applied, from the temporaries holding its target and value. The
# same bytecode in 3.11, 3.12 and 3.13 (STORE_ATTR and friends take a name everywhere).
_REPLAY = {
    EffectKind.SET_ATTR: lambda em, name, target, value: (
        em.emit("LOAD_FAST", value), em.emit("LOAD_FAST", target), em.emit("STORE_ATTR", name)),
    EffectKind.DEL_ATTR: lambda em, name, target, value: (
        em.emit("LOAD_FAST", target), em.emit("DELETE_ATTR", name)),
    EffectKind.OBJECT_SET_ATTR: lambda em, name, target, value: (
        em.call_const_with(object.__setattr__, [lambda: em.emit("LOAD_FAST", target), lambda: em.const(name),
                                                lambda: em.emit("LOAD_FAST", value)]), em.emit("POP_TOP")),
    EffectKind.OBJECT_DEL_ATTR: lambda em, name, target, value: (
        em.call_const_with(object.__delattr__, [lambda: em.emit("LOAD_FAST", target), lambda: em.const(name)]),
        em.emit("POP_TOP")),
    EffectKind.SET_GLOBAL: lambda em, name, target, value: (
        em.emit("LOAD_FAST", value), em.emit("STORE_GLOBAL", name)),
    EffectKind.DEL_GLOBAL: lambda em, name, target, value: em.emit("DELETE_GLOBAL", name),
    EffectKind.SET_CELL: lambda em, name, target, value: (
        em.emit("LOAD_FAST", value), em.emit("STORE_DEREF", em.cell(name))),
    EffectKind.SET_LIST: _replay_call(_replace_list),
    EffectKind.SET_DICT: _replay_call(_replace_dict),
    EffectKind.SET_METHOD: lambda em, name, target, value: (
        em.call_const_with(replay_set_method, [lambda: em.emit("LOAD_FAST", target), lambda: em.const(name),
                                               lambda: em.emit("LOAD_FAST", value)]), em.emit("POP_TOP")),
    EffectKind.ADVANCE_ITER: _replay_call(_advance_iterator),
    EffectKind.SET_STATE: _replay_call(_set_state),
}


def _load_effects(em: "_Emitter", effects: Sequence, result_local: str | None, temp) -> list:
    """Each effect's target and value into temporaries: [(effect, target temp, value temp)]."""
    loaded = []
    for effect in effects:
        names = []
        for spec in (effect.target, effect.value):
            if spec is None:
                names.append(None)
                continue
            names.append(temp("___tjc_effect"))
            em.build_output(spec, result_local)
            em.emit("STORE_FAST", names[-1])
        loaded.append((effect, *names))
    return loaded


def _apply_effects(em: "_Emitter", loaded: list) -> None:
    for effect, target, value in loaded:
        _REPLAY[effect.kind](em, effect.name, target, value)


def _shared_specs(output_spec: Any, side_effects: Sequence) -> set:
    """The ids of the spec objects that `output_spec` and `side_effects` reach more than once
    (guard/trace_result.py: one spec object per object), each to be built once and loaded again. A spec
    reached again is not looked into again: what it is built from is built once with it. Specs
    that load the very object wherever they are built (graph outputs, sources, immutable
    constants) need no temporary and are left out."""
    seen, shared = set(), set()

    def visit(spec):
        if isinstance(spec, (GraphOutput, SourceOutput, EnteredContext, FrameCellOutput)):
            return
        if isinstance(spec, ConstantOutput) and not _is_mutable_constant(spec.value):
            return
        if id(spec) in seen:
            shared.add(id(spec))
            return
        seen.add(id(spec))
        for part in parts(spec):
            visit(part)

    for effect in side_effects:
        for spec in (effect.target, effect.value):
            if spec is not None:
                visit(spec)
    visit(output_spec)
    return shared


def _is_mutable_constant(value: Any) -> bool:
    """Whether `build_constant` makes a new object of `value` on every build."""
    return type(value) in (list, dict, set) or type(value) is tuple and any(type(v) in (list, dict, set)
                                                                            for v in value)


def _uses_graph(spec: Any) -> bool:
    return any(isinstance(s, GraphOutput) for s in walk(spec))


def uses_graph(output_spec: Any, side_effects: Sequence = ()) -> bool:
    """Whether the transformed code reads a graph output: the graph must be compiled and called
    even where it does no tensor work (it returns a symbolic input the frame rebuilds)."""
    return _uses_graph(output_spec) or _uses_graph(tuple(side_effects))


def _prologue(original_bc: bytecode.Bytecode) -> list:
    """The original's instructions up to and including RESUME (COPY_FREE_VARS, MAKE_CELL, ...)."""
    out = []
    for instr in original_bc:
        out.append(instr)
        if isinstance(instr, Instr) and instr.name == "RESUME":
            return out
    raise CodegenError(f"{original_bc.qualname}: no RESUME in the code (not a 3.11+ function body?)")


def build_transformed_code(original: types.CodeType, compiled_fn: Callable | None,
                           graph_inputs: Sequence[Source], output_spec: Any,
                           resume_fns: Sequence[Callable] = (),
                           side_effects: Sequence = ()) -> types.CodeType:
    """The code that replaces `original`: call `compiled_fn(*inputs)`, replay `side_effects`
    (trace_result.SideEffect, in program order), rebuild `output_spec`.

    `compiled_fn` returns a tuple or list of outputs; GraphOutput(i) is its item i. When the spec
    uses no GraphOutput (a function that returns constants or its inputs), `compiled_fn` may be
    None and nothing is called. A BreakOutput spec continues past a graph break instead of
    returning (graph_break/emit.py): `resume_fns` holds one resume function per target of its plan.
    """
    if FACTS is None:
        raise CodegenError(f"codegen supports CPython {sorted(VERSIONS)}, not {PYTHON}")
    if original.co_flags & _GENERATOR_LIKE:
        raise CodegenError(f"{original.co_qualname}: generators and coroutines are not compiled")
    original_bc = bytecode.Bytecode.from_code(original)
    lineno = original.co_firstlineno
    em = _Emitter(original, lineno, _shared_specs(output_spec, side_effects))

    uses_graph = _uses_graph(output_spec) or _uses_graph(tuple(side_effects))
    # A compiled graph is called even where nothing reads its outputs and it takes no input: its
    # work may still matter (a random draw advances the generator the rest of the frame draws from).
    calls = compiled_fn is not None
    result_local = None
    temp = em.temp
    if calls:
        result_local = temp(_RESULT_LOCAL)
        em.call_const(compiled_fn, list(graph_inputs))
        em.emit("STORE_FAST", result_local)
    elif uses_graph:
        raise CodegenError("the output spec uses graph outputs but compiled_fn is None")
    loaded = _load_effects(em, side_effects, result_local, temp)
    if isinstance(output_spec, BreakOutput):
        emit_break(em, output_spec, result_local, resume_fns, loaded, _apply_effects)
    elif loaded:
        returned = temp("___tjc_return")
        em.build_output(output_spec, result_local)
        em.emit("STORE_FAST", returned)
        _apply_effects(em, loaded)
        em.emit("LOAD_FAST", returned)
        em.emit("RETURN_VALUE")
    else:
        em.build_output(output_spec, result_local)
        em.emit("RETURN_VALUE")

    new_bc = bytecode.Bytecode(_prologue(original_bc) + em.instrs)
    for attr in ("argcount", "posonlyargcount", "kwonlyargcount", "first_lineno", "name",
                 "qualname", "filename", "docstring", "flags"):
        setattr(new_bc, attr, getattr(original_bc, attr))
    new_bc.argnames = list(original_bc.argnames)
    new_bc.cellvars = list(original_bc.cellvars)
    new_bc.freevars = list(original_bc.freevars)
    code = new_bc.to_code()
    _check_compatible(original, code)
    return code


def _check_compatible(original: types.CodeType, code: types.CodeType) -> None:
    """The runtime's rules, checked here too so a codegen bug names itself at build time."""
    args = argument_names(original)
    problems = []
    if code.co_varnames[:len(args)] != args:
        problems.append(f"argument names {code.co_varnames[:len(args)]} != {args}")
    for attr in ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_flags", "co_cellvars",
                 "co_freevars", "co_name", "co_qualname", "co_filename", "co_firstlineno"):
        if getattr(code, attr) != getattr(original, attr):
            problems.append(f"{attr}: {getattr(code, attr)!r} != {getattr(original, attr)!r}")
    if problems:
        raise CodegenError(f"transformed code for {original.co_qualname} differs from the original: "
                           + "; ".join(problems))


def format_code(code: types.CodeType) -> str:
    """Listing for TJC_LOG=bytecode and for tests that compare with expected files.

    One symbolic instruction a line (the bytecode library's view: no offsets, no inline caches),
    with object addresses removed, so the same code prints the same text in every run.
    """
    lines = [f"code {code.co_qualname} (line {code.co_firstlineno})",
             f"  varnames: {code.co_varnames}"]
    if code.co_cellvars:
        lines.append(f"  cellvars: {code.co_cellvars}")
    if code.co_freevars:
        lines.append(f"  freevars: {code.co_freevars}")
    for instr in bytecode.Bytecode.from_code(code):
        if not isinstance(instr, Instr):
            continue   # labels and exception-table markers: the body has none
        if instr.arg is bytecode.UNSET:
            lines.append(f"    {instr.name}")
        else:
            lines.append(f"    {instr.name:<16} {_format_arg(instr.name, instr.arg)}")
    return "\n".join(lines) + "\n"


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _format_arg(opname: str, arg: Any) -> str:
    if isinstance(arg, str) and opname != "LOAD_CONST":
        return arg   # a variable or attribute name
    if isinstance(arg, CellVar):
        return f"cell {arg.name}"
    if isinstance(arg, FreeVar):
        return f"free {arg.name}"
    if isinstance(arg, tuple) and len(arg) == 2 and isinstance(arg[0], bool):
        return arg[1]   # (push_null / is_method flag, name): the flag is always False here
    text = _ADDRESS.sub("", repr(arg))
    return text if len(text) <= 60 else text[:57] + "..."
