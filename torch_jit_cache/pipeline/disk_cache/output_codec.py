"""Output specs and side effects as data: what the transformed code rebuilds and replays after the
graph (guard/trace_result.py), stored so that `decode` gives specs codegen turns into the same code.

Stored as a table of records, each spec once, children before parents, referred to by position:
a spec object reached from several places (the returned value, a side effect, the stack at a
break) is one object again after decoding, and two equal spec objects stay two
(guard/trace_result.py: identity of spec objects is identity of the objects they rebuild).

Nothing is pickled by reference: a class, function, module or dtype a spec holds is stored as the
name that reaches it (names.name_of) and re-bound on load (names.rebind, the check guards use);
a function's code by its position among the frame's code constants (the key's digest covers
them); a graph break's plan by its instruction's index, planned again on load (plan_break is a
function of the code and the index). Sources are stored as they are, once checked to hold only
names and constants. Anything else is not stored (NotStored, with the reason).
"""
from __future__ import annotations

import functools
import types

from ...graph_break import plan_break
from ...guard.sources import (AttrSource, BuiltinSource, ClosureSource, DictItemSource, GlobalSource, ItemSource,
                              LocalSource)
from ...guard.trace_result import (AttrOutput, BreakOutput, CallOutput, ConstantOutput, ContextSwitch, DictOutput,
                                   EffectKind, EnteredContext, FrameCellOutput, FunctionOutput, GraphOutput, IterOutput, ListOutput,
                                   ModeSwitch, ObjectOutput, SideEffect, SourceOutput, SuperOutput, TupleOutput)
from .names import NAME_TAGS, Mismatch, NotStored, is_constant, name_of, rebind

# Sources whose fields are names and constants alone (a ComputedSource holds a function).
_PLAIN_SOURCES = (LocalSource, GlobalSource, BuiltinSource, ClosureSource, AttrSource, ItemSource, DictItemSource)
_CONTAINERS = {"tuple": tuple, "list": list, "set": set, "frozenset": frozenset}


# --- values: constants a spec holds ---------------------------------------------------------------

def encode_value(value, files: set):
    """A constant of a spec (a ConstantOutput's value, a tuple subclass, a block's entry) as data:
    builtin constants and containers of them, devices, ranges, partials, and named objects by name."""
    import torch
    if is_constant(value):
        return ("c", value)
    kind = type(value).__name__
    if type(value) in (tuple, list, set, frozenset):
        return (kind, [encode_value(v, files) for v in value])
    if type(value) is dict:
        return ("dict", [(encode_value(k, files), encode_value(v, files)) for k, v in value.items()])
    if type(value) is torch.device:
        return ("device", str(value))
    if type(value) is range:   # a range the trace made, rebuilt as the constant it is
        return ("range", value.start, value.stop, value.step)
    if type(value) is functools.partial:
        return ("partial", encode_value(value.func, files), encode_value(value.args, files),
                encode_value(value.keywords, files))
    return name_of(value, files)   # NotStored for an object no name reaches


def decode_value(record):
    tag = record[0]
    if tag == "c":
        return record[1]
    if tag in _CONTAINERS:
        return _CONTAINERS[tag](decode_value(v) for v in record[1])
    if tag == "dict":
        return {decode_value(k): decode_value(v) for k, v in record[1]}
    if tag == "device":
        import torch
        return torch.device(record[1])
    if tag == "range":
        return range(*record[1:])
    if tag == "partial":
        return functools.partial(decode_value(record[1]), *decode_value(record[2]), **decode_value(record[3]))
    if tag in NAME_TAGS:
        return rebind(record)
    raise ValueError(f"unknown value tag {tag!r}")


def check_source(source) -> None:
    """NotStored unless `source` is a chain of plain sources with constant keys."""
    step = source
    while step is not None:
        if type(step) not in _PLAIN_SOURCES:
            raise NotStored(f"a {type(step).__name__} in an output")
        if type(step) in (ItemSource, DictItemSource) and not is_constant(step.key):
            raise NotStored(f"{source}: an item key of type {type(step.key).__name__}")
        step = step.base


def _code_path(root: types.CodeType, code: types.CodeType):
    """The positions leading from `root` through its code constants to `code` itself, or None."""
    for i, const in enumerate(root.co_consts):
        if const is code:
            return (i,)
        if isinstance(const, types.CodeType):
            found = _code_path(const, code)
            if found is not None:
                return (i, *found)
    return None


# --- specs --------------------------------------------------------------------------------------

class _Encoder:
    """Specs into records of one table (`records`), each spec object once (by identity)."""

    def __init__(self, code: types.CodeType, files: set):
        self.code, self.files = code, files
        self.records: list = []
        self._at: dict = {}     # id(spec) -> position
        self._held: list = []   # the specs encoded, alive while ids are compared

    def spec(self, spec):
        if spec is None:
            return None
        at = self._at.get(id(spec))
        if at is None:
            record = self._record(spec)
            at = self._at[id(spec)] = len(self.records)
            self.records.append(record)
            self._held.append(spec)
        return at

    def _specs(self, specs) -> list:
        return [self.spec(s) for s in specs]

    def _record(self, spec):
        t = type(spec)
        if t is GraphOutput:
            return ("graph", spec.index)
        if t is SourceOutput:
            check_source(spec.source)
            return ("source", spec.source)
        if t is ConstantOutput:
            return ("const", encode_value(spec.value, self.files))
        if t is TupleOutput:
            cls = None if spec.cls is None else encode_value(spec.cls, self.files)
            return ("tuple", self._specs(spec.items), cls)
        if t is ListOutput:
            return ("list", self._specs(spec.items))
        if t is DictOutput:
            for key, _ in spec.items:
                if not is_constant(key):
                    raise NotStored("a dict output with non-constant keys")
            return ("dict", [(key, self.spec(item)) for key, item in spec.items])
        if t is AttrOutput:
            return ("getattr", self.spec(spec.base), spec.name)
        if t is IterOutput:
            return ("iter", self.spec(spec.base), spec.skip, self._specs(spec.items))
        if t is FrameCellOutput:
            return ("cell", spec.name)
        if t is SuperOutput:
            return ("super", self.spec(spec.cls), self.spec(spec.obj))
        if t in (ObjectOutput, CallOutput):
            fn = spec.cls if t is ObjectOutput else spec.fn
            return ("object" if t is ObjectOutput else "call", self.spec(fn), spec.names, self._specs(spec.values))
        if t is FunctionOutput:
            path = _code_path(self.code, spec.code)
            if path is None:
                raise NotStored(f"a function made from code {spec.code.co_qualname!r}, not one of the frame's")
            return ("function", path, spec.cells, self.spec(spec.defaults), self.spec(spec.kwdefaults),
                    self.spec(spec.annotations))
        if t is BreakOutput:
            return self._break(spec)
        raise NotStored(f"output {t.__name__}")

    def _break(self, spec: BreakOutput):
        if plan_break(self.code, spec.plan.index) != spec.plan:
            raise NotStored("the break's plan is not the one its instruction's index gives")
        for s in spec.switches:
            if type(s) is not ContextSwitch and (type(s) is not ModeSwitch or not is_constant((s.inside, s.outside))):
                raise NotStored(f"a break switch {s!r:.60}")
        stack = [("null",) if item is None else ("entered", encode_value(item.enter, self.files))
                 if isinstance(item, EnteredContext) else ("spec", self.spec(item)) for item in spec.stack]
        switches = [("mode", encode_value(s.set, self.files), s.inside, s.outside) if type(s) is ModeSwitch
                    else ("context", encode_value(s.enter, self.files)) for s in spec.switches]
        return ("break", spec.plan.index, stack, [(name, self.spec(item)) for name, item in spec.locals],
                spec.kw_names, spec.reason, switches, spec.iter_slots)


def encode(output, side_effects, code: types.CodeType, files: set) -> dict:
    """`output` and `side_effects` (trace_result.SideEffect) of a trace of `code` as data; NotStored
    where a part cannot be stored exactly. The user files of the names it holds are added to
    `files`."""
    enc = _Encoder(code, files)
    effects = []
    for effect in side_effects:
        if type(effect) is not SideEffect or not isinstance(effect.kind, EffectKind):
            raise NotStored(f"a side effect {effect!r:.60}")
        effects.append((effect.kind.name, enc.spec(effect.target), effect.name, enc.spec(effect.value)))
    at = enc.spec(output)
    return {"specs": enc.records, "output": at, "side_effects": effects}


class _Decoder:
    def __init__(self, code: types.CodeType):
        self.code = code
        self.built: list = []

    def at(self, position):
        return None if position is None else self.built[position]

    def many(self, positions) -> tuple:
        return tuple(self.built[p] for p in positions)

    def build(self, record):
        tag = record[0]
        if tag == "graph":
            return GraphOutput(record[1])
        if tag == "source":
            check_source(record[1])
            return SourceOutput(record[1])
        if tag == "const":
            return ConstantOutput(decode_value(record[1]))
        if tag == "tuple":
            return TupleOutput(self.many(record[1]), None if record[2] is None else decode_value(record[2]))
        if tag == "list":
            return ListOutput(self.many(record[1]))
        if tag == "dict":
            return DictOutput(tuple((key, self.built[p]) for key, p in record[1]))
        if tag == "getattr":
            return AttrOutput(self.at(record[1]), record[2])
        if tag == "iter":
            return IterOutput(self.at(record[1]), record[2], self.many(record[3]))
        if tag == "cell":
            return FrameCellOutput(record[1])
        if tag == "super":
            return SuperOutput(self.at(record[1]), self.at(record[2]))
        if tag in ("object", "call"):
            cls = ObjectOutput if tag == "object" else CallOutput
            return cls(self.at(record[1]), tuple(record[2]), self.many(record[3]))
        if tag == "function":
            code = self.code
            for i in record[1]:
                code = code.co_consts[i]
            if not isinstance(code, types.CodeType):
                raise Mismatch("a stored function's code is not among the frame's constants")
            return FunctionOutput(code, tuple(record[2]), self.at(record[3]), self.at(record[4]), self.at(record[5]))
        if tag == "break":
            return self._break(record)
        raise ValueError(f"unknown output tag {tag!r}")

    def _break(self, record):
        _, index, stack, locals_, kw_names, reason, switches, iter_slots = record
        items = tuple(None if item[0] == "null" else EnteredContext(decode_value(item[1])) if item[0] == "entered"
                      else self.built[item[1]] for item in stack)
        made = tuple(ModeSwitch(decode_value(s[1]), s[2], s[3]) if s[0] == "mode" else ContextSwitch(decode_value(s[1]))
                     for s in switches)
        return BreakOutput(plan_break(self.code, index), items, tuple((n, self.built[p]) for n, p in locals_),
                           tuple(kw_names), reason, made, tuple(iter_slots))


def decode(record: dict, code: types.CodeType):
    """(output spec, side effects) from `encode`'s record, for a frame of `code`; Mismatch where a
    name no longer reaches what it named."""
    dec = _Decoder(code)
    for r in record["specs"]:
        dec.built.append(dec.build(r))
    effects = tuple(SideEffect(EffectKind[kind], dec.at(target), name, dec.at(value))
                    for kind, target, name, value in record["side_effects"])
    return dec.at(record["output"]), effects
