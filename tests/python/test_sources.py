"""guard/sources.py: every kind of Source means the same thing in each of its homes.

For a table of example sources over a toy frame, the value from `load`, the value the emitted
bytecode returns when the runtime runs it, and the value the C++ guard accessor reads (in mapping
and in frame mode) are the same object, and the C++ node prints the source's own text. The table
must hold an example of every concrete Source class: a new kind that is not added here fails
test_every_source_kind_has_an_example.

Torch-free: runs on 3.11, 3.12, 3.13.
"""
import types

import pytest

from torch_jit_cache.pipeline import codegen
from torch_jit_cache import runtime
from torch_jit_cache.guard import sources
from torch_jit_cache.guard.tree import GuardBuilder
from torch_jit_cache.guard.sources import (ApplySource, AttrSource, BuiltinSource, CallSource, ChainedSource,
                                           ClosureSource, ComputedSource, DictItemSource, FrameCellSource, FrameValues,
                                           GlobalSource,
                                           InstanceDictSource, ItemSource, LoadedWholeSource, LocalSource,
                                           MethodCallSource, RootSource, Source, TypeSource)
from torch_jit_cache.guard.trace_result import SourceOutput

pytestmark = pytest.mark.usefixtures("fresh_runtime")


class Box:
    """A distinct, weakly referenceable value for every source (so identity says which was read)."""

    def __init__(self, label, **attrs):
        self.label = label
        self.__dict__.update(attrs)

    def __repr__(self):
        return f"Box({self.label!r})"


def _make_toy():
    captured = Box("captured", payload=Box("captured.payload"))

    def toy(x, cell_arg, d, xs):
        # `cell_arg` is an argument that is also a cell variable (loaded through its cell).
        return captured, (lambda: cell_arg)

    return toy


_TOY = _make_toy()
_BUILTINS = {"toy_builtin": Box("builtin")}
_GLOBALS = {"__builtins__": _BUILTINS,
            "GLOBAL_BOX": Box("global", items=(Box("items[0]"), Box("items[1]")))}
_SNAPSHOT = Box("x.snapshot()")
_LOOKED_UP = {("payload", 1): Box("x.lookup('payload', default=1)")}
_ARGS = {"x": Box("x", payload=Box("x.payload"), snapshot=lambda: _SNAPSHOT,
                  lookup=lambda name, default=None: _LOOKED_UP[name, default]), "cell_arg": Box("cell_arg"),
         "d": {"k": Box("d['k']"), 3: Box("d[3]")}, "xs": [Box("xs[0]"), Box("xs[1]")]}


def _toy_function():
    """The toy as a function over the test's own globals and builtins."""
    return types.FunctionType(_TOY.__code__, _GLOBALS, "toy", None, _TOY.__closure__)


def _frame_values() -> FrameValues:
    f_locals = dict(_ARGS, captured=_TOY.__closure__[0].cell_contents)
    return FrameValues(f_locals, _GLOBALS, _BUILTINS)


EXAMPLES = [
    LocalSource("x"),
    LocalSource("cell_arg"),
    GlobalSource("GLOBAL_BOX"),
    BuiltinSource("toy_builtin"),
    ClosureSource("captured"),
    AttrSource(LocalSource("x"), "payload"),
    AttrSource(ClosureSource("captured"), "payload"),
    ItemSource(LocalSource("d"), "k"),
    ItemSource(LocalSource("d"), 3),
    ItemSource(LocalSource("xs"), -1),
    ItemSource(AttrSource(GlobalSource("GLOBAL_BOX"), "items"), 0),
    ItemSource(InstanceDictSource(LocalSource("x")), "payload"),
    MethodCallSource(LocalSource("x"), "snapshot"),
    DictItemSource(LocalSource("d"), "k"),
    CallSource(AttrSource(LocalSource("x"), "lookup"), ("payload",), (("default", 1),)),
]

_ABSTRACT = {Source, RootSource, ChainedSource, LoadedWholeSource}


def _pick(box, name):
    """A function of the compiler's, as ComputedSource calls one: here it returns an attribute, so
    that identity says the computed value is the one expected."""
    return getattr(box, name)


# Computed at call time, never guarded (ComputedSource): checked on their own below.
COMPUTED = [ComputedSource(LocalSource("x"), _pick, ("payload",)),
            ComputedSource(AttrSource(GlobalSource("GLOBAL_BOX"), "items"), _pick, ("__class__",))]


def _kinds(cls=Source):
    for sub in cls.__subclasses__():
        if sub.__module__ == sources.__name__:
            yield sub
            yield from _kinds(sub)


def test_every_source_kind_has_an_example():
    concrete = {k for k in _kinds() if k not in _ABSTRACT}
    assert concrete - {type(s) for s in EXAMPLES + COMPUTED + UNHOOKED + APPLIED + CELLS} == set()
    assert all(issubclass(k, (RootSource, ChainedSource)) for k in concrete)


def _guarded_by_identity(source):
    """A root GuardManager with one ID_MATCH on `source`'s node, and that node."""
    builder = GuardBuilder()
    node = builder.node(source)
    node.id_match(source.load(_frame_values()))
    return builder.root, node


@pytest.mark.parametrize("source", EXAMPLES, ids=str)
def test_load_emit_and_guard_agree(source):
    frame = _frame_values()
    expected = source.load(frame)
    assert isinstance(expected, Box)
    assert sources.load_source(source, frame.f_locals, frame.f_globals, frame.f_builtins) is expected
    code = _TOY.__code__
    assert sources.unreachable_root(source, codegen.argument_names(code), code.co_freevars,
                                    _GLOBALS, _BUILTINS) is None

    # The C++ accessor, in mapping mode: reads the same object and prints the same text.
    root, node = _guarded_by_identity(source)
    assert node.source == str(source)
    assert root.explain(frame.f_locals, _GLOBALS) is None
    assert root.check(frame.f_locals, _GLOBALS)

    # The emitted bytecode, run by the runtime in a shadow frame; the second call is a cache hit
    # only when the guard tree, reading the frame itself (frame mode), finds the same object.
    new_code = codegen.build_transformed_code(code, None, [], SourceOutput(source))
    fn = _toy_function()

    def jit(frame_, entries):
        if frame_.f_code is code:
            return runtime.GuardedCode(new_code, _guarded_by_identity(source)[0])
        return runtime.RUN_ORIGINAL

    with runtime.eval_frame(jit):
        first = fn(**_ARGS)
        second = fn(**_ARGS)
    assert first is expected and second is expected
    (entry,) = runtime.cache_entries(fn)
    assert entry.hits == 1  # the frame-mode guard read the same object


def test_a_different_object_fails_the_guard():
    # The agreement above is not vacuous: each accessor fails on a frame where its object differs.
    frame = _frame_values()
    for source in EXAMPLES:
        root, _ = _guarded_by_identity(source)
        assert root.check(frame.f_locals, _GLOBALS)
        changed = {"x": Box("x2", payload=Box("p2")), "cell_arg": Box("c2"), "d": {"k": Box(1), 3: Box(2)},
                   "xs": [Box(3), Box(4)], "captured": Box("cap2", payload=Box("p3"))}
        builtins = {"toy_builtin": Box("b2")}
        glob = {"__builtins__": builtins, "GLOBAL_BOX": Box("g2", items=(Box(5), Box(6)))}
        assert not root.check(changed, glob), source


class Hooked:
    """A class whose own __getattribute__ counts every call: the sources below must not run it."""
    calls = 0

    def __init__(self):
        object.__setattr__(self, "payload", Box("hooked.payload"))

    def __getattribute__(self, name):
        type(self).calls += 1
        return object.__getattribute__(self, name)


# Read without the class's own __getattribute__ (the instance __dict__, the type): what a guard on
# an object whose hooks the tracer followed reads.
UNHOOKED = [InstanceDictSource(LocalSource("x")), TypeSource(LocalSource("x"))]


@pytest.mark.parametrize("source", UNHOOKED, ids=str)
def test_unhooked_sources_load_emit_and_guard_alike_without_running_the_hook(source):
    obj = Hooked()
    args = dict(_ARGS, x=obj)
    expected = source.load(FrameValues(args, _GLOBALS, _BUILTINS))
    assert expected is (object.__getattribute__(obj, "__dict__") if type(source) is InstanceDictSource
                        else Hooked)
    builder = GuardBuilder()
    node = builder.node(source)
    assert node.source == str(source)
    if type(source) is TypeSource:
        node.id_match(Hooked)
    else:
        node.dict_keys(("payload",))
    code = _TOY.__code__
    new_code = codegen.build_transformed_code(code, None, [], SourceOutput(source))
    fn = _toy_function()
    Hooked.calls = 0

    def jit(frame_, entries):
        if frame_.f_code is code:
            return runtime.GuardedCode(new_code, builder.root)
        return runtime.RUN_ORIGINAL

    with runtime.eval_frame(jit):
        first = fn(**args)
        second = fn(**args)
    assert first is expected and second is expected
    assert runtime.cache_entries(fn)[0].hits == 1
    assert Hooked.calls == 0
    assert not builder.root.check(dict(args, x=Box("other")), _GLOBALS)


@pytest.mark.parametrize("source", COMPUTED, ids=str)
def test_a_computed_source_loads_and_emits_the_same_and_refuses_a_guard(source):
    frame = _frame_values()
    expected = _pick(source.base.load(frame), *source.args)
    assert source.load(frame) is expected
    assert str(source) == f"_pick({source.base}, {source.args[0]!r})"
    code = _TOY.__code__
    new_code = codegen.build_transformed_code(code, None, [], SourceOutput(source))
    fn = _toy_function()

    def jit(frame_, entries):
        return runtime.GuardedCode(new_code, runtime.GuardManager()) if frame_.f_code is code else runtime.RUN_ORIGINAL

    with runtime.eval_frame(jit):
        assert fn(**_ARGS) is expected
    with pytest.raises(TypeError, match="computed at call time"):
        GuardBuilder().node(source)


# A builtin type applied to the value (ApplySource): `tuple(od)`, an OrderedDict's own order.
APPLIED = [ApplySource(LocalSource("od"), tuple)]


def test_an_applied_type_loads_emits_and_guards_alike():
    import collections

    source = APPLIED[0]
    od = collections.OrderedDict(a=1, b=2)
    od.move_to_end("a")
    frame = FrameValues({"od": od}, _GLOBALS, _BUILTINS)
    assert source.load(frame) == ("b", "a")
    builder = GuardBuilder()
    node = builder.node(source)
    assert node.source == str(source)
    node.equals_match(("b", "a"))
    assert builder.root.check({"od": od}, _GLOBALS)
    assert not builder.root.check({"od": collections.OrderedDict(a=1, b=2)}, _GLOBALS)

    def toy(od):
        return od
    new_code = codegen.build_transformed_code(toy.__code__, None, [], SourceOutput(source))
    assert types.FunctionType(new_code, _GLOBALS)(od) == ("b", "a")


# The cell object of a free variable itself (FrameCellSource): read in frame mode only, compared by
# identity with the same cell reached through a function's __closure__.
CELLS = [FrameCellSource("captured")]


def test_a_frame_cell_source_loads_emits_and_guards_the_cell_itself():
    source = CELLS[0]
    cell = _TOY.__closure__[0]
    fn = _toy_function()
    args = dict(_ARGS, x=fn)   # x: a function over the very cell, reached as L['x'].__closure__[0]
    frame = FrameValues(args, _GLOBALS, _BUILTINS, cells={"captured": cell})
    assert source.load(frame) is cell
    code = _TOY.__code__
    assert sources.unreachable_root(source, codegen.argument_names(code), code.co_freevars,
                                    _GLOBALS, _BUILTINS) is None
    assert sources.unreachable_root(FrameCellSource("x"), codegen.argument_names(code), code.co_freevars,
                                    _GLOBALS, _BUILTINS) == "cell(C['x']): 'x' is not a free variable"

    def relation():
        builder = GuardBuilder()
        node = builder.node(source)
        assert node.source == str(source) == "cell(C['captured'])"
        other = builder.node(ItemSource(AttrSource(LocalSource("x"), "__closure__"), 0))
        builder.root.identity_relation([node, other], [0, 0])
        return builder.root

    assert not relation().check(args, _GLOBALS)   # mapping mode has no cells: missing
    new_code = codegen.build_transformed_code(code, None, [], SourceOutput(source))

    misses = []

    def jit(frame_, entries):
        if frame_.f_code is code:
            misses.append(1)
            if len(misses) == 1:
                return runtime.GuardedCode(new_code, relation())
        return runtime.RUN_ORIGINAL

    with runtime.eval_frame(jit):
        first = fn(**args)
        second = fn(**args)
        third = fn(**dict(args, x=_make_toy()))   # a function over another cell: the relation fails
    assert first is cell and second is cell and type(third) is tuple   # the third ran as written
    assert len(misses) == 2
    (entry,) = runtime.cache_entries(fn)
    assert entry.hits == 1
