"""The cache-miss callback behind compile(): decide, trace, compile the graph, build guards.

One `FrameCompiler` per compile() call holds its settings. The runtime calls it on a cache miss
(with the hook suspended) for every frame that runs inside the compiled call: the decorated function
and whatever user functions it calls that the trace did not inline. Which frames are traced is decided
by trace_rules (torch, the standard library and this package are skipped for good, by module name).
A frame whose trace does no tensor work is not cached: it runs its original code (see _no_graph).
"""
from __future__ import annotations

import _imp
import dataclasses
import sys
import weakref

from . import codegen, disk_cache
from .code_counts import CodeCounts
from ..runtime import counters, log, trace_log
from .. import graph_break, runtime
from ..frontend import proxies, stance, trace_rules
from ..config import config
from ..frontend.dynamic import DynamicMarkError, DynamicPolicy
from ..guard.tree import build_guards
from ..guard.fast_sources import SourceRewriter
from ..guard.sources import LocalSource, Source, load_source, unreachable_root
from ..guard.trace_result import (BreakOutput, FloatSymbolGuard, GuardKind, GuardSpec, SourceOutput, Unsupported,
                                  drop_tracebacks, has_tensor_work, walk)


def _output_sources(spec):
    """The sources an output spec loads (SourceOutput leaves, at any depth)."""
    return [s.source for s in walk(spec) if isinstance(s, SourceOutput)]


def _failure_text(e: BaseException, text: str) -> str:
    """`text`, after dropping the tracebacks of `e` and its chain: an exception object can outlive
    the failure (a backend that keeps and re-raises its error), and its traceback would keep the
    frames of this compile, and the user's arguments in them, alive until gc."""
    drop_tracebacks(e)
    return text


def _is_number_value_guard(spec) -> bool:
    # bool is kept: a flag's two values often mean graph / no graph.
    return spec.kind is GuardKind.EQUALS_MATCH and type(spec.value) in (int, float)


@dataclasses.dataclass(frozen=True)
class FrameReport:
    """What explain() is told of one frame: its graph (None: no tensor work, or it ran uncompiled),
    the graph's op count, its guards as text, the graph break that ended it, or why it fell back."""
    frame: str
    graph: object
    op_count: int
    guards: str
    break_reason: object = None
    fallback_reason: object = None
    ops: tuple = ()


def higher_order_bodies(gm) -> list:
    """The GraphModules a traced graph's higher-order op nodes call (tracer/variables/torch_objects/
    control_flow.py), nested ones included: their generated forwards are the graph's code too."""
    import torch.fx

    return [m for m in gm.modules() if m is not gm and isinstance(m, torch.fx.GraphModule)]


def _op_name(node) -> str:
    target = node.target
    if node.op == "call_function":
        return getattr(target, "__name__", str(target))
    return str(target)   # call_method: the method's name; call_module: the submodule's path


def _graph_ops(gm) -> tuple:
    """The names of the operations a traced graph runs (explain's op list, the structured trace's)."""
    return tuple(_op_name(n) for n in gm.graph.nodes if n.op not in ("placeholder", "output", "get_attr"))


class FullGraphError(RuntimeError):
    """fullgraph=True and the tracer could not capture the whole frame."""


def _fx_tracing() -> bool:
    """Whether torch.fx's symbolic tracer is running (never imported here: no torch, no tracer)."""
    check = getattr(sys.modules.get("torch.fx._symbolic_trace"), "is_fx_symbolic_tracing", None)
    return check is not None and check()


@dataclasses.dataclass
class FrameCompiler:
    backend: object = "eager"
    fullgraph: bool = False
    # The code compile() was asked for: compiled even when it lives in a library
    # (torch.nn.Sequential.forward, say); other library frames are skipped.
    target_code: object = None
    # Entries per code and guarded object for this compile() call (None: config.cache_limit).
    cache_limit: object = None
    # Whose entries this callback makes (the runtime reads it): each compile() call owns its cache,
    # frame actions and limits; they are evicted when this compiler (held by the compiled object)
    # dies.
    cache_owner: object = dataclasses.field(init=False, repr=False, compare=False)
    # explain(): called with a FrameReport for every frame compiled or run uncompiled.
    observer: object = dataclasses.field(default=None, repr=False, compare=False)
    # Symbolic sizes (frontend/dynamic.py): None, automatic after a size-caused recompile; True, every
    # dimension of the frame's argument tensors from the first compile; False, never.
    dynamic: object = None
    _dynamic: object = dataclasses.field(init=False, repr=False, compare=False)
    # mode= and options= as given, and the inductor config they stand for (backends/modes.py).
    mode: object = None
    options: object = None
    backend_patches: tuple = ()

    # How often each code this compiler made an entry for came back with none alive (its entries
    # evicted because an object they guard by identity died). Keyed by identity, weakly: codes die
    # with their functions, and equal codes are distinct caches (the resume functions of one
    # break, made per entry of their frame, compare equal: keyed by value, 9 entries of the frame
    # read as one resume code evicted 9 times).
    _evicted_returns: object = dataclasses.field(init=False, repr=False, compare=False)
    _shared_entries: object = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self):
        self.cache_owner = runtime.CacheOwner(self.cache_limit or 0)
        self.forget()
        _LIVE[id(self)] = self

    def forget(self) -> None:
        """Forget what this compiler remembers per code, as a new one would (tjc.reset())."""
        self._evicted_returns = CodeCounts()
        self._shared_entries = CodeCounts()   # per code: traces not pinned to their modules
        self._dynamic = DynamicPolicy(self.dynamic)

    def __call__(self, frame, entries):
        code = frame.f_code
        if _imp.lock_held():
            # Import machinery (a meta-path finder, such as an editable install's, called while
            # importlib holds the global import lock) is skipped: no tensor work there, and a
            # trace would wait on imports in another thread (the tracer's warm-up) that wait on
            # this lock: a deadlock, seen under DataParallel's forward.
            return runtime.SKIP
        # A resume function exists because its origin was compiled: it is compiled too, wherever it lives.
        if code is not self.target_code and not graph_break.is_resume_code(code):
            rule = trace_rules.lookup(code, frame.f_globals)
            if rule.action is not trace_rules.Action.TRACE:
                if log.enabled("skips"):
                    log.log("skips", f"not tracing {log.describe_code(code)}: {rule.reason}")
                return runtime.SKIP_TREE if rule.action is trace_rules.Action.SKIP_TREE else runtime.SKIP
        if self._thrashing(code, entries):
            return runtime.SKIP
        if stance.current() != "default":
            decided = self._under_stance(code, frame, entries)
            if decided is not None:
                return decided
        if _fx_tracing():
            # torch.fx.symbolic_trace through a compiled function: its arguments are FX proxies,
            # not values, and FX records the ops the original code runs (as torch.compile does).
            return runtime.RUN_ORIGINAL
        if entries:
            counters.count("recompiles")
            if log.enabled("recompiles"):
                reasons = "\n".join(f"    - {e.explain(frame)}" for e in entries)
                log.log("recompiles", f"recompiling {log.describe_code(code)}; guard failures:\n{reasons}")
        trace_log.begin(code, frame, entries)
        run = _Stages()
        try:
            # KeyboardInterrupt and SystemExit pass through (_compile): the user's call ends as
            # eager's would, and nothing is recorded, so the next call compiles again.
            reason = self._compile(frame, entries, run)
            if isinstance(reason, FloatSymbolGuard):
                # The trace (or the backend: AOTAutograd specialises a float output) guarded on a
                # float traced as a symbol: compiled again with floats as constants, once.
                self._dynamic.refuse_floats(code, str(reason))
                run = _Stages()
                reason = self._compile(frame, entries, run)
        except BaseException as e:
            trace_log.end(e)
            raise
        finally:
            if run.reached("trace"):   # the trace's ShapeEnv must not outlive it (fake_shapes.py)
                from ..tracer.fake_shapes import forget_shape_envs
                forget_shape_envs()
        trace_log.end(reason)
        if isinstance(reason, runtime.GuardedCode):   # an entry: from now on its death counts
            self._evicted_returns.setdefault(code, 0)
        if isinstance(reason, DynamicMarkError):
            raise reason   # the user's mark_dynamic cannot be honoured: theirs to fix
        if isinstance(reason, str) and not (self.fullgraph or entries or self._may_cut_without_graph(code)):
            from ..tracer.tensor_presence import has_torch_objects   # torch.compile skips a frame with
            if not has_torch_objects(frame):                        # nothing torch-related untraced
                log.log("fallbacks", f"running {log.describe_code(code)} uncompiled: nothing torch-related ({reason})")
                return runtime.SKIP_TREE_IF_QUIET   # as a fallback runs, not counted as one
        if self.observer is not None and isinstance(reason, str):
            self.observer(FrameReport(log.describe_code(code), None, 0, "", None, reason))
        if not isinstance(reason, str):
            return reason  # the GuardedCode, or SKIP for a trace without tensor work
        # Raised or logged here, after the failure's handler has ended: the failure's traceback
        # holds the tracer's frames, and through them example tensors and the user's values; a
        # FullGraphError raised inside the handler would carry it as __context__.
        counters.count("unsupported")
        if self.fullgraph:
            raise FullGraphError(f"fullgraph=True: cannot compile {log.describe_code(code)}: {reason}")
        log.warn_once((code.co_filename, code.co_firstlineno, code.co_qualname, reason),
                      f"torch_jit_cache: running {log.describe_code(code)} uncompiled: {reason}")
        if log.enabled("fallbacks"):  # every fallback, where the warning above shows the first
            log.log("fallbacks", f"{log.describe_code(code)}: {reason}")
        # The frames it calls are still intercepted (a model's layers under a wrapper that falls
        # back), until two runs show that nothing below it compiles or hits: then they run
        # uncompiled with it and the hook off, at eager speed (runtime.SKIP_TREE_IF_QUIET).
        return runtime.SKIP_TREE_IF_QUIET

    def _under_stance(self, code, frame, entries):
        """What a miss does under a stance other than "default", or None to compile as usual.
        force_eager: the frame runs as written (a compiled call already running when the stance
        was set still reaches this callback). A recompile (entries exist) under
        "eager_on_recompile" runs the original code (the next call may hit again); under
        "fail_on_recompile" it raises, naming the failed guard."""
        now = stance.current()
        if now == "force_eager" or (entries and now == "eager_on_recompile"):
            return runtime.RUN_ORIGINAL
        if not entries:
            return None
        failure = entries[0].explain(frame)
        raise stance.RecompileError(f"set_stance('fail_on_recompile'): {log.describe_code(code)} would compile again "
                                    f"({len(entries)} entr{'y' if len(entries) == 1 else 'ies'} cached; the first "
                                    f"failed: {failure})")

    def _thrashing(self, code, entries) -> bool:
        """Whether `code`'s entries keep dying: an object it guards by identity is made anew per
        call (a module built in forward, a slice of a ModuleList taken at a graph break), so every
        call would compile again and run far slower than eager. The cache limit cannot see it (a
        dead entry no longer counts); at the same number of returns the code runs uncompiled for
        this compile() call, with one warning."""
        if entries:
            return False
        returns = self._evicted_returns.get(code)
        if returns is None:   # no entry made yet (a first call, or compiles that were interrupted)
            return False
        returns += 1
        self._evicted_returns[code] = returns
        if returns < self.cache_owner.effective_cache_limit:
            return False
        reason = (f"compiled {returns + 1} times: each time its entry was evicted because an object "
                  "it guards by identity died (one made anew per call)")
        counters.count("unsupported")
        trace_log.fallback(code, reason)
        log.warn_once((code.co_filename, code.co_firstlineno, code.co_qualname, "thrashing"),
                      f"torch_jit_cache: running {log.describe_code(code)} uncompiled: {reason}")
        if self.observer is not None:
            self.observer(FrameReport(log.describe_code(code), None, 0, "", None, reason))
        return True

    def _compile(self, frame, entries, run):
        """The GuardedCode for `frame` (or what _no_graph returns for a trace without tensor work),
        or the reason (a str) why it runs uncompiled. Each stage is a function that takes and
        returns values; `run(name, stage, ...)` calls it and names the stage a failure happened in.

        Every stage from the trace to the GuardedCode may fail, on code we did not foresee, in a
        backend or in torch.fx; none of that may reach the user's call, which then runs the
        original code and gives eager's result. Only `Exception` is caught: KeyboardInterrupt and
        SystemExit pass through untouched.
        """
        code = frame.f_code
        resolve = _resolver(frame)
        # Before the tracer is imported (1 s): a process that only loads never imports it. A code
        # an earlier process traced to no tensor work and skipped (_no_graph) is skipped again,
        # untraced, where _no_graph would skip it.
        skippable = not entries and code is not self.target_code
        loaded = trace_log.timed("disk cache load", disk_cache.load, self, frame, resolve,
                                 skippable)   # never raises; None: trace as usual
        if loaded is not None:
            return loaded
        from .. import backends, tracer  # torch is imported only when a frame is compiled
        from ..graph_break import driver

        traced = None
        try:
            plan = run("dynamic shapes plan", self._dynamic.plan, code, frame.f_locals, resolve)
            traced = run("trace", self._trace, frame, plan)
            result, cut = traced.result, traced.cut
            if self._pins_modules(code, entries):
                result.guards.extend(_module_local_identities(frame, result.guards))
            # A break with no tensor work before it is worth an entry only where the frame is
            # meant to compile (the compile() target, a resume function): any other frame runs its
            # original code, as one without tensor work does (a property that raises, a helper
            # that prints first).
            if not has_tensor_work(result.graph) and (not cut or not self._may_cut_without_graph(code)):
                return run("entry without a graph", self._no_graph, frame, entries, result)
            rewritten = run("source rewriting", _RewrittenSources.of, result, resolve)
            run("source check", _check_reachable, frame, result, rewritten)
            has_graph = has_tensor_work(result.graph)
            # A graph of no tensor work whose outputs the frame still reads (a value made dynamic
            # on a recompile, passed on to a resume function) is compiled too.
            needs_graph = has_graph or codegen.uses_graph(result.output, result.side_effects)
            compiled = run("backend compile", self._backend_compile, result) if needs_graph else None
            shape_guards = rewritten.shape_guards
            if result.shape_state is not None:
                shape_guards = run("shape guards after the backend", _shape_guards_after_backend, result,
                                   rewritten.rewriter)
            new_code = run("codegen", _transformed_code, frame, compiled, rewritten.graph_inputs, result)
            guards = run("guard building", _bound_guards, code, rewritten.guards, shape_guards)
            guarded = run("cache entry", runtime.GuardedCode, new_code, guards)
            # A frame's first cut, with no graph before it, at a call that failed inside (the
            # compile() target's decorator wrapper calling forward) splits no graph: nothing
            # compiled ran before it, and the callee is compiled on its own and counts its own
            # break. Not counted twice, as torch.compile does not; still logged. (In a resume
            # function the cut comes after the previous graph, so it is one.)
            made = counters.MadeEntry(has_graph, traced.break_reason if cut else None,
                                      cut and (has_graph or not traced.in_callee or graph_break.is_resume_code(code)))
            trace_log.traced(result, traced, _graph_ops(result.graph) if has_graph and trace_log.enabled() else None)
            trace_log.timed("disk cache store", disk_cache.store, self, frame, result, rewritten, shape_guards,
                            made)   # never raises
        except (DynamicMarkError, FloatSymbolGuard) as e:
            e.__traceback__ = None
            return e
        except (Unsupported, backends.BackendCompilerFailed, driver.EveryBreak) as e:  # these name their stage
            if isinstance(e, Unsupported) and e.leaves_without_tensor_work and skippable:
                return self._raises_without_graph(code, _failure_text(e, str(e)))
            return _failure_text(e, str(e))
        except Exception as e:  # noqa: BLE001 - see the docstring: no failure reaches the user
            return _failure_text(e, f"{run.current} failed: {type(e).__name__}: {e}")
        finally:
            if traced is not None:
                tracer.release_shape_state(traced.result)
        counters.count("graphs_traced", has_graph)
        counters.count_entry(code, made)
        if log.enabled("graph") and has_graph:
            log.log("graph", f"{log.describe_code(code)}\n{result.graph.print_readable(print_output=False)}")
        if log.enabled("guards"):
            log.log("guards", f"{log.describe_code(code)}\n{guards}")
        if log.enabled("bytecode"):
            log.log("bytecode", f"{log.describe_code(code)}\n{codegen.format_code(new_code)}")
        if self.observer is not None:
            ops = _graph_ops(result.graph) if has_graph else ()
            self.observer(FrameReport(log.describe_code(code), result.graph if has_graph else None,
                                      len(ops), str(guards), made.break_reason if made.counted_break else None, None,
                                      ops))
        return guarded

    def _pins_modules(self, code, entries) -> bool:
        """Whether this trace's entry is pinned to the frame's modules (ID_MATCH on them). The
        first entries of a code are shared by every instance equal in what the trace read (the
        first layer's input without grad, the others' with it: two entries for N layers). Those
        count against the cache limit for every object, so once they fill half of it, later
        entries are made per object (blocks that each hold their own drop rate), each object
        keeping the other half for itself, as when every module was guarded by identity."""
        shared = self._shared_entries.get(code) or 0
        if entries and shared >= max(1, self.cache_owner.effective_cache_limit // 2):
            return True
        self._shared_entries[code] = shared + 1
        return False

    def _may_cut_without_graph(self, code) -> bool:
        return code is self.target_code or graph_break.is_resume_code(code)

    def _trace(self, frame, plan):
        """The frame's trace, cut at its first break where it has one (graph_break/driver.py)."""
        from .. import backends
        from ..graph_break import driver

        with backends.tracing_for(self.backend):
            return driver.trace_frame(frame, plan, self._dynamic, self.fullgraph)

    def _backend_compile(self, result):
        """The backend's callable for the traced graph, run with interception off."""
        from .. import backends

        # The graph's own generated forward (and anything compiled from it) must run as is:
        # marked skip before anything can call it under the hook.
        runtime.set_skip(type(result.graph).forward)
        for body in higher_order_bodies(result.graph):   # torch.cond's branches, map's body
            runtime.set_skip(type(body).forward)
        backends.ensure_tuple_output(result.graph)
        unbacked = result.shape_state is not None and result.shape_state.has_unbacked
        return self.compile_graph(result.graph, result.example_inputs, unbacked=unbacked)

    def compile_graph(self, gm, example_inputs, *, unbacked: bool = False):
        """This compiler's backend on `gm` (a traced graph, or one loaded from the disk cache, whose
        forward is marked skip), run with interception off; `gm` is unlinked from its graph after."""
        from ..backends import sharing

        pieces = self._ddp_pieces(gm, example_inputs)
        # An identical graph compiled before (the same block, another instance, another compile() call
        # that loaded it) and cut alike shares its callable: the backend runs once (backends/sharing.py).
        key = sharing.key(self.backend, gm, example_inputs, unbacked=unbacked, patches=self.backend_patches,
                          pieces=pieces)
        compiled = sharing.lookup(key)
        if compiled is not None:
            counters.count("shared_backend_compiles")
            gm.graph.owning_module = None
            return compiled
        # A backend may swap the parameters of opaquely called modules (AOTAutograd does):
        # what the swap leaves in their derived state is put back (frontend/proxies.py).
        with proxies.preserving_derived_state(gm.modules()):
            compiled = self._compile_whole_or_split(gm, example_inputs, pieces)
        # What the backend made (AOT-autograd's generated wrappers, whose code carries no
        # module name the trace rules could read, inductor's runner, a user backend's
        # callable) is never intercepted: it runs with interception off, at its own speed.
        compiled = runtime.without_interception(compiled)
        sharing.remember(key, compiled)
        # fx links the graph back to its GraphModule, a cycle only the collector frees; the
        # GraphModule holds the proxies of opaquely called modules (frontend/proxies.py) and with
        # them the modules' parameters, which must go when the entry does, by reference
        # counting, never by the collector. Nothing needs the link once the backend is done.
        gm.graph.owning_module = None
        return compiled

    def _ddp_pieces(self, gm, example_inputs):
        """Under a DDP forward, where gm is cut at DDP's gradient buckets ({node: piece},
        backends/ddp_split.py); None where it is compiled whole."""
        from .. import backends
        from ..backends import ddp_split

        cap = None if backends.runs_eagerly(self.backend) else ddp_split.bucket_cap()
        return None if cap is None else ddp_split.partitions(gm, example_inputs, cap)

    def _compile_whole_or_split(self, gm, example_inputs, pieces):
        """The backend on gm, or on gm cut into `pieces` (_ddp_pieces)."""
        from .. import backends
        from ..backends import ddp_split

        def compile_piece(piece, inputs):
            return backends.compile_graph(self.backend, piece, inputs, fallback_to_eager=config.fallback_to_eager,
                                          patches=self.backend_patches)

        if pieces is None:
            return compile_piece(gm, example_inputs)
        counters.count("ddp_pieces", max(pieces.values()) + 1)
        return ddp_split.compile_split(gm, example_inputs, pieces, compile_piece)

    def _raises_without_graph(self, code, what: str):
        """A frame the trace followed, with no tensor work, to an exception that leaves it (a
        re-raise the trace cannot cut at: the state there holds the exception) or to its return
        of something the trace cannot rebuild (an object of a class made in the trace): run as
        written, it does everything the trace saw, as a frame without tensor work does; skipped
        as _no_graph skips one (never the compile() target, nor a code with entries: those fall
        back, the failure named)."""
        return self._skip_untraced(code, f"it leaves with no tensor work done ({what})")

    def _skip_untraced(self, code, why: str):
        """SKIP for `code` (never traced again, in this process or, through the disk cache, a later
        one), logged with `why`."""
        if log.enabled("fallbacks"):
            log.log("fallbacks", f"running {log.describe_code(code)} uncompiled: {why}")
        disk_cache.store_skip(self, code)   # never raises
        return runtime.SKIP

    def _no_graph(self, frame, entries, result):
        """A trace with no tensor work: its frame runs the original code, never a graph.

        Caching it as usual would add an entry per argument value (a Python helper called with
        3,000 different ints filled the cache limit, warned, and then checked every entry's guards
        before running code that eager runs in 50 ns). Such code is marked SKIP instead, so it runs
        at the price of the hook alone; it can still be compiled as part of a traced caller
        (inlining ignores the mark), and a later call with tensors from an uncompiled frame runs
        eagerly: slower at worst, never wrong.

        Two kinds of code keep their chance to compile: the function compile() was asked for, and
        code that has entries (SKIP would abandon them). They get an entry that runs the original
        code, guarded by the trace's guards less the values of ints and floats: one entry for every
        int, and a call that brings tensors or other types misses it and is traced again. (Running
        them with RUN_ORIGINAL would trace every call again: 3.5 ms for a two-int `add`.)
        """
        code = frame.f_code
        if code is not self.target_code and not entries:
            return self._skip_untraced(code, "its trace does no tensor work")
        if log.enabled("fallbacks"):
            log.log("fallbacks", f"running {log.describe_code(code)} uncompiled: its trace does no tensor work")
        specs = [g for g in result.guards if not _is_number_value_guard(g)]
        # No GLOBAL_STATE guard: grad mode and the default dtype matter only to tensor work.
        guards = build_guards(specs, global_state=False)
        return runtime.GuardedCode(code, guards)


# Every live FrameCompiler, by id (a dataclass with fields compared is unhashable): what reset()
# reaches to make each forget its memory per code.
_LIVE: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def forget_compilers() -> None:
    """Every live compiler forgets its memory per code (tjc.reset())."""
    for compiler in list(_LIVE.values()):
        compiler.forget()


def _rewrite_shape_guards(shape_guards, rewriter):
    if shape_guards is None:
        return None
    return dataclasses.replace(shape_guards, bindings=tuple(
        (sym, dataclasses.replace(b, source=rewriter.rewrite(b.source))) for sym, b in shape_guards.bindings))


class _Stages:
    """Runs the compile's stages, remembering which ran: the one running names a failure."""

    def __init__(self):
        self.current = None
        self._ran: list = []

    def __call__(self, name: str, stage, *args):
        self.current = name
        self._ran.append(name)
        return trace_log.timed(name, stage, *args)

    def reached(self, name: str) -> bool:
        return name in self._ran


def _resolver(frame):
    """`resolve(source)`: the value `source` reaches from `frame`."""
    f_locals, f_globals, f_builtins = frame.f_locals, frame.f_globals, frame.f_builtins

    def resolve(source):
        return load_source(source, f_locals, f_globals, f_builtins)
    return resolve


def _module_local_identities(frame, guards) -> list:
    """ID_MATCH specs for the modules among the frame's arguments that the trace guarded by type.

    A module is guarded by what the trace read from it, not by identity, so equal instances share
    an entry (nn_module.py); past FrameCompiler._pins_modules' count, an entry is pinned to its
    modules, so the cache limit counts it per object (docs/cache.md) and N blocks that each
    differ do not exhaust one limit."""
    import torch

    pinned = {g.source for g in guards if g.kind is GuardKind.ID_MATCH}
    specs = []
    for g in guards:
        if g.kind is not GuardKind.TYPE_MATCH or type(g.source) is not LocalSource or g.source in pinned:
            continue
        value = frame.f_locals.get(g.source.local_name)
        if isinstance(value, torch.nn.Module):
            pinned.add(g.source)
            specs.append(GuardSpec(g.source, GuardKind.ID_MATCH, value))
    return specs


@dataclasses.dataclass(frozen=True)
class _RewrittenSources:
    """The trace's graph inputs, guards and shape guards, through nn.Module attributes rewritten
    to read the modules' dicts instead (guard/fast_sources.py)."""
    rewriter: SourceRewriter
    graph_inputs: list
    guards: list
    shape_guards: object

    @classmethod
    def of(cls, result, resolve) -> "_RewrittenSources":
        rewriter = SourceRewriter(resolve)
        graph_inputs = [rewriter.rewrite(s) for s in result.graph_inputs]
        specs = [dataclasses.replace(g, source=rewriter.rewrite(g.source),
                                     value=rewriter.rewrite(g.value) if isinstance(g.value, Source) else g.value)
                 for g in result.guards]
        return cls(rewriter, graph_inputs, specs, _rewrite_shape_guards(result.shape_guards, rewriter))


def _check_reachable(frame, result, rewritten: _RewrittenSources) -> None:
    """Every source the entry loads or guards starts from the frame (its arguments, free variables,
    globals or builtins); Unsupported otherwise."""
    code = frame.f_code
    arguments, freevars = codegen.argument_names(code), code.co_freevars
    used = [*rewritten.graph_inputs, *_output_sources(result.output)]
    used += [s for e in result.side_effects for spec in (e.target, e.value)
             for s in _output_sources(spec)]
    used += [s for g in rewritten.guards for s in (g.source, g.value) if isinstance(s, Source)]
    if rewritten.shape_guards is not None:
        used += [b.source for _, b in rewritten.shape_guards.bindings]
    for source in used:
        why = unreachable_root(source, arguments, freevars, frame.f_globals, frame.f_builtins)
        if why is not None:
            raise Unsupported(f"unreachable from the frame: {why}", filename=code.co_filename,
                              lineno=code.co_firstlineno)


def _shape_guards_after_backend(result, rewriter):
    """The backend may have specialised sizes while it compiled (inductor): the guards come from
    the ShapeEnv as it stands now, or the entry would serve sizes the compiled code was not made for
    (a conv compiled for 96 channels run with 240). A binding it added reads a source
    checked before. The ShapeEnv is released once read."""
    from .. import tracer

    shape_guards = _rewrite_shape_guards(tracer.final_shape_guards(result), rewriter)
    tracer.release_shape_state(result)
    return shape_guards


def _transformed_code(frame, compiled, graph_inputs, result):
    """The code the entry runs: the graph call, the side effects, the return or the break with its
    resume functions (pipeline/codegen.py, graph_break/)."""
    code = frame.f_code
    resume_fns = graph_break.resume_functions(code, frame.f_globals, result.output, config.max_resume_depth) \
        if isinstance(result.output, BreakOutput) else ()
    trace_log.resume_functions(resume_fns)
    return codegen.build_transformed_code(code, compiled, graph_inputs, result.output, resume_fns,
                                          result.side_effects)


def _bound_guards(code, specs, shape_guards):
    """The entry's guard tree, bound to `code`: a guard the frame cannot reach fails here, not in
    the user's call."""
    guards = build_guards(specs, shape_guards=shape_guards)
    guards.bind(code)
    return guards
