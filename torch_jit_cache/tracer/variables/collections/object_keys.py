"""Dict keys that are objects made in the trace (an instance of a user class, whose `__hash__` and
`__eq__` are Python): a plain dict the trace made holds one as an ObjectKey, the object's tracker
with the hash stored with the entry, as CPython's dict stores one.

A lookup in such a dict, or by such an object (`d[k]`, `d[k] = v`, `del d[k]`, `get`, `in`, `pop`,
`setdefault`), is made as CPython's dict makes it: the key's hash once (its class's `__hash__`
traced; object's own hashes by identity), then, among the entries stored with that hash, the
same object found without a comparison, or the stored key compared with `stored == key` (traced,
the stored key's `__eq__` first, as PyObject_RichCompare does). An exception either raises is
raised in the trace (a `try` or `assertRaises` catches it). Where several entries share the hash,
the order Python compares them in follows the table's probe sequence, which the trace does not
model: refused, as is a dict changed by the comparison. Everything else that reads such a dict's
keys as constants (rebuilding it after the graph, merging it into another, `==`, repr, copies)
refuses it (DictVariable.object_keyed), so it never leaves the trace.
"""
from __future__ import annotations

from ....guard.attribute_lookup import type_lookup
from ..base import provided, unsupported
from ..constant import ConstantVariable

_OBJECT_HASH = vars(object)["__hash__"]


class ObjectKey:
    """A dict entry's key that is an object of the trace: its tracker and its stored hash (an int,
    or the tracker itself where the class hashes by identity). Compared by identity."""

    __slots__ = ("tracker", "hash")
    made = 0   # how many were ever made: none, and no dict needs a lookup by this module

    def __init__(self, tracker, hash_):
        self.tracker, self.hash = tracker, hash_
        ObjectKey.made += 1

    def __repr__(self):
        return f"ObjectKey({self.tracker!r})"


ABSENT = object()   # lookup(): no entry has the key


def is_object_key(key) -> bool:
    """An object made in the trace of a user class (no source: the trace's own)."""
    return key.source is None and provided("is_user_object")(key)


def needs_lookup(d, key) -> bool:
    """Whether a lookup of `key` in the dict tracker `d` is this module's: the key is an object
    made in the trace, or `d` holds one."""
    if bool(ObjectKey.made) and any(type(k) is ObjectKey for k in d.items):
        return True
    return not key.is_python_constant() and is_object_key(key)


def key_hash(tx, key):
    """hash(key) as Python computes it: a constant's own, a class's Python __hash__ traced (its
    exception raised in the trace), or, for object's own hash, the tracker (identity)."""
    if key.is_python_constant():
        try:
            return hash(key.as_python_constant())
        except TypeError:
            unsupported(f"a dict lookup by an unhashable {key}")
    if not is_object_key(key):   # an object of the frame, a tensor: no lookup among object keys
        unsupported(f"a lookup by {key} in a dict with objects of the trace as keys")
    if type_lookup(key.python_type(), "__hash__") is _OBJECT_HASH:
        return key   # one tracker per object made in the trace: identity
    return provided("user_hash")(tx, key).as_python_constant()


def _same_hash(a, b) -> bool:
    return a == b if type(a) is int and type(b) is int else a is b


def lookup(tx, d, key):
    """(the key of `d.items` that `key` finds, or ABSENT; the key a new entry for it is stored as).
    `d`: a plain dict the trace made (DictVariable.find checks)."""
    h = key_hash(tx, key)
    store = key.as_python_constant() if key.is_python_constant() else ObjectKey(key, h)
    candidates = [k for k in d.items if _same_hash(k.hash if type(k) is ObjectKey else hash(k), h)]
    if not candidates:
        return ABSENT, store
    if len(candidates) > 1:
        unsupported("a dict lookup where several keys share one hash (Python compares them in the order "
                    "of the table's probe sequence)")
    stored = candidates[0]
    if type(stored) is ObjectKey and stored.tracker is key:
        return stored, store
    if type(stored) is not ObjectKey and key.is_python_constant():   # two constants: no user code
        return (stored if stored == key.as_python_constant() else ABSENT), store
    version = d.version
    stored_tracker = stored.tracker if type(stored) is ObjectKey else ConstantVariable(stored)
    equal = provided("compare_op")(tx, "==", stored_tracker, key).truthy(tx)
    if d.version != version or stored not in d.items:
        unsupported("a dict changed by the comparison of its keys (Python looks the key up again)")
    return (stored if equal else ABSENT), store
