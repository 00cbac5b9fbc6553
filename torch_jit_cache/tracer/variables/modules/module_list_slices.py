"""ModuleListSliceVariable: `module_list[i:j]` in the trace, a tuple of the children's trackers
that answers as the new nn.ModuleList Python makes."""
from __future__ import annotations

import torch.nn as nn

from ..base import unsupported
from ..collections.containers import TupleVariable


class ModuleListSliceVariable(TupleVariable):
    """A slice of an nn.ModuleList, `ModuleList(children[k])` in Python: iterated, indexed and
    measured as its children; made again as a new ModuleList where it outlives the trace."""

    def __init__(self, items):
        super().__init__(items, cls=nn.ModuleList)

    def python_type(self):
        return nn.ModuleList

    def call_method(self, tx, name, args, kwargs):
        if name not in ("__len__", "__getitem__", "__iter__"):
            unsupported(f"method {name} of a ModuleList slice")
        return super().call_method(tx, name, args, kwargs)

    def __repr__(self):
        return f"ModuleListSliceVariable({self.items!r})"
