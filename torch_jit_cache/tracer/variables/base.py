"""VariableTracker: the symbolic value the tracer keeps on its stack for each Python value.

Methods that need the trace (to add nodes, guards, or inline code) take the translator `tx`
explicitly. What variables may use from `tx`: `tx.output` (the OutputGraph), `tx.wrap(value,
source)` (wrap a real value read from the frame), `tx.wrap_constant(value)` (wrap a value computed
from constants: builder.wrap_constant), `tx.inline_call(func_var, args, kwargs)` and
`tx.call(fn_var, args, kwargs)`. Variables never import the translator, and import each other one
way only (tests/python/test_import_layers.py): a service of a higher module reaches a lower one
through `tx` or through a method the higher tracker overrides, never through an import.
"""
from __future__ import annotations

import types

import torch

from ..output_graph import OutputGraph  # noqa: F401  (layering: variables -> fx building)
from ...guard.process_lived import holdable_key
from ...guard.sources import AttrSource
from ...guard.trace_result import AttrOutput, ConstantOutput, SourceOutput, Unsupported

_HEAPTYPE = 1 << 9   # Py_TPFLAGS_HEAPTYPE


def is_static_type(value) -> bool:
    """A type that is not a heap type (int, list, dict, ...): it lives for the process, and == on it
    is identity."""
    return type(value) is type and not value.__flags__ & _HEAPTYPE


def unsupported(reason: str):
    raise Unsupported(reason)


class TracedRaise(Unsupported):
    """An exception the trace knows is raised: a subscript of a dict tracker (its keys are exact
    and guarded), a missing attribute of an object built in the trace, or `raise IndexError(...)` /
    `raise KeyError(...)` / `raise AttributeError(...)` in traced code. Unsupported like any other
    raise, except where a caller models Python catching it: the collections.abc.Mapping mixins
    (`in`, `.get`: KeyError) and Sequence's iteration (IndexError) over a user __getitem__
    (user_object.py), hasattr and getattr with a default (AttributeError, builtins.py), and a try
    block of the traced code (translator.py finds its handler in the exception table)."""

    # The raised exception as a tracker (exceptions.ExceptionVariable), or None where the raise
    # site does not model it: a try block cannot catch it then. A site below exceptions.py in the
    # import order names it as `made_of` instead, (class, [arg trackers]), built when caught.
    value = None
    made_of = None
    # A new raise, which sets the exception's __context__ where it is first caught (translator.py
    # `_handle`); False for RERAISE and a bare raise, which keep the context it had.
    fresh = True


class TracedKeyError(TracedRaise):
    pass


class TracedIndexError(TracedRaise):
    pass


class TracedAttributeError(TracedRaise):
    """An attribute an object built in the trace does not have (new_object.py), or `raise
    AttributeError(...)`; hasattr and getattr with a default catch it, as Python does."""


def traced(kind: type, reason: str, cls: type, args: list) -> TracedRaise:
    """A `kind` raise of `cls(*args)` (trackers), to be raised where it is made: `raise traced(...)`.
    A local holding it at the raise site would keep that frame, and what it holds, alive through
    the exception's traceback after a modelled catch dropped it (a cycle the collector must break)."""
    raised = kind(reason)
    raised.made_of = (cls, args)
    return raised


# Calls a tracker's module makes into a module above it in the one-way import order (a tensor's
# numpy view; the exception and the `==` a list method's stand-in check needs): the module that
# implements one registers it under its name at import (`@provides`), the caller looks it up by
# that name when it runs (`provided`). Importing any tracker module imports the package
# tracer.variables, whose __init__ imports every provider, so a lookup during a trace finds it.
_PROVIDED: dict = {}


def provides(fn, name: str | None = None):
    """Register `fn` under `name` (its own name by default) for `provided`; returns `fn`."""
    name = name or fn.__name__
    assert _PROVIDED.get(name, fn) is fn, f"two providers of {name}"
    _PROVIDED[name] = fn
    return fn


def provided(name: str):
    """The function a module above registered under `name` (`provides`)."""
    return _PROVIDED[name]


# The builtin exception -> its traced raise (handlers/exceptions.py's RAISE_VARARGS).
TRACED_RAISES = {KeyError: TracedKeyError, IndexError: TracedIndexError,
                 AttributeError: TracedAttributeError}


class VariableTracker:
    """Base class. `source` is where the value came from in the frame, or None if built here."""

    # Made of items produced one at a time by `next_item()` (an iterator, a generator): what
    # Python consumes item by item (list.extend) takes them so, each before the next is made.
    yields_lazily = False
    # What `a is b` compares for two trackers of one family: their identity_object()s. Trackers of
    # different families, or of none, are not known to be the same object (operators.is_op).
    identity_family = None
    # Slots named here are what the builtin that runs them does, whatever the type (protocol_builtin).
    protocol_slots = frozenset()
    # python_type() is the object's exact type, pinned by a TYPE_MATCH guard where it was read: an
    # object of another type known to the trace is not it (operators.is_op).
    exact_type = False
    # A mutable object the builder guards by type, not identity (a plain user object, a list, a
    # dict): side_effects.py is told of every one reached, to keep its mutation sound.
    guarded_by_type = False
    # Int attributes read from this object stay constants even when they change between compiles
    # (an nn.Module's sizes and flags, as torch.compile's allow_unspec_int_on_nn_module=False);
    # another object's int attribute that changes (a cache's position) becomes a symbol.
    specializes_int_attributes = False

    def __init__(self, source=None):
        self.source = source

    # -- what the value is ----------------------------------------------------------------------
    def python_type(self):
        unsupported(f"type of {self} is unknown")

    # Whether the object's class, where it is not a static type, is one the tracker only takes
    # when it defines none of its own methods (sets.plain_subclass): its C methods are its static
    # base's, so their attributes are answered as for that base's.
    methods_of_static_base = False

    def is_python_constant(self) -> bool:
        try:
            self.as_python_constant()
            return True
        except Unsupported:
            return False

    def as_python_constant(self):
        unsupported(f"{self} is not a Python constant")

    def dict_key(self, tx):
        """The key a dict lookup by this value is made with (`d[k]`, `d.get(k)`, `k in d`): a
        constant's value (a user object that lives as long as the process answers itself:
        user_object.py)."""
        if not self.is_python_constant():
            unsupported(f"index by a non-constant {self}")
        return self.as_python_constant()

    # -- graph arguments ------------------------------------------------------------------------
    def as_fx_arg(self):
        """The value as an fx node argument (nodes for tensors, Python values for constants)."""
        return self.as_python_constant()

    def as_example(self):
        """The value with tensors replaced by their example tensors, to run an op eagerly."""
        return self.as_python_constant()

    # -- protocol -------------------------------------------------------------------------------
    def var_getattr(self, tx, name: str) -> "VariableTracker":
        if protocol_builtin(self, name) is not None:   # `r.__iter__`: called as iter(r)
            return MethodVariable(self, name)
        unsupported(f"attribute {name!r} of {self}")

    def var_setattr(self, tx, name: str, value: "VariableTracker") -> None:
        """`self.name = value`: recorded for replay (tracer/side_effects.py) where the store can be
        replayed faithfully; everything else is refused."""
        unsupported(f"STORE_ATTR {name} on {self} (a side effect that cannot be replayed)")

    def var_delattr(self, tx, name: str) -> None:
        unsupported(f"DELETE_ATTR {name} on {self} (a side effect that cannot be replayed)")

    def call_function(self, tx, args: list, kwargs: dict) -> "VariableTracker":
        unsupported(f"call to {self}")

    def call_method(self, tx, name: str, args: list, kwargs: dict) -> "VariableTracker":
        return tx.call(self.var_getattr(tx, name), args, kwargs)

    def unpack(self, tx) -> list:
        """The items of an iteration over the value (guards on lengths/keys are added here)."""
        unsupported(f"iteration over {self}")

    def truthy(self, tx) -> bool:
        unsupported(f"truth value of {self}")

    # -- after the graph ------------------------------------------------------------------------
    def reconstruct(self, outputs) -> object:
        """How the transformed code rebuilds this value once the graph has run: an output spec
        (guard/trace_result.py) made of graph outputs, constants, sources read again at call time, and
        containers of those. `outputs.graph_output(node)` numbers the graph's outputs; a container
        rebuilds its items with `outputs.rebuild(item)`, so a graph break can decide per item.

        Every tracker that can leave the trace says how it is rebuilt: today the returned value;
        with graph breaks, the stack and locals live at the break too. A value read from the frame
        is reloaded from its source only where the trace cannot have changed it, or where the change
        is replayed on that very object first (side_effects.py: a list read from the frame and
        appended to is reloaded, and the replay has appended to it by then).
        """
        unsupported(f"returning {self}: it cannot be rebuilt after the graph")

    def __repr__(self) -> str:
        src = f" from {self.source}" if self.source is not None else ""
        return f"{type(self).__name__}{src}"

    def require_guardable(self, what: str, name: str) -> None:
        """Returns where the builder guarded this value completely (its attribute `name` read by an
        opaque call of `what`, opaque_calls.py, which reads it unseen); refuses everything else. Plain
        objects are guarded by type alone (their attributes where read): not enough for such a call."""
        unsupported(f"opaque call of {what}: attribute {name!r} is a {self} the tracer cannot guard")

    def bound_method_type(self, name: str):
        """The Python type of `self.name` when it is a method (MethodVariable.python_type), where
        the tracker knows it; else None."""
        return None

    def identity_object(self):
        """The real object this tracker stands for, where `identity_family` says it is known."""
        unsupported(f"identity of {self}")


_CALLABLE_NAMES = frozenset({"__name__", "__qualname__", "__module__", "__doc__"})


class CallableVariable(VariableTracker):
    """A callable known while tracing (a builtin, a torch function, a pure math function); the
    subclass says what calling it does."""

    identity_family = "constant"   # a class against a builtin that is one (`type(n) is int`)

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def as_python_constant(self):
        return self.fn

    def python_type(self):
        return type(self.fn)

    def var_getattr(self, tx, name: str) -> "VariableTracker":
        # A callable's names: read-only in C (a builtin, a method descriptor), writable on a Python
        # function: read through its source where it has one (guarded by value), else a constant
        # (builtins, and the functions of trusted modules, whose module alone is guarded).
        if name in _CALLABLE_NAMES and hasattr(self.fn, name):
            value = getattr(self.fn, name)
            if self.source is not None:
                return tx.wrap(value, AttrSource(self.source, name))
            if value is None or type(value) is str:
                return tx.wrap_constant(value)
        unsupported(f"attribute {name!r} of {self}")

    def reconstruct(self, outputs):
        if self.source is not None:
            return SourceOutput(self.source)
        if is_static_type(self.fn) or holdable_key(self.fn):
            # A dict's key or a set's item (containers.key_tracker, sets.item_tracker): the type, or
            # the library function, itself; it lives as long as the process.
            return ConstantOutput(self.fn)
        return super().reconstruct(outputs)

    def identity_object(self):
        return self.as_python_constant()


# A builtin type's protocol slot called by name (`r.__iter__()`, `t.__len__()`, `it.__next__()`) is
# what the builtin that calls that slot does: the builtin's model answers it. Only for a static
# type, whose slots nothing can replace, and without arguments (`it.__next__(d)` is a TypeError
# where `next(it, d)` is not).
_PROTOCOL_BUILTINS = {"__iter__": iter, "__len__": len, "__next__": next, "__reversed__": reversed}


def protocol_builtin(obj: "VariableTracker", name: str):
    """The builtin that runs `obj`'s own slot `name`, or None (see above)."""
    fn = _PROTOCOL_BUILTINS.get(name)
    if fn is None:
        return None
    try:
        cls = obj.python_type()
    except Unsupported:
        return None
    slot = getattr(cls, name, None) if is_static_type(cls) else None
    return fn if isinstance(slot, (types.WrapperDescriptorType, types.MethodDescriptorType)) or \
        name in obj.protocol_slots else None


class MethodVariable(VariableTracker):
    """`obj.name`, a method loaded and not called yet (`xs.append`, `x.view`, `"a,b".split`).

    Calling it is `obj.call_method(tx, name, ...)`: what the call does is the object's tracker's
    business (folded for a constant, a node for a tensor, refused for an opaque value). Held at a
    graph break or returned, it is made again as the attribute read from the rebuilt object, once
    however often it is reached."""

    def __init__(self, obj: VariableTracker, name: str):
        super().__init__(None)
        self.obj, self.name = obj, name

    def python_type(self):
        found = self.obj.bound_method_type(self.name)
        if found is None:
            unsupported(f"type of {self} is unknown")
        return found

    def call_function(self, tx, args, kwargs):
        fn = None if args or kwargs else protocol_builtin(self.obj, self.name)
        if fn is not None:
            return tx.call(tx.wrap(fn, None), [self.obj], {})
        return self.obj.call_method(tx, self.name, args, kwargs)

    # What a bound C method answers without being called, by the kind of its descriptor on the
    # class: a method descriptor binds to a builtin method (its __qualname__ names the object's
    # type, its __module__ is None), a slot wrapper (`xs.__setitem__`) to a method-wrapper (its
    # __qualname__ is the descriptor's; it has no __module__).
    _C_METHOD_ATTRS = {
        types.MethodDescriptorType: {
            "__name__": lambda cls, d: d.__name__,
            "__qualname__": lambda cls, d: f"{cls.__qualname__}.{d.__name__}",
            "__doc__": lambda cls, d: d.__doc__,
            "__module__": lambda cls, d: None,
        },
        types.WrapperDescriptorType: {
            "__name__": lambda cls, d: d.__name__,
            "__qualname__": lambda cls, d: d.__qualname__,
            "__doc__": lambda cls, d: d.__doc__,
        },
    }

    def var_getattr(self, tx, name):
        """`xs.append.__name__`, `.__qualname__`, `.__doc__`, `.__module__`, `.__self__` of a C method
        of an object whose class is a static type (list, dict, str, ...: a tracker of one is exact,
        and the class cannot change), answered from the class's descriptor."""
        descriptor = self._c_method_descriptor()
        if descriptor is None:
            unsupported(f"attribute {name!r} of {self}")
        if name == "__self__":
            return self.obj
        attrs = self._C_METHOD_ATTRS[type(descriptor)]
        if name in attrs:
            return tx.wrap_constant(attrs[name](self.obj.python_type(), descriptor))
        unsupported(f"attribute {name!r} of {self}")

    def _c_method_descriptor(self):
        try:
            cls = self.obj.python_type()
        except Unsupported:
            return None
        if not is_static_type(cls) and not self.obj.methods_of_static_base:
            return None
        for klass in cls.__mro__:
            found = vars(klass).get(self.name)
            if found is not None:
                return found if type(found) in self._C_METHOD_ATTRS else None
        return None

    def reconstruct(self, outputs):
        return outputs.once(self, lambda: AttrOutput(outputs.rebuild(self.obj), self.name))

    def __repr__(self):
        return f"MethodVariable({self.obj!r}.{self.name})"


def catching_raise(tx, run, kind=TracedKeyError):
    """(run(), True), or (None, False) where `run` raised the traced `kind` (TracedRaise)."""
    state = (torch.is_grad_enabled(), len(tx.output.autocast_blocks))
    try:
        return run(), True
    except kind as raised:
        raised.__traceback__ = None   # the frames it crossed: freed now, not by the collector
        if (torch.is_grad_enabled(), len(tx.output.autocast_blocks)) != state:
            unsupported(f"{kind.__name__} raised inside a grad-mode or autocast block")
        return None, False
