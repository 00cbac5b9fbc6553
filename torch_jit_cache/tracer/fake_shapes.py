"""Every trace runs on fake tensors: one FakeTensorMode and ShapeEnv per trace, and the guards they leave.

No trace runs the user's program on real data: every tensor the trace reads from the
frame is converted once (`fakeify`) into a fake tensor with the real one's sizes, strides, storage
offset, dtype, device, conj/neg bits, requires_grad and view relations (two views of one base
become views of one fake base), and no data; every example op, factory and opaque call runs under
the mode (`FakeShapes.running()`), so tracing costs no device memory for the model's weights and
draws no random numbers. A trace whose frame has a dynamic dimension (frontend/dynamic.py decides which)
gives each such dimension a symbol; every other tensor (parameters included) is converted with
static sizes, and a static trace has the same ShapeEnv, with no symbol in it until the trace makes
one from data (`.item()` under capture_scalar_outputs). Whatever the traced code asks of a symbolic size (a branch on
`T > block_size`, `range(T)`, a view that needs `C % n_head == 0`) is recorded by the ShapeEnv as a
guard, exactly as under torch.compile. `guards()` turns that state into a ShapeGuards value over our
Sources: which source each symbol is read from (a size, a stride, a storage offset), the symbols'
ranges and the boolean expressions; guard/shape_guards.py compiles them into the C++ SYMBOLIC_SHAPES
leaf; TENSOR_MATCH keeps checking the sizes and strides no symbol reads (guard/tree.py).

Data-dependent values (config.capture_scalar_outputs / capture_dynamic_output_shape_ops): `.item()`,
nonzero and the like make *unbacked* symbols (u0, u1) in the ShapeEnv. They are not inputs: no
source reads them, so `guards()` binds none and no guard mentions one (the ShapeEnv refuses to guard
on them: a branch on one is a graph break, symbolic.py). `record()` notes on each node the unbacked
symbols its result binds (torch's `unbacked_bindings`); what the trace assumed of them (`u0 >= 0`
for a size, a torch._check) is a *deferred runtime assert*, which `check_in_graph()` makes nodes of
the graph (torch.fx.passes.runtime_assert, as Dynamo does), so a call whose data breaks an
assumption raises instead of computing a wrong result. A graph whose asserts cannot be placed is
refused (the frame runs eagerly).

Lifetime: the mode, the ShapeEnv and every fake tensor belong to the trace; `release()` drops them
(OutputGraph.release), and only sympy expressions over plain symbols reach the guards. A backend
that compiles symbolically (aot_eager, inductor) receives the fake example inputs and keeps what it
needs with its compiled artifact, which dies with the cache entry.
"""
from __future__ import annotations

import contextlib
import dataclasses
import threading

import torch

from ..frontend.dynamic import DynamicMarkError
from ..guard.sources import Source
from ..guard.trace_result import FloatSymbolGuard, Unsupported


def _torch_source(source: Source):
    """A torch._guards.Source naming our source (the ShapeEnv keys symbols by such sources)."""
    return _Named(str(source), source)


def _named_class():
    from torch._guards import GuardSource, Source as TorchSource

    @dataclasses.dataclass(frozen=True)
    class Named(TorchSource):
        text: str
        ours: object = dataclasses.field(compare=False, hash=False, repr=False)

        # torch 2.13 reads `name` and `guard_source` as (cached) properties.
        @property
        def _name_template(self) -> str:
            return self.text

        @property
        def guard_source(self):
            return GuardSource.LOCAL

    return Named


_Named = None


def _first_use() -> None:
    """The first ShapeEnv and fake op import parts of torch lazily, and some of those imports fail
    on purpose (optional dependencies such as z3): the failures' tracebacks form reference cycles
    through every frame on the stack. Made on the user's stack, those cycles would hold the user's
    frames (and the module being compiled) until the cycle collector ran. So the first
    use happens once on a thread of its own, whose stack holds nothing of the user's."""
    def warm():
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv

        try:
            shapes = FakeShapes.__new__(FakeShapes)
            shapes.mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
            shapes.mode.cache_enabled = False
            with shapes.running():
                torch.empty(2, 3) @ torch.empty(3, 2)
        except Exception:  # noqa: BLE001 - the trace that follows meets the same failure and says so
            pass

    thread = threading.Thread(target=warm, name="torch_jit_cache-fake-warmup")
    thread.start()
    thread.join()


def _noting_shape_env_class():
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    class NotingShapeEnv(ShapeEnv):
        """A ShapeEnv that keeps, in `guesses`, each comparison on unbacked symbols it could not
        decide and answered with the caller's default instead (torch's guard_or_false and
        guard_or_true: `(expression, assumed value)`); no guard and no runtime assert checks such
        an answer. torch calls `_log_suppressed_dde` exactly there; its log line is not kept."""

        def _log_suppressed_dde(self, a, assumed_value: bool) -> None:
            self.guesses.append((a, assumed_value))

    return NotingShapeEnv


_NotingShapeEnv = None


class FakeShapes:
    def __init__(self):
        global _Named, _NotingShapeEnv
        from torch._subclasses.fake_tensor import FakeTensorMode

        if _Named is None:
            _first_use()
            _Named = _named_class()
            _NotingShapeEnv = _noting_shape_env_class()
        self.shape_env = _NotingShapeEnv(specialize_zero_one=True, duck_shape=False)
        self.shape_env.guesses = []
        self.mode = FakeTensorMode(shape_env=self.shape_env, allow_non_fake_inputs=True)
        # Its dispatch cache (an op's output metadata by its inputs' metadata) makes a model's
        # repeated layers cost one fake dispatch per op kind: llama's 151 example ops took 0.56 s
        # without it, 0.34 s with it. Entries whose key holds a symbol live in the ShapeEnv's own
        # cache and die with it (torch >= 2.6: `fake_tensor_cache`); the class-level one holds
        # metadata only. Where a torch has no per-ShapeEnv cache, SymInts would key the
        # class-level dict and keep this ShapeEnv for the life of the process: off there.
        self.mode.cache_enabled = hasattr(self.shape_env, "fake_tensor_cache")
        # (our Source, fake tensor, [DimChoice]) for every tensor converted, in order.
        self.inputs: list = []
        # (our Source, SymInt) for every int argument traced as a symbol.
        self.ints: list = []
        self.floats: set = set()   # the symbols of float arguments (symfloat)
        # Whether some node binds an unbacked symbol (record): the graph then gets its asserts.
        self.has_unbacked = False

    def running(self):
        """The fake mode, entered around example ops (factories and ops on constants included),
        with torch's Python dispatcher on: torch 2.11 needs it for ops on symbolic sizes (a matmul
        asks numel() of a tensor with symbolic sizes without it), as torch.compile's tracing has it."""
        from torch._dispatch.python import enable_python_dispatcher

        stack = contextlib.ExitStack()
        stack.enter_context(self.mode)
        stack.enter_context(enable_python_dispatcher())
        return stack

    def fakeify(self, real: torch.Tensor, source: Source, choices: list | None) -> torch.Tensor:
        """The fake tensor standing for `real` in this trace (one per tensor: the mode memoizes),
        with a symbol for each dimension `choices` makes dynamic (None: all static)."""
        from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

        choices = choices or []
        if any(c.dynamic for c in choices):
            dims = [DimDynamic.DYNAMIC if c.dynamic else DimDynamic.STATIC for c in choices]
            how = dict(symbolic_context=StatelessSymbolicContext(
                dynamic_sizes=dims, dynamic_strides=[DimDynamic.INFER_STRIDE] * len(dims)))
        else:
            how = dict(static_shapes=True)   # no symbol: the ShapeEnv is not consulted
        try:
            fake = self.mode.from_tensor(real, source=_torch_source(source), **how)
        except Exception as e:  # noqa: BLE001 - a tensor fake tensors cannot stand for
            raise Unsupported(f"cannot trace {source} on a fake tensor: {type(e).__name__}: {e}") from None
        if getattr(fake, "item_memo", None) is not None:
            # torch gives a 0-d CPU input a *backed* `.item()` symbol, read from the source
            # `L['c'].item()`, which no guard of ours can read: `.item()` makes an unbacked one.
            fake.item_memo = None
        for d, c in enumerate(choices):
            if c.dynamic and (c.min is not None or c.max is not None):
                size = fake.size(d)
                if isinstance(size, torch.SymInt):
                    from torch.fx.experimental.symbolic_shapes import constrain_range
                    constrain_range(size, min=c.min if c.min is not None else 0, max=c.max)
        self.inputs.append((source, fake, choices))
        return fake

    def symint(self, value: int, source: Source):
        """A SymInt standing for the int argument `value` read from `source`, or `value` itself
        where the ShapeEnv keeps it a constant (0 and 1 are specialized, as sizes are)."""
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        src = _torch_source(source)
        sym = self.shape_env.create_symbol(value, source=src, dynamic_dim=DimDynamic.DYNAMIC)
        result = self.shape_env.create_symintnode(sym, hint=value, source=src)
        if isinstance(result, torch.SymInt):
            self.ints.append((source, result))
        return result

    def symfloat(self, value: float, source: Source):
        """A SymFloat standing for the float argument `value` read from `source`. The C++ shape
        guard computes on int64 only: a trace that guards on it (a branch on it, `float(s)`, which
        also replaces the symbol by its value) fails to build its guards (`guards`) and traces
        static; one that only computes with it needs no guard but its type."""
        from torch.fx.experimental.symbolic_shapes import DimDynamic

        src = _torch_source(source)
        sym = self.shape_env.create_unspecified_symbol(value, source=src, dynamic_dim=DimDynamic.DYNAMIC)
        self.floats.add(sym)
        return self.shape_env.create_symfloatnode(sym, hint=value, source=src)

    def fake_copy(self, real: torch.Tensor) -> torch.Tensor:
        """A fake tensor for `real` with static sizes, not one of the trace's inputs (the parameters
        an opaque module runs with while traced: opaque_calls.py)."""
        return self.mode.from_tensor(real, static_shapes=True)

    def record(self, node, value) -> None:
        """Note on fx `node` its example `value` and the unbacked symbols it made (the
        runtime-assert pass finds each symbol's defining node there)."""
        from torch.fx.experimental.symbolic_shapes import compute_unbacked_bindings

        node.meta["example_value"] = value
        pending = self.shape_env.pending_fresh_unbacked_symbols
        if pending:
            self._forget_value_only(pending, value)
        if pending:
            bindings = compute_unbacked_bindings(self.shape_env, value)
            if bindings:
                node.meta["unbacked_bindings"] = bindings
                self.has_unbacked = True

    @staticmethod
    def _forget_value_only(pending: list, value) -> None:
        """Drop from `pending` the fresh unbacked symbols that the op's result mentions nowhere
        (no size, stride or offset, no symbolic scalar in it): the op read a tensor as a number for
        its values only (`torch._foreach_add([a], 1 - t)`, `torch.add(x, y, alpha=t)`: the 0-d
        tensor becomes the op's Scalar, whose `.item()` makes the symbol). The graph node is given
        the tensor itself and converts it when it runs, checking the value as it does eagerly; no
        later node can name the symbol. A symbol the result mentions, even inside an expression
        (`2*u0`), stays, so `compute_unbacked_bindings` binds it or the op is refused."""
        from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

        mentioned = free_unbacked_symbols(value)
        pending[:] = [s for s in pending if s in mentioned]

    def guess_mark(self) -> int:
        """A mark for `guessed_since`: how many undecidable comparisons were answered so far."""
        return len(self.shape_env.guesses)

    def refuse_guesses_since(self, mark: int, name: str) -> None:
        """Unsupported where a comparison on unbacked symbols was answered by a default since
        `mark` (while `name` ran): a Python value computed from such an answer holds only for the
        data the default fits, so the trace must not keep it as a constant."""
        guesses = self.shape_env.guesses
        if len(guesses) > mark:
            expr, assumed = guesses[mark]
            raise Unsupported(f"{name}() answered a comparison on data-dependent sizes that the trace "
                              f"cannot decide ({expr} taken as {assumed}): its result would hold only "
                              "for some data")

    def unbound_unbacked(self) -> bool:
        """Whether the last op made unbacked symbols its result does not carry (`record` found no
        node for them); they are forgotten, so the next op's bindings start clean."""
        pending = self.shape_env.pending_fresh_unbacked_symbols
        if pending:
            pending.clear()
            return True
        return False

    def check_in_graph(self, gm, example_inputs: list) -> None:
        """Make the ShapeEnv's deferred runtime asserts nodes of `gm` (see the module docstring),
        then drop the example values `record` left on its nodes (they hold this ShapeEnv)."""
        try:
            if self.has_unbacked or any(self.shape_env.deferred_runtime_asserts.values()):
                from torch.fx.passes.runtime_assert import insert_deferred_runtime_asserts

                # The placeholders bind the input symbols an assert may also read.
                placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
                for node, value in zip(placeholders, example_inputs):
                    node.meta["example_value"] = value
                insert_deferred_runtime_asserts(gm, self.shape_env, "torch_jit_cache")
                self._check_replaced_unbacked(gm, placeholders, example_inputs)
                gm.recompile()
        except Exception as e:  # noqa: BLE001 - an assert the graph cannot compute: no entry
            raise Unsupported(f"the runtime asserts on data-dependent sizes could not be placed in the "
                              f"graph: {type(e).__name__}: {e}") from None
        finally:
            # The root graph's and its bodies' (higher-order ops' subgraphs, control_flow.py).
            for module in gm.modules():
                for node in module.graph.nodes if isinstance(module, torch.fx.GraphModule) else ():
                    for key in ("example_value", "unbacked_bindings"):
                        node.meta.pop(key, None)

    def _check_replaced_unbacked(self, gm, placeholders: list, example_inputs: list) -> None:
        """An assert node for each unbacked symbol a node binds that the ShapeEnv replaced by an
        expression (`torch._check(u0 == s0 + s1)` makes u0 stand for `s0 + s1`): torch's pass
        then takes the node for the expression and checks nothing, so a call whose data breaks the
        equality would return. The expression is computed from the graph's inputs (a size, a
        stride, an int); one that needs a value no input gives raises (the graph is refused)."""
        import operator

        import sympy

        env = self.shape_env
        replaced = []
        for node in gm.graph.nodes:
            for sym, path in node.meta.get("unbacked_bindings", {}).items():
                target = env.replace(sym)
                if target != sym:
                    if path != ():
                        raise ValueError(f"{sym} = {target} binds inside {node}'s result")
                    replaced.append((node, sym, target))
        if not replaced:
            return
        # symbol -> (node, how to read it: "size"/"stride" and a dim, or None for the node itself)
        reads = {sym: (node, None, None) for node in gm.graph.nodes
                 for sym, path in node.meta.get("unbacked_bindings", {}).items() if path == ()}
        for ph, value in zip(placeholders, example_inputs):
            if isinstance(value, torch.SymInt):
                reads.setdefault(value.node.expr, (ph, None, None))
            elif isinstance(value, torch.Tensor):
                for kind, read in (("size", value.size), ("stride", value.stride)):
                    for d in range(value.dim()):
                        v = read(d)
                        if isinstance(v, torch.SymInt):
                            reads.setdefault(v.node.expr, (ph, kind, d))
        graph = gm.graph
        ops = {"size": torch.ops.aten.sym_size.int, "stride": torch.ops.aten.sym_stride.int}

        def build(expr):
            if isinstance(expr, sympy.Integer):
                return int(expr)
            if isinstance(expr, sympy.Symbol):
                if expr not in reads:
                    raise ValueError(f"no graph input or node gives {expr}")
                ph, kind, d = reads[expr]
                return ph if kind is None else graph.call_function(ops[kind], (ph, d))
            combine = {sympy.Add: operator.add, sympy.Mul: operator.mul}.get(type(expr))
            if combine is None:
                raise ValueError(f"cannot compute {expr} in the graph")
            result = build(expr.args[0])
            for arg in expr.args[1:]:
                result = graph.call_function(combine, (result, build(arg)))
            return result

        order = {n: i for i, n in enumerate(graph.nodes)}
        for node, sym, target in replaced:
            # Right after the binding node, or the last node binding a symbol the target reads.
            last = max([node] + [reads[s][0] for s in _free(target) if s in reads], key=order.__getitem__)
            with graph.inserting_before(last.next):
                same = graph.call_function(operator.eq, (node, build(target)))
                graph.call_function(torch.ops.aten._assert_scalar.default,
                                    (same, f"Runtime assertion failed: {sym} == {target}"))

    def release(self) -> None:
        self.inputs.clear()
        self.ints.clear()
        self.floats.clear()
        self.shape_env = self.mode = None

    # -- after the trace --------------------------------------------------------------------------
    def check_marks(self) -> None:
        """A mark_dynamic dimension the trace made one value is an error the user must see."""
        for source, fake, choices in self.inputs:
            for d, c in enumerate(choices):
                if c.strict and not _free(self._expr(fake.size(d))):
                    raise DynamicMarkError(
                        f"{source}.size()[{d}] is marked dynamic (mark_dynamic) but the traced code "
                        f"needs it to be {int(self._expr(fake.size(d)))} (a branch, a Python int or an "
                        "op that needs one size): remove the mark or use maybe_mark_dynamic")

    def _expr(self, value):
        import sympy

        if isinstance(value, torch.SymInt):
            return self.shape_env.replace(value.node.expr)
        return sympy.Integer(value)

    def guards(self):
        """The ShapeGuards for the trace's state (the dims its symbols read are the ones
        TENSOR_MATCH leaves to it: guard/tree.py)."""
        import sympy

        from ..guard.shape_guards import ShapeGuards, SymbolBinding

        env = self.shape_env
        bindings: dict = {}          # symbol -> SymbolBinding
        exprs: list = []
        fresh = 0

        def bind(expr, binding):
            nonlocal fresh
            if isinstance(expr, sympy.Symbol) and expr not in bindings:
                bindings[expr] = binding
                return
            # Another place with the same symbol, or a compound size (2*s0): a new symbol for this
            # place, equal to the expression.
            sym = sympy.Symbol(f"_tjc{fresh}", integer=True)
            fresh += 1
            bindings[sym] = binding
            exprs.append(sympy.Eq(sym, expr))

        for source, fake, _choices in self.inputs:
            for kind, read in (("size", fake.size), ("stride", fake.stride)):
                for d in range(fake.dim()):
                    expr = self._expr(read(d))
                    if _free(expr):
                        bind(expr, SymbolBinding(source, kind, d))
            offset = self._expr(fake.storage_offset())
            if _free(offset):
                bind(offset, SymbolBinding(source, "storage_offset", None))
        for source, value in self.ints:
            bind(self._expr(value), SymbolBinding(source, "int", None))
        # Checked before any simplification: a replacement (float(s) made s its value) turns the
        # guards on a float symbol into True, and nothing would check the value any more.
        on_floats = [g.expr for g in env.guards if _free(g.expr) & self.floats] + \
            [sym for sym in self.floats if sym in env.replacements]
        if on_floats:
            raise FloatSymbolGuard(f"a guard on a float argument: {on_floats[0]} (floats are guarded by value)")
        for guard in env.guards:
            expr = env.simplify(guard.expr)
            if _unbacked(expr):
                # The ShapeEnv never guards on an unbacked symbol (it raises instead); one here
                # would be a guard no call could evaluate: no entry, rather than a wrong one.
                raise Unsupported(f"a shape guard reads a data-dependent size: {expr}")
            if expr is sympy.true:
                continue
            if expr is sympy.false:
                raise Unsupported(f"a shape guard is always false: {guard.expr}")
            missing = _free(expr) - set(bindings)
            if missing:
                raise Unsupported(f"a shape guard reads sizes no input has: {expr}")
            exprs.append(expr)
        ranges = []
        for sym in bindings:
            vr = env.var_to_range.get(sym)
            if vr is None:
                continue
            lo, hi = _bound(vr.lower), _bound(vr.upper)
            if lo is not None or hi is not None:
                ranges.append((sym, lo if lo is not None else -2 ** 63, hi))
        return ShapeGuards(tuple(bindings.items()), tuple(ranges), _unique(exprs))


def forget_shape_envs() -> None:
    """Empty the method caches of torch's ShapeEnv. They are functools.lru_cache objects shared by
    every instance and keyed by the instance (`ShapeEnv._maybe_evaluate_static`, ...), so a trace's
    ShapeEnv, and through its symbols the frames that made it, would stay alive in them after the
    trace; nothing of ours needs them afterwards. Called when a compile with symbolic sizes ends
    (pipeline/convert_frame.py). Only caching is lost for a ShapeEnv still in use elsewhere."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    for attr in vars(ShapeEnv).values():
        clear = getattr(attr, "cache_clear", None)
        if clear is not None:
            clear()


def _bound(value):
    """An int bound of a value range, or None where it is unbounded (or past int64)."""
    import sympy

    if not isinstance(value, sympy.Integer):   # int_oo, -int_oo, sympy.oo
        return None
    value = int(value)
    return value if -2 ** 62 < value < 2 ** 62 else None


def _unbacked(expr) -> bool:
    from torch.fx.experimental.symbolic_shapes import has_free_unbacked_symbols

    return has_free_unbacked_symbols(expr)


def _free(expr) -> set:
    return set(getattr(expr, "free_symbols", ()))


def _unique(exprs) -> tuple:
    seen, out = set(), []
    for e in exprs:
        if e not in seen:
            seen.add(e)
            out.append(e)
    return tuple(out)
