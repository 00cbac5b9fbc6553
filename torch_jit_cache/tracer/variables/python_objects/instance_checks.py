"""isinstance() and issubclass() as CPython decides them: by the metaclass's __instancecheck__ /
__subclasscheck__, looked up on the type of the class.

    isinstance(obj, cls)  ->  type(obj) is cls  or  type(cls).__instancecheck__(cls, obj)
    issubclass(c, cls)    ->  type(cls).__subclasscheck__(cls, c)
    (a tuple of classes: any of them, item by item)

Most metaclasses decide from the object's *type*, which the tracer knows (each tracker's
python_type(), guarded where the object was read): `type` itself and `abc.ABCMeta` (whose registry
and __subclasshook__ see only classes). Both also ask `obj.__class__`, which is the type unless the
class defines `__class__` itself (a proxy, a mock): isinstance of such an object is a graph break. Those rows are BY_TYPE. A metaclass with a check of its
own may decide from the object's *state*: torch.BoolStorage's metaclass answers True for a
TypedStorage whose dtype is bool, which is not a subclass of BoolStorage. Deciding such a check
from the type answered False where eager answers True (`assert isinstance(s, torch.BoolStorage)`
failed in the compiled call). A check written in Python is traced as the Python it is, so what it
reads of the object is read, and guarded, as any read is, or is the graph break; a check in C
that no row names is a graph break.

Rows of KNOWN_CHECKS are torch's own checks written in Python whose answer is known from the
type: the Parameter and Buffer metaclasses (True also for a tensor flagged `_is_param` /
`_is_buffer`, which only tensor subclasses are, and those never enter a graph: tensor.py),
torch.autograd's Variable (any tensor) and torch.Generator's (type's check, or an export fake
object, which is refused). Traced instead, each would run torch's code for a common test.
`super().__instancecheck__(obj)` in a metaclass's own check reaches type's: TypeCheckVariable.

The second argument may also be an object that is no class whose type has a check of its own
(`isinstance(m, typing.Mapping)`: typing's _SpecialGenericAlias asks `issubclass(type(m),
collections.abc.Mapping)`): that check is traced the same way (_object_check).
"""
from __future__ import annotations

import abc
import types

from ....guard.attribute_lookup import type_lookup
from ....guard.sources import AttrSource
from ..base import CallableVariable, unsupported
from ..constant import ConstantVariable
from ..collections.containers import TupleVariable

# __instancecheck__ / __subclasscheck__ functions that decide from classes alone.
BY_TYPE = frozenset({type.__instancecheck__, type.__subclasscheck__,
                     abc.ABCMeta.__instancecheck__, abc.ABCMeta.__subclasscheck__})


def _known_checks() -> dict:
    """{__instancecheck__ function: answer(type of the object, cls) -> bool, or None where the
    answer needs the object itself}. Imported here, once, so that this module imports without torch."""
    try:
        import torch
        from torch.autograd.variable import VariableMeta
        from torch.nn.parameter import _BufferMeta, _ParameterMeta

        from ....torch_compat import custom_class_base
        CustomClassBase, CustomClassBaseMeta = custom_class_base()
    except ImportError:
        return {}

    def opaque(t, cls):
        # torch.Generator's metaclass: type's check, then a FakeScriptObject wrapping an instance
        # (made only by export's fake script objects); CustomClassBase itself asks a registry.
        from torch._library.fake_class_registry import FakeScriptObject
        return None if cls is CustomClassBase or issubclass(t, FakeScriptObject) else issubclass(t, cls)

    return {_ParameterMeta.__instancecheck__: issubclass, _BufferMeta.__instancecheck__: issubclass,
            VariableMeta.__instancecheck__: lambda t, cls: issubclass(t, torch.Tensor),
            CustomClassBaseMeta.__instancecheck__: opaque}


KNOWN_CHECKS = _known_checks()


_OBJECT_CLASS = vars(object)["__class__"]


# The class of a (tracker, class) pair whose tracker is an object the trace holds, not a constant.
_AN_OBJECT = object()


def _class_items(cls_var) -> list:
    """The (tracker, class) pairs of isinstance's second argument: one class, or a tuple of them
    (nested tuples flattened, as Python does); an object that is no constant is (tracker, _AN_OBJECT)."""
    if isinstance(cls_var, TupleVariable):
        return [pair for item in cls_var.items for pair in _class_items(item)]
    if not cls_var.is_python_constant():
        return [(cls_var, _AN_OBJECT)]
    value = cls_var.as_python_constant()
    if isinstance(value, types.UnionType):   # int | str
        return [pair for v in value.__args__ for pair in _class_items(ConstantVariable(v))]
    if isinstance(value, tuple):
        items = cls_var.items if isinstance(cls_var, TupleVariable) else [ConstantVariable(v) for v in value]
        return [pair for item in items for pair in _class_items(item)]
    return [(cls_var, value)]


def _traced_check(tx, cls_var, cls, check, name: str, arg) -> bool:
    """type(cls).<name>(cls, arg), traced as the Python function it is."""
    if cls_var.source is None:
        unsupported(f"{type(cls).__name__}.{name} of a class that has no source")
    if cls is _AN_OBJECT:
        cls = cls_var
    fn = tx.wrap(check, AttrSource(AttrSource(cls_var.source, "__class__"), name))
    result = tx.call(fn, [cls_var, arg], {})
    if not result.is_python_constant():
        unsupported(f"{type(cls).__name__}.{name} returned {result}, not a constant")
    return bool(result.as_python_constant())   # Python takes the truth of what it returns


def _object_check(tx, cls_var, name: str, arg) -> bool:
    """isinstance / issubclass against an object that is no class (`typing.Mapping`, a
    _SpecialGenericAlias): Python calls its type's `name`; one written in Python is traced (it reads
    the object through its source, guarded), one in C, or none (a TypeError), breaks."""
    check = type_lookup(cls_var.python_type(), name)
    if not isinstance(check, types.FunctionType):
        unsupported(f"{name} of {cls_var}: not a class, and its type has no Python {name}")
    return _traced_check(tx, cls_var, _AN_OBJECT, check, name, arg)


def isinstance_(tx, args, kwargs):
    if kwargs or len(args) != 2:
        unsupported("isinstance() with other than two arguments")
    obj, cls_arg = args
    t = obj.python_type()
    if type_lookup(t, "__class__") is not _OBJECT_CLASS:
        # type's and ABCMeta's checks also ask obj.__class__, which this class answers itself (a
        # proxy or a mock that pretends to be another class).
        unsupported(f"isinstance of a {t.__name__}, whose class defines __class__")
    for cls_var, cls in _class_items(cls_arg):
        if t is cls:   # CPython's exact-type shortcut, before any __instancecheck__
            return ConstantVariable(True)
        if cls is _AN_OBJECT:
            if _object_check(tx, cls_var, "__instancecheck__", obj):
                return ConstantVariable(True)
            continue
        if not isinstance(cls, type):
            unsupported(f"isinstance(..., {cls!r}): not a class")
        check = type_lookup(type(cls), "__instancecheck__")
        if check in BY_TYPE:
            answer = issubclass(t, cls)
        elif check in KNOWN_CHECKS:
            answer = KNOWN_CHECKS[check](t, cls)
            if answer is None:
                unsupported(f"isinstance(..., {cls.__name__}): its metaclass decides from the object")
        elif isinstance(check, types.FunctionType):
            answer = _traced_check(tx, cls_var, cls, check, "__instancecheck__", obj)
        else:
            unsupported(f"isinstance(..., {cls.__name__}): its metaclass {type(cls).__name__} decides "
                        "in C from the object")
        if answer:
            return ConstantVariable(True)
    return ConstantVariable(False)


def issubclass_(tx, args, kwargs):
    if kwargs or len(args) != 2:
        unsupported("issubclass() with other than two arguments")
    sub_var, cls_arg = args
    sub = sub_var.as_python_constant() if sub_var.is_python_constant() else None
    if not isinstance(sub, type):
        unsupported(f"issubclass({sub_var}, ...) on a value that is not a class")
    for cls_var, cls in _class_items(cls_arg):
        if cls is _AN_OBJECT:
            if _object_check(tx, cls_var, "__subclasscheck__", sub_var):
                return ConstantVariable(True)
            continue
        if not isinstance(cls, type):
            unsupported(f"issubclass(..., {cls!r}): not a class")
        check = type_lookup(type(cls), "__subclasscheck__")
        if check in BY_TYPE:
            # Classes are guarded by identity where they are read; an ABC's register() after the
            # trace is not seen.
            answer = issubclass(sub, cls)
        elif isinstance(check, types.FunctionType):
            answer = _traced_check(tx, cls_var, cls, check, "__subclasscheck__", sub_var)
        else:
            unsupported(f"issubclass(..., {cls.__name__}): its metaclass {type(cls).__name__} decides in C")
        if answer:
            return ConstantVariable(True)
    return ConstantVariable(False)


class TypeCheckVariable(CallableVariable):
    """type.__instancecheck__ / type.__subclasscheck__ bound to a class (`super().__instancecheck__`
    in a metaclass's own check): the decision by type, whatever the class's metaclass."""

    def __init__(self, fn, cls_var):
        super().__init__(fn)
        self.cls_var = cls_var

    def call_function(self, tx, args, kwargs):
        cls = self.cls_var.as_python_constant() if self.cls_var.is_python_constant() else None
        if kwargs or len(args) != 1 or not isinstance(cls, type):
            unsupported(f"type.{self.fn.__name__}({self.cls_var}, ...)")
        if self.fn is type.__instancecheck__:
            t = args[0].python_type()
        else:
            t = args[0].as_python_constant() if args[0].is_python_constant() else None
            if not isinstance(t, type):
                unsupported(f"type.__subclasscheck__ of {args[0]}, not a class")
        return ConstantVariable(issubclass(t, cls))
