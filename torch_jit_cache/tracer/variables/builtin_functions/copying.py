"""copy.deepcopy in the trace: the copy is a graph of new trackers, built from the copied ones.

Model code copies small records inside forward: HuggingFace's `PreTrainedConfig.get_text_config`
deep-copies a config, `to_dict` deep-copies its __dict__. The copy is new, so it is what the trace
builds itself: lists and dicts become new ListVariable/DictVariable (no source: rebuilt after the
graph where they escape), plain objects a NewObjectVariable (new_object.py: rebuilt as
`cls.__new__(cls)` plus its __dict__, which is what deepcopy's default protocol makes). Values
deepcopy returns as they are (int, str, None, a dtype, a class, a function) stay the tracker that
was copied, with its source and guards. Python's memo is followed: an object reached twice in what
is copied is copied once, and a cycle closes on the copy.

What is read is guarded where it is read: an object from the frame has its attributes read as
`obj.name` (attribute.py: each value guarded) and the keys of its __dict__ pinned (DICT_KEYS), so
an attribute added or removed recompiles. Objects from the frame are guarded by type, not identity
(side_effects.py), so whether two mutable parts of what is copied are one object (one copy) or two
is pinned as it is now (ALIAS_OF / DISTINCT_FROM).

Everything else is a graph break, never a guess: tensors (TorchDynamo refuses them too: the copy
would be a new graph input), an explicit memo, classes with their own copy protocol (__deepcopy__,
__reduce_ex__, __reduce__, __getstate__, __setstate__, __getnewargs__, a copyreg reducer), and
classes whose instances the trace cannot build as deepcopy rebuilds them (new_object.refusal:
__slots__, a builtin base, __del__). An object the trace already stored to or deleted from is
refused too (the copy's attribute order would need the replayed __dict__'s).

A class may write its own __getattribute__ and __setattr__ (HuggingFace's PreTrainedConfig).
deepcopy never calls __setattr__: it fills the copy's __dict__. What it asks through
__getattribute__ is followed: on an object from the frame, the protocol's names (__deepcopy__,
__reduce_ex__, ...) must resolve to themselves (attribute_lookup's trusted renamings, as now) and
its state is its __dict__, read item by item (`x.__dict__['name']`, guarded); on the new copy,
`hasattr(y, '__setstate__')` and `y.__dict__` are run through its class's hooks
(object_hooks.py). On an object built in the trace, each protocol name is looked up through its
class's __getattribute__, traced (a config the trace deep-copied once, copied again: Whisper's
`get_text_config`), and must resolve as object's protocol would (`_hooked_protocol_refusal`).
"""
from __future__ import annotations

import copyreg
import types

from ....guard.attribute_lookup import (MISSING, has_generic_getattribute, instance_dict, resolved_name,
                                        type_lookup)
from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import GuardKind
from ..base import TracedAttributeError, VariableTracker, catching_raise, unsupported
from ..constant import ConstantVariable, SAFE_TYPES, is_immutable_torch_value
from ..collections.containers import ListVariable, TupleVariable
from ..collections.dicts import DictVariable
from ..python_objects.functions import UserFunctionVariable
from ..python_objects.new_object import NewObjectVariable, ObjectMethodVariable, UserClassVariable, refusal
from ..python_objects.object_hooks import InstanceDictVariable
from ..collections.sets import SetVariable
from ..python_objects.user_object import UserObjectVariable

# The copy protocol deepcopy follows for a plain object: object's own, all the way.
_OBJECT_PROTOCOL = {"__reduce_ex__": vars(object)["__reduce_ex__"],
                    "__reduce__": vars(object)["__reduce__"],
                    "__getstate__": vars(object).get("__getstate__", MISSING)}   # 3.11+
_NO_PROTOCOL = ("__deepcopy__", "__setstate__", "__getnewargs__", "__getnewargs_ex__")
# What deepcopy and object.__reduce_ex__ read from the object copied, through getattr, in the
# order they read it.
_READ_ON_X = ("__deepcopy__", "__reduce_ex__", "__reduce__", "__getnewargs_ex__", "__getnewargs__",
              "__getstate__")


def deepcopy(tx, args, kwargs):
    """copy.deepcopy(x) (BUILTIN_HANDLERS)."""
    memo = kwargs.get("memo", args[1] if len(args) > 1 else None)
    if len(args) != 1 or set(kwargs) - {"memo"} or \
            memo is not None and not (isinstance(memo, ConstantVariable) and memo.value is None):
        unsupported("copy.deepcopy with a memo or other arguments")
    return _Copier(tx).copy(args[0])


def _atomic(value) -> bool:
    """A value deepcopy returns as it is: numbers, strings, None, classes, functions, and tuples
    of them (a tuple whose items all copy to themselves is its own copy)."""
    if type(value) in SAFE_TYPES or isinstance(value, (type, types.FunctionType, types.BuiltinFunctionType)):
        return True
    return type(value) is tuple and all(_atomic(v) for v in value)


def _copy_set(x):
    """deepcopy of a set: set.__reduce__ gives its items in iteration order, and deepcopy makes a
    new set of their copies in that order. Items that deepcopy returns as they are (_atomic) make a
    set built in the trace, whose order is that of the same additions; a frame set the trace
    changed has no known order (sets.py), and other items (a frozenset is copied to a new one)
    break."""
    if x.source is not None and x.order is None:
        unsupported(f"copy.deepcopy of {x.source} after the trace changed it (its order is not known)")
    items = list(x.order) if x.order is not None else list(x.items)
    if not all(_atomic(v) for v in items):
        unsupported(f"copy.deepcopy of {x}: an item deepcopy would copy")
    return SetVariable(items)


def _protocol_refusal(cls: type) -> str | None:
    """Why deepcopy would not make `cls.__new__(cls)` plus a copy of the __dict__, or None."""
    if cls in copyreg.dispatch_table:
        return "copyreg has a reducer for it"
    for name, impl in _OBJECT_PROTOCOL.items():
        if type_lookup(cls, name) is not impl:
            return f"it defines its own {name}"
    for name in _NO_PROTOCOL:
        if type_lookup(cls, name) is not MISSING:
            return f"it defines {name}"
    return refusal(cls, init=False)


class _Copier:
    """One deepcopy call: its memo, keyed by tracker, and by the real object for trackers of
    objects read from the frame (two sources may reach one object)."""

    def __init__(self, tx):
        self.tx = tx
        self.memo: dict = {}       # id(tracker) (_key) -> copy
        self.by_real: dict = {}    # id(real object) -> copy
        self.reached: list = []    # (tracker, real object) of the frame's mutable objects copied
        self.keep: list = []       # the trackers whose ids key `memo`

    @staticmethod
    def _key(x) -> int:
        # Each read of a built object's __dict__ is a tracker of its own over the one dict.
        return id(x.items) if isinstance(x, InstanceDictVariable) else id(x)

    def copy(self, x) -> VariableTracker:
        if self._key(x) in self.memo:
            return self.memo[self._key(x)]
        if isinstance(x, ConstantVariable):   # a class too (classes.ClassVariable)
            v = x.value
            if type(v) in SAFE_TYPES or is_immutable_torch_value(v) or isinstance(v, type):
                return x   # deepcopy's atomic values: returned as they are
            unsupported(f"copy.deepcopy of a {type(v).__name__}")
        if isinstance(x, UserFunctionVariable):
            return x
        real = self._real(x)
        if real is not None and id(real) in self.by_real:
            return self.by_real[id(real)]
        if isinstance(x, TupleVariable):
            items = [self.copy(item) for item in x.items]
            if x.cls in (None, tuple) and all(a is b for a, b in zip(items, x.items)):
                return x   # a tuple of atomic values is its own copy
            return self._done(x, real, TupleVariable(items, fields=x.fields, cls=x.cls))
        if type(x) is ListVariable and x.cls is None:
            y = self._done(x, real, ListVariable([]))
            y.items = [self.copy(item) for item in x.items]
            return y
        if type(x) in (DictVariable, InstanceDictVariable):
            x.refuse_object_keys("copied (deepcopy copies its keys too)")
            y = self._done(x, real, DictVariable({}))
            y.items = {k: self.copy(v) for k, v in x.items.items()}
            return y
        if type(x) is NewObjectVariable:
            why = _protocol_refusal(x.cls)
            if why is None and not has_generic_getattribute(x.cls):
                why = self._hooked_protocol_refusal(x)
            if why is not None:
                unsupported(f"copy.deepcopy of a {x.cls.__name__}: {why}")
            y = self._done(x, real, self._new(x.cls, x.cls_var))
            y.attrs.update({k: self.copy(v) for k, v in x.attrs.items()})
            return y
        if type(x) is UserObjectVariable:
            return self._copy_frame_object(x, real)
        if isinstance(x, SetVariable) and x.cls is set:
            return self._done(x, real, _copy_set(x))
        unsupported(f"copy.deepcopy of {x}")

    def _hooked_protocol_refusal(self, x) -> str | None:
        """Why deepcopy's reads on `x`, an object built in the trace whose class has its own
        __getattribute__, would not find object's protocol, or None. Each name deepcopy and
        object.__reduce_ex__ ask for (`_READ_ON_X`, in the order they ask) is looked up through
        the class's hook, traced as Python runs it: the names object answers (__reduce_ex__,
        __reduce__, __getstate__) must give object's own method bound to `x`, the others must
        raise AttributeError. Its state is then `x`'s tracked __dict__, which object.__getstate__
        reads without the hook."""
        for name in _READ_ON_X:
            value, found = catching_raise(self.tx, lambda n=name: x.var_getattr(self.tx, n), TracedAttributeError)
            if name not in _OBJECT_PROTOCOL:
                if found:
                    return f"its __getattribute__ answers {name}"
            elif not (isinstance(value, ObjectMethodVariable) and value.obj is x and value.name == name):
                return f"its __getattribute__ does not answer {name} with object's own"
        return None

    def _real(self, x):
        """The frame's object behind `x` (a plain object, list or dict with a source), or None;
        its relation to each such object copied before is pinned as it is now."""
        real = self.tx.output.side_effects.real_object(x) if x.source is not None else None
        if real is None:
            return None
        for other, other_real in self.reached:
            self.tx.output.side_effects.pin(
                x, other_real is real, other,
                f"copy.deepcopy reaches {x.source} and {other.source}")
        self.reached.append((x, real))
        return real

    def _done(self, x, real, y):
        self.memo[self._key(x)] = y
        self.keep.append(x)
        if real is not None:
            self.by_real[id(real)] = y
        return y

    def _new(self, cls, cls_var):
        """`cls.__new__(cls)`, then what deepcopy's _reconstruct asks of it before it fills the
        __dict__: `hasattr(y, "__setstate__")` (must be False) and `y.__dict__` (must be its own
        __dict__), run through the class's own __getattribute__ where it has one."""
        y = NewObjectVariable(cls, cls_var)
        if y.has_attribute(self.tx, "__setstate__") or \
                not isinstance(y.var_getattr(self.tx, "__dict__"), InstanceDictVariable):
            unsupported(f"copy.deepcopy of a {cls.__name__}: the copy's __setstate__ or __dict__ "
                        "is its class's own")
        return y

    def _copy_frame_object(self, x, obj):
        cls = type(obj)
        why = _protocol_refusal(cls)
        if why is None and self.tx.output.side_effects.has_any_attr_effect(obj):
            why = "the trace changed its attributes before"
        d = instance_dict(obj)
        if why is None and any(name in d for name in _READ_ON_X):
            why = "its __dict__ has a name of the copy protocol"
        if why is None and type_lookup(cls, "__getattr__") is not MISSING:
            why = "its __getattr__ would be asked for __deepcopy__"   # (object_protocol.py)
        if why is None:   # read through its __getattribute__: trusted renamings only (user_object.py)
            renamed = [name for name in _READ_ON_X if resolved_name(obj, name) != name]
            why = f"its __getattribute__ renames {renamed[0]}" if renamed else None
        cls_var = self.tx.wrap(cls, AttrSource(x.source, "__class__"))
        if why is None and not isinstance(cls_var, UserClassVariable):
            why = "its class is not a plain user class"
        if why is not None:
            unsupported(f"copy.deepcopy of a {cls.__name__}: {why}")
        # What is copied is the __dict__ (object.__getstate__): the names there now, in this order,
        # each value read from it (a data descriptor or a renaming of the same name is not asked).
        dict_source = AttrSource(x.source, "__dict__")
        self.tx.output.add_guard(dict_source, GuardKind.DICT_KEYS, tuple(d))
        y = self._done(x, obj, self._new(cls, cls_var))
        for name in d:
            y.attrs[name] = self.copy(self.tx.wrap(d[name], ItemSource(dict_source, name)))
        return y
