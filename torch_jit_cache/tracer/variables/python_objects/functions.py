"""Python functions: user functions and methods (inlined), Python modules, pure helpers.

A user function is traced by inlining: the translator interprets its bytecode with its own
locals (`tx.inline_call`). The function tracker provides what that needs: the code, argument
binding, closure cells, and the source of each global the body reads.
"""
from __future__ import annotations

import inspect
import sys
import traceback
import types

from ....frontend.proxies import is_allowed_in_graph
from ....guard.sources import AttrSource, GlobalSource, ItemSource
from ....frontend.trace_rules import functorch_transform
from ....guard.trace_result import (AttrOutput, CallOutput, ConstantOutput, DictOutput, FunctionOutput, GuardKind, SourceOutput,
                                    TupleOutput, bound_method, function_of)
from . import function_attributes
from ..base import CallableVariable, VariableTracker, is_static_type, unsupported
from ..constant import ConstantVariable
from .cells import CellVariable, real_cell
from ..collections.containers import TupleVariable
from ..collections.dicts import DictVariable
from ..torch_objects.contexts import call_decorated, decorated_grad_mode
from .exceptions import TracebackVariable
from ..modules.opaque_calls import call_opaque_function
from ..builtin_functions.operators import call_operator, immutable_constant, of_operator_module, operator_twin
from ..builtin_functions.pure import fold

# Generators are run lazily (generators.py); coroutines are not traced.
_NOT_INLINABLE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


# Function attributes read as values (their data descriptors on the function type cannot run code).
_FUNCTION_NAMES = frozenset({"__name__", "__qualname__", "__module__", "__doc__"})
# Writable too, and what a call binds: read through the source, guarded by value.
_FUNCTION_DEFAULTS = frozenset({"__defaults__", "__kwdefaults__"})
# The function's own containers (its annotations dict, made on first read where it had none; its
# type parameters' tuple, from 3.12): of a function read from the frame, read through its source
# as the objects they are (a dict changed in the trace is changed on the function after the graph).
_FUNCTION_CONTAINERS = frozenset(name for name in ("__annotations__", "__type_params__")
                                 if name in vars(types.FunctionType))


class BaseFunctionVariable(VariableTracker):
    """What inlining needs: `code`, `f_globals`, `name`, `defaults`, `kwdefaults`, `cells`."""

    code: types.CodeType
    f_globals: dict

    def python_type(self):
        return types.FunctionType

    def truthy(self, tx) -> bool:
        # A function defines neither __bool__ nor __len__: always true (`if validator := d.get(k)`).
        return True

    def call_function(self, tx, args, kwargs):
        return tx.inline_call(self, args, kwargs)

    def global_source(self, tx, name: str):
        """Where global `name` of this function is read from, seen from the traced frame."""
        if self.f_globals is tx.output.root_globals:
            return GlobalSource(name)
        if self.source is not None:
            return ItemSource(AttrSource(self.source, "__globals__"), name)
        unsupported(f"globals of {self.code.co_name} are not reachable from the traced frame")

    def bind_args(self, tx, args: list, kwargs: dict) -> dict:
        """Bind trackers to parameter names as a call would (defaults included)."""
        if self.code.co_flags & _NOT_INLINABLE:
            unsupported(f"call to coroutine {self.code.co_name}")
        dummy_closure = tuple(types.CellType() for _ in self.code.co_freevars) or None
        fake = types.FunctionType(self.code, {}, self.code.co_name,
                                  tuple(self.defaults(tx)) or None, dummy_closure)
        fake.__kwdefaults__ = self.kwdefaults(tx) or None
        try:
            bound = inspect.signature(fake).bind(*args, **kwargs)
        except TypeError as e:
            unsupported(f"call to {self.code.co_name}: {e}")
        bound.apply_defaults()
        result = {}
        # By name, never by position: co_varnames lists keyword-only parameters before *args
        # (`def f(*ts, by=1)` has co_varnames ('by', 'ts')), the signature lists them after it.
        # inspect renames a comprehension's implicit '.0' argument to 'implicit0'.
        for sig_name, param in bound.signature.parameters.items():
            pname = "." + sig_name[len("implicit"):] if sig_name.startswith("implicit") \
                and sig_name not in self.code.co_varnames else sig_name
            value = bound.arguments[sig_name]
            if param.kind is inspect.Parameter.VAR_POSITIONAL:
                value = TupleVariable(list(value))
            elif param.kind is inspect.Parameter.VAR_KEYWORD:
                value = DictVariable(dict(value))
            result[pname] = value
        return result


def function_class(tx, fn):
    """`fn.__class__` of a Python function: `type(fn)` (types.FunctionType; a function's
    `__class__` cannot be assigned), as the builtin `type` answers it."""
    return tx.call(tx.wrap(type, None), [fn], {})


class UserFunctionVariable(BaseFunctionVariable):
    identity_family = "function"

    """A real Python function object (read from the frame, a module, or a class).

    A function made inside another function (a closure, a lambda, a nested def) is often made
    anew on every call of its maker: HuggingFace builds its attention-mask functions that way. A
    guard on its identity fails on every call once the object is gone (its death even evicts the
    entry), so every call compiled again. Such a function is guarded by what the trace relies on
    instead (`by_contents`): its code object by identity (the builder adds that guard), its
    closure cells where they are read, its defaults as values, its globals through its own
    `__globals__`. `identity_guard` is called when the trace relies on the object itself (an `is`
    test, the function used as a constant): then it is guarded by identity after all.
    """

    def __init__(self, fn: types.FunctionType, source=None, identity_guard=None):
        super().__init__(source)
        self.fn = fn
        self.code = fn.__code__
        self.f_globals = fn.__globals__
        self._cells = None
        self._identity_guard = identity_guard

    def reconstruct(self, outputs):
        if self.source is None:
            return super().reconstruct(outputs)
        return SourceOutput(self.source)

    def call_function(self, tx, args, kwargs):
        if is_allowed_in_graph(self.fn):   # tjc.allow_in_graph: one opaque node (opaque_calls.py)
            return call_opaque_function(tx, self, args, kwargs)
        transform = functorch_transform(self.fn)   # torch.vmap's wrapper: runs as written (frontend/trace_rules.py)
        if transform is not None:
            unsupported(transform)
        decorated = decorated_grad_mode(self.fn)   # @torch.no_grad(): its function, under the mode
        if decorated is not None:
            return call_decorated(tx, self, *decorated, args, kwargs)
        if self.fn is traceback.clear_frames and len(args) == 1 and not kwargs \
                and isinstance(args[0], TracebackVariable):
            # assertRaises' __exit__ clears the traceback's frames: done with, and no trace value
            # reaches them (the traceback is not modelled): nothing to observe.
            return ConstantVariable(None)
        return tx.inline_call(self, args, kwargs)

    @property
    def by_contents(self) -> bool:
        return self._identity_guard is not None

    def as_python_constant(self):
        if self._identity_guard is not None:
            self._identity_guard()
        return self.fn

    def global_source(self, tx, name: str):
        if self.by_contents:  # another object with this code may carry other globals
            return ItemSource(AttrSource(self.source, "__globals__"), name)
        return super().global_source(tx, name)

    def defaults(self, tx):
        base = AttrSource(self.source, "__defaults__") if self.source is not None else None
        if self.by_contents:  # another function with this code may carry other defaults: guard
            wrapped = tx.wrap(self.fn.__defaults__, base)  # the tuple (or None) itself
            return list(wrapped.items) if self.fn.__defaults__ is not None else []
        return [tx.wrap(v, ItemSource(base, i) if base else None)
                for i, v in enumerate(self.fn.__defaults__ or ())]

    def kwdefaults(self, tx):
        base = AttrSource(self.source, "__kwdefaults__") if self.source is not None else None
        if self.by_contents:
            wrapped = tx.wrap(self.fn.__kwdefaults__, base)
            return dict(wrapped.items) if self.fn.__kwdefaults__ is not None else {}
        return {k: tx.wrap(v, ItemSource(base, k) if base else None)
                for k, v in (self.fn.__kwdefaults__ or {}).items()}

    def cells(self, tx) -> list:
        if self._cells is None:
            base = AttrSource(self.source, "__closure__") if self.source is not None else None
            self._cells = []
            for i, cell in enumerate(self.fn.__closure__ or ()):
                where = ItemSource(base, i) if base is not None else None
                name = self.fn.__code__.co_freevars[i]
                self._cells.append(real_cell(tx, cell, where,
                                             lambda i=i, cell=cell, name=name: _real_cell_tracker(base, i, cell, name)))
        return self._cells

    def var_getattr(self, tx, name):
        stored = function_attributes.frame_stored(tx, self, name)
        if stored is not None:
            return stored
        if name == "__class__":
            return function_class(tx, self)
        if name == "__code__":
            # The code inlined is this very object, and the builder guards `fn.__code__` by
            # identity wherever the function has a source: a constant.
            return ConstantVariable(self.code)
        if name in _FUNCTION_CONTAINERS and self.source is not None:
            return tx.wrap(getattr(self.fn, name), AttrSource(self.source, name))
        if name in _FUNCTION_NAMES or name in _FUNCTION_DEFAULTS or name in vars(self.fn):
            # Writable on the function (functools.wraps copies them; `__wrapped__` lives in its
            # __dict__): read through the function's source so the value is guarded where it is.
            value = getattr(self.fn, name)
            if self.source is None:
                if type(value) is not str:
                    unsupported(f"attribute {name!r} of function {self.fn.__name__} with no source")
                return ConstantVariable(value)
            return tx.wrap(value, AttrSource(self.source, name))
        missing = function_attributes.frame_missing(tx, self, name)
        if missing is not None:
            raise missing
        unsupported(f"attribute {name!r} of function {self.fn.__name__}")

    def has_attribute(self, tx, name):
        answer = function_attributes.frame_has(tx, self, name)
        return hasattr(self.as_python_constant(), name) if answer is None else answer

    def var_setattr(self, tx, name, value):
        function_attributes.frame_set(tx, self, name, value)

    def var_delattr(self, tx, name):
        function_attributes.frame_del(tx, self, name)

    def __repr__(self):
        return f"UserFunctionVariable({self.fn.__qualname__})"

    def require_guardable(self, what, name):
        self.as_python_constant()   # by identity

    def identity_object(self):
        # Guarded by identity (as_python_constant adds it for a function guarded by contents):
        # `type(self).forward is wrapper`, as transformers' checkpointing layers test.
        return self.as_python_constant()


class NestedFunctionVariable(BaseFunctionVariable):
    """A function made by MAKE_FUNCTION while tracing (a nested def, a lambda, a comprehension)."""

    def __init__(self, code, f_globals, parent_global_source, defaults, kwdefaults, cells, *,
                 in_root=False, annotations=None):
        super().__init__(None)
        self.code = code
        self.f_globals = f_globals
        self._parent_global_source = parent_global_source
        self._defaults = defaults
        self._kwdefaults = kwdefaults
        self._cells = cells
        self.in_root = in_root        # made by the root frame (its globals are the frame's)
        # MAKE_FUNCTION's annotations tuple ('x', int, ...), kept only to make the function again
        # (trackers of constants, or classes read from the frame): the trace never reads them.
        self.annotations = annotations
        # functools.wraps(fn) applied to it (function_wraps.WrapsVariable): fn, and the names it gave.
        self.wrapped_by, self.wrapped_names, self.wrapped_updated = None, (), ()
        self.attrs = {}   # its __dict__'s names (function_attributes.py)
        self.special = {}   # what the trace stored to the function type's descriptors (__doc__, ...)
        self.dict_view = None   # `f.__dict__`, once read: a dict tracker over `attrs`

    def wrap_names(self, wrapped, names: tuple, updated: tuple = ()) -> None:
        """update_wrapper(self, wrapped, assigned=names, updated=updated): `names` now read from
        `wrapped`, and `__wrapped__` is `wrapped`."""
        self.wrapped_by, self.wrapped_names, self.wrapped_updated = wrapped, tuple(names), tuple(updated)
        self.attrs.pop("__wrapped__", None)   # update_wrapper sets it last
        for name in names:
            self.special.pop(name, None)

    def reconstruct(self, outputs):
        """Made again from its code, once. Made by the root frame over its cells only, it closes
        over the frame's very cells (own or free variables: FunctionOutput). Otherwise (made in an
        inlined call, or closing over a cell an inlined call made) it is made over its module's
        globals and its cells as cells.py makes them again: the frame's very cells, one new cell
        per cell of an inlined frame holding what it holds at the end of the trace, shared by
        every function closing over it, a real closure's cell loaded again."""
        names = tuple(c.frame_name for c in self._cells)
        as_frame = self.in_root and None not in names
        module = None if as_frame else _module_of(self.f_globals)
        if not as_frame and module is None:
            unsupported(f"{self}: closes over an inlined call's cells, over globals that are no module's")

        def make():
            defaults = TupleOutput(tuple(outputs.rebuild(d) for d in self._defaults)) if self._defaults else None
            kwdefaults = DictOutput(tuple((k, outputs.rebuild(v)) for k, v in self._kwdefaults.items())) \
                if self._kwdefaults else None
            annotations = outputs.rebuild(self.annotations) if self.annotations is not None else None
            if as_frame:
                return FunctionOutput(self.code, names, defaults, kwdefaults, annotations)
            closure = TupleOutput(tuple(outputs.rebuild(c) for c in self._cells)) if self._cells else None
            return CallOutput(ConstantOutput(function_of),
                              ("code", "module", "closure", "defaults", "kwdefaults", "annotations"),
                              (ConstantOutput(self.code), ConstantOutput(module), closure or ConstantOutput(None),
                               defaults or ConstantOutput(None), kwdefaults or ConstantOutput(None),
                               annotations or ConstantOutput(None)))

        if self.wrapped_by is not None:
            # functools.wraps gave it another function's names: given again from the wrapped
            # function rebuilt (stores on functions are refused: nothing else changed them).
            unwrapped = make

            def make():
                return CallOutput(ConstantOutput(function_attributes.rewrap), ("fn", "wrapped", "assigned", "updated"),
                                  (unwrapped(), outputs.rebuild(self.wrapped_by),
                                   ConstantOutput(self.wrapped_names), ConstantOutput(self.wrapped_updated)))
        if self.attrs or self.special:
            bare = make

            def make():
                return CallOutput(ConstantOutput(function_attributes.with_attributes), ("fn", "attrs", "special"), (
                    bare(), DictOutput(tuple((k, outputs.rebuild(v)) for k, v in self.attrs.items())),
                    DictOutput(tuple((k, outputs.rebuild(v)) for k, v in self.special.items()))))
        return outputs.once(self, make)

    def set_parts(self, *, defaults=None, kwdefaults=None, cells=None, annotations=None):
        """3.13's SET_FUNCTION_ATTRIBUTE: the parts MAKE_FUNCTION takes by flag on 3.11/3.12."""
        if defaults is not None:
            self._defaults = defaults
        if kwdefaults is not None:
            self._kwdefaults = kwdefaults
        if cells is not None:
            self._cells = cells
        if annotations is not None:
            self.annotations = annotations

    def global_source(self, tx, name):
        return self._parent_global_source(tx, name)

    def var_getattr(self, tx, name):
        # Made here from a constant code object, whose names it keeps until assigned (refused)
        # or given by functools.wraps; plain names are its own __dict__'s.
        if name in self.attrs and function_attributes.in_dict(name):
            return self.attrs[name]
        if name in self.special:
            return self.special[name]
        if self.wrapped_by is not None:
            if name == "__wrapped__":
                return self.wrapped_by
            if name in self.wrapped_names:
                return self.wrapped_by.var_getattr(tx, name)
        if name == "__class__":
            return function_class(tx, self)
        if name == "__code__":
            return ConstantVariable(self.code)
        if name == "__name__":
            return ConstantVariable(self.code.co_name)
        if name == "__qualname__":
            return ConstantVariable(self.code.co_qualname)
        special = function_attributes.nested_special(tx, self, name)
        if special is not None:
            return special
        if function_attributes.only_in_dict(name):
            return function_attributes.nested_get(self, name)
        unsupported(f"attribute {name!r} of function {self.code.co_name} made while tracing")

    def var_setattr(self, tx, name, value):
        function_attributes.nested_set(self, name, value)

    def has_attribute(self, tx, name):
        return function_attributes.nested_has(self, name)

    def var_delattr(self, tx, name):
        function_attributes.nested_del(self, name)

    def defaults(self, tx):
        return self._defaults

    def kwdefaults(self, tx):
        return self._kwdefaults

    def cells(self, tx):
        return self._cells

    def __repr__(self):
        return f"NestedFunctionVariable({self.code.co_name})"


def _module_of(f_globals: dict):
    """The imported module whose namespace `f_globals` is, or None."""
    module = sys.modules.get(f_globals.get("__name__"))
    return module if module is not None and vars(module) is f_globals else None


_DECORATORS = (staticmethod, classmethod, property)


class DecoratedVariable(VariableTracker):
    """staticmethod(f), classmethod(f) or property(f) made in a class body, f a function it made
    (class_statements.py reads it as the class attribute it is)."""

    def __init__(self, kind: type, func: BaseFunctionVariable):
        super().__init__(None)
        self.kind, self.func = kind, func

    def python_type(self):
        return self.kind

    def var_getattr(self, tx, name):
        if name == "__func__" and self.kind is not property or name == "fget" and self.kind is property:
            return self.func
        unsupported(f"attribute {name!r} of {self} (setter, deleter, ...)")

    def __repr__(self):
        return f"DecoratedVariable({self.kind.__name__}, {self.func!r})"


def decorate(kind, args, kwargs):
    """staticmethod/classmethod/property called with one function made in the trace, else None."""
    if any(kind is d for d in _DECORATORS) and len(args) == 1 and not kwargs and \
            isinstance(args[0], NestedFunctionVariable):
        return DecoratedVariable(kind, args[0])
    return None


class UserMethodVariable(VariableTracker):
    """A function bound to a tracked object (`self.helper`): called with the object first."""

    def __init__(self, func: BaseFunctionVariable, obj: VariableTracker, source=None):
        super().__init__(source)
        self.func, self.obj = func, obj

    def python_type(self):
        return types.MethodType

    def truthy(self, tx) -> bool:
        return True   # a bound method defines neither __bool__ nor __len__

    def call_function(self, tx, args, kwargs):
        return tx.call(self.func, [self.obj, *args], kwargs)

    def var_getattr(self, tx, name):
        # A bound method's two members, and the rest forwarded to its function (method_getattro).
        if name == "__func__":
            return self.func
        if name == "__self__":
            return self.obj
        if name in _FUNCTION_NAMES or name == "__code__":
            return self.func.var_getattr(tx, name)
        unsupported(f"attribute {name!r} of {self}")

    def reconstruct(self, outputs):
        # Alive at a break (a method loaded before the call that breaks): the same function bound
        # to the same object again, not `obj.name`, which a super() method or an instance
        # attribute would answer differently.
        if self.source is not None:
            return SourceOutput(self.source)
        return outputs.once(self, lambda: CallOutput(ConstantOutput(bound_method), ("function", "instance"),
                                                     (outputs.rebuild(self.func), outputs.rebuild(self.obj))))


class PythonModuleVariable(VariableTracker):
    """A module such as torch, math or a user module. Attributes of torch and math are trusted
    (not guarded one by one); the module itself is guarded by identity."""

    def __init__(self, module: types.ModuleType, source=None):
        super().__init__(source)
        self.module = module

    def as_python_constant(self):
        return self.module

    def python_type(self):
        return types.ModuleType

    def reconstruct(self, outputs):
        if self.source is not None:
            return SourceOutput(self.source)
        if is_trusted_module(self.module):   # torch or math imported inside the function
            return ConstantOutput(self.module)
        return super().reconstruct(outputs)

    def var_getattr(self, tx, name):
        try:
            value = getattr(self.module, name)
        except AttributeError:
            unsupported(f"module {self.module.__name__} has no attribute {name!r}")
        trusted = is_trusted_module(self.module)
        src = AttrSource(self.source, name) if self.source is not None else None
        return tx.wrap(value, src, guard=not trusted)


def is_trusted_module(module) -> bool:
    name = getattr(module, "__name__", "")
    return name in ("math", "operator", "torch") or name.startswith("torch.")


class PureFunctionVariable(CallableVariable):
    """A function of pure.py's table (math.sqrt, operator.add, str.upper, struct.pack): run while
    tracing on constants; one of the operator module on other values runs as its operator
    (operators.py)."""

    def call_function(self, tx, args, kwargs):
        # Folding runs the function on copies of its arguments (as_python_constant): sound for
        # what only reads them. operator.setitem, delitem and the in-place operators change a
        # list, dict, set or bytearray they are given, so on one of those they run as their
        # operator on the tracker itself, whose change the trace then carries.
        if not all(immutable_constant(a) for a in [*args, *kwargs.values()]):
            twin = operator_twin(self.fn)
            if twin is not None:
                return call_operator(tx, twin, args, kwargs)
            if of_operator_module(self.fn):   # operator.iconcat on a list: would change a copy
                unsupported(f"operator.{self.fn.__name__} on a list, dict, set or bytearray")
        return fold(tx, self.fn, args, kwargs)

    def reconstruct(self, outputs):
        # A method of a builtin type read with no source (`int.__new__`, `str.upper` off the
        # builtin's name): the type's attribute again, the very object for a descriptor.
        owner = getattr(self.fn, "__self__", None)
        owner = owner if isinstance(owner, type) else getattr(self.fn, "__objclass__", None)
        name = getattr(self.fn, "__name__", None)
        if self.source is None and is_static_type(owner) and name and getattr(owner, name, None) == self.fn:
            return AttrOutput(ConstantOutput(owner), name)
        return super().reconstruct(outputs)


def _real_cell_tracker(base, i, cell, name):
    """The tracker of cell `i` (variable `name`) of a real function's closure (`base`: the
    closure's source, or None)."""
    where = ItemSource(base, i) if base is not None else None
    try:
        value = cell.cell_contents
    except ValueError:
        return CellVariable(writable=False, real=cell, cell_source=where, cell_name=name)
    src = AttrSource(where, "cell_contents") if where is not None else None
    return CellVariable(lazy=(value, src), writable=False, real=cell, cell_source=where, cell_name=name)


# -- what builder.py wraps a value read from the frame with (its WRAP_RULES) ----------------------
def wrap_python_module(tx, value, source, g):
    g(GuardKind.ID_MATCH, value)
    return PythonModuleVariable(value, source)


def wrap_function(tx, value, source, g):
    g(GuardKind.TYPE_MATCH, types.FunctionType)
    if g.enabled and value.__code__.co_flags & inspect.CO_NESTED:
        # Made inside another function, maybe anew per call: guarded by its code and by what
        # the trace reads from it, not by the identity of a short-lived object.
        g(GuardKind.ID_MATCH, value.__code__, AttrSource(source, "__code__"))
        return UserFunctionVariable(value, source, identity_guard=lambda: g(GuardKind.ID_MATCH, value))
    g(GuardKind.ID_MATCH, value)
    # The body traced is the function's code: `fn.__code__ = other` keeps the function's
    # identity, so the code is guarded too.
    g(GuardKind.ID_MATCH, value.__code__, AttrSource(source, "__code__") if source is not None else None)
    return UserFunctionVariable(value, source)


def wrap_method(tx, value, source, g):
    fsrc = AttrSource(source, "__func__") if source is not None else None
    ssrc = AttrSource(source, "__self__") if source is not None else None
    return UserMethodVariable(tx.wrap(value.__func__, fsrc, g.enabled), tx.wrap(value.__self__, ssrc, g.enabled),
                              source)


def wrap_pure_function(tx, value, source, g):
    owner = getattr(value, "__self__", None)
    if owner is None and not hasattr(value, "__objclass__") or isinstance(owner, types.ModuleType):
        g(GuardKind.ID_MATCH, value)   # a module's function: one object
        return PureFunctionVariable(value, source)
    # A method of a pure type (str.upper, int.from_bytes, "a,b".split): a descriptor no weakref
    # reaches, or a bound method made anew at each read: guarded by its name and what holds it.
    g(GuardKind.TYPE_MATCH, type(value))
    if g.enabled:
        g(GuardKind.EQUALS_MATCH, value.__name__, AttrSource(source, "__name__"))
        holder = "__self__" if owner is not None else "__objclass__"
        tx.wrap(getattr(value, holder), AttrSource(source, holder))
    return PureFunctionVariable(value, source)
