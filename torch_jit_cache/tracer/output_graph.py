"""The fx graph under construction, its graph inputs and the guard set (the tracer's lowest layer).

One OutputGraph is shared by the root translator and every inlined call. It knows nothing about
variable trackers: it deals in fx Nodes, Sources, example tensors and GuardSpecs.
"""
from __future__ import annotations

import builtins
import contextlib
import dataclasses
import dis
import importlib
import linecache
import operator
import re
import weakref

import torch
import torch.fx

from ..config import config
from ..backends import static_inputs, tracing_for_eager
from ..guard.sources import Source
from ..guard.trace_result import ConstantOutput, EffectKind, GuardKind, GuardSpec, SideEffect, TraceBudgetExceeded, Unsupported
from .side_effects import SideEffects

# In-place operators emitted as call_function nodes: registering them keeps dead-code elimination
# from dropping a mutation whose result nobody reads (x.add_(1) on an input, x += y).
_INPLACE_OPERATORS = (operator.iadd, operator.isub, operator.imul, operator.itruediv,
                      operator.ifloordiv, operator.imod, operator.ipow, operator.imatmul,
                      operator.iand, operator.ior, operator.ixor, operator.ilshift,
                      operator.irshift, operator.setitem)
for _op in _INPLACE_OPERATORS:
    torch.fx.node.has_side_effect(_op)
# The autocast switch nodes, as TorchDynamo records them (torch keeps both side-effectful for fx).
_ENTER_AUTOCAST = torch.amp.autocast_mode._enter_autocast
_EXIT_AUTOCAST = torch.amp.autocast_mode._exit_autocast
for _op in (_ENTER_AUTOCAST, _EXIT_AUTOCAST):
    torch.fx.node.has_side_effect(_op)


# The inference-mode switch nodes, as TorchDynamo records them (side-effectful for fx here).
_ENTER_INFERENCE = torch.autograd.grad_mode._enter_inference_mode
_EXIT_INFERENCE = torch.autograd.grad_mode._exit_inference_mode
for _op in (_ENTER_INFERENCE, _EXIT_INFERENCE):
    torch.fx.node.has_side_effect(_op)


@dataclasses.dataclass(eq=False)
class InferenceBlock:
    """A `torch.inference_mode(mode)` block the traced code is in: `real` the torch._C._InferenceMode
    entered for real while it is traced (None once left), `prev_grad` the traced grad mode it
    restores on exit (entering sets grad mode to `not mode`, as c10::InferenceMode does)."""
    mode: bool
    prev_grad: bool
    real: object = None


def _leave(open_blocks: list, block, kind: str) -> None:
    """The traced code leaves `block`, the innermost of `open_blocks`: its real context is left too."""
    if not open_blocks or open_blocks[-1] is not block:
        raise Unsupported(f"{kind} blocks left out of order (tracer bug)")
    open_blocks.pop()
    real, block.real = block.real, None
    real.__exit__(None, None, None)


def _kept(graph_blocks: list, blocks: list) -> int:
    """How many of the graph's open blocks ((block, node, ...) outermost first) stay open when the
    traced code's open blocks are `blocks`: their common beginning."""
    keep = 0
    while keep < min(len(graph_blocks), len(blocks)) and graph_blocks[keep][0] is blocks[keep]:
        keep += 1
    return keep


@dataclasses.dataclass(eq=False)
class AutocastBlock:
    """An autocast block the traced code is in: `args` as _enter_autocast takes them, `real` the
    torch.autocast entered for real while it is traced (None once left)."""
    args: tuple
    real: object = None


def mark_side_effect(target) -> None:
    """Declare `target` (e.g. torch.Tensor.add_) as mutating, so DCE keeps its nodes: every call
    of it has the effect."""
    _MARKED_FOR_A_CALL.discard(target)
    if target not in torch.fx.node._side_effectful_functions:
        torch.fx.node.has_side_effect(target)


# node.meta key: the node's own call writes a tensor it is given (inplace=True, out=, a `name_` op).
IN_PLACE = "tjc_in_place"
# Functions put in torch.fx's side-effect set for one call's sake (F.relu for F.relu(x, inplace=True)).
# The set is process-wide and backends' dead-code elimination reads it, so the mark stays; but later
# traces judge each call of such a function by the call, never by what an earlier trace marked (a
# torch.cond branch calling F.relu was refused as impure once any trace had seen ReLU(inplace=True)).
# Holds functions torch.fx's set holds already.
_MARKED_FOR_A_CALL: set = set()


def mark_call_side_effect(node) -> None:
    """Keep `node` whether or not its result is read: its call writes a tensor it was given, though
    other calls of its function may not (IN_PLACE in its meta)."""
    node.meta[IN_PLACE] = True
    if node.target not in torch.fx.node._side_effectful_functions:
        torch.fx.node.has_side_effect(node.target)
        _MARKED_FOR_A_CALL.add(node.target)


def side_effectful_function(target) -> bool:
    """Whether every call of `target` has an effect by torch.fx's own account (operator.setitem,
    an assert), leaving out functions marked only for one call of them (mark_call_side_effect)."""
    return target in torch.fx.node._side_effectful_functions and target not in _MARKED_FOR_A_CALL


def impure_node(node) -> bool:
    """torch.fx's Node.is_impure, except that a function marked only for one call of it makes
    impure only the calls that wrote a tensor (IN_PLACE), not every later call of it."""
    if node.meta.get(IN_PLACE):
        return True
    if node.op != "call_function" or node.target not in _MARKED_FOR_A_CALL:
        return node.is_impure()
    from torch._library.utils import _RANDOM_FUNCTIONS

    target = node.target   # what torch.fx's verdict rests on besides its side-effect set
    schema = getattr(target, "_schema", None)
    return bool(getattr(target, "_nondeterministic_seeded", False) or target in _RANDOM_FUNCTIONS
                or schema is not None and schema.is_mutable)


_RELATIONS = (GuardKind.DISTINCT_FROM, GuardKind.ALIAS_OF)


class OutputGraph:
    """Mutable trace state shared by all translators of one trace (the GIL is the only lock)."""

    def __init__(self, f_globals: dict, f_builtins: dict, frame_plan=None):
        self.graph = torch.fx.Graph()
        # `graph` is where nodes go now: the root graph, or a higher-order op's body while it is
        # traced (`subgraph`); graph inputs always go to the root. `closed_graphs`: the bodies
        # finished, whose nodes no later node may use (a value escaping its body).
        self.root_graph = self.graph
        self.closed_graphs: set = set()
        # Instructions this trace may still interpret, over the root frame and every call it
        # inlines (translator.py `run`; config.trace_budget).
        self.step_budget = self.steps_left = config.trace_budget
        # Dynamic shapes (frontend/dynamic.py, fake_shapes.py): the plan says which tensor dims are symbols
        # (and records the sizes this trace reads); `fake_shapes` is the trace's fake mode and
        # ShapeEnv, which every trace has: the examples are fake tensors, never the user's data.
        from .fake_shapes import FakeShapes

        self.frame_plan = frame_plan
        self.fake_shapes = FakeShapes()
        self.root_globals = f_globals
        self.root_builtins = f_builtins
        self.graph_inputs: list[Source] = []
        self.example_inputs: list[torch.Tensor] = []
        self._guards: dict[tuple, GuardSpec] = {}
        self._last_placeholder = None
        # Variable-tracker caches, opaque here: id(tensor) -> tracker, Source -> tracker.
        # `keepalive` holds the objects whose ids key `by_id` for the duration of the trace.
        self.by_id: dict[int, object] = {}
        self.by_source: dict[Source, object] = {}
        self.keepalive: list = []
        # id(parameter) -> the tracker the trace reads in its place, while an FSDP2 block's
        # forward is traced (fsdp2.py: the sharded parameter's gathered whole).
        self.param_substitutes: dict[int, object] = {}
        # Whether the trace guarded torch's global module-hook dicts empty (nn_module.py): once per
        # trace, through whichever module was called first.
        self.global_hooks_guarded = False
        # Whether every module is guarded by identity (pin_modules_by_identity: the
        # trace stored to a module), else only those the trace relies on as objects.
        self.modules_by_identity = False
        # (shape_guards.SymbolBinding, int): ints read from input tensors that TENSOR_MATCH does not
        # check (storage_offset()), guarded by value (trace_result.TraceResult.exact_reads).
        self.exact_reads: list = []
        # The exception the traced code is handling now (sys.exc_info()'s, an ExceptionVariable),
        # as PUSH_EXC_INFO and POP_EXCEPT set it; None: whatever the thread handled at frame entry
        # (handlers/exceptions.py). One for all frames: inlined calls share the thread's, as in Python.
        self.handled_exception = None
        # What the trace does to objects outside the graph, replayed after it (side_effects.py).
        self.side_effects = SideEffects(self.add_guard)
        # Grad mode (contexts.py). `entry_grad_mode`: the frame's at its start (the GLOBAL_STATE
        # guard pins it); `grad_mode`: the traced code's now, which the real mode follows while
        # tracing, so that example ops and torch.is_grad_enabled() see it; `_graph_grad_mode`:
        # the mode the graph's nodes so far leave behind. A switch becomes a node only before the
        # next op (create_node), and the graph ends in the entry mode (finish): a block with no
        # op in it costs nothing, and the caller of the graph never sees its mode changed.
        self.entry_grad_mode = torch.is_grad_enabled()
        self.grad_mode = self.entry_grad_mode
        self._graph_grad_mode = self.entry_grad_mode
        # Autocast blocks, the same way (contexts.py): `autocast_blocks` are the traced code's,
        # outermost first, each entered for real while traced; `_graph_autocast` the (block,
        # _enter_autocast node) pairs the graph's nodes so far leave open. The entry state is the
        # GLOBAL_STATE guard's (autocast_cpu); a block's args are constants in the graph.
        self.autocast_blocks: list[AutocastBlock] = []
        self._graph_autocast: list = []
        # Inference-mode blocks, as autocast blocks are, entered for real while traced so that the
        # examples are inference tensors where eager's are (and eager's errors, using one in
        # autograd or in place outside the block, are the examples' too). `_graph_inference`: the
        # (block, _enter_inference_mode node, graph grad mode before it) the graph leaves open;
        # the enter node sets grad mode and the exit node restores the one before it.
        # `entered_inference`: a block was entered in this trace (finish checks the outputs).
        self.inference_blocks: list[InferenceBlock] = []
        self._graph_inference: list = []
        self.entered_inference = False
        # A backward() ran in the graph (traced_backward.py): tensors' .grad reads follow it.
        self.backward_in_graph = False
        # Lists and tuples read from the frame whose items are being wrapped (containers.wrap_sequence).
        self.sequences_in_wrap: dict = {}
        # Modules the graph calls opaquely (tracer/variables/modules/opaque_calls.py): submodule name ->
        # proxy (frontend/proxies.py), registered on the GraphModule by finish(); `_submodule_names` maps
        # id(original) -> name for the trace (the module is in `keepalive` meanwhile).
        self.submodules: dict[str, object] = {}
        self._submodule_names: dict[int, str] = {}

    # -- guards -------------------------------------------------------------------------------
    def spend(self, steps: int = 1):
        """Charges `steps` to the trace budget: each interpreted instruction, and each item a
        builtin's model computes without running an instruction (list(zip(...)) and the like), so
        no loop of the trace's own runs unbounded. Past it, TraceBudgetExceeded: the frame runs
        its original code."""
        self.steps_left -= steps
        if self.steps_left < 0:
            raise TraceBudgetExceeded(
                f"the trace ran past its budget of {self.step_budget} instructions (a long Python "
                "loop; config.trace_budget / TJC_TRACE_BUDGET raises it)")

    def pin_modules_by_identity(self) -> None:
        """Every module of the trace guarded by identity, those read so far and those read later
        (nn_module.NNModuleVariable.require_identity). For a trace whose effects are keyed by the
        real objects (a store to a module) or that mutates a module's tensors in place: which
        sources reach one module (one buffer) is then part of what the trace relies on, and the
        values guarded at each source do not say it."""
        self.modules_by_identity = True
        for v in list(self.by_source.values()):
            pin = getattr(v, "require_identity", None)
            if pin is not None:
                pin()

    def add_guard(self, source: Source, kind: GuardKind, value=None) -> None:
        # A source has one guard of each kind, except identity relations: one per other source.
        key = (source, kind, value) if kind in _RELATIONS else (source, kind)
        if key not in self._guards:
            self._guards[key] = GuardSpec(source, kind, value)

    @property
    def guards(self) -> list[GuardSpec]:
        return list(self._guards.values())

    # -- nodes ----------------------------------------------------------------------------------
    def add_placeholder(self, source: Source, value: torch.Tensor, static: str | None = None) -> torch.fx.Node:
        """A graph input loaded from `source` at call time; placeholders stay ahead of all nodes.
        `static`: how it is a static input for CUDA graphs (backends/static_inputs.py), if it is."""
        name = "arg%d" % len(self.graph_inputs)
        root = self.root_graph
        ctx = (root.inserting_before(None) if self._last_placeholder is None
               else root.inserting_after(self._last_placeholder))
        with ctx:
            node = root.placeholder(name)
        node.meta["source"] = source
        node.meta["example_value"] = value   # dropped with the others' (fake_shapes.check_in_graph)
        if static is not None:
            node.meta[static_inputs.STATIC_INPUT] = static
        self._last_placeholder = node
        self.graph_inputs.append(source)
        self.example_inputs.append(value)
        return node

    def has_tensor_work(self) -> bool:
        """Whether the graph so far computes anything (trace_result.has_tensor_work's test)."""
        return any(node.op not in ("placeholder", "output") for node in self.root_graph.nodes)

    def create_node(self, op: str, target, args: tuple, kwargs: dict) -> torch.fx.Node:
        if self.closed_graphs:
            self.refuse_escaped((args, kwargs))
        self._switch_graph_inference(self.inference_blocks)   # first: it sets grad mode too
        self._switch_graph_grad_mode(self.grad_mode)
        self._switch_graph_autocast(self.autocast_blocks)
        if op == "call_function":
            target = _reachable_target(target)
        return self.graph.create_node(op, target, tuple(args), dict(kwargs))

    def refuse_escaped(self, values) -> None:
        """Unsupported where `values` (fx args) use a node of a finished higher-order op body."""
        def check(node):
            if node.graph in self.closed_graphs:
                raise Unsupported("a value made inside a higher-order op's body (torch.cond branch, map or "
                                  "while_loop body) is used outside it")
            return node
        torch.fx.node.map_arg(values, check)

    @contextlib.contextmanager
    def subgraph(self):
        """Nodes made inside the block go to a fresh fx graph, yielded with the dict of the
        submodules its nodes call (a higher-order op's body: torch_objects/control_flow.py). The
        outer graph is first put in the traced code's grad/autocast/inference state, so a body that
        changes none makes no switch node; one that does is refused there (its nodes are impure).
        Graph inputs the body reads still become placeholders of the root graph."""
        self._switch_graph_inference(self.inference_blocks)
        self._switch_graph_grad_mode(self.grad_mode)
        self._switch_graph_autocast(self.autocast_blocks)
        saved = (self.graph, self.submodules, self._submodule_names, self._graph_grad_mode,
                 list(self._graph_autocast), list(self._graph_inference))
        body = torch.fx.Graph()
        self.graph, self.submodules, self._submodule_names = body, {}, {}
        try:
            yield body, self.submodules
        finally:
            (self.graph, self.submodules, self._submodule_names, self._graph_grad_mode,
             self._graph_autocast, self._graph_inference) = saved
            self.closed_graphs.add(body)

    def add_submodule(self, module, make_proxy) -> str:
        """The name of the GraphModule's submodule standing for `module`: one `make_proxy(module)`
        per module and trace, however often the graph calls it."""
        name = self._submodule_names.get(id(module))
        if name is None:
            name = f"opaque{len(self.submodules)}_{type(module).__name__}"
            self.submodules[name] = make_proxy(module)
            self._submodule_names[id(module)] = name
            self.keepalive.append(module)
        return name

    # -- grad mode ------------------------------------------------------------------------------
    def set_grad_mode(self, mode: bool) -> None:
        """The traced code switches grad mode (entering or leaving a block)."""
        self.grad_mode = mode
        torch._C._set_grad_enabled(mode)

    def switch_grad_mode(self, mode: bool, what: str) -> None:
        """The traced code sets grad mode outside any with statement (`torch._C._set_grad_enabled`,
        making a `torch.set_grad_enabled` object): it holds for the rest of the frame and after it,
        as in eager (`leave_grad_mode_effects`). Refused inside an inference-mode block, whose exit
        restores the mode through its own guard."""
        if self.inference_blocks:
            raise Unsupported(f"{what} inside a torch.inference_mode block")
        self.set_grad_mode(mode)

    def leave_grad_mode_effects(self, outside: bool) -> tuple:
        """The side effect that leaves grad mode `outside` after the graph (the mode the traced code
        has outside its open blocks where it returns or breaks), where it differs from the entry
        mode the graph ends in; () otherwise."""
        if outside == self.entry_grad_mode:
            return ()
        return (SideEffect(EffectKind.SET_STATE, ConstantOutput(torch._C._set_grad_enabled), None,
                           ConstantOutput(outside)),)

    def _switch_graph_grad_mode(self, mode: bool) -> None:
        if self._graph_grad_mode != mode:
            # torch._C._set_grad_enabled is side-effectful for fx (dead-code elimination keeps it).
            self.graph.create_node("call_function", torch._C._set_grad_enabled, (mode,), {})
            self._graph_grad_mode = mode

    # -- autocast -------------------------------------------------------------------------------
    def enter_autocast(self, args: tuple) -> AutocastBlock:
        """The traced code enters an autocast block: the real one too, so the examples follow it."""
        real = torch.amp.autocast(*args)
        real.__enter__()
        block = AutocastBlock(args, real)
        self.autocast_blocks.append(block)
        return block

    def exit_autocast(self, block: AutocastBlock) -> None:
        _leave(self.autocast_blocks, block, "autocast")

    def _switch_graph_autocast(self, blocks: list) -> None:
        """Make the graph's open autocast blocks `blocks`: leave the ones it has that `blocks` do
        not, innermost first, then enter the missing ones, outermost first."""
        graph = self._graph_autocast
        keep = _kept(graph, blocks)
        while len(graph) > keep:
            self.graph.create_node("call_function", _EXIT_AUTOCAST, (graph.pop()[1],), {})
        for block in blocks[keep:]:
            graph.append((block, self.graph.create_node("call_function", _ENTER_AUTOCAST, block.args, {})))

    # -- inference mode -------------------------------------------------------------------------
    def enter_inference_mode(self, mode: bool) -> InferenceBlock:
        """The traced code enters `torch.inference_mode(mode)`: the real one too, so the examples follow it."""
        block = InferenceBlock(mode, self.grad_mode, torch._C._InferenceMode(mode))
        block.real.__enter__()
        self.inference_blocks.append(block)
        self.grad_mode = not mode
        self.entered_inference = True
        return block

    def exit_inference_mode(self, block: InferenceBlock) -> None:
        _leave(self.inference_blocks, block, "inference-mode")
        self.grad_mode = block.prev_grad

    def _switch_graph_inference(self, blocks: list) -> None:
        """Make the graph's open inference-mode blocks `blocks` (as _switch_graph_autocast); each
        node changes the graph's grad mode as the block does in eager."""
        graph = self._graph_inference
        keep = _kept(graph, blocks)
        while len(graph) > keep:
            _, node, before = graph.pop()
            self.graph.create_node("call_function", _EXIT_INFERENCE, (node,), {})
            self._graph_grad_mode = before
        for block in blocks[keep:]:
            node = self.graph.create_node("call_function", _ENTER_INFERENCE, (block.mode,), {})
            graph.append((block, node, self._graph_grad_mode))
            self._graph_grad_mode = not block.mode

    def check_inference_outputs(self, output_nodes: list, runs_as_traced: bool) -> None:
        """A backend that compiles through AOTAutograd (aot_eager, inductor) runs the inference-mode
        nodes while it traces, not at call time: inside the graph the ops and errors are the same,
        but a tensor the block made would leave the graph as a normal tensor, not an inference
        tensor as in eager. Such a graph is refused for those backends."""
        if not self.entered_inference or runs_as_traced:
            return
        for node in output_nodes:
            example = node.meta.get("example_value") if isinstance(node, torch.fx.Node) else None
            if isinstance(example, torch.Tensor) and example.is_inference():
                raise Unsupported("an inference tensor made in a torch.inference_mode block leaves the graph, "
                                  "and this backend (AOTAutograd) would return a normal tensor")

    def release(self) -> None:
        """Drops every reference the trace state holds to user objects and trackers.

        Trackers and this object reference each other; left to the cycle collector, they would
        keep the user's modules, tensors and their example clones alive after the trace
        (nothing may wait for gc.collect()). Called when the trace ends, on every path.
        """
        self.by_id.clear()
        self.by_source.clear()
        self.keepalive.clear()
        if self.fake_shapes is not None:
            self.fake_shapes.release()
        self.frame_plan = None
        self.side_effects.release()
        self._guards.clear()
        while self.inference_blocks:   # innermost first; each restores the grad mode it found
            self.exit_inference_mode(self.inference_blocks[-1])
        torch._C._set_grad_enabled(self.entry_grad_mode)   # the trace's blocks end here too
        while self.autocast_blocks:   # innermost first, as their exits would run
            self.exit_autocast(self.autocast_blocks[-1])
        self.example_inputs = []
        self.graph_inputs = []
        self.submodules = {}
        self._submodule_names.clear()
        self.closed_graphs = set()
        self.root_globals = self.root_builtins = None

    def finish(self, output_nodes: list) -> torch.fx.GraphModule:
        if self.closed_graphs:
            self.refuse_escaped(tuple(output_nodes))
        self.check_inference_outputs(output_nodes, tracing_for_eager())
        self._switch_graph_inference([])
        self._switch_graph_grad_mode(self.entry_grad_mode)
        self._switch_graph_autocast([])
        self.graph.output(tuple(output_nodes))
        root = torch.nn.Module()
        for name, proxy in self.submodules.items():
            root.add_module(name, proxy)
        gm = torch.fx.GraphModule(root, self.graph)
        forget_generated_source_with(gm)
        gm.graph.lint()
        missing = unreachable_globals(type(gm).forward)
        if missing:
            # fx prints a constant it has no name for by its repr (`typing.Any` for a constant
            # Any): the generated forward would raise NameError in the user's call.
            raise Unsupported(f"the fx graph's generated code loads {', '.join(missing)}, which it "
                              "cannot reach (a constant in the graph that torch.fx cannot name)")
        return gm


def forget_generated_source_with(gm: torch.fx.GraphModule) -> None:
    """When `gm` dies, drop the source torch.fx registered for its generated forward.

    fx keeps every GraphModule's source, for tracebacks, in its loader's cache and in `linecache`
    (a lazy entry holding a copy of the module's globals), under a new `<eval_with_key>.N` name
    each time, and never removes it: one entry per graph for the life of the process. The entry is
    only useful while the code can run, which is while `gm` lives.
    """
    filename = type(gm).forward.__code__.co_filename
    if filename.startswith("<eval_with_key>"):
        weakref.finalize(gm, _forget_source, filename).atexit = False


def _forget_source(filename: str) -> None:
    linecache.cache.pop(filename, None)
    loader = getattr(torch.fx.graph_module, "_loader", None)   # torch's private _EvalCacheLoader
    if loader is not None:
        loader.eval_cache.pop(filename, None)


def unreachable_globals(fn) -> list:
    """Names that `fn`'s code loads as globals but neither its globals nor builtins define."""
    f_globals = fn.__globals__
    f_builtins = f_globals.get("__builtins__", builtins)
    if not isinstance(f_builtins, dict):
        f_builtins = vars(f_builtins)
    names = {i.argval for i in dis.get_instructions(fn.__code__) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    return sorted(n for n in names if n not in f_globals and n not in f_builtins)


def _reachable_target(target):
    """`target`, or a function that calls it, such that the graph's code reaches it. fx writes a
    callable whose module is torch's as its qualified name (`module.__name__`), not as a global
    it holds; for an object that name does not reach (a torch.jit.ScriptFunction is written as the
    class torch.jit.ScriptFunction) the graph would call something else."""
    if not torch.fx.graph._is_from_torch(target):
        return target
    try:
        name = torch.fx.node._get_qualified_name(target)
        root, *path = name.split(".")
        found = importlib.import_module(root)
        for part in path:
            found = getattr(found, part)
        if found is target:
            return target
    except Exception:   # noqa: BLE001 - a name fx cannot make or that leads nowhere: wrap it
        pass

    def call(*args, **kwargs):
        return target(*args, **kwargs)

    call.__name__ = call.__qualname__ = re.sub(r"\W", "_", getattr(target, "__name__", None) or type(target).__name__)
    return call
