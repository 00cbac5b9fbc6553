"""The tracer: symbolic execution of a frame's bytecode into a torch.fx graph plus guards.

    trace(code, f_locals, f_globals, f_builtins, closure) -> TraceResult

`f_locals` holds the bound arguments by name and, for free variables, their cell contents.
Anything the tracer cannot handle raises Unsupported (never a wrong result).
Layering: translator.py -> handlers/ -> variables/ -> output_graph.py (fx building).
"""
from __future__ import annotations

import torch

from .. import graph_break
from ..shape_guards import pinning
from ..sources import LocalSource
from ..trace_result import (BreakOutput, ContextSwitch, FunctionOutput, GraphOutput, IterOutput,
                            ModeSwitch,
                            SourceOutput, TraceResult, TupleOutput, Unsupported, walk)
from .output_graph import OutputGraph
from .translator import InstructionTranslator
from .variables import DictVariable, DictViewVariable, IteratorVariable, ListVariable, TensorVariable
from .variables.contexts import AutocastExitVariable, GradModeExitVariable
from .variables.generators import GeneratorVariable

__all__ = ["trace", "list_breaks", "Unsupported"]


_MAX_BREAK_MOVES = 8


def trace(code, f_locals, f_globals, f_builtins, closure=None, cut=None, plan=None) -> TraceResult:
    """`cut`: (graph_break.BreakPlan, arrival): stop when the root frame reaches the plan's
    instruction for the arrival-th time, and return a BreakOutput for the state there.
    `plan`: dynamic.FramePlan, which tensor dimensions are symbols (None: all static).

    A generator alive at the cut cannot be rebuilt (variables/generators.py): the cut moves to
    where the first generator the frame made and had not exhausted there was made (before it,
    that generator does not exist yet), and the frame is traced again, a few times at most."""
    for _ in range(_MAX_BREAK_MOVES):
        try:
            return _trace(code, f_locals, f_globals, f_builtins, closure, cut, plan)
        except _GeneratorAtBreak as moved:
            where = moved.to
        if where is None or where == (cut[0].index, cut[1]):
            break
        try:
            cut = (graph_break.plan_break(code, where[0]), where[1])
        except graph_break.BreakRefused as why:
            raise Unsupported(f"a generator is alive at the graph break, and the frame cannot be cut "
                              f"where it was made ({why})", filename=code.co_filename,
                              lineno=code.co_firstlineno, instruction="graph break") from None
    raise Unsupported("a generator is alive at the graph break (it cannot be rebuilt)",
                      filename=code.co_filename, lineno=code.co_firstlineno, instruction="graph break")


class _GeneratorAtBreak(Exception):
    """The state at a cut holds a suspended generator; `to`: where to cut instead, or None."""

    def __init__(self, to):
        super().__init__(to)
        self.to = to


def _trace(code, f_locals, f_globals, f_builtins, closure, cut, plan) -> TraceResult:
    stop_at = (cut[0].index, cut[1]) if cut is not None else None
    output, tx = _root(code, f_locals, f_globals, f_builtins, closure, plan, stop_at=stop_at)
    try:
        result = tx.run()
        outputs = GraphOutputs()
        if cut is not None and not tx.stopped:
            raise Unsupported("the second trace did not reach the graph break (tracer bug)",
                              filename=code.co_filename, lineno=code.co_firstlineno)
        try:
            if cut is not None:
                try:
                    spec, effects = _break_state(tx, cut[0], outputs)
                except _GeneratorAtBreak:
                    raise _GeneratorAtBreak(next((g.created_at for g in tx.generators if not g.done),
                                                 None)) from None
            else:
                spec, effects = _return_state(result, output.side_effects, outputs)
        except Unsupported as e:
            where = "graph break" if cut is not None else "RETURN_VALUE"
            raise Unsupported(e.reason, filename=code.co_filename,
                              lineno=code.co_firstlineno, instruction=where) from None
        try:
            gm = output.finish(outputs.nodes)
            output.fake_shapes.check_in_graph(gm, output.example_inputs)
        except Unsupported:
            raise
        except Exception as e:  # torch.fx refused the graph (lint, codegen): never the user's error
            raise Unsupported(f"building the fx graph failed: {type(e).__name__}: {e}",
                              filename=code.co_filename, lineno=code.co_firstlineno) from None
        result = TraceResult(graph=gm, graph_inputs=list(output.graph_inputs),
                             example_inputs=list(output.example_inputs), output=spec,
                             guards=output.guards, side_effects=effects,
                             shape_state=output.fake_shapes, exact_reads=tuple(output.exact_reads))
        result.shape_guards = final_shape_guards(result)
        output.fake_shapes = None   # handed to the result: released by its user (release_shape_state)
        return result
    finally:
        output.release()
        del tx, output


def final_shape_guards(result: TraceResult):
    """The shape guards of `result` from its ShapeEnv as it stands now: called when the trace ends
    and again after the backend compiled, which may have specialised sizes (inductor fixing a
    convolution's channel count adds a replacement and a guard to the ShapeEnv). A size the backend
    made a constant is no symbol's any more, so TENSOR_MATCH checks it. Raises Unsupported for a
    guard that cannot be built: the entry is then not made."""
    shape_guards = None
    if result.shape_state is not None:
        result.shape_state.check_marks()
        shape_guards = result.shape_state.guards()
        if not shape_guards.bindings and not shape_guards.exprs:
            shape_guards = None   # a static trace: TENSOR_MATCH checks every size
    return pinning(shape_guards, result.exact_reads)


def release_shape_state(result: TraceResult) -> None:
    """Drops `result`'s ShapeEnv and fake inputs (fake_shapes.py: nothing may wait for the collector)."""
    if result.shape_state is not None:
        result.shape_state.release()
        result.shape_state = None


def _root_args(code, f_locals) -> dict:
    nargs = code.co_argcount + code.co_kwonlyargcount \
        + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
    return {n: f_locals[n] for n in code.co_varnames[:nargs] if n in f_locals}


def _free(code, f_locals, closure) -> dict:
    free = dict(f_locals)
    if closure is not None:  # cell contents from the closure win over f_locals
        for name, cell in zip(code.co_freevars, closure):
            try:
                free[name] = cell.cell_contents
            except ValueError:
                free.pop(name, None)
    return free


def _root(code, f_locals, f_globals, f_builtins, closure, plan=None, **options):
    """A fresh OutputGraph and the root frame's translator over it."""
    output = OutputGraph(f_globals, f_builtins, plan)
    cells = InstructionTranslator.root_cells(code, _free(code, f_locals, closure))
    return output, InstructionTranslator(code, output, f_globals, raw_args=_root_args(code, f_locals),
                                         free_cells=cells, **options)


def list_breaks(code, f_locals, f_globals, f_builtins, closure, first, limit: int = 64) -> list:
    """fullgraph=True: the text of every break the frame would take, starting from `first` (the
    Unsupported its trace stopped at, with `break_at` set). Each round traces the frame again,
    passing over the breaks found so far (translator `passing_over`), to the next one. The list
    ends at the frame's end, or with the failure that stops it: one that cannot be cut
    (graph_break.plan_break refuses it), a failure in no instruction of the root, or a jump on a
    value an unsupported instruction made (its path is unknown)."""
    found, failure = {}, first
    texts = [str(first)]
    while failure is not None and len(found) < limit:
        index, arrival = failure.break_at
        try:
            found[(index, arrival)] = graph_break.plan_break(code, index)
        except graph_break.BreakRefused as why:
            texts[-1] += f"; no graph break there ({why}): breaks after it are not listed"
            break
        failure = None
        output, tx = _root(code, f_locals, f_globals, f_builtins, closure, passing_over=found)
        try:
            tx.run()
        except Unsupported as e:
            texts.append(str(e))
            if e.break_at is None or e.break_at in found:
                break
            failure = e
            e.__traceback__ = None
        finally:
            output.release()
            del tx, output
    return texts


class GraphOutputs:
    """The graph's outputs, numbered as trackers are rebuilt (`VariableTracker.reconstruct`): one
    output per distinct node, however often it is returned."""

    def __init__(self):
        self.nodes: list = []
        self._index: dict = {}
        self.made: dict = {}   # id(tracker) -> its spec (`once`); trackers outlive the rebuild

    def graph_output(self, node) -> GraphOutput:
        index = self._index.get(node)
        if index is None:
            index = self._index[node] = len(self.nodes)
            self.nodes.append(node)
        return GraphOutput(index)

    def rebuild(self, v):
        return v.reconstruct(self)

    def once(self, v, make):
        return _once(self.made, v, make)


def _once(made: dict, v, make):
    """The output spec of `v`, an object the trace constructed (a list, dict, tuple or set, a
    function, an object of a user class: containers.py, new_object.py, model_output.py, ...),
    from `make()` the first time and the very same spec object wherever `v` is reached again:
    codegen builds such a spec once and loads it again (`_Emitter.build_output`), so the frame
    gets one object, as in eager, wherever it reaches it (returned twice, stored by a side effect
    and returned, two locals at a break). An object that reaches itself has no spec (refused)."""
    key = id(v)
    if key in made:
        if made[key] is None:
            raise Unsupported(f"{v} reaches itself through its attributes")
        return made[key]
    made[key] = None
    made[key] = spec = make()
    return spec


def _return_state(result, side_effects, outputs):
    """(the returned value's output spec, the side effects to replay before returning).

    Without side effects the value is rebuilt as it always was. With them it is rebuilt like the
    state at a break (`_Rebuilder`), together with the effects' targets and values: a value read
    from the frame is reloaded from its source (a list the trace appended to is the very list the
    replay appends to), and an object the trace built is built once however often it is reached
    (stored and also returned, it is one object)."""
    if not side_effects:
        return result.reconstruct(outputs), ()
    rebuild = _Rebuilder(outputs)
    spec = rebuild(result)
    # The frame's own cells die with it, unless a function made again after the graph (returned,
    # or stored by an effect) closes over them: only those cells' stores are replayed.
    effects = side_effects.reconstruct(rebuild, cells=False)
    kept = {name for s in (spec, *(e.value for e in effects)) for name in _closed_over(s)}
    if kept:   # again with those cells' stores, by one rebuilder (each object rebuilt once)
        rebuild = _Rebuilder(outputs)
        spec = rebuild(result)
        effects = side_effects.reconstruct(rebuild, cells=kept)
    return spec, effects


def _closed_over(spec) -> set:
    """The names of the frame's cells that functions in the output spec close over."""
    return {name for s in walk(spec) if isinstance(s, FunctionOutput) for name in s.cells}


def _break_state(tx, plan, outputs):
    """(the stack and live locals at the break, as output specs (graph_break.py), the side effects
    to replay before the break instruction runs)."""
    stack = tx.stack
    if plan.consumed > len(stack):
        raise Unsupported(f"the break instruction pops {plan.consumed} items of a stack of "
                          f"{len(stack)} (tracer bug)")
    switches = _break_switches(tx, plan)
    rebuild = _Rebuilder(outputs)
    effects = tx.output.side_effects.reconstruct(rebuild)
    # A loop's iterator on the stack whose items are known goes to the resume function as a tuple
    # of what it has still to yield, made an iterator again by the resume's prologue: the tracer
    # can read a tuple, so the rest of the loop is compiled (a Python iterator it cannot read).
    stack_specs, iter_slots = [], []
    for i, v in enumerate(stack):
        if v is tx.NULL:
            stack_specs.append(None)
        elif i in plan.with_slots:
            stack_specs.append(v.entered_context())
        elif isinstance(v, IteratorVariable) and not rebuild.live_iterator(v) and i < len(stack) - plan.consumed:
            stack_specs.append(TupleOutput(rebuild.remaining(v)))
            iter_slots.append(i)
        else:
            stack_specs.append(rebuild(v))
    stack_specs = tuple(stack_specs)
    live = sorted(set().union(*plan.live), key=tx.code.co_varnames.index)
    local_specs = []
    for name in live:
        # A live local unbound at the break (read only on another path: the exception path of a
        # with block reads what its body assigns) is left out: unbound in the resume function too.
        if name in tx.locals:
            local_specs.append((name, rebuild(tx.locals[name])))
        elif name in tx.raw_args:
            local_specs.append((name, SourceOutput(LocalSource(name))))
    return BreakOutput(plan, stack_specs, tuple(local_specs), tuple(tx.kw_names or ()), switches=switches,
                       iter_slots=tuple(iter_slots)), effects


def _break_switches(tx, plan) -> tuple:
    """What the cut instruction runs inside (outermost first; empty: the frame's own state), after
    checking that the with blocks around the break are grad-mode and autocast blocks that a resume
    function can enter again in order from the frame's state.

    Grad-mode blocks: each block's exit restores the mode of the grad-mode block around it, and the
    mode now is the innermost one's; they become one ModeSwitch (the mode is one flag). Autocast
    blocks: the ones on the stack are the trace's open blocks, in order; each becomes a
    ContextSwitch that enters the very block again (its state is several values and a nesting
    count, which only entering and leaving it sets as eager does). The two states are independent,
    so the grad switch goes first."""
    stack, output = tx.stack, tx.output
    exits = []
    for slot in plan.with_slots:
        if slot >= len(stack) - plan.consumed \
                or not isinstance(stack[slot], (GradModeExitVariable, AutocastExitVariable)):
            raise Unsupported(f"the break is inside a with block of {stack[slot] if slot < len(stack) else '?'}, "
                              "not a grad-mode or autocast block")
        exits.append(stack[slot])
    if sum(isinstance(v, (GradModeExitVariable, AutocastExitVariable)) for v in stack) != len(exits):
        raise Unsupported("a block's exit on the stack outside its with block")
    outside = output.entry_grad_mode
    expected = outside
    for e in exits:
        if isinstance(e, GradModeExitVariable):
            if e.prev != expected:
                raise Unsupported("grad-mode blocks that a resume function cannot enter again in order")
            expected = e.mode
    if output.grad_mode != expected:
        raise Unsupported("the grad mode at the break is not its with block's")
    blocks = [e.block for e in exits if isinstance(e, AutocastExitVariable)]
    if len(blocks) != len(output.autocast_blocks) or any(a is not b for a, b in zip(blocks, output.autocast_blocks)):
        raise Unsupported("the autocast blocks open at the break are not its with blocks")
    grad = (ModeSwitch(torch._C._set_grad_enabled, expected, outside),) if expected != outside else ()
    return grad + tuple(ContextSwitch(e.entered_context().enter) for e in exits
                        if isinstance(e, AutocastExitVariable))


_TUPLE_ITERATOR = type(iter(()))


class _Rebuilder:
    """How a tracker at a graph break is rebuilt.

    A value read from the frame is loaded again from its source: the rest of the frame must see
    the very object (a list it appends to later, a tensor it compares with `is`), and what the
    trace did to it is replayed on it first (side_effects.py; sources are loaded before any effect
    is applied, so a store cannot redirect a path). Side effects' targets and values are rebuilt
    by the same rebuilder. An object the trace built is rebuilt from its items, once (`_once`):
    a list or dict the trace built and reached twice at the break (a local and a stack item, say)
    is one object in the resume function too.

    A loop's iterator over a list or dict the trace built is rebuilt from its remaining items, a
    copy: where the container itself is reached too, the rest of the frame could change it under
    the loop, so that is refused (`iterated`, `containers`: ids of such containers reached each way).
    """

    def __init__(self, outputs):
        self.outputs = outputs
        self.iterators: set = set()
        self.iterated: set = set()
        self.containers: set = set()
        self.made: dict = {}

    def graph_output(self, node):
        return self.outputs.graph_output(node)

    def once(self, v, make):
        return _once(self.made, v, make)

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
        if isinstance(v, GeneratorVariable):
            raise _GeneratorAtBreak(None)   # trace() moves the cut (generators.py)
        if isinstance(v, IteratorVariable):
            if v.changed:   # Python's iterator saw the change (or raises RuntimeError for a dict's)
                raise Unsupported("an iterator over a list or dict that changed since it was made")
            if getattr(v, "exhausted", False):   # an exhausted list iterator stays exhausted
                return IterOutput(None, 0, ())
            if self.live_iterator(v):
                return IterOutput(self(v.origin), v.index)
            if v.kind not in (None, _TUPLE_ITERATOR):
                # Made again from its remaining items, it would be a tuple iterator: the rest of the
                # frame could tell (isinstance(e, enumerate)), so the break is not made here.
                raise Unsupported(f"a {v.kind.__name__} object held at the break (it would be made again "
                                  "as a tuple iterator)")
            return IterOutput(None, 0, self.remaining(v))
        return v.reconstruct(self)   # containers come back here for each item

    @staticmethod
    def live_iterator(v) -> bool:
        """Whether the loop iterator `v` must stay Python's own iterator over the very list or
        dict read from the frame (the rest of the frame may change it, and the loop must see
        that); otherwise it may be rebuilt from its remaining items."""
        origin = v.origin.mapping if isinstance(v.origin, DictViewVariable) else v.origin
        return isinstance(origin, (ListVariable, DictVariable)) and origin.source is not None

    def remaining(self, v) -> tuple:
        """The specs of the items `v` has still to yield (each container it iterates reached once)."""
        if id(v) in self.iterators:
            raise Unsupported("a loop's iterator is reached twice at the break")
        self.iterators.add(id(v))
        for container in v.watched:   # the container it iterates (zip's: each)
            if container.source is None:
                if id(container) in self.iterated or id(container) in self.containers:
                    raise Unsupported("a loop over a container reached again at the break")
                self.iterated.add(id(container))
        if v.changed:
            raise Unsupported("an iterator over a list or dict that changed since it was made")
        return tuple(self(i) for i in v.rest())
