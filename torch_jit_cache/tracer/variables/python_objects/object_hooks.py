"""object's own attribute hooks, reached from a class's Python ones, and an object's __dict__.

A class may write its own __getattribute__ / __setattr__ / __delattr__ in Python and end in
object's: HuggingFace's PreTrainedConfig renames through `attribute_map` and then calls
`super().__setattr__(key, value)`; huggingface_hub's `@strict` validates and then calls the
__setattr__ it replaced. For an object the trace built (new_object.py) such hooks are run step by
step: `obj.name` inlines `type(obj).__getattribute__(obj, "name")`, and so on down to object's,
which is ObjectHookVariable here: `object.__getattribute__(obj, name)` (reached as an attribute
of `object`, of a class that inherits it, or of super()) is the object's generic lookup
(`generic_getattr`: Python's order over its tracked __dict__ and its class), `object.__setattr__`
and `object.__delattr__` plain stores into and deletions from that __dict__. A missing attribute
is a TracedAttributeError, which hasattr and getattr with a default catch (builtins.py).

InstanceDictVariable: `obj.__dict__` of such an object, a dict tracker whose items are the very
dict of trackers the object keeps (`attrs`): a store through either is seen through the other, as
in Python. Rebuilt after the graph as `obj.__dict__` of the rebuilt object, only where the class's
__getattribute__ is object's (otherwise `obj.__dict__` after the graph would run the class's own
hook, which the trace did not ask for that name).

For objects read from the frame, ObjectHookVariable calls the tracker's `object_getattr` /
`object_setattr` / `object_delattr` instead (object_protocol.py: the real object's generic lookup,
guarded, and stores recorded for replay).
"""
from __future__ import annotations

from ....guard.attribute_lookup import has_generic_getattribute
from ....guard.trace_result import AttrOutput, SourceOutput
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable
from ..collections.dicts import DictVariable

# object's hooks by name: what calling each does to an object that has the generic operation.
OBJECT_HOOKS = {name: vars(object)[name] for name in ("__getattribute__", "__setattr__", "__delattr__")}
# object's allocation and initialisation: `object.__new__(cls)` makes a new object of a plain class
# (the class tracker's `new_object`, new_object.py), `object.__init__(obj)` does nothing.
_OBJECT_MAKERS = {name: vars(object)[name] for name in ("__new__", "__init__")}


def object_hook_name(raw) -> str | None:
    """The name of object's own hook `raw` is, or None."""
    for name, hook in (*OBJECT_HOOKS.items(), *_OBJECT_MAKERS.items()):
        if raw is hook:
            return name
    return None


class ObjectHookVariable(VariableTracker):
    """object.__getattribute__ / __setattr__ / __delattr__ / __new__ / __init__, unbound (`object.__setattr__`, read
    through `source`: loaded again from there at a break) or bound by super() to an object built
    in the trace (`super().__setattr__`)."""

    def __init__(self, name: str, obj=None, source=None):
        super().__init__(source)
        self.name, self.obj = name, obj

    def reconstruct(self, outputs):
        if self.obj is None and self.source is not None:
            return SourceOutput(self.source)
        return super().reconstruct(outputs)

    def call_function(self, tx, args, kwargs):
        if self.obj is not None:
            args = [self.obj, *args]
        if self.name == "__new__":
            # object.__new__(cls) with more arguments raises in eager (the class has its own
            # __new__ or __init__ that took them).
            if kwargs or len(args) != 1 or not hasattr(args[0], "new_object"):
                unsupported(f"object.__new__ of {', '.join(map(repr, args))}: not one plain class")
            return args[0].new_object(tx)
        if self.name == "__init__":
            # object.__init__(obj) does nothing; with more arguments it may raise (CPython's
            # object_init), which is left to eager.
            if kwargs or len(args) != 1:
                unsupported(f"object.__init__ with {len(args) - 1} extra arguments")
            return ConstantVariable(None)
        arity = {"__getattribute__": 2, "__setattr__": 3, "__delattr__": 2}[self.name]
        if kwargs or len(args) != arity:
            unsupported(f"object.{self.name} with {len(args)} arguments")
        obj, key, *value = args
        prefix = "generic" if hasattr(obj, "generic_getattr") else "object"
        if not hasattr(obj, f"{prefix}_getattr"):
            unsupported(f"object.{self.name} on {obj}: not a user object")
        if not key.is_python_constant() or type(key.as_python_constant()) is not str:
            unsupported(f"object.{self.name} with a name that is not a constant str")
        name = key.as_python_constant()
        if self.name == "__getattribute__":
            return getattr(obj, f"{prefix}_getattr")(tx, name)
        if self.name == "__setattr__":
            getattr(obj, f"{prefix}_setattr")(tx, name, value[0])
        else:
            getattr(obj, f"{prefix}_delattr")(tx, name)
        return ConstantVariable(None)

    def __repr__(self):
        bound = f" of {self.obj!r}" if self.obj is not None else ""
        return f"ObjectHookVariable({self.name}{bound})"


class InstanceDictVariable(DictVariable):
    """`obj.__dict__` of an object the trace built: its items are the object's own `attrs`."""

    def __init__(self, obj):
        VariableTracker.__init__(self, None)
        self.obj = obj
        self.items = obj.attrs   # shared, not copied: one dict, seen through both

    # The object's: an attribute added or removed changes its keys under a loop over either.
    @property
    def version(self):
        return self.obj.dict_version

    @version.setter
    def version(self, value):
        self.obj.dict_version = value

    def reconstruct(self, outputs):
        if self.items is not self.obj.attrs:
            unsupported(f"the __dict__ of a {self.obj.python_type().__name__} built in the trace leaves "
                        "it after the object was given another")
        if not has_generic_getattribute(self.obj.python_type()):
            unsupported(f"the __dict__ of a {self.obj.python_type().__name__} built in the trace "
                        "leaves it (its class has its own __getattribute__)")
        return AttrOutput(outputs.rebuild(self.obj), "__dict__")

    def __repr__(self):
        return f"InstanceDictVariable({self.obj!r})"


def replace_instance_dict(obj, value) -> None:
    """`obj.__dict__ = value` (object's `__dict__` setter) for an object the trace built, `value` a
    dict the trace made (as functools.partial.__setstate__ does): that very dict becomes the
    object's, one dict of trackers seen through both (`obj.attrs` is `value.items`). After the
    graph `value` is rebuilt as the rebuilt object's `__dict__` while it still is it. A dict read
    from the frame, a dict subclass or another object's __dict__ is refused."""
    cls = obj.python_type()
    if type(value) is not DictVariable or value.source is not None:
        unsupported(f"{cls.__name__}.__dict__ = {value}: only a plain dict the trace made")
    if not all(type(k) is str for k in value.items):
        unsupported(f"{cls.__name__}.__dict__ = a dict with keys other than str")
    if not has_generic_getattribute(cls) or value.instance_dict_of is not None:
        unsupported(f"{cls.__name__}.__dict__ = {value}: the dict is another object's, or the class has "
                    "its own __getattribute__")

    def rebuilt(outputs):
        return AttrOutput(outputs.rebuild(obj), "__dict__") if obj.attrs is value.items else None

    obj.attrs = value.items
    obj.dict_version += 1
    value.instance_dict_of = rebuilt
