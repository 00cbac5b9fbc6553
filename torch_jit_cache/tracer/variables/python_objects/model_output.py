"""ModelOutputVariable: a HuggingFace ModelOutput (or diffusers BaseOutput) that the trace constructs.

transformers.utils.generic.ModelOutput is an OrderedDict subclass that every model output
dataclass derives from (`BaseModelOutputWithPast(last_hidden_state=h, past_key_values=cache)`);
diffusers.utils.outputs.BaseOutput (`UNet2DConditionOutput(sample=h)`) is its copy in diffusers,
with the same semantics for everything modelled here (MODEL_OUTPUT_BASES).
Its state is in two places: the dataclass fields, as instance attributes, and the OrderedDict's
items, which hold the non-None fields in field order (its __post_init__ puts them there; its
__setattr__ on a field also stores the item when the value is not None; its __setitem__ also sets
the attribute). The OrderedDict part is C state that no tracked __dict__ can stand for, so the
class is not inlined as a plain object (new_object.py refuses builtin bases); it is modelled here
by those semantics: `fields` (every dataclass field's tracker, in field order) and `keys` (the
items' keys, in order).

Reads: `out.name` for a field, `out["name"]` for a present key (a missing one is a KeyError:
refused), `out[0]` / `out[1:]` through to_tuple() (the values of `keys`), `out.to_tuple()`,
`keys()`, `values()`, `items()`, `get()`, iteration (over the keys), truth (non-empty). Stores: a
field by attribute or by item, with ModelOutput's rules. Anything else is refused.

After the graph the object is made again by calling the class with every field as a keyword
(trace_result.CallOutput). That is the object eager code makes only if the call ends with the
same items: its dataclass __init__ stores each field and __post_init__ adds the non-None ones, in
field order; so `keys` must be exactly the non-None fields in field order, or the rebuild is
refused (a field stored None, or stored out of order, after construction). Calling the class
after the graph runs nothing the trace skipped that eager code would see differently:
__post_init__ only checks the fields and registers the class with torch's pytree once.

Which classes: a dataclass deriving from a class of MODEL_OUTPUT_BASES (matched by module and
name: this package never imports transformers or diffusers), whose __init__ is the one dataclass
generated, whose other fields default to None (ModelOutput's own rule), and that overrides none of
the methods modelled here but those of _OVERRIDABLE. ModelOutput's special case for a lone
non-tensor first field (a dict or an iterator of pairs spread into fields; BaseOutput's: a dict) is
refused.

Methods written in Python that this file does not model (CLIPOutput's own `to_tuple`, a helper a
subclass adds) are traced as Python with the object as `self`, read from the class through its
source (`G['CLIPOutput'].to_tuple`, guarded by identity); `out[0]` goes through an overriding
to_tuple, as ModelOutput.__getitem__ does.
"""
from __future__ import annotations

import dataclasses
import types

from ....guard.attribute_lookup import type_lookup
from ....guard.sources import AttrSource
from ....guard.trace_result import CallOutput, SourceOutput
from ..base import MethodVariable, VariableTracker, unsupported
from ..constant import ConstantVariable
from ..collections.containers import ListVariable, TupleVariable
from .functions import UserMethodVariable
from ..builtin_functions.operators import getitem
from ..torch_objects.tensor import TensorVariable

# What this file models: each must be what ModelOutput has (its own, OrderedDict's, dict's).
_MODELLED = ("__post_init__", "__setattr__", "__setitem__", "__getitem__", "to_tuple",
             "__getattribute__", "__delitem__", "keys", "values", "items", "get", "__iter__",
             "__len__", "__bool__", "__contains__", "__getattr__", "__delattr__")
# Of those, what a subclass may override with a Python function (traced as Python): nothing else
# here calls it, but __getitem__ with an index, which the override then answers.
_OVERRIDABLE = ("to_tuple",)


# The OrderedDict-and-dataclass output bases whose methods behave as this file models them, as
# (module, class name). diffusers' BaseOutput differs from ModelOutput only where this file refuses
# anyway: its __post_init__ spreads a lone dict first field (refused in construct()).
MODEL_OUTPUT_BASES = frozenset({
    ("transformers.utils.generic", "ModelOutput"),
    ("diffusers.utils.outputs", "BaseOutput"),
})


def _model_output_base(cls: type):
    for klass in cls.__mro__:
        if (klass.__module__, klass.__name__) in MODEL_OUTPUT_BASES:
            return klass
    return None


def is_model_output_class(cls: type) -> bool:
    return _model_output_base(cls) is not None


def _refusal(cls: type) -> str | None:
    base = _model_output_base(cls)
    if type(cls) is not type or not dataclasses.is_dataclass(cls) or cls is base:
        return "not a dataclass subclass of ModelOutput"
    for name in _MODELLED:
        if type_lookup(cls, name) is not type_lookup(base, name) and not (
                name in _OVERRIDABLE and isinstance(type_lookup(cls, name), types.FunctionType)):
            return f"it overrides {name}"
    init = type_lookup(cls, "__init__")
    owner = next(k for k in cls.__mro__ if "__init__" in vars(k))
    if not (isinstance(init, types.FunctionType) and dataclasses.is_dataclass(owner)
            and init.__code__.co_filename == "<string>"
            and init.__qualname__ == f"{owner.__qualname__}.__init__"):
        return "its __init__ is not the one @dataclass made"
    fields = dataclasses.fields(cls)
    if not fields:
        return "it has no fields"
    if any(not f.init or getattr(f, "kw_only", False) for f in fields):
        return "a field is left out of __init__ or keyword-only"
    if any(f.default is not None for f in fields[1:]) or \
            any(f.default_factory is not dataclasses.MISSING for f in fields):
        return "a field other than the first has a default other than None"
    return None


def _is_none(v) -> bool:
    return isinstance(v, ConstantVariable) and v.value is None


def construct(tx, cls_var, args: list, kwargs: dict) -> "ModelOutputVariable":
    """`cls(*args, **kwargs)` for a ModelOutput class `cls_var` (a UserClassVariable)."""
    cls = cls_var.value
    why = _refusal(cls)
    if why is not None:
        unsupported(f"construction of {cls.__qualname__} in the trace: {why}")
    names = [f.name for f in dataclasses.fields(cls)]
    if len(args) > len(names) or any(k not in names for k in kwargs) or \
            any(k in names[:len(args)] for k in kwargs):
        unsupported(f"{cls.__qualname__}() called with arguments its fields do not take")
    values = dict(zip(names, args), **kwargs)
    first = dataclasses.fields(cls)[0]
    if names[0] not in values and first.default is dataclasses.MISSING:
        unsupported(f"{cls.__qualname__}() without its required field {names[0]!r}")
    fields = {n: values.get(n, ConstantVariable(None)) for n in names}
    others_none = all(_is_none(fields[n]) for n in names[1:])
    if others_none and not isinstance(fields[names[0]], TensorVariable) and not _is_none(fields[names[0]]):
        unsupported(f"{cls.__qualname__}() with a lone first field that is not a tensor "
                    "(ModelOutput may spread it into fields)")
    return ModelOutputVariable(cls, cls_var, fields, [n for n in names if not _is_none(fields[n])])


class ModelOutputVariable(VariableTracker):
    def __init__(self, cls: type, cls_var, fields: dict, keys: list):
        super().__init__(None)
        self.cls, self.cls_var = cls, cls_var
        self.fields, self.keys = fields, keys

    def python_type(self):
        return self.cls

    def _values(self) -> list:
        return [self.fields[k] for k in self.keys]

    def _python_method(self, name: str):
        """The class's Python function `name` where it is traced rather than modelled, else None."""
        raw = type_lookup(self.cls, name)
        if not isinstance(raw, types.FunctionType) or name in self.fields:
            return None
        if name in _MODELLED and (name not in _OVERRIDABLE or raw is type_lookup(_model_output_base(self.cls), name)):
            return None
        return raw

    def var_getattr(self, tx, name: str) -> VariableTracker:
        if name in self.fields:
            return self.fields[name]
        if name == "__class__":
            return self.cls_var
        fn = self._python_method(name)
        if fn is not None:
            if self.cls_var.source is None:
                unsupported(f"{self.cls.__name__}.{name}: the class has no source to guard it by")
            return UserMethodVariable(tx.wrap(fn, AttrSource(self.cls_var.source, name)), self)
        if name in ("to_tuple", "keys", "values", "items", "get"):
            return MethodVariable(self, name)
        unsupported(f"attribute {name!r} of a {self.cls.__name__} built in the trace")

    def call_method(self, tx, name, args, kwargs):
        if self._python_method(name) is not None:
            return tx.call(self.var_getattr(tx, name), args, kwargs)
        if kwargs:
            unsupported(f"{self.cls.__name__}.{name} with keyword arguments")
        if name == "to_tuple" and not args:
            return TupleVariable(self._values())
        if name == "keys" and not args:
            return ListVariable([ConstantVariable(k) for k in self.keys])
        if name == "values" and not args:
            return ListVariable(self._values())
        if name == "items" and not args:
            return ListVariable([TupleVariable([ConstantVariable(k), self.fields[k]]) for k in self.keys])
        if name == "get" and len(args) in (1, 2) and args[0].is_python_constant():
            key = args[0].as_python_constant()
            if key in self.keys:
                return self.fields[key]
            return args[1] if len(args) == 2 else ConstantVariable(None)
        if name == "__getitem__" and len(args) == 1:
            return self.getitem(tx, args[0])
        unsupported(f"{self.cls.__name__}.{name}() on an object built in the trace")

    def getitem(self, tx, key):
        if not key.is_python_constant():
            unsupported(f"subscript of a {self.cls.__name__} by {key}")
        k = key.as_python_constant()
        if isinstance(k, str):
            if k not in self.keys:
                unsupported(f"KeyError {k!r}: {self.cls.__name__} has no item {k!r}")
            return self.fields[k]
        if self._python_method("to_tuple") is not None:
            return getitem(tx, self.call_method(tx, "to_tuple", [], {}), key)
        values = self._values()
        if isinstance(k, slice):
            return TupleVariable(values[k])
        if isinstance(k, int) and -len(values) <= k < len(values):
            return values[k]
        unsupported(f"index {k!r} into the to_tuple() of a {self.cls.__name__} of {len(values)} items")

    def _store(self, name: str, value, *, item: bool) -> None:
        if name not in self.fields:
            unsupported(f"store of {name!r}, not a field of {self.cls.__name__}")
        if not item and _is_none(value) and name in self.keys:
            # ModelOutput.__setattr__ leaves the item as it was: attribute and item now differ.
            unsupported(f"{self.cls.__name__}.{name} = None while its item is set")
        self.fields[name] = value
        if (item or not _is_none(value)) and name not in self.keys:
            self.keys.append(name)

    def var_setattr(self, tx, name: str, value) -> None:
        self._store(name, value, item=False)   # ModelOutput.__setattr__: the item only if not None

    def setitem(self, tx, key, value) -> None:
        if not (key.is_python_constant() and isinstance(key.as_python_constant(), str)):
            unsupported(f"item assignment on a {self.cls.__name__} by {key}")
        self._store(key.as_python_constant(), value, item=True)

    def unpack(self, tx) -> list:
        return [ConstantVariable(k) for k in self.keys]

    def truthy(self, tx) -> bool:
        return bool(self.keys)

    def reconstruct(self, outputs):
        expected = [n for n, v in self.fields.items() if not _is_none(v)]
        if self.keys != expected:
            unsupported(f"a {self.cls.__name__} whose items {self.keys} are not its non-None "
                        f"fields in order {expected}: calling the class again would not make it")
        return outputs.once(self, lambda: CallOutput(
            SourceOutput(self.cls_var.source), tuple(self.fields),
            tuple(outputs.rebuild(v) for v in self.fields.values())))

    def __repr__(self):
        return f"ModelOutputVariable({self.cls.__name__})"

    def bound_method_type(self, name):
        return types.MethodType


