"""The cache-miss callback behind compile(): decide, trace, compile the graph, build guards.

One `FrameCompiler` per compile() call holds its settings. The runtime calls it on a cache miss
(with the hook suspended) for every frame that runs inside the compiled call: the decorated function
and whatever user functions it calls that the trace did not inline. Which frames are traced is decided
by trace_rules (torch, the standard library and this package are skipped for good, by module name).
A frame whose trace does no tensor work is not cached: it runs its original code (see _no_graph).
"""
from __future__ import annotations

import dataclasses
import types

from . import log, runtime, trace_rules
from .config import config
from .guards import build_guards
from .fast_sources import SourceRewriter
from .sources import Source, load_source
from .trace_result import GuardKind, Unsupported

# Python-level counters that stats() adds to the runtime's.
COUNTERS = {"graphs": 0, "graph_breaks": 0, "recompiles": 0, "unsupported": 0}


def describe(code: types.CodeType) -> str:
    return f"'{code.co_qualname}' ({code.co_filename}:{code.co_firstlineno})"


def _has_tensor_work(graph) -> bool:
    # Placeholders and the output node alone mean the frame computes nothing on tensors (it reads
    # shapes, returns an input as is, or does pure Python work).
    return any(node.op not in ("placeholder", "output") for node in graph.graph.nodes)


def _is_number_value_guard(spec) -> bool:
    # bool is kept: a flag's two values often mean graph / no graph.
    return spec.kind is GuardKind.EQUALS_MATCH and type(spec.value) in (int, float)


class FullGraphError(RuntimeError):
    """fullgraph=True and the tracer could not capture the whole frame."""


@dataclasses.dataclass
class FrameCompiler:
    backend: object = "eager"
    fullgraph: bool = False
    # The code compile() was asked for: compiled even when it lives in a library
    # (torch.nn.Sequential.forward, say); other library frames are skipped.
    target_code: object = None

    def __call__(self, frame, entries):
        code = frame.f_code
        if code is not self.target_code:
            rule = trace_rules.lookup(code, frame.f_globals)
            if rule.action is trace_rules.Action.SKIP:
                if log.enabled("skips"):
                    log.log("skips", f"not tracing {describe(code)}: {rule.reason}")
                return runtime.SKIP
        if entries:
            COUNTERS["recompiles"] += 1
            if log.enabled("recompiles"):
                reasons = "\n".join(f"    - {e.explain(frame)}" for e in entries)
                log.log("recompiles", f"recompiling {describe(code)}; guard failures:\n{reasons}")
        from . import tracer  # torch is imported only when a frame is compiled
        import torch

        # Tracing runs the ops on real example tensors; random ops (dropout) must not advance the
        # generator, or the compiled call that follows would draw different numbers than eager.
        rng = torch.random.get_rng_state()
        try:
            result = tracer.trace(code, frame.f_locals, frame.f_globals, frame.f_builtins, frame.closure)
        except Unsupported as e:
            COUNTERS["unsupported"] += 1
            if self.fullgraph:
                raise FullGraphError(f"fullgraph=True: cannot compile {describe(code)}: {e}") from None
            log.warn_once((code.co_filename, code.co_firstlineno, code.co_qualname, e.reason),
                          f"torch_jit_cache: running {describe(code)} uncompiled: {e}")
            # The frames it calls are still intercepted (a model's layers under a wrapper that
            # falls back), until two runs show that nothing below it compiles or hits: then they
            # run uncompiled with it and the hook off, at eager speed (runtime.SKIP_TREE_IF_QUIET).
            return runtime.SKIP_TREE_IF_QUIET
        finally:
            torch.random.set_rng_state(rng)
        if not _has_tensor_work(result.graph):
            return self._no_graph(frame, entries, result)
        return self._finish(frame, result)

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
        if log.enabled("fallbacks"):
            log.log("fallbacks", f"running {describe(code)} uncompiled: its trace does no tensor work")
        if code is not self.target_code and not entries:
            return runtime.SKIP
        f_locals, f_globals, f_builtins = frame.f_locals, frame.f_globals, frame.f_builtins
        specs = [g for g in result.guards if not _is_number_value_guard(g)]
        # No GLOBAL_STATE guard: grad mode and the default dtype matter only to tensor work.
        guards = build_guards(specs, global_state=False,
                              resolve=lambda s: load_source(s, f_locals, f_globals, f_builtins))
        return runtime.GuardedCode(code, guards)

    def _finish(self, frame, result):
        from . import backends, codegen

        f_locals, f_globals, f_builtins = frame.f_locals, frame.f_globals, frame.f_builtins

        def resolve(source):
            return load_source(source, f_locals, f_globals, f_builtins)

        # Guards and input loads through nn.Module attributes read the modules' dicts instead.
        rewriter = SourceRewriter(resolve)
        graph_inputs = [rewriter.rewrite(s) for s in result.graph_inputs]
        specs = [dataclasses.replace(g, source=rewriter.rewrite(g.source),
                                     value=rewriter.rewrite(g.value) if isinstance(g.value, Source) else g.value)
                 for g in result.guards]
        # The graph's own generated forward (and anything compiled from it) must run as is: marked
        # skip before anything can call it under the hook.
        runtime.set_skip(type(result.graph).forward)
        compiled = backends.compile_graph(self.backend, result.graph, result.example_inputs,
                                          fallback_to_eager=config.fallback_to_eager)
        # What the backend made (AOT-autograd's generated wrappers, whose code carries no module
        # name the trace rules could read, inductor's runner, a user backend's callable) is never
        # intercepted: it runs with interception off, at its own speed.
        compiled = runtime.without_interception(compiled)
        COUNTERS["graphs"] += 1
        new_code = codegen.build_transformed_code(frame.f_code, compiled, graph_inputs, result.output)
        guards = build_guards(specs, resolve=resolve)
        if log.enabled("graph"):
            log.log("graph", f"{describe(frame.f_code)}\n{result.graph.print_readable(print_output=False)}")
        if log.enabled("guards"):
            log.log("guards", f"{describe(frame.f_code)}\n{guards}")
        if log.enabled("bytecode"):
            log.log("bytecode", f"{describe(frame.f_code)}\n{codegen.format_code(new_code)}")
        return runtime.GuardedCode(new_code, guards)
