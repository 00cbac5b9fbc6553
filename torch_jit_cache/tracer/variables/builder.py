"""Wrap a real value read from the frame (with its Source) into a tracker, adding its guards.

WRAP_RULES orders the rules; each rule's maker lives in the module of the tracker it makes
(`wrap_tensor` in tensor.py, `wrap_sequence` in containers.py, ...), so a new kind of value is one
rule in its own module and one row here. The first rule that applies and makes a tracker wins.

Guards the rules add: TENSOR_MATCH for tensors; TYPE_MATCH + EQUALS_MATCH for scalars and strings;
TYPE_MATCH + ID_MATCH for functions and classes; TYPE_MATCH + EQUALS_MATCH on `.training` +
DICT_TAGS for nn.Modules (the guards below a module skipped while its dicts are unchanged), with
ID_MATCH only where the trace relies on the object (nn_module.NNModuleVariable.require_identity);
for functions made inside another function (closures, lambdas: often made anew per call) and
functools.partial objects, guards on their parts instead (`__code__` by identity, closure cells,
defaults and globals where read; partial's func, args and keywords); TYPE_MATCH alone for plain
user objects, dict subclasses, os.environ and any other object whose class keeps CPython's own
attribute lookup (open_object.py; their attributes and items are guarded where read); TYPE_MATCH + LENGTH for lists and tuples; TYPE_MATCH + DICT_KEYS for dicts; SAME_AS
when one tensor is reached through a second source; torch.dtype, torch.layout and
torch.memory_format by identity (held strongly), torch.device by value (its type and index);
members of plain Enum classes by identity (constant.is_enum_member); sets and frozensets of
constants by type and their items in iteration order (SET_ITEMS: sets.wrap_set, wrap_frozenset);
numpy arrays by type, `dtype.str`, shape, strides and `flags.writeable` (numpy_tensors.py); numpy
numbers by type and `item()` (numpy_values.py).
`guard=False` is for attributes of trusted
modules (torch.relu, math.pi): only the module itself is guarded.
"""
from __future__ import annotations

import builtins
import collections
import functools
import inspect
import os
import types
import weakref
from typing import Callable, NamedTuple

import torch
import torch.nn as nn

from ...guard.sources import LocalSource
from .builtin_functions import builtins as builtin_rules
from .collections import counters, frame_dict_subclasses
from .torch_objects import dynamo_contexts, made_functions
from .modules import builtin_module_methods, nn_module
from . import constant
from .collections import containers, deques, dicts, frame_iterators, namedtuples, ranges, sets
from .torch_objects import (contexts, control_flow, grad_switches, numpy_tensors, numpy_values, saved_hooks_contexts,
                            symbolic, tensor)
from .python_objects import (exceptions, functions, new_object, opaque, open_object, partials, regex_values, signatures,
                             user_object, weakrefs)
from .builtin_functions import pure, state_readers
from .base import VariableTracker, unsupported
from .python_objects.classes import ClassVariable
from .constant import ConstantVariable, is_constant_value, is_stand_in
from .collections.containers import ListVariable, TupleVariable
from .collections.iterators import IteratorVariable
from .parallel.distributed import wrap_distributed
from .collections.sets import SetVariable
from .python_objects.user_object import DictSubclassVariable, EnvironVariable, UserObjectVariable


class WrapRule(NamedTuple):
    """One entry of WRAP_RULES: `applies(value, source)` says whether the rule is for the value;
    `make(tx, value, source, g)` returns its tracker, having added its guards through `g`, or
    None where it finds the value is not its own after all (the next rules are asked)."""
    name: str
    applies: Callable
    make: Callable


def _always(value, source) -> bool:
    return True


def _is_sequence(value, source) -> bool:
    # A namedtuple whose class overrides tuple's protocol is read as the object it is.
    return isinstance(value, (tuple, list)) and type(value) in (tuple, list, torch.Size) or \
        (isinstance(value, tuple) and hasattr(type(value), "_fields") and namedtuples.keeps_tuple_protocol(type(value)))


# The order is the precedence: the first rule that applies and makes a tracker wins. Each
# variable module contributes the rules for its own trackers; this table alone orders them.
WRAP_RULES = (
    # First: the rules below probe values (isinstance, getattr(v, "__module__")), which runs a
    # class's own __getattribute__/__getattr__; a user object whose class has them is decided from
    # its type alone, so tracing does not run its hooks (object_protocol.py traces them).
    WrapRule("user object with attribute hooks", lambda v, s: s is not None and user_object.has_attribute_hooks(v),
             user_object.wrap_hooked_object),
    WrapRule("tensor", lambda v, s: isinstance(v, torch.Tensor), tensor.wrap_tensor),
    WrapRule("dynamic int", lambda v, s: type(v) is int, symbolic.wrap_dynamic_scalar),
    WrapRule("dynamic float", lambda v, s: type(v) is float, symbolic.wrap_dynamic_scalar),
    WrapRule("scalar", lambda v, s: type(v) in constant.SCALAR_TYPES, constant.wrap_scalar),
    WrapRule("slice", lambda v, s: s is not None and constant.is_constant_slice(v), constant.wrap_slice),
    # NotImplemented: a singleton of its own type, held by identity (it never dies)
    WrapRule("NotImplemented", lambda v, s: v is NotImplemented, constant.wrap_not_implemented),
    WrapRule("numpy number", lambda v, s: s is not None and numpy_values.is_frame_numpy_number(v),
             numpy_values.wrap_numpy_number),
    # a numpy array: the tensor torch.as_tensor makes of it, traced through torch._numpy
    WrapRule("numpy array", lambda v, s: s is not None and numpy_tensors.is_frame_array(v),
             numpy_tensors.wrap_frame_array),
    WrapRule("type alias", lambda v, s: constant.is_type_alias(v), constant.wrap_type_alias),
    WrapRule("enum member", lambda v, s: constant.is_enum_member(v), constant.wrap_enum_member),
    WrapRule("torch singleton", lambda v, s: isinstance(v, constant.TORCH_SINGLETONS), constant.wrap_torch_singleton),
    WrapRule("device", lambda v, s: type(v) is torch.device, constant.wrap_device),
    WrapRule("module", lambda v, s: isinstance(v, nn.Module), nn_module.wrap_module),
    WrapRule("sequence", _is_sequence, containers.wrap_sequence),
    WrapRule("dict", lambda v, s: type(v) is dict, dicts.wrap_dict),
    WrapRule("deque", lambda v, s: type(v) is collections.deque, deques.wrap_deque),
    WrapRule("range", lambda v, s: type(v) is range, ranges.wrap_range),
    WrapRule("frozenset", lambda v, s: type(v) is frozenset, sets.wrap_frozenset),
    WrapRule("set", lambda v, s: s is not None and (sets.plain_subclass(type(v)) or sets.plain_subclass(type(v), frozenset)),
             sets.wrap_set),
    WrapRule("python module", lambda v, s: isinstance(v, types.ModuleType), functions.wrap_python_module),
    WrapRule("numpy callable", lambda v, s: numpy_values.is_numpy_callable(v), numpy_values.wrap_numpy_callable),
    WrapRule("builtin", lambda v, s: builtin_rules.is_handled_builtin(v), builtin_rules.wrap_builtin),
    WrapRule("context class", lambda v, s: isinstance(v, type), contexts.wrap_context_class),
    WrapRule("autocast object", _always, contexts.refuse_autocast),
    # torch.distributed: collectives are captured, the rest breaks before it runs (distributed.py)
    WrapRule("distributed", _always, lambda tx, v, s, g: wrap_distributed(tx, v, s, g.enabled)),
    WrapRule("built-in module method", _always, builtin_module_methods.wrap_builtin_module_method),
    WrapRule("dynamo-only context", lambda v, s: dynamo_contexts.is_dynamo_only(v), dynamo_contexts.wrap_dynamo_only),
    WrapRule("grad-mode switch", lambda v, s: v is grad_switches.SET_GRAD_ENABLED, grad_switches.wrap_grad_switch),
    WrapRule("saved tensors hooks disabled", lambda v, s: v is saved_hooks_contexts.DISABLE_SAVED_TENSORS_HOOKS,
             saved_hooks_contexts.wrap_hooks_disable),
    # torch.cond, control_flow.map: their functions traced into bodies of one node (control_flow.py)
    WrapRule("higher-order op", lambda v, s: control_flow.is_higher_order_entry(v), control_flow.wrap_higher_order),
    WrapRule("torch function", lambda v, s: tensor.is_torch_callable(v), tensor.wrap_torch_function),
    WrapRule("inspect.signature", lambda v, s: v is inspect.signature, signatures.wrap_signature),
    # re.compile & co: run while tracing on constants (regex_values.py), else inlined
    WrapRule("re function", lambda v, s: regex_values.is_re_function(v), regex_values.wrap_re_function),
    WrapRule("function", lambda v, s: isinstance(v, types.FunctionType), functions.wrap_function),
    WrapRule("partial", lambda v, s: type(v) is functools.partial and s is not None, partials.wrap_partial),
    WrapRule("method", lambda v, s: isinstance(v, types.MethodType), functions.wrap_method),
    WrapRule("pure function", lambda v, s: pure.is_pure(v), functions.wrap_pure_function),
    # sys.get_int_max_str_digits & co: called, the value is read and guarded through the source
    WrapRule("interpreter-state reader", lambda v, s: s is not None and state_readers.is_state_reader(v),
             state_readers.wrap_state_reader),
    WrapRule("sys.exc_info", lambda v, s: _is_handled_exception_function(v),
             exceptions.wrap_handled_exception_function),
    WrapRule("class", lambda v, s: isinstance(v, type), new_object.wrap_class),
    WrapRule("print", lambda v, s: v is builtins.print, builtin_rules.wrap_print),
    # a weakref.ref: called, its referent is read through `L['w'].__call__()` (weakrefs.py)
    WrapRule("weak reference", lambda v, s: s is not None and type(v) is weakref.ReferenceType,
             weakrefs.wrap_frame_weakref),
    # a builtin iterator over a range, str, bytes or tuple: its position read and guarded exactly
    WrapRule("frame iterator", lambda v, s: s is not None and frame_iterators.is_frame_iterator(v),
             frame_iterators.wrap_frame_iterator),
    # os.environ: reads are guarded constants (user_object.py)
    WrapRule("os.environ", lambda v, s: s is not None and v is os.environ, user_object.wrap_by_type(EnvironVariable)),
    # a plain dict subclass's object the frame holds as a local: a dict of its class the trace may
    # change (frame_dict_subclasses.py). Reached through a global, a closure or an attribute (a
    # library's registry, which grows as the process runs) it is read only, its keys unpinned.
    WrapRule("dict subclass traced as a dict", lambda v, s: isinstance(s, LocalSource)
             and user_object.is_dict_subclass_object(v) and frame_dict_subclasses.traced_as_dict(v),
             frame_dict_subclasses.wrap_frame_dict_subclass),
    WrapRule("dict subclass object", lambda v, s: s is not None and user_object.is_dict_subclass_object(v),
             user_object.wrap_by_type(DictSubclassVariable)),
    WrapRule("user object", lambda v, s: s is not None and user_object.is_plain_user_object(v),
             user_object.wrap_by_type(UserObjectVariable)),
    # any other object with CPython's own attribute lookup: read through its source (open_object.py)
    WrapRule("open object", lambda v, s: s is not None and open_object.is_open_object(v),
             user_object.wrap_by_type(open_object.OpenObjectVariable)),
    WrapRule("opaque", lambda v, s: s is not None, opaque.wrap_opaque),
)


def _is_handled_exception_function(v) -> bool:
    return any(v is fn for fn in exceptions.HANDLED_EXCEPTION_FUNCTIONS)   # no user __eq__ or __hash__


class Guards:
    """`g(kind, value, source)`: what a rule guards its value with, by default at the value's own
    source; nothing where the caller asked for no guard (`enabled` False: attributes of trusted
    modules, values without a source)."""

    def __init__(self, out, source, enabled: bool):
        self.out, self.source, self.enabled = out, source, enabled

    def __call__(self, kind, value=None, source=None):
        if self.enabled:
            self.out.add_guard(self.source if source is None else source, kind, value)


def wrap(tx, value, source, guard: bool = True):
    out = tx.output
    if source is not None and source in out.by_source:
        return out.by_source[source]
    vt = _wrap(tx, value, source, guard and source is not None)
    if source is not None:
        out.by_source[source] = vt
        if vt.guarded_by_type:
            out.side_effects.reached(value, vt)
    return vt


def _wrap(tx, value, source, guard):
    if is_stand_in(value):   # a trace-time class's stand-in is never a value (class_statements.py)
        unsupported(f"{value!r}, a stand-in of a class made in the trace, read as a value (tracer bug)")
    g = Guards(tx.output, source, guard)
    for rule in WRAP_RULES:
        if rule.applies(value, source):
            vt = rule.make(tx, value, source, g)
            if vt is not None:
                return vt
    unsupported(f"value of type {type(value).__name__} read from {source}")


def wrap_constant(value) -> VariableTracker:
    """The tracker of a value computed from constants while tracing (a folded call's result, an
    item of a constant string or tuple): tuples and lists item by item, sets of constants, a builtin
    iterator over a range, str, bytes or tuple (its items; made again after the graph only as a
    tuple iterator's type allows: iterators.py), and constants; anything else is refused. The translator offers it as `tx.wrap_constant`, so
    trackers below this module (constant.py) make containers without importing them."""
    value = symbolic.folded(value)
    if type(value) is tuple:
        return TupleVariable([wrap_constant(v) for v in value])
    if isinstance(value, list):
        return ListVariable([wrap_constant(v) for v in value])
    if type(value) is set and all(sets.is_set_item(v) for v in value):
        return SetVariable(value)
    if type(value) in (dict, collections.Counter) and all(containers.is_key_constant(k) for k in value):
        # a new dict or Counter a folded call made (`a | b`, `+counter`): its items, in order
        items = {k: wrap_constant(v) for k, v in value.items()}
        return counters.CounterVariable(items) if type(value) is collections.Counter else dicts.DictVariable(items)
    if is_constant_value(value):
        return ConstantVariable(value)
    if type(value) is type and not is_stand_in(value):   # `type(3)`, a member of `list[int]`
        return ClassVariable(value)
    if type(value) in frame_iterators.ITERATOR_TYPES:   # `"ab".__iter__()`: its items, read now
        return IteratorVariable([wrap_constant(v) for v in value], kind=type(value))
    if made_functions.is_made_torch_function(value):   # `_ntuple(3)`'s parse
        return made_functions.MadeTorchFunctionVariable(value)
    unsupported(f"a constant computation produced a {type(value).__name__}")
