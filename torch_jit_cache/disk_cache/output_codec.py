"""Output specs as stored: which of a trace's output specs an entry can hold (pickled as they are,
their types named)."""
from __future__ import annotations

from ..trace_result import (BreakOutput, ConstantOutput, DictOutput, GraphOutput, ListOutput, SourceOutput,
                            TupleOutput, walk)
from .names import NotStored, is_constant, name_of


def check_output(spec, files: set) -> None:
    if isinstance(spec, BreakOutput):
        raise NotStored("a graph break (resume functions are not stored)")
    for part in walk(spec):
        if isinstance(part, (GraphOutput, SourceOutput, ListOutput, DictOutput)):
            continue
        if isinstance(part, TupleOutput) and (part.cls is None or _is_named_type(part.cls, files)):
            continue
        if isinstance(part, ConstantOutput) and is_constant(part.value):
            continue
        raise NotStored(f"output {type(part).__name__}")
    for part in walk(spec):
        if isinstance(part, DictOutput) and not all(is_constant(k) for k, _ in part.items):
            raise NotStored("a dict output with non-constant keys")


def _is_named_type(cls, files: set) -> bool:
    """A tuple subclass output (torch.return_types.max, a namedtuple) pickles by its name: only
    where the name reaches it."""
    try:
        return isinstance(cls, type) and name_of(cls, files)[0] == "named"
    except NotStored:
        return False
