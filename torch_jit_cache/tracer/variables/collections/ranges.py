"""RangeVariable: a range, known whole while tracing (range() of constants, or read from the frame
and guarded by value); returned or held at a break it is the constant it is."""
from __future__ import annotations

from ....guard.sources import AttrSource
from ....guard.trace_result import ConstantOutput, GuardKind
from ..base import VariableTracker, unsupported
from ..constant import ConstantVariable
from .containers import constant_index


class RangeVariable(VariableTracker):
    def __init__(self, value: range):
        super().__init__(None)
        self.value = value

    def python_type(self):
        return range

    def as_python_constant(self):
        return self.value

    def unpack(self, tx):
        if len(self.value) > 100_000:
            unsupported("a loop over more than 100,000 iterations")
        return [ConstantVariable(i) for i in self.value]

    def truthy(self, tx):
        return bool(self.value)

    def getitem(self, tx, key):
        r = self.value[constant_index(key)]
        return RangeVariable(r) if isinstance(r, range) else ConstantVariable(r)

    def reconstruct(self, outputs):
        return ConstantOutput(self.value)   # immutable, and compared by value


def wrap_range(tx, value, source, g):
    """Guarded by its start, stop and step (EQUALS_MATCH holds only plain constants, not a range)."""
    g(GuardKind.TYPE_MATCH, range)
    for name in ("start", "stop", "step") if source is not None else ():
        g(GuardKind.EQUALS_MATCH, getattr(value, name), AttrSource(source, name))
    return RangeVariable(value)
