"""What a trace produces: the contract between the tracer, guard/tree.py and pipeline/codegen.py.

The tracer (tracer/) fills a TraceResult; guard/tree.py turns its guards into a C++ guard tree;
pipeline/codegen.py builds the transformed code that loads `graph_inputs` from the frame, calls the compiled
graph and rebuilds the return value from `output`.
"""
from __future__ import annotations

import collections
import dataclasses
import enum
import types
from typing import Any

from .sources import Source


class GuardKind(enum.Enum):
    TYPE_MATCH = "type_match"        # value: the type (held weakly by the C++ guard)
    ID_MATCH = "id_match"            # value: the object (held weakly)
    EQUALS_MATCH = "equals_match"    # value: an immutable builtin (int, float, bool, str, None, tuple)
    NONE_MATCH = "none_match"        # value: None
    NOT_NONE = "not_none"
    BOOL_MATCH = "bool_match"        # value: bool
    LENGTH = "length"                # value: int
    DICT_KEYS = "dict_keys"          # value: tuple of keys in order
    SET_ITEMS = "set_items"          # value: tuple of a set's items in its iteration order
    TENSOR_MATCH = "tensor_match"    # value: an example tensor (not held by the guard)
    SAME_AS = "same_as"              # value: another Source that must reach this very object
                                     # (one tensor reached twice is one graph input)
    # Object identity relations between two sources, compared at check time and holding nothing
    # (OBJECT_ALIASING, csrc/guards/identity_relation.h): the trace read one source after a store
    # through the other, and is exact only while they alias as they did when compiled.
    DISTINCT_FROM = "distinct_from"  # value: another Source that must reach another object
    ALIAS_OF = "alias_of"            # value: another Source that must reach this very object
    # Not a check: the node's children are skipped while the dicts they read are unchanged
    # (csrc/guards/dict_tags.h); what tags cannot vouch for (TENSOR_MATCH, ...) runs every time.
    DICT_TAGS = "dict_tags"


@dataclasses.dataclass(frozen=True)
class GuardSpec:
    source: Source
    kind: GuardKind
    value: Any = None


# Output specs: how to rebuild what the original function returned.
#
# Identity is the identity of spec objects: one object the trace built (a list, a dict, a tuple, a
# set, a function, an object of a user class) has one spec object however many places reach it
# (the returned value, a side effect, the stack and locals at a break; the tracer's `once`), and
# codegen builds a spec object reached more than once the first time it is reached, keeps it in a
# temporary and loads it again everywhere else (codegen._shared_specs). Two objects have two spec
# objects, even where the specs are equal (two lists with the same items stay two lists), so
# nothing may merge equal specs. GraphOutput, SourceOutput and ConstantOutput of an immutable value
# load the very object every time they are built, and are built again where reached again.
@dataclasses.dataclass(frozen=True)
class GraphOutput:
    """The graph's output number `index`."""
    index: int


@dataclasses.dataclass(frozen=True)
class ConstantOutput:
    """A Python constant the trace computed (an int, a str, None, ...)."""
    value: Any


@dataclasses.dataclass(frozen=True)
class SourceOutput:
    """A value read from the frame and returned as is (loaded again at call time)."""
    source: Source


@dataclasses.dataclass(frozen=True)
class TupleOutput:
    items: tuple
    # A tuple subclass to rebuild (a namedtuple, torch.return_types.max, torch.Size); None: a tuple.
    cls: Any = None


@dataclasses.dataclass(frozen=True)
class ListOutput:
    items: tuple


@dataclasses.dataclass(frozen=True)
class DictOutput:
    items: tuple  # ((key constant, spec), ...) in order


@dataclasses.dataclass(frozen=True)
class FunctionOutput:
    """A function the trace made (a nested def, a lambda) in the frame, made again after the graph:
    `code`, closing over the frame's cells named `cells` (its own or its free variables), with
    `defaults` (a TupleOutput), `kwdefaults` (a DictOutput) and `annotations` (the flat
    ('name', annotation, ...) tuple MAKE_FUNCTION takes), or None."""
    code: Any
    cells: tuple = ()
    defaults: Any = None
    kwdefaults: Any = None
    annotations: Any = None


@dataclasses.dataclass(frozen=True)
class FrameCellOutput:
    """One of the frame's cells itself (its own or a free variable, by `name`), as a value: a cell
    that a function made in an inlined call closes over, shared with the frame after the graph."""
    name: str


@dataclasses.dataclass(frozen=True)
class ObjectOutput:
    """An object of a plain class the trace constructed (tracer/variables/python_objects/new_object.py), made
    again after the graph: `object.__new__(cls)` (cls: an output spec, its source), then its
    instance __dict__ filled with `names` = `values` (output specs), in that order."""
    cls: Any
    names: tuple
    values: tuple


@dataclasses.dataclass(frozen=True)
class CallOutput:
    """An object the trace constructed, made again after the graph by calling `fn` (an output spec,
    a class's source) with the keywords `names` = `values` (output specs): a HuggingFace
    ModelOutput (tracer/variables/python_objects/model_output.py)."""
    fn: Any
    names: tuple
    values: tuple


def built_dict(cls, items, default_factory=None):
    """An OrderedDict or defaultdict the trace built, made again after the graph by CallOutput
    from its items (a dict, in order) and, for a defaultdict, its factory."""
    if default_factory is not None or cls is collections.defaultdict:
        return cls(default_factory, items)
    return cls(items)


def rebuilt_dict_object(cls, base, items, attrs):
    """An instance of a dict or OrderedDict subclass the trace built, made again after the graph
    without running its class's __init__ or __setitem__ again: `cls.__new__(cls)`, its items
    stored through `base`'s own __setitem__ in order, then its instance __dict__."""
    obj = cls.__new__(cls)
    for key, value in items.items():
        base.__setitem__(obj, key, value)
    obj.__dict__.update(attrs)
    return obj


def rebuilt_list_object(cls, items):
    """An instance of a plain list subclass the trace built (no __init__ or __new__ of its own),
    made again after the graph: `cls.__new__(cls)` extended by its items, what `cls(items)` makes."""
    obj = cls.__new__(cls)
    list.extend(obj, items)
    return obj


def object_id(obj):
    """id(obj) of an object the trace built, taken after the graph from the object made again (the
    one every other reference to it gets)."""
    return id(obj)


def bound_method(function, instance):
    """`function` bound to `instance`: a method the trace held (a super() method, a class's
    function read through an object), made again after the graph by CallOutput."""
    return types.MethodType(function, instance)


def call_with(fn, args, kwargs):
    """`fn(*args, **kwargs)`: an object the trace made by a call, made again after the graph by
    CallOutput (a functools.partial, zip, enumerate or map over rebuilt parts, a generator not
    started yet from its function and arguments). With positional arguments only, the transformed
    code calls `fn` itself instead (codegen._positional_call): the same call, no frame of this."""
    return fn(*args, **kwargs)


def replay_set_method(target, name, args):
    """`set.<name>(target, *args)`: a change the trace made to a set read from the frame, made
    again on that very set after the graph (EffectKind.SET_METHOD), by set's own method."""
    if getattr(set, name)(target, *args) is NotImplemented:   # an operand that is not a set
        raise TypeError(f"set.{name} refused {args!r} (tracer bug)")


def reversed_at(seq, position):
    """`reversed(seq)` about to yield `seq[position]` (list_reverseiterator's own state), or
    exhausted for position -1: a reversed() the trace advanced, made again after the graph."""
    it = reversed(seq)
    it.__setstate__(position)
    return it


def cell_of(**contents):
    """A closure cell holding `contents=` (empty without it): a cell of a frame the trace inlined,
    made again after the graph for a function made there and closing over it."""
    return types.CellType(*contents.values())


def function_of(code, module, closure, defaults=None, kwdefaults=None, annotations=None):
    """A function made in a frame the trace inlined, made again after the graph over `module`'s
    globals and the cells `closure` (a tuple of cells made again, cell_of). `annotations`: the flat
    ('name', annotation, ...) tuple MAKE_FUNCTION takes."""
    fn = types.FunctionType(code, vars(module), code.co_name, defaults, closure)
    if kwdefaults:
        fn.__kwdefaults__ = kwdefaults
    if annotations:
        fn.__annotations__ = dict(zip(annotations[::2], annotations[1::2]))
    return fn


@dataclasses.dataclass(frozen=True)
class SuperOutput:
    """`super(cls, obj)`, made again after the graph: a super object the trace held on the stack
    at a break (its attribute is read by the bytecode that follows)."""
    cls: Any
    obj: Any


@dataclasses.dataclass(frozen=True)
class AttrOutput:
    """`base.name`: a bound method the trace held before calling it (`x.item`, `xs.append`)."""
    base: Any
    name: str


@dataclasses.dataclass(frozen=True)
class IterOutput:
    """An iterator part-way through a loop. `base`: a SourceOutput of what it iterates, advanced by
    `skip` items (the very object the frame iterates, so later changes to it show through), or None:
    an iterator over `items`, the remaining items (the trace built what it iterates)."""
    base: Any
    skip: int
    items: tuple = ()


@dataclasses.dataclass(frozen=True)
class EnteredContext:
    """A stack slot at a graph break that holds the `__exit__` BEFORE_WITH left for a grad-mode or
    autocast block the frame is inside (graph_break/__init__.py). It is not rebuilt as a value: the
    resume function enters the block again in its prologue: `enter()` (a constant: torch.no_grad,
    torch.enable_grad, or functools.partial(torch.autocast, *args)), then BEFORE_WITH."""
    enter: Any


@dataclasses.dataclass(frozen=True)
class ModeSwitch:
    """Run the cut instruction of a graph break with `set(inside)` before it and `set(outside)`
    after it, on both paths, normal and exception (`set`: torch._C._set_grad_enabled)."""
    set: Any
    inside: Any
    outside: Any


@dataclasses.dataclass(frozen=True)
class ContextSwitch:
    """Run the cut instruction of a graph break inside the context `enter()` makes, entered as a
    with statement enters it and exited with (None, None, None) after the instruction, on both
    paths (an autocast block: its exit restores the state its entry found, whatever that was)."""
    enter: Any


@dataclasses.dataclass(frozen=True)
class BreakOutput:
    """The frame continues past a graph break (graph_break/__init__.py): rebuild `stack` (bottom first; None
    where the stack held NULL, an EnteredContext where it held a grad-mode or autocast block's exit) and the
    locals `locals` ((name, spec), ...; a live local unbound at the break is left out and stays
    unbound), run `plan.instr` (inside `switches`, ModeSwitch and ContextSwitch steps entered in
    order and left in reverse, when inside grad-mode or autocast blocks), then
    call a resume function per target. `kw_names`: 3.11/3.12 keyword names of a pending CALL.
    `iter_slots`: stack positions holding a loop's iterator, rebuilt as the tuple of its remaining
    items (the resume function's prologue makes it an iterator again)."""
    plan: Any
    stack: tuple
    locals: tuple
    kw_names: tuple = ()
    reason: str = ""
    switches: tuple = ()
    iter_slots: tuple = ()


class EffectKind(enum.Enum):
    """What a replayed side effect does (tracer/side_effects.py records them; codegen replays them).
    `target` and `value` are output specs, `name` an attribute or global name."""
    SET_ATTR = "setattr"         # target.name = value (the type's own __setattr__ runs)
    DEL_ATTR = "delattr"         # del target.name
    # object.__setattr__(target, name, value) / object.__delattr__(target, name): a store a class's
    # own __setattr__/__delattr__ (traced) made through object's; replaying it with the class's
    # hook would run that hook a second time.
    OBJECT_SET_ATTR = "object_setattr"
    OBJECT_DEL_ATTR = "object_delattr"
    SET_GLOBAL = "set_global"    # global name = value, in the frame's globals
    DEL_GLOBAL = "del_global"    # del global name
    SET_CELL = "set_cell"        # the frame's own cell `name` = value
    SET_LIST = "set_list"        # target[:] = value: the list's final contents, same object
    SET_DICT = "set_dict"        # target.clear(); target.update(value): final items, in order
    SET_METHOD = "set_method"    # set.<name>(target, *value): one mutation of a frame's set, replayed
    ADVANCE_ITER = "advance_iter"  # next(target, None), value (an int) times: a frame iterator's steps
    # target(value), target a constant setter of global state (torch._C._set_grad_enabled): the
    # state the traced code leaves outside its blocks, where it differs from the frame's entry
    # state (a switch outside a with block); the graph itself always ends in the entry state.
    SET_STATE = "set_state"


@dataclasses.dataclass(frozen=True)
class SideEffect:
    kind: EffectKind
    target: Any = None           # an output spec (None for globals)
    name: str | None = None
    value: Any = None            # an output spec (None for deletions)


def walk(spec):
    """Every output spec in `spec`, itself included, depth first; `spec` may also be a sequence
    of SideEffects (their targets and values are walked). A spec reached twice is walked twice."""
    if isinstance(spec, (tuple, list)):
        for effect in spec:
            yield from walk(effect.target)
            yield from walk(effect.value)
        return
    if spec is None:
        return
    yield spec
    for part in parts(spec):
        yield from walk(part)


def parts(spec) -> list:
    """The output specs `spec` is built from, in the order codegen builds them (None left out)."""
    if isinstance(spec, (TupleOutput, ListOutput)):
        found = spec.items
    elif isinstance(spec, DictOutput):
        found = [item for _, item in spec.items]
    elif isinstance(spec, AttrOutput):
        found = [spec.base]
    elif isinstance(spec, IterOutput):
        found = [spec.base, *spec.items]
    elif isinstance(spec, SuperOutput):
        found = [spec.cls, spec.obj]
    elif isinstance(spec, FunctionOutput):
        found = [spec.defaults, spec.kwdefaults, spec.annotations]
    elif isinstance(spec, ObjectOutput):
        found = [spec.cls, *spec.values]
    elif isinstance(spec, CallOutput):
        found = [spec.fn, *spec.values]
    elif isinstance(spec, BreakOutput):   # EnteredContext slots are no output specs
        found = [i for i in spec.stack if not isinstance(i, EnteredContext)] + [i for _, i in spec.locals]
    else:
        found = []
    return [part for part in found if part is not None]


@dataclasses.dataclass
class TraceResult:
    graph: Any                    # torch.fx.GraphModule; placeholders in the order of graph_inputs
    graph_inputs: list            # [Source]: loaded from the frame at call time, in placeholder order
    example_inputs: list          # [torch.Tensor]: the fake tensors the trace ran on, same order
    output: Any                   # an output spec (GraphOutput, ConstantOutput, TupleOutput, ...)
    guards: list                  # [GuardSpec]: every fact the trace relied on
    # SideEffects on objects outside the graph, in program order: replayed after the graph call,
    # before returning or before the instruction at a graph break.
    side_effects: tuple = ()
    # shape_guards.ShapeGuards when the trace had symbolic sizes (tracer/fake_shapes.py) or read an
    # int no other guard pins (exact_reads), else None: as they stood when the trace ended.
    shape_guards: Any = None
    # The trace's FakeShapes (its ShapeEnv), kept past the trace because a backend that compiles
    # symbolically (inductor) adds guards and replacements to it; convert_frame builds the guards
    # from it after the backend compiled (tracer.final_shape_guards), then releases it.
    shape_state: Any = None
    # ((shape_guards.SymbolBinding, int), ...): ints the trace read from an input tensor that no
    # TENSOR_MATCH checks (its storage_offset()), each guarded to equal the value read.
    exact_reads: tuple = ()
    # Graph-input mutations the graph performs are part of the graph (in-place ops on inputs).


def has_tensor_work(graph) -> bool:
    """Whether a trace's graph (a GraphModule) computes anything: placeholders and the output node
    alone mean the frame reads shapes, returns an input as is, or does pure Python work, and no
    graph is compiled or called for it."""
    return any(node.op not in ("placeholder", "output") for node in graph.graph.nodes)


class Unsupported(Exception):
    """The tracer cannot continue: the frame runs its original code and the reason is logged."""

    def __init__(self, reason: str, *, filename: str = "?", lineno: int = 0, instruction: str = ""):
        self.reason = reason
        self.filename = filename
        self.lineno = lineno
        self.instruction = instruction
        # Set by the root translator when the failure happened at one of its instructions (or in a
        # call it inlined there): (decoded index, how many times the trace had reached it). The
        # frame may then be cut there (graph_break/plan.py); None: it cannot be cut.
        self.break_at = None
        # Set when a translator of an inlined call located it (raised inside a callee).
        self.in_callee = False
        # Set by the root translator: an exception the trace models leaves the frame (no try
        # block of it catches it) and the trace did no tensor work before it. The frame, run as
        # written, does all the trace saw: it is a frame without tensor work (pipeline/convert_frame.py).
        self.leaves_without_tensor_work = False
        where = f"{filename}:{lineno}" + (f" ({instruction})" if instruction else "")
        super().__init__(f"{reason} at {where}")


class TraceBudgetExceeded(Unsupported):
    """The trace ran more instructions than `config.trace_budget` (a long Python loop unrolled one
    instruction at a time): the whole frame runs its original code. It is never a graph break
    (`break_at` stays None whoever sets it): cutting the frame would trace the same loop again up
    to the cut, and its resume function again after it."""

    @property
    def break_at(self):
        return None

    @break_at.setter
    def break_at(self, value):
        pass


def _caught_in_the_compiler(e: BaseException) -> bool:
    """Whether `e` was raised inside a compile: the first entry of its traceback is the frame that
    handles it, a frame of this package for the compiler's own failures (None: none is left)."""
    tb = e.__traceback__
    return tb is None or str(tb.tb_frame.f_globals.get("__name__")).partition(".")[0] == __name__.partition(".")[0]


class FloatSymbolGuard(Unsupported):
    """A guard on a float argument traced as a symbol (frontend/dynamic.py FramePlan.scalar_is_dynamic),
    which the C++ shape guard cannot compute: the frame is compiled again with its floats as
    constants, guarded by value, from then on."""


def drop_tracebacks(e: BaseException) -> None:
    """Drop the tracebacks of `e` and its chain: an exception object can outlive the failure (a
    backend that keeps and re-raises its error), and its traceback would keep the frames of the
    compile, and the user's arguments in them, alive. The chain stops at an exception the compile
    did not catch: a frame compiled inside the user's `except` or `with` block sees the user's
    exception as the __context__ of every failure, and it must keep its traceback."""
    seen, todo = set(), [e]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen or not _caught_in_the_compiler(e):
            continue
        seen.add(id(e))
        e.__traceback__ = None
        todo += (e.__cause__, e.__context__)
