"""Context managers the tracer enters: grad modes (`with torch.no_grad()`, `torch.enable_grad()`,
`torch.set_grad_enabled(flag)`, functions decorated with `@torch.no_grad()`/`@torch.enable_grad()`)
and autocast (`with torch.autocast("cpu", ...)`, `torch.amp.autocast(...)`).

Each enters a grad mode and restores the mode it found on exit. The trace follows that as eager
does: entering sets the mode (OutputGraph.set_grad_mode: the real mode too, so the example ops and
`torch.is_grad_enabled()` see it; the graph gets a `torch._C._set_grad_enabled` node before its
next op), BEFORE_WITH pushes a GradModeExitVariable where the interpreter keeps the bound
`__exit__`, and calling it with (None, None, None) restores the previous mode. The exception path
of a block is never traced (a raise in a traced frame is Unsupported).

Autocast blocks the same way, with their own state: entering one enters a real `torch.autocast`
with the same arguments while the block is traced (OutputGraph.enter_autocast), so the example ops
get eager's dtypes, and the graph gets `torch.amp.autocast_mode._enter_autocast(*args)` before the
block's first op and `_exit_autocast(that node)` after its last, as TorchDynamo records it. The
arguments must be constants (or guarded values): device "cpu" or "cuda" (HF's rotary embeddings
enter `torch.autocast(x.device.type, enabled=False)`; where CUDA is absent, an enabled
torch.autocast("cuda") warns and disables itself: refused, the frame runs as eager does, warning
included), and any warning or error the constructor gives (a dtype autocast does not support on
the device) is refused too. `dtype=None` and `cache_enabled=None` stay None in the graph and the resume
functions: torch resolves them when the block is entered, as eager does.

At a graph break inside such blocks the exit tracker is not rebuilt as a value: the break code runs
the cut instruction inside the blocks (graph_break/state.py `break_switches`), and the resume
function enters each block again in its prologue with `entered_context().enter()` and BEFORE_WITH
(bytecode/resume.py): `REENTER[mode]` for a grad mode, a constant `functools.partial(torch.autocast,
*args)` for autocast.

Context managers written in Python (contextlib.nullcontext, a user class with __enter__ and
__exit__, @contextlib.contextmanager; `enter_user_context`): BEFORE_WITH inlines __enter__ and
leaves a UserContextExitVariable, whose call at the block's normal end inlines __exit__(None, None,
None); @contextmanager's __exit__ catches the generator's StopIteration in a try block, which the
tracer does not follow, so it is modelled instead (`_MODELLED_EXITS`: the generator is run on past
its yield and must return). Their state lives in their objects, so it needs no switch of its
own: the side effects the two methods make are replayed after the graph like any other. Such a block has no `entered_context`: a resume function could enter it
again only by running __enter__ a second time, so a graph break inside it cuts the frame before its
with statement instead (graph_break/state.py `break_switches`, `made_at`), and the with statement
runs as written. An exception the trace raises in the block unwinds through its exit
(`accepts_exception`, handlers/exceptions.py WITH_EXCEPT_START): __exit__ is inlined with it and
may suppress it (@contextmanager's throws it into the generator: not modelled). Known gap: where the graph itself raises at run time (an op
whose error depends on tensor values), none of the block's replayed effects happen and __exit__
never sees the exception, so an __exit__ that suppresses or records exceptions differs from eager
there (TorchDynamo inlines __exit__ the same way).

`torch.inference_mode(mode)` blocks (and functions decorated with `@torch.inference_mode()`) as
autocast blocks are: entered for real while traced (OutputGraph.enter_inference_mode), so the
examples are inference tensors where eager's are and eager's errors with them (saving one for
backward, an in-place op outside the block) are the examples' errors too: the frame falls back and
raises as eager. The graph gets `_enter_inference_mode(mode)` before the block's first op and
`_exit_inference_mode(that node)` after its last, so under the eager backend it makes real inference
tensors. Entering sets grad mode to `not mode` and leaving restores it, in the trace as in the
graph. AOTAutograd runs those nodes while it traces the graph, not at call time, so for aot_eager
and inductor a graph whose outputs include a tensor the block made is refused
(OutputGraph.check_inference_outputs); one whose block results stay inside the graph is the
same there. At a graph break inside one, the break instruction runs inside the block (a
ContextSwitch entering `torch.inference_mode(mode)`) and the resume function enters it again with
a constant `functools.partial(torch.inference_mode, mode)`, as for autocast.

Not traced, with the reason: `torch.cpu.amp.autocast` and
`torch.cuda.amp.autocast` (deprecated: eager warns when one is made), an autocast object made
outside the trace (its arguments are not known), autocast as a decorator, a context manager whose
__enter__ or __exit__ is not a Python function.
"""
from __future__ import annotations

import contextlib
import functools
import types
import warnings

import torch
import torch.utils._contextlib as _torch_contextlib

from ....guard.attribute_lookup import type_lookup
from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import EnteredContext, GuardKind, SourceOutput
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable
from .dynamo_contexts import DynamoOnlyExitVariable
from ..python_objects.generators import GeneratorVariable
from .grad_decorators import GradModeDecoratedVariable
from .grad_switches import SetGradEnabledVariable, frame_set_grad_enabled, make_set_grad_enabled

# The classes the tracer enters, and how each finds its mode from the arguments it was made with.
# set_grad_enabled sets the mode when it is made, not when it is entered: where BEFORE_WITH comes
# right after it the two are the same (GradModeClassVariable); made as a value it is
# grad_switches.SetGradEnabledVariable.
GRAD_MODE_CLASSES = {
    torch.no_grad: lambda: False,
    torch.enable_grad: lambda: True,
    torch.set_grad_enabled: lambda mode: mode,
}
# What a resume function builds to enter a block of mode m again (no arguments: nothing to load).
REENTER = {False: torch.no_grad, True: torch.enable_grad}
# torch.autocast is torch.amp.autocast; its arguments, in the order _enter_autocast takes them.
AUTOCAST = torch.amp.autocast
_AUTOCAST_PARAMS = ("device_type", "dtype", "enabled", "cache_enabled")
_AUTOCAST_DEFAULTS = {"dtype": None, "enabled": True, "cache_enabled": None}
# What the argument values may be (bool is checked by type: 1 is not True to autocast's users).
_AUTOCAST_CHECKS = {
    "device_type": lambda v: v in ("cpu", "cuda"),
    "dtype": lambda v: v is None or isinstance(v, torch.dtype),
    "enabled": lambda v: type(v) is bool,
    "cache_enabled": lambda v: v is None or type(v) is bool,
}
# Context managers refused by name, so the fallback says why.
_REFUSED = {
    torch.cpu.amp.autocast: "torch.cpu.amp.autocast is not traced (deprecated: eager warns when "
                            "one is made)",
    torch.cuda.amp.autocast: "torch.cuda.amp.autocast is not traced (deprecated: eager warns when "
                             "one is made)",
}
# The code of the wrapper that `@torch.no_grad()` and friends put around a function
# (torch.utils._contextlib.context_decorator): every decorated function shares it.
_DECORATOR_CODE = torch.no_grad()(lambda: None).__code__
_CLONE = _torch_contextlib._DecoratorContextManager.clone


def context_class(value, source) -> VariableTracker | None:
    """The tracker for a context-manager class the tracer knows (or refuses by name), or for the
    constant that enters an autocast block again in a resume function's prologue, else None."""
    if isinstance(value, functools.partial) and value.func is AUTOCAST and not value.keywords:
        return AutocastClassVariable(source, value.args)
    if isinstance(value, functools.partial) and value.func is torch.inference_mode and not value.keywords \
            and len(value.args) == 1 and type(value.args[0]) is bool:
        return InferenceModeClassVariable(source, value.args[0])
    if not isinstance(value, type):
        return None
    if value in GRAD_MODE_CLASSES:
        return GradModeClassVariable(value, source)
    if value is AUTOCAST:
        return AutocastClassVariable(source)
    if value is torch.inference_mode:
        return InferenceModeClassVariable(source)
    if value in _REFUSED:
        return RefusedContextClass(value, source)
    return None


class GradModeClassVariable(VariableTracker):
    """torch.no_grad, torch.enable_grad or torch.set_grad_enabled, before it is called."""

    def __init__(self, cls, source=None):
        super().__init__(source)
        self.cls = cls

    def as_python_constant(self):
        return self.cls

    def python_type(self):
        return type

    def call_function(self, tx, args, kwargs):
        if self.cls in REENTER.values() and len(args) == 1 and not kwargs and not args[0].is_python_constant():
            # `torch.no_grad(fn)`: the decorator without parentheses (grad_decorators.py).
            return GradModeDecoratedVariable(self.cls, self.cls is torch.enable_grad, args[0])
        try:
            mode = GRAD_MODE_CLASSES[self.cls](*[a.as_python_constant() for a in args],
                                               **{k: v.as_python_constant() for k, v in kwargs.items()})
        except TypeError as e:
            unsupported(f"{self.cls.__name__}(...): {e}")
        if type(mode) is not bool:
            unsupported(f"{self.cls.__name__}({mode!r}): the mode is not a bool")
        if self.cls is torch.set_grad_enabled and tx.next_op() != "BEFORE_WITH":
            # Made as a value, it switches the mode for the rest of the frame (grad_switches.py).
            return make_set_grad_enabled(tx, mode)
        return GradModeVariable(self.cls, mode)

    def reconstruct(self, outputs):
        if self.source is None:
            return super().reconstruct(outputs)
        return SourceOutput(self.source)

    def __repr__(self):
        return f"GradModeClassVariable({self.cls.__name__})"


class RefusedContextClass(VariableTracker):
    def __init__(self, cls, source=None):
        super().__init__(source)
        self.cls = cls

    def call_function(self, tx, args, kwargs):
        unsupported(_REFUSED[self.cls])


class GradModeVariable(VariableTracker):
    """A grad-mode context manager made by the trace, not entered yet; `prev`: the mode its exit
    restores, None for the mode found on entering it (a set_grad_enabled object's is its own)."""

    def __init__(self, cls, mode: bool, prev=None):
        super().__init__(None)
        self.cls, self.mode, self.prev = cls, mode, prev

    def python_type(self):
        return self.cls

    def call_function(self, tx, args, kwargs):
        """`torch.no_grad()(fn)`: the decorator form (grad_decorators.py)."""
        if self.cls not in REENTER.values() or len(args) != 1 or kwargs or args[0].is_python_constant():
            unsupported(f"call to {self}")
        return GradModeDecoratedVariable(self.cls, self.mode, args[0])

    def enter(self, tx):
        """BEFORE_WITH: (what it leaves below: the exit, what `as` binds: None)."""
        prev = tx.output.grad_mode if self.prev is None else self.prev
        tx.output.set_grad_mode(self.mode)
        return GradModeExitVariable(self.mode, prev), ConstantVariable(None)

    def __repr__(self):
        return f"GradModeVariable({self.cls.__name__}, {self.mode})"


def _check_normal_exit(args, kwargs, what: str) -> None:
    """The bound `__exit__` BEFORE_WITH left is called at its block's normal end with (None, None,
    None), or by WITH_EXCEPT_START with (type, exception, traceback) where an exception the trace
    raised unwinds through the block (handlers/exceptions.py); anything else is a tracer bug."""
    if kwargs or len(args) != 3:
        unsupported(f"{what}'s __exit__ called with {len(args)} arguments (tracer bug)")


class GradModeExitVariable(VariableTracker):
    """The bound `__exit__` BEFORE_WITH left on the stack for a grad-mode block: `mode` inside the
    block, `prev` the mode it restores."""

    def __init__(self, mode: bool, prev: bool):
        super().__init__(None)
        self.mode, self.prev = mode, prev
        self.exited = False

    def call_function(self, tx, args, kwargs):
        _check_normal_exit(args, kwargs, "a grad-mode block")
        if self.exited:
            unsupported("a grad-mode block exited twice (tracer bug)")
        self.exited = True
        tx.output.set_grad_mode(self.prev)
        return ConstantVariable(None)

    def entered_context(self) -> EnteredContext:
        """How a graph break inside the block carries it over (graph_break/state.py, bytecode/resume.py)."""
        return EnteredContext(REENTER[self.mode])

    def __repr__(self):
        return f"GradModeExitVariable(mode={self.mode}, prev={self.prev})"


class AutocastClassVariable(VariableTracker):
    """torch.autocast (torch.amp.autocast) before it is called; `bound`: the arguments a resume
    function's constant `functools.partial(torch.autocast, *args)` already holds."""

    def __init__(self, source=None, bound: tuple = ()):
        super().__init__(source)
        self.bound = bound

    def python_type(self):
        return type if not self.bound else functools.partial

    def call_function(self, tx, args, kwargs):
        if not all(a.is_python_constant() for a in (*args, *kwargs.values())):
            unsupported("torch.autocast with an argument that is not a constant")
        values = [*self.bound, *(a.as_python_constant() for a in args)]
        named = {k: v.as_python_constant() for k, v in kwargs.items()}
        if len(values) > len(_AUTOCAST_PARAMS) or set(named) - set(_AUTOCAST_PARAMS) \
                or set(named) & set(_AUTOCAST_PARAMS[:len(values)]):
            unsupported("torch.autocast called with arguments it does not take")
        bound = dict(_AUTOCAST_DEFAULTS, **dict(zip(_AUTOCAST_PARAMS, values)), **named)
        if "device_type" not in bound:
            unsupported("torch.autocast without a device_type")
        for name in _AUTOCAST_PARAMS:
            if not _AUTOCAST_CHECKS[name](bound[name]):
                unsupported(f"torch.autocast({name}={bound[name]!r}) is not traced (device 'cpu' or "
                            "'cuda', a dtype or None, and bools are)")
        args = tuple(bound[name] for name in _AUTOCAST_PARAMS)
        # Made once here, as eager makes it: a warning (an unsupported dtype, which disables it) or
        # an error is eager's to give, so the frame falls back.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                AUTOCAST(*args)
            except Exception as e:
                unsupported(f"torch.autocast{args} raised {type(e).__name__}: {e}")
        if caught:
            unsupported(f"torch.autocast{args} warns: {caught[0].message}")
        return AutocastVariable(args)

    def reconstruct(self, outputs):
        if self.source is None or self.bound:
            return super().reconstruct(outputs)
        return SourceOutput(self.source)

    def __repr__(self):
        return f"AutocastClassVariable{self.bound}"


class AutocastVariable(VariableTracker):
    """An autocast context manager made by the trace, not entered yet: `args` as _enter_autocast
    takes them (device_type, dtype, enabled, cache_enabled). Calling it (the decorator form) or
    rebuilding it after the graph is refused (the base class)."""

    def __init__(self, args: tuple):
        super().__init__(None)
        self.args = args

    def python_type(self):
        return AUTOCAST

    def enter(self, tx):
        """BEFORE_WITH: (the exit it leaves below, what `as` binds: the autocast object)."""
        return AutocastExitVariable(tx.output.enter_autocast(self.args)), self

    def __repr__(self):
        return f"AutocastVariable{self.args}"


class BlockExitVariable(VariableTracker):
    """The bound `__exit__` BEFORE_WITH left on the stack for a block OutputGraph keeps a record
    of (`block`); each kind says what it is (`what`), how the graph leaves it (`leave`) and what
    enters it again in a resume function (`again`)."""
    what = "a block"

    def __init__(self, block):
        super().__init__(None)
        self.block = block

    def leave(self, output):
        raise NotImplementedError

    def again(self):
        raise NotImplementedError

    def call_function(self, tx, args, kwargs):
        _check_normal_exit(args, kwargs, self.what)
        self.leave(tx.output)
        return ConstantVariable(None)

    def entered_context(self) -> EnteredContext:
        """How a graph break inside the block carries it over (graph_break/state.py, bytecode/resume.py)."""
        return EnteredContext(self.again())


class AutocastExitVariable(BlockExitVariable):
    what = "an autocast block"

    def leave(self, output):
        output.exit_autocast(self.block)

    def again(self):
        return functools.partial(AUTOCAST, *self.block.args)

    def __repr__(self):
        return f"AutocastExitVariable{self.block.args}"


class InferenceModeClassVariable(VariableTracker):
    """torch.inference_mode before it is called (`torch.inference_mode(fn)` decorates: refused);
    `bound`: the mode a resume function's constant `functools.partial(torch.inference_mode, mode)`
    holds, else None."""

    def __init__(self, source=None, bound=None):
        super().__init__(source)
        self.bound = bound

    def python_type(self):
        return type if self.bound is None else functools.partial

    def call_function(self, tx, args, kwargs):
        values = [a.as_python_constant() if a.is_python_constant() else None for a in (*args, *kwargs.values())]
        if self.bound is not None:
            values = [self.bound, *values]
        if len(values) > 1 or set(kwargs) - {"mode"} or (values and type(values[0]) is not bool):
            unsupported("torch.inference_mode with an argument other than a constant bool mode")
        return InferenceModeVariable(values[0] if values else True)

    def reconstruct(self, outputs):
        if self.source is None or self.bound is not None:
            return super().reconstruct(outputs)
        return SourceOutput(self.source)

    def __repr__(self):
        return f"InferenceModeClassVariable({'' if self.bound is None else self.bound})"


class InferenceModeVariable(VariableTracker):
    """An inference_mode context manager made by the trace, not entered yet. Calling it (the
    decorator form applied in the trace) or rebuilding it after the graph is refused (the base class)."""

    def __init__(self, mode: bool):
        super().__init__(None)
        self.mode = mode

    def python_type(self):
        return torch.inference_mode

    def enter(self, tx):
        """BEFORE_WITH: (the exit it leaves below, what `as` binds: None, as inference_mode.__enter__)."""
        return InferenceModeExitVariable(tx.output.enter_inference_mode(self.mode)), ConstantVariable(None)

    def __repr__(self):
        return f"InferenceModeVariable({self.mode})"


class InferenceModeExitVariable(BlockExitVariable):
    what = "an inference-mode block"

    def leave(self, output):
        output.exit_inference_mode(self.block)

    def again(self):
        return functools.partial(torch.inference_mode, self.block.mode)

    def __repr__(self):
        return f"InferenceModeExitVariable({self.block.mode})"


def enter_user_context(tx, ctx):
    """BEFORE_WITH over an object of a user class (`ctx`: a tracker with `type_method`, read from the
    frame or made by the trace: contextlib.nullcontext(), a class written with __enter__/__exit__)
    whose __enter__ and __exit__ are Python functions: both are looked up on the type, as
    BEFORE_WITH does, and __enter__ is inlined now. Returns (the exit it leaves below, what `as`
    binds)."""
    cls = ctx.python_type()
    for name in ("__enter__", "__exit__"):
        if not isinstance(type_lookup(cls, name), types.FunctionType):
            unsupported(f"with {ctx}: {cls.__name__}.{name} is not a Python function (grad-mode, autocast "
                        "and context managers written in Python are traced)")
    exit_fn = ctx.type_method(tx, "__exit__")
    entered = tx.call(ctx.type_method(tx, "__enter__"), [ctx], {})
    return UserContextExitVariable(ctx, exit_fn, _MODELLED_EXITS.get(type_lookup(cls, "__exit__"))), entered


def _generator_exit(tx, ctx):
    """@contextlib.contextmanager's __exit__(None, None, None): the generator is run on from its
    yield and must return (StopIteration, caught there: __exit__ returns False). Written here since
    the tracer follows no try block; a generator that yields again (eager: RuntimeError) is
    refused."""
    gen = ctx.var_getattr(tx, "gen")
    if not isinstance(gen, GeneratorVariable):
        unsupported(f"a @contextmanager object whose generator is {gen}")
    if gen.next_item() is not None or not gen.done:
        unsupported("a @contextmanager generator that did not stop after its yield")
    return ConstantVariable(False)


# __exit__ methods written in Python that the tracer cannot inline (a try block), and what it runs
# in their place on the normal path.
_MODELLED_EXITS = {contextlib._GeneratorContextManager.__exit__: _generator_exit}


class UserContextExitVariable(VariableTracker):
    """The bound `__exit__` BEFORE_WITH left on the stack for a context manager written in Python;
    called at the block's normal end with (None, None, None), or with an exception unwinding
    through the block, it is inlined. It has no `entered_context`: a resume function cannot enter
    such a block again without running its __enter__ a second time, so a graph break inside the
    block cuts the frame at `made_at` (before the with statement) where the trace knows it, and
    is refused otherwise (graph_break/state.py)."""

    def __init__(self, ctx, exit_fn, modelled=None):
        super().__init__(None)
        self.ctx, self.exit_fn = ctx, exit_fn
        self.modelled = modelled   # what runs in place of exit_fn (_MODELLED_EXITS), or None
        self.exited = False
        self.made_at = None   # root frame: where the context manager was pushed (handlers/control.py)

    def call_function(self, tx, args, kwargs):
        _check_normal_exit(args, kwargs, "a context manager")
        if self.exited:
            unsupported("a with block exited twice (tracer bug)")
        self.exited = True
        if self.modelled is not None:
            if not (args[0].is_python_constant() and args[0].as_python_constant() is None):
                # @contextmanager's __exit__ throws the exception into the generator: not modelled.
                unsupported("an exception through a @contextmanager block")
            return self.modelled(tx, self.ctx)
        return tx.call(self.exit_fn, [self.ctx, *args], {})

    def __repr__(self):
        return f"UserContextExitVariable({self.ctx})"


def context_object(tx, ctx):
    """The tracker for a grad-mode or inference-mode context manager object the trace holds as a
    torch callable (made by a call the tracer ran, such as the `ctx_factory()` that
    `@torch.inference_mode()`'s wrapper calls, or read from the frame), or None. Its mode is read
    where it lives: an object with a source is guarded by its `mode` attribute."""
    if isinstance(ctx, SetGradEnabledVariable):
        return GradModeVariable(torch.set_grad_enabled, ctx.mode, ctx.prev)
    value = getattr(ctx, "fn", None)
    if type(value) is torch.set_grad_enabled:
        ctx = frame_set_grad_enabled(tx, ctx, value)
        return GradModeVariable(torch.set_grad_enabled, ctx.mode, ctx.prev)
    if type(value) in (torch.no_grad, torch.enable_grad):
        return GradModeVariable(type(value), type(value) is torch.enable_grad)
    if type(value) is torch.inference_mode:
        mode = ConstantVariable(value.mode) if ctx.source is None else tx.wrap(value.mode, AttrSource(ctx.source, "mode"))
        if not mode.is_python_constant() or type(mode.as_python_constant()) is not bool:
            unsupported("torch.inference_mode object with a mode that is not a bool")
        return InferenceModeVariable(mode.as_python_constant())
    return None


def accepts_exception(exit_) -> bool:
    """Whether the exit BEFORE_WITH left (`exit_`) may be called by WITH_EXCEPT_START with an
    exception the trace raised in its block: grad-mode, autocast, inference-mode and Dynamo-only
    blocks leave as on the normal path and never suppress it; a Python-written __exit__ is inlined
    with it, except @contextmanager's, which throws it into its generator (not modelled). An exit
    already called (an exception raised by the block's own normal exit) takes none."""
    if isinstance(exit_, UserContextExitVariable):
        return exit_.modelled is None and not exit_.exited
    if isinstance(exit_, GradModeExitVariable):
        return not exit_.exited
    return isinstance(exit_, (BlockExitVariable, DynamoOnlyExitVariable))


def refuse_autocast_object(value) -> None:
    """An autocast object made outside the trace: its arguments are not known to it."""
    if isinstance(value, AUTOCAST):
        unsupported("an autocast object made outside the traced code")


# The context classes whose decorator the tracer follows, with the `clone` their decorator calls
# per call (a subclass may enter differently; set_grad_enabled's clone carries a mode it is made with).
_DECORATOR_CLONES = {torch.no_grad: _CLONE, torch.enable_grad: _CLONE,
                     torch.inference_mode: torch.inference_mode.clone,
                     torch.set_grad_enabled: torch.set_grad_enabled.clone}


def decorated_grad_mode(fn):
    """(context class, index of the wrapped function in the wrapper's closure, index of the
    decorator's `ctx_factory`) when `fn` is the wrapper `@torch.no_grad()`, `@torch.enable_grad()`
    or `@torch.inference_mode(mode)` made, else None."""
    if getattr(fn, "__code__", None) is not _DECORATOR_CODE or not fn.__closure__:
        return None
    names = fn.__code__.co_freevars
    try:
        factory_index = names.index("ctx_factory")
        factory = fn.__closure__[factory_index].cell_contents
        index = names.index("func")
    except (ValueError, IndexError):
        return None
    ctx = getattr(factory, "__self__", None)
    if type(ctx) not in _DECORATOR_CLONES or getattr(factory, "__func__", None) is not _DECORATOR_CLONES[type(ctx)]:
        return None
    return type(ctx), index, factory_index


def call_decorated(tx, wrapper, cls, index: int, factory_index: int, args, kwargs):
    """Call the function a grad-mode or inference-mode decorator wraps, inlined, in its block.
    `wrapper` is the UserFunctionVariable of the decorator's wrapper, pinned by identity (its
    closure, which holds the context object and the function, is fixed when it is made); an
    inference_mode object's `mode` is an attribute, guarded where it is read."""
    if wrapper.source is None:
        unsupported("a function decorated with a grad mode, not reachable from the frame")
    wrapper.as_python_constant()   # the identity guard, where the wrapper was guarded by contents
    closure = AttrSource(wrapper.source, "__closure__")
    cell = AttrSource(ItemSource(closure, index), "cell_contents")
    inner = tx.wrap(wrapper.fn.__closure__[index].cell_contents, cell)
    mode = None
    if cls in (torch.inference_mode, torch.set_grad_enabled):   # the mode is the object's attribute
        ctx_source = AttrSource(AttrSource(ItemSource(closure, factory_index), "cell_contents"), "__self__")
        mode = tx.wrap(wrapper.fn.__closure__[factory_index].cell_contents.__self__.mode, AttrSource(ctx_source, "mode"))
        if not mode.is_python_constant() or type(mode.as_python_constant()) is not bool:
            unsupported(f"@torch.{cls.__name__} with a mode that is not a bool")
    if cls is torch.inference_mode:
        block = tx.output.enter_inference_mode(mode.as_python_constant())
        result = tx.call(inner, args, kwargs)
        tx.output.exit_inference_mode(block)
        return result
    prev = tx.output.grad_mode
    tx.output.set_grad_mode(GRAD_MODE_CLASSES[cls]() if mode is None else mode.as_python_constant())
    result = tx.call(inner, args, kwargs)
    tx.output.set_grad_mode(prev)
    return result


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def wrap_context_class(tx, value, source, g):
    """torch.no_grad and friends; None for any other class."""
    ctx = context_class(value, source)
    if ctx is not None:
        g(GuardKind.ID_MATCH, value)
    return ctx


def refuse_autocast(tx, value, source, g):
    """Callable, but no torch function: refused here, before the rules that would take it."""
    refuse_autocast_object(value)
