"""CellVariable: a closure cell, of the traced frame, of a frame the trace inlined, or of a real
function's closure read while tracing it."""
from __future__ import annotations

from ....guard.sources import AttrSource
from ....guard.trace_result import CallOutput, ConstantOutput, FrameCellOutput, SourceOutput, cell_of
from ..base import VariableTracker, refuse_outer_change, unsupported


class CellVariable(VariableTracker):
    """A closure cell. `contents` is a tracker, or None while empty; `lazy` is (value, source) of
    a real cell not read yet. `real`: the real cell object of the root frame's free variable or of
    a real function's closure; the trace has one tracker per real cell (`real_cell`), so a store
    through one path is what every other path reads, and the store is replayed into that very
    cell after the graph. A real cell whose object the trace does not hold is not writable."""

    def __init__(self, contents=None, *, lazy=None, writable=True, root_name=None, frame_name=None, real=None,
                 cell_source=None, cell_name=None):
        super().__init__(None)
        self.contents = contents
        self.lazy = lazy
        self.writable = writable
        self.real, self.cell_source = real, cell_source   # a real function's cell: `fn.__closure__[i]`
        self.unpinned = False
        self.cell_name = cell_name if cell_name is not None else frame_name   # its variable's name
        # One of the root frame's own cells: a store to it is a side effect, replayed into the
        # real cell (side_effects.py), since code after a graph break reads it there. (No real
        # function can close over it while the root is traced: only trackers share it.)
        self.root_name = root_name
        # The traced frame's own cell or free variable of that name: after the graph it is that
        # very cell of the frame (FrameCellOutput), whoever closes over it.
        self.frame_name = frame_name if frame_name is not None else root_name

    def load(self, tx):
        if self.real is not None:
            tx.output.side_effects.reading_real_cell(self)
        if self.contents is None and self.lazy is not None:
            value, source = self.lazy
            self.contents = tx.wrap(value, source)
        if self.contents is None:
            unsupported("read of an empty closure cell")
        return self.contents

    def store(self, tx, value):
        refuse_outer_change(self, "a closure variable store")
        if self.real is not None and (self.frame_name is not None or self.cell_source is not None):
            tx.output.side_effects.stored_real_cell(self)
        if self.real is not None and self.frame_name is not None:
            # the root frame's free variable: STORE_DEREF after the graph writes the real cell
            tx.output.side_effects.store_cell(self.frame_name, value, free=True)
        elif self.real is not None and self.cell_source is not None:
            # a real function's cell: `fn.__closure__[i].cell_contents = value` after the graph
            tx.output.side_effects.store_attr(self, self.real, "cell_contents", value, by_identity=True)
        elif not self.writable:
            unsupported("assignment to a closure variable of the traced frame (nonlocal)")
        elif self.root_name is not None:
            tx.output.side_effects.store_cell(self.root_name, value)
        self.contents = value

    def reconstruct(self, outputs):
        """The cell itself, for a function made again over it (functions.py). The frame's own
        cells and free variables are the frame's very cells (stores the trace made to them are
        replayed first: rebuild.py); a real cell read from a closure is loaded again by its
        source; one the trace made in an inlined frame (a frame gone after the graph) is made
        again holding what it holds at the end of the trace, once, so functions sharing it in
        the trace share it after, and a store through one after the graph is seen by all."""
        if self.frame_name is not None:
            return FrameCellOutput(self.frame_name)
        if self.cell_source is not None:
            return SourceOutput(self.cell_source)
        if self.lazy is not None:
            source = self.lazy[1]
            if not isinstance(source, AttrSource) or source.name != "cell_contents":
                unsupported(f"a closure cell read from {source} (the cell itself has no source)")
            return SourceOutput(source.base)
        if self.contents is None:
            return outputs.once(self, lambda: CallOutput(ConstantOutput(cell_of), (), ()))
        return outputs.once(self, lambda: CallOutput(ConstantOutput(cell_of), ("contents",),
                                                     (outputs.rebuild(self.contents),)))


def real_cell(tx, cell, where, make):
    """The one tracker of real cell object `cell` in this trace, reached at `where` (the cell's
    source or None): `make()` the first time (side_effects.real_cell)."""
    return tx.output.side_effects.real_cell(cell, where, make)
