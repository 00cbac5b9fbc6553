"""An instance of a plain subclass of dict read from the frame, traced as a dict of its class that
the trace may change (the subclass objects the trace builds are dict_subclasses.py's).

Which objects: the class passes dict_subclass_refusal (Python functions only; of the special
methods only __init__, __setitem__, __delitem__ and __post_init__), has no __setattr__ or
comparison of its own, derives from dict itself (not
OrderedDict, whose order lives outside the dict), keeps dict's own __getitem__ (the guards read
each value through `d[k]`), and every key is a constant the guards may hold. Anything else stays
user_object.DictSubclassVariable, which reads and never writes.

Guards: the object's type; its keys in order (DICT_KEYS, read as dict's); each value the trace
reads, through `d[k]`; the class by identity (through `d.__class__`, where the class's own methods
are read); the names of the instance __dict__ (DICT_KEYS on `d.__dict__`), so an instance attribute
that appears, or goes, recompiles.

Changes: item changes are the dict model's (containers.py `mutating`), replayed after the graph on
the very object as its final items with dict's own clear and update (codegen._replace_dict: the
subclass's overrides of those are not what the trace ran); attribute stores go to the instance
__dict__ through object.__setattr__ (the class defines no __setattr__), replayed in program order
with the other side effects. The object itself is what the caller gets back (its source).
"""
from __future__ import annotations

from ....guard.attribute_lookup import Where, instance_dict, lookup, type_lookup
from ....guard.sources import AttrSource, ItemSource
from ....guard.trace_result import GuardKind
from ..python_objects.attribute import read_attribute, store_attribute
from ..base import unsupported
from .containers import is_key_constant, reloaded
from .dict_subclass_reads import keeps_dicts
from .dict_subclasses import BuiltDictSubclassVariable, dict_subclass_refusal, own_comparison


def traced_as_dict(value) -> bool:
    """Whether a frame object of a dict subclass is traced as a dict of its class (see above)."""
    cls = type(value)
    if not isinstance(value, dict) or cls is dict or dict_subclass_refusal(cls) is not None:
        return False
    if type_lookup(cls, "__setattr__") is not vars(object)["__setattr__"] or own_comparison(cls):
        return False   # stores and == here are the model's own (see above)
    builtin = next(klass for klass in cls.__mro__ if not klass.__flags__ & (1 << 9))
    return builtin is dict and keeps_dicts(cls, "__getitem__") and all(is_key_constant(k) for k in dict.keys(value))


class FrameDictSubclassVariable(BuiltDictSubclassVariable):
    """The dict of its class that the frame's object is; `value` is the object (held for the
    trace only, as every frame object's tracker holds it)."""

    def __init__(self, value, items: dict, source, cls_var):
        super().__init__(type(value), items, cls_var=cls_var)
        self.source, self.value = source, value

    def reconstruct(self, outputs):
        return reloaded(self)   # the very object; its changes are replayed on it first

    def var_getattr(self, tx, name):
        effects = tx.output.side_effects
        if name in (instance_dict(self.value) or {}) or effects.has_attr_effect(self, self.value, name):
            return read_attribute(tx, self, self.value, name)   # the instance __dict__ wins over methods
        return super().var_getattr(tx, name)

    def var_setattr(self, tx, name, value):
        if name.startswith("__") or lookup(self.value, name).where not in (Where.INSTANCE_DICT, Where.MISSING):
            unsupported(f"store to {self.cls.__name__}.{name}, a name its class has")
        store_attribute(tx, self, self.value, name, value)

    def var_delattr(self, tx, name):
        unsupported(f"deletion of {self.cls.__name__}.{name} from an object read from the frame")

    def __repr__(self):
        return f"FrameDictSubclassVariable({self.cls.__name__} from {self.source})"


def wrap_frame_dict_subclass(tx, value, source, g):
    cls = type(value)
    g(GuardKind.TYPE_MATCH, cls)
    keys = tuple(dict.keys(value))
    g(GuardKind.DICT_KEYS, keys)
    g(GuardKind.DICT_KEYS, tuple(instance_dict(value) or {}), AttrSource(source, "__dict__"))
    cls_var = tx.wrap(cls, AttrSource(source, "__class__"))
    items = {k: tx.wrap(dict.__getitem__(value, k), ItemSource(source, k), g.enabled) for k in keys}
    return FrameDictSubclassVariable(value, items, source, cls_var)
