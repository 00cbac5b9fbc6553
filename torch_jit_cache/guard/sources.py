"""Sources: where a value the tracer read came from, relative to the frame.

Every value read from the frame keeps its source, so that (1) each fact the trace relied on becomes
a guard on that source (guard/tree.py), and (2) the transformed code can load graph inputs from the
frame at call time (pipeline/codegen.py). Sources are immutable, hashable and print as users read them:
`L['x']`, `G['SCALE']`, `C['scale']` (a closure variable), `L['self'].fc1.weight`, `L['xs'][2]`.

Each kind of source is one class, and that class is the one home of what the kind means:

  name()                the text users read; the C++ accessor prints the same (guard failures)
  load(frame)           the value at call time, from a FrameValues (tests, convert_frame's resolve)
  emit_load(emitter)    the bytecode that loads it, through codegen's _Emitter primitives (the
                        emitter keeps the per-version opcode tables)
  guard_node(parent)    the C++ guard tree node reading it: `parent` is the root GuardManager for a
                        RootSource, the node of `base` for a ChainedSource
  unreachable(...)      RootSource only: why the frame cannot reach it, or None

A RootSource reads the frame itself; a ChainedSource takes one step from the value of its `base`
(load_step / emit_step / guard_node on the base's node) and inherits the rest. Adding a kind means
writing one class; tests/python/test_sources.py checks that every concrete class is in its table of
examples and that load, the emitted bytecode and the C++ accessor agree on each.
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping

from .. import _C


@dataclasses.dataclass(frozen=True, eq=False)
class FrameValues:
    """What sources are loaded from: a frame's arguments (and, for free variables, their cell
    contents) by name, its globals, its builtins (a dict or the builtins module), and its free
    variables' cells themselves by name (where the caller has them)."""
    f_locals: Mapping
    f_globals: Mapping
    f_builtins: Any
    cells: Mapping = dataclasses.field(default_factory=dict)

    @property
    def builtins_dict(self) -> Mapping:
        return self.f_builtins if isinstance(self.f_builtins, dict) else vars(self.f_builtins)


@dataclasses.dataclass(frozen=True)
class Source:
    # Every source has `base`: the source it takes a step from (ChainedSource), or None (RootSource).

    def name(self) -> str:
        raise NotImplementedError(type(self).__name__)

    def __str__(self) -> str:
        return self.name()

    @property
    def root(self) -> "RootSource":
        """The frame-level source (LocalSource, GlobalSource, ...) this one hangs from."""
        raise NotImplementedError(type(self).__name__)

    def load(self, frame: FrameValues) -> Any:
        raise NotImplementedError(type(self).__name__)

    def emit_load(self, em) -> None:
        raise NotImplementedError(type(self).__name__)

    def guard_node(self, parent):
        raise NotImplementedError(type(self).__name__)

    def is_frame_input(self) -> bool:
        """Whether the value is an argument of the frame, or found in a container that is (what
        dynamic=True understands by "input"; an attribute of anything is not)."""
        return False


@dataclasses.dataclass(frozen=True)
class RootSource(Source):
    """A value the frame holds itself: an argument, a global, a builtin, a free variable."""
    base: ClassVar[None] = None

    @property
    def root(self) -> "RootSource":
        return self

    def unreachable(self, arguments, freevars, f_globals, builtins: Mapping) -> str | None:
        """Why this is not bound when the (shadow) frame starts, or None."""
        raise NotImplementedError(type(self).__name__)


@dataclasses.dataclass(frozen=True)
class ChainedSource(Source):
    """One step (an attribute, an item, ...) from the value of `base`."""
    base: Source

    @property
    def root(self) -> RootSource:
        return self.base.root

    def with_base(self, base: Source) -> "ChainedSource":
        """The same step taken from another base (fast_sources rewrites bases)."""
        return dataclasses.replace(self, base=base)

    def load(self, frame: FrameValues) -> Any:
        return self.load_step(self.base.load(frame))

    def emit_load(self, em) -> None:
        self.base.emit_load(em)
        self.emit_step(em)

    def load_step(self, value: Any) -> Any:
        """This step applied to the base's value."""
        raise NotImplementedError(type(self).__name__)

    def emit_step(self, em) -> None:
        """Bytecode taking this step, with the base's value on top of the stack."""
        raise NotImplementedError(type(self).__name__)


@dataclasses.dataclass(frozen=True)
class LoadedWholeSource(ChainedSource):
    """A step whose bytecode loads its base itself (a call with the base as an argument: `type(x)`,
    `dict.__getitem__(d, k)`): its emit_load emits the whole chain, and it is never a step that
    another's bytecode takes from the base's value on the stack."""

    def emit_load(self, em) -> None:
        raise NotImplementedError(type(self).__name__)

    def emit_step(self, em) -> None:
        raise TypeError(f"{self.name()} is loaded whole (emit_load), not as a step")


@dataclasses.dataclass(frozen=True)
class LocalSource(RootSource):
    """An argument of the frame (only arguments are bound when a frame starts)."""
    local_name: str

    def name(self) -> str:
        return f"L[{self.local_name!r}]"

    def load(self, frame: FrameValues) -> Any:
        return frame.f_locals[self.local_name]

    def emit_load(self, em) -> None:
        em.load_argument(self, self.local_name)

    def guard_node(self, parent):
        return parent.local(self.local_name)

    def unreachable(self, arguments, freevars, f_globals, builtins) -> str | None:
        return None if self.local_name in arguments else f"{self.local_name!r} is not an argument"

    def is_frame_input(self) -> bool:
        return True


@dataclasses.dataclass(frozen=True)
class GlobalSource(RootSource):
    """A name in the function's globals."""
    global_name: str

    def name(self) -> str:
        return f"G[{self.global_name!r}]"

    def load(self, frame: FrameValues) -> Any:
        return frame.f_globals[self.global_name]

    def emit_load(self, em) -> None:
        em.load_global(self.global_name)

    def guard_node(self, parent):
        return parent.global_(self.global_name)

    def unreachable(self, arguments, freevars, f_globals, builtins) -> str | None:
        return None if self.global_name in f_globals else f"{self.global_name!r} is not a global"


@dataclasses.dataclass(frozen=True)
class BuiltinSource(RootSource):
    """A name found in the function's builtins (not shadowed by a global)."""
    builtin_name: str

    def name(self) -> str:
        return f"B[{self.builtin_name!r}]"

    def load(self, frame: FrameValues) -> Any:
        return frame.builtins_dict[self.builtin_name]

    def emit_load(self, em) -> None:
        # LOAD_GLOBAL looks in the globals, then the builtins: a BuiltinSource is by contract not
        # shadowed by a global (unreachable() refuses one that is), so this finds the builtin.
        em.load_global(self.builtin_name)

    def guard_node(self, parent):
        return parent.builtin(self.builtin_name)

    def unreachable(self, arguments, freevars, f_globals, builtins) -> str | None:
        if self.builtin_name in f_globals or self.builtin_name not in builtins:
            return f"{self.builtin_name!r} is not an unshadowed builtin"
        return None


@dataclasses.dataclass(frozen=True)
class ClosureSource(RootSource):
    """The contents of a free variable's cell (the function's __closure__)."""
    free_name: str

    def name(self) -> str:
        return f"C[{self.free_name!r}]"

    def load(self, frame: FrameValues) -> Any:
        return frame.f_locals[self.free_name]

    def emit_load(self, em) -> None:
        em.load_free(self, self.free_name)

    def guard_node(self, parent):
        return parent.closure(self.free_name)

    def unreachable(self, arguments, freevars, f_globals, builtins) -> str | None:
        return None if self.free_name in freevars else f"{self.free_name!r} is not a free variable"


@dataclasses.dataclass(frozen=True)
class FrameCellSource(RootSource):
    """The cell object of one of the frame's free variables, not its contents: what an identity
    relation (ALIAS_OF, DISTINCT_FROM) compares with a cell reached through a function's
    `__closure__`, so that a store through one path is known to be, or not to be, what the other
    reads at every later call."""
    free_name: str

    def name(self) -> str:
        return f"cell(C[{self.free_name!r}])"

    def load(self, frame: FrameValues) -> Any:
        return frame.cells[self.free_name]

    def emit_load(self, em) -> None:
        em.load_free_cell(self, self.free_name)

    def guard_node(self, parent):
        return parent.closure_cell(self.free_name)

    def unreachable(self, arguments, freevars, f_globals, builtins) -> str | None:
        return None if self.free_name in freevars else f"{self.free_name!r} is not a free variable"


@dataclasses.dataclass(frozen=True)
class AttrSource(ChainedSource):
    attr: str

    def name(self) -> str:
        return f"{self.base.name()}.{self.attr}"

    def load_step(self, value: Any) -> Any:
        return getattr(value, self.attr)

    def emit_step(self, em) -> None:
        em.load_attr(self.attr)

    def guard_node(self, parent):
        return parent.attr(self.attr)


@dataclasses.dataclass(frozen=True)
class ItemSource(ChainedSource):
    """base[key] for an immutable builtin key (int, str, ...)."""
    key: Any

    def name(self) -> str:
        return f"{self.base.name()}[{self.key!r}]"

    def load_step(self, value: Any) -> Any:
        return value[self.key]

    def emit_step(self, em) -> None:
        em.subscript_const(self.key)

    def guard_node(self, parent):
        return parent.item(self.key)

    def is_frame_input(self) -> bool:
        return self.base.is_frame_input()


@dataclasses.dataclass(frozen=True)
class DictItemSource(LoadedWholeSource):
    """dict's own item `key` of the base, a dict or a dict subclass object, read without running
    the class's own __getitem__ (or __missing__): a guard on an object whose class hook the tracer
    followed must not run that hook again (transformers' ACT2FN builds a module on each read)."""
    key: Any

    def name(self) -> str:
        return f"dict.__getitem__({self.base.name()}, {self.key!r})"

    def load_step(self, value: Any) -> Any:
        return dict.__getitem__(value, self.key)

    def emit_load(self, em) -> None:
        em.call_const_with(dict.__getitem__, [lambda: self.base.emit_load(em), lambda: em.const(self.key)])

    def guard_node(self, parent):
        return parent.dict_item(self.key)


@dataclasses.dataclass(frozen=True)
class ApplySource(LoadedWholeSource):
    """fn(base) for a builtin type `fn`: `tuple(od)`, an OrderedDict's keys in its own order (which
    no read of its dict part gives: `move_to_end` changes only the OrderedDict's list). Only built
    under a guard on the base's exact type, whose `fn(base)` runs no code of the user's
    (dict_subclass_reads.guarded_keys)."""
    fn: type

    def name(self) -> str:
        return f"apply({self.base.name()}, {self.fn!r})"

    def load_step(self, value: Any) -> Any:
        return self.fn(value)

    def emit_load(self, em) -> None:
        em.call_const_with(self.fn, [lambda: self.base.emit_load(em)])

    def guard_node(self, parent):
        return parent.apply(self.fn)


class ObjectId:
    """`ObjectId(obj)` is `id(obj)`, a plain int. A type, so that ApplySource can read the id of an
    object no identity guard may hold (a list or dict of the frame cannot be weakly referenced):
    EQUALS_MATCH on `apply(source, ObjectId)` pins the very number the trace used for `id(obj)`,
    and reading it runs no code of the user's. It lives as long as the process (vouched below)."""
    __slots__ = ()

    def __new__(cls, obj):
        return id(obj)


_C.vouch_process_lived(ObjectId)


@dataclasses.dataclass(frozen=True)
class InstanceDictSource(LoadedWholeSource):
    """The base's instance __dict__ as object's lookup finds it (`vars(x)`), read without running
    the class's own __getattribute__: a guard on an object whose class hook the tracer followed
    must not run that hook again (it may count, log or answer otherwise)."""

    def name(self) -> str:
        return f"vars({self.base.name()})"

    def load_step(self, value: Any) -> Any:
        return object.__getattribute__(value, "__dict__")

    def emit_load(self, em) -> None:
        em.call_const_with(object.__getattribute__, [lambda: self.base.emit_load(em), lambda: em.const("__dict__")])

    def guard_node(self, parent):
        return parent.instance_dict()


@dataclasses.dataclass(frozen=True)
class TypeSource(LoadedWholeSource):
    """type(base): the class, read without the `__class__` lookup a class's own __getattribute__
    would answer."""

    def name(self) -> str:
        return f"type({self.base.name()})"

    def load_step(self, value: Any) -> Any:
        return type(value)

    def emit_load(self, em) -> None:
        em.call_const_with(type, [lambda: self.base.emit_load(em)])

    def guard_node(self, parent):
        return parent.type()


@dataclasses.dataclass(frozen=True)
class MethodCallSource(LoadedWholeSource):
    """base.method(): a method called without arguments, of the builtin types whose such method
    reads the object's state and runs no other code (a weakref's `__call__`: its referent or None;
    a builtin iterator's `__reduce__`: what it iterates and how far it got). Only built under a
    guard on the base's exact type (tracer/variables/collections/frame_iterators.py, weakrefs.py), which the
    C++ tree checks before reading this child."""
    method: str

    def name(self) -> str:
        return f"{self.base.name()}.{self.method}()"

    def load_step(self, value: Any) -> Any:
        return getattr(value, self.method)()

    def emit_load(self, em) -> None:
        em.call_with(lambda: (self.base.emit_load(em), em.load_attr(self.method)), [])

    def guard_node(self, parent):
        return parent.call_method(self.method)


def call_with(fn, args: tuple, kwargs: tuple):
    """fn(*args, **dict(kwargs)): CallSource's step, a constant of the compiled code."""
    return fn(*args, **dict(kwargs))


@dataclasses.dataclass(frozen=True)
class CallSource(LoadedWholeSource):
    """base(*args, **dict(kwargs)) with constant arguments (kwargs as (name, value) pairs), of a
    callable whose result for the same arguments is fixed by its state until that changes (a
    functools.lru_cache wrapper: its cache). Only built under a guard on the base's identity
    (tracer/variables/builtin_functions/lru_cache_calls.py), which the C++ tree checks before
    reading this child."""
    args: tuple
    kwargs: tuple = ()

    def name(self) -> str:
        return f"call({self.base.name()}, {(self.args, self.kwargs)!r})"

    def load_step(self, value: Any) -> Any:
        return call_with(value, self.args, self.kwargs)

    def emit_load(self, em) -> None:
        em.call_const_with(call_with, [lambda: self.base.emit_load(em), lambda: em.const(self.args),
                                       lambda: em.const(self.kwargs)])

    def guard_node(self, parent):
        return parent.call((self.args, self.kwargs))


@dataclasses.dataclass(frozen=True)
class ComputedSource(LoadedWholeSource):
    """fn(the base's value, *args): a value the compiled code computes at call time from one the
    frame reaches, with a function of the compiler's (FSDP2's local shard of a parameter, with its
    gradient averaged: tracer/variables/parallel/fsdp2.py). Never guarded itself (no C++ accessor calls
    functions): guards read what it is computed from."""
    fn: Any
    args: tuple = ()

    def name(self) -> str:
        extra = "".join(f", {a!r}" for a in self.args)
        return f"{getattr(self.fn, '__name__', self.fn)}({self.base.name()}{extra})"

    def load_step(self, value: Any) -> Any:
        return self.fn(value, *self.args)

    def emit_load(self, em) -> None:
        em.call_const_with(self.fn, [lambda: self.base.emit_load(em)] + [lambda a=a: em.const(a) for a in self.args])

    def guard_node(self, parent):
        raise TypeError(f"{self.name()} is computed at call time: guards read what it is computed from")


def load_source(source: Source, f_locals, f_globals, f_builtins) -> Any:
    """The value `source` names in a frame given by its locals (arguments and, for free variables,
    their cell contents, by name), globals and builtins. Used by tests and by convert_frame."""
    return source.load(FrameValues(f_locals, f_globals, f_builtins))


def unreachable_root(source: Source, arguments, freevars, f_globals, f_builtins) -> str | None:
    """Why the transformed code or a guard could not reach `source` from the frame, or None.

    Both start from the frame: its arguments (the only locals bound when it starts), its free
    variables, its globals and builtins. A source rooted anywhere else (a module the user's code
    never imported, say) would raise NameError or fail its guard on every call.
    """
    builtins = FrameValues({}, f_globals, f_builtins).builtins_dict
    why = source.root.unreachable(arguments, freevars, f_globals, builtins)
    return None if why is None else f"{source}: {why}"
