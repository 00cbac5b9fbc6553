"""Rebuilding trackers as output specs: what the transformed code makes again after the graph.

`GraphOutputs` numbers the graph's outputs as trackers are rebuilt; `Rebuilder` rebuilds the state
at a graph break (graph_break/state.py) and a returned value with side effects (`return_state`):
a value read from the frame is loaded again from its source, an object the trace built is built
once however often it is reached (`once`), and a loop's iterator is rebuilt from what it has still
to yield where the rest of the frame cannot tell. How each kind is rebuilt is its tracker's
`reconstruct` (variables/base.py). A generator that has started cannot be rebuilt: the Rebuilder
raises GeneratorAtBreak, and the graph-break driver moves the cut.
"""
from __future__ import annotations

from ..guard.trace_result import ConstantOutput, FrameCellOutput, FunctionOutput, GraphOutput, SourceOutput, TupleOutput, Unsupported, walk
from .variables import DictVariable, DictViewVariable, IteratorVariable, ListVariable, TensorVariable
from .variables.collections.ranges import RangeVariable
from .variables.python_objects.generators import GeneratorVariable

__all__ = ["GraphOutputs", "Rebuilder", "GeneratorAtBreak", "BlockAtBreak", "once", "return_state"]


class GeneratorAtBreak(Exception):
    """The state at a cut holds a suspended generator; `to`: where to cut instead, or None."""

    def __init__(self, to):
        super().__init__(to)
        self.to = to


class BlockAtBreak(Exception):
    """The cut is inside the with block of a context manager written in Python, which a resume
    function cannot enter again without running its __enter__ twice; `to`: where to cut instead
    (the instruction that pushed the context manager for BEFORE_WITH: the with statement then runs
    for real, after the graph), or None."""

    def __init__(self, to, what: str):
        super().__init__(to, what)
        self.to, self.what = to, what


class GraphOutputs:
    """The graph's outputs, numbered as trackers are rebuilt (`VariableTracker.reconstruct`): one
    output per distinct node, however often it is returned."""

    def __init__(self):
        self.nodes: list = []
        self._index: dict = {}
        self.made: dict = {}   # id(tracker) -> (tracker, its spec) (`once`)

    def graph_output(self, node) -> GraphOutput:
        index = self._index.get(node)
        if index is None:
            index = self._index[node] = len(self.nodes)
            self.nodes.append(node)
        return GraphOutput(index)

    def rebuild(self, v):
        return v.reconstruct(self)

    def once(self, v, make):
        return once(self.made, v, make)


def once(made: dict, v, make):
    """The output spec of `v`, an object the trace constructed (a list, dict, tuple or set, a
    function, an object of a user class: containers.py, new_object.py, model_output.py, ...),
    from `make()` the first time and the very same spec object wherever `v` is reached again:
    codegen builds such a spec once and loads it again (its emitter's `build_output`), so the frame
    gets one object, as in eager, wherever it reaches it (returned twice, stored by a side effect
    and returned, two locals at a break). An object that reaches itself has no spec (refused)."""
    key = id(v)
    if key in made:
        if made[key][1] is None:
            raise Unsupported(f"{v} reaches itself through its attributes")
        return made[key][1]
    # The entry holds `v` itself: a tracker made for the rebuild alone (an exception's args tuple)
    # dies after it, and another such tracker could take its id and be given its spec.
    made[key] = (v, None)
    spec = make()
    made[key] = (v, spec)
    return spec


def return_state(result, side_effects, outputs):
    """(the returned value's output spec, the side effects to replay before returning).

    Without side effects the value is rebuilt as it always was. With them it is rebuilt like the
    state at a break (`Rebuilder`), together with the effects' targets and values: a value read
    from the frame is reloaded from its source (a list the trace appended to is the very list the
    replay appends to), and an object the trace built is built once however often it is reached
    (stored and also returned, it is one object)."""
    if not side_effects:
        return result.reconstruct(outputs), ()
    rebuild = Rebuilder(outputs)
    spec = rebuild(result)
    # The frame's own cells die with it, unless a function made again after the graph (returned,
    # or stored by an effect) closes over them: only those cells' stores are replayed.
    effects = side_effects.reconstruct(rebuild, cells=False)
    kept = {name for s in (spec, *(e.value for e in effects)) for name in _closed_over(s)}
    if kept:   # again with those cells' stores, by one rebuilder (each object rebuilt once)
        rebuild = Rebuilder(outputs)
        spec = rebuild(result)
        effects = side_effects.reconstruct(rebuild, cells=kept)
    return spec, effects


def _closed_over(spec) -> set:
    """The names of the frame's cells that functions in the output spec close over."""
    return {name for s in walk(spec) if isinstance(s, (FunctionOutput, FrameCellOutput))
            for name in (s.cells if isinstance(s, FunctionOutput) else (s.name,))}


class Rebuilder:
    """How a tracker at a graph break is rebuilt.

    A value read from the frame is loaded again from its source: the rest of the frame must see
    the very object (a list it appends to later, a tensor it compares with `is`), and what the
    trace did to it is replayed on it first (side_effects.py; sources are loaded before any effect
    is applied, so a store cannot redirect a path). Side effects' targets and values are rebuilt
    by the same rebuilder. Everything else is the tracker's own `reconstruct` (one home per kind:
    an iterator in iterators.py, a generator in generators.py, a partial in builtins.py, ...),
    which rebuilds its parts through `self`. An object the trace built is rebuilt once (`once`):
    a list, an iterator or a function reached twice at the break (a local and a stack item, say)
    is one object in the resume function too.

    A suspended generator cannot be rebuilt (GeneratorVariable.reconstruct refuses): the
    Rebuilder raises GeneratorAtBreak instead, and the driver cuts where it was made.

    A loop's iterator on the stack at a break may instead go to the resume function as the items
    it has still to yield (`remaining`, graph_break/state.py), a copy: where the container it
    iterates is reached too, the rest of the frame could change it under the loop, so that is
    refused (`iterated`, `containers`: ids of such containers reached each way).
    """

    def __init__(self, outputs):
        self.outputs = outputs
        self.made: dict = {}
        self.iterators: set = set()
        self.iterated: set = set()
        self.containers: set = set()

    def graph_output(self, node):
        return self.outputs.graph_output(node)

    def once(self, v, make):
        return once(self.made, v, make)

    def __call__(self, v):
        return self.rebuild(v)

    def rebuild(self, v):
        if v.source is not None:
            if not isinstance(v, TensorVariable) or v._node is None or v._node.op == "placeholder":
                return SourceOutput(v.source)
        if isinstance(v, (ListVariable, DictVariable)):
            if id(v) in self.iterated:
                raise Unsupported("a loop over a container reached again at the break")
            self.containers.add(id(v))
        if isinstance(v, GeneratorVariable) and v.started:
            raise GeneratorAtBreak(None)   # the driver moves the cut (generators.py)
        if id(v) in self.iterators:   # passed on as its remaining items: made again it would be two
            raise Unsupported("a loop's iterator is reached twice at the break")
        return v.reconstruct(self)   # containers come back here for each item

    @staticmethod
    def live_iterator(v) -> bool:
        """Whether the loop iterator `v` must stay Python's own iterator over the very list or
        dict read from the frame (the rest of the frame may change it, and the loop must see
        that); otherwise it may go on as its remaining items."""
        origin = v.origin.mapping if isinstance(v.origin, DictViewVariable) else v.origin
        return isinstance(origin, (ListVariable, DictVariable)) and origin.source is not None

    def remaining(self, v):
        """The spec of what `v` has still to yield, which the resume function iterates: the rest
        of a range as a range (three numbers to pass and guard, however long the loop: a break
        in every iteration of a long loop would otherwise pass, wrap and guard every item left,
        in every resume function of the chain), else a tuple of the items (each container it
        iterates reached once)."""
        for it in _iterators_within(v):   # enumerate's and zip's own go on with it, as copies
            if id(it) in self.iterators or id(it) in self.made:
                raise Unsupported("a loop's iterator is reached twice at the break")
            self.iterators.add(id(it))
        for container in v.watched:   # the container it iterates (zip's: each)
            if container.source is None:
                if id(container) in self.iterated or id(container) in self.containers:
                    raise Unsupported("a loop over a container reached again at the break")
                self.iterated.add(id(container))
        if v.changed:
            raise Unsupported("an iterator over a list or dict that changed since it was made")
        if type(v) is IteratorVariable and isinstance(v.origin, RangeVariable) and v.kind is _RANGE_ITERATOR:
            return ConstantOutput(v.origin.value[v.index:])
        return TupleOutput(tuple(self(i) for i in v.rest()))


_RANGE_ITERATOR = type(iter(range(0)))


def _iterators_within(v):
    """`v` and the iterators it reads its items from (enumerate's child, zip's children)."""
    yield v
    for inner in (getattr(v, "child", None), *getattr(v, "children", ())):
        if inner is not None and hasattr(inner, "rest"):
            yield from _iterators_within(inner)
