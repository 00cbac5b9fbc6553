"""Trace rules: which frames the compiler intercepts and traces, decided by module name.

    rule = lookup(code, f_globals)      # -> Rule(action, name, reason)

A frame is judged by the module its code belongs to (`f_globals['__name__']`, the name its functions
carry as `__module__`) and that module's top package, never by the directory the file lies in: in a
virtual environment sysconfig's stdlib folder contains `site-packages`, so a directory prefix
skipped every pip-installed package (transformers, a user's own library) as if it were the stdlib.

What is skipped, and why (first matching rule wins):
- TorchDynamo's entry points (torch.compile, its wrapper, its eval-frame callbacks) with everything
  they call (Action.SKIP_TREE): TorchDynamo's compile and the code it compiled are its own;
- code that FX, AOT-autograd and inductor generate (`<eval_with_key>` files, modules in inductor's
  cache folder): it is the output of a compile; tracing it again would compile a compiled graph;
- torch and the packages of its distribution, and this package: their Python code is the machinery
  the tracer models from outside (torch functions are graph ops, not bytecode to follow);
- the standard library (`sys.stdlib_module_names`): its frames are infrastructure (logging,
  threading, importlib, warnings) that hold no graph work; dataclasses' *generated* methods are not
  stdlib code: they run in the globals of the class's module and follow that module's rule;
- a few third-party packages that hold no tensor work worth tracing and whose frames would only
  cost trace attempts: numpy (its Python functions wrap C routines the tracer cannot see into),
  triton (kernel launchers that inductor generates and calls) and typing_extensions (reached from
  torch's own code, FSDP2's hooks for one).
Everything else is traced: third-party packages, user code, and code without a module name
(`exec` of a string with bare globals). A module named in MODULE_RULES follows its row before its
package's: the model zoo (`torch_jit_cache.testing.models`) lies in this package but holds models
written as a user writes them, and is traced as theirs are (under `DDP(zoo_model)` its frames are
called from torch's code and must compile). The rest of `torch_jit_cache.testing` (CompileCounter,
a backend; the leak checker; the pytest plugin) is the compiler's own code and stays skipped.

A module whose name shadows a stdlib module (a user's own `test.py`) is skipped with the stdlib;
its frames run uncompiled, which is never wrong, only slower.
"""
from __future__ import annotations

import dataclasses
import enum
import gc
import os
import sys
import types


class Action(enum.Enum):
    TRACE = "trace"
    SKIP = "skip"
    SKIP_TREE = "skip_tree"   # as SKIP, and nothing the frame calls is intercepted either


@dataclasses.dataclass(frozen=True)
class Rule:
    action: Action
    name: str        # short name of the rule, for tests and logs
    reason: str      # why, in words a user reads in a log


# Top packages skipped by name: (packages, rule name, reason). Data, not code: a new rule is a row.
PACKAGE_RULES: tuple = (
    (frozenset({"torch", "functorch", "torchgen"}), "torch",
     "torch's own Python code (its functions are graph operations, not code to follow)"),
    (frozenset({"torch_jit_cache"}), "torch_jit_cache", "the compiler's own code"),
    (frozenset({"numpy"}), "numpy", "numpy wraps C routines the tracer cannot see into"),
    (frozenset({"triton"}), "triton", "kernel launchers that backends generate and call"),
    # Reached from torch's own code (FSDP2's hooks, torch._dynamo.disable's wrappers): tracing it
    # only cost trace attempts and a fallback warning naming a typing helper.
    (frozenset({"typing_extensions"}), "typing_extensions", "backports of the typing module (no tensor work)"),
)

# Modules whose rule is not their package's, matched by their full name before PACKAGE_RULES:
# (modules, action, rule name, reason).
MODULE_RULES: tuple = (
    (frozenset({"torch_jit_cache.testing.models"}), Action.TRACE, "model_zoo",
     "the model zoo: models written as a user's are, traced as theirs are"),
)

# Filenames of code that backends and FX generate: (prefix, rule name, reason).
GENERATED_FILENAME_RULES: tuple = (
    ("<eval_with_key>", "fx_generated", "code that torch.fx generated (a GraphModule's forward)"),
)

# TorchDynamo's entry points, (module, qualname): torch.compile itself, the wrapper it puts around a
# callable (whose frames TorchDynamo compiles), and the eval-frame callbacks by which TorchDynamo
# compiles a frame. Everything they run belongs to TorchDynamo's compile or to code it compiled: run
# as a tree uncompiled (runtime.SKIP_TREE), so that neither the namedtuples and generated functions
# its compiler calls nor the code it compiled reach our hook (torch.cond run as written compiles its
# branches this way, inside whatever compiled call called it). A name torch renames falls back to
# SKIP, as torch's frames are.
DYNAMO_ENTRY_POINTS = frozenset({
    ("torch", "compile"),
    ("torch._dynamo.eval_frame", "_TorchDynamoContext.__call__.<locals>.compile_wrapper"),
    ("torch._dynamo.convert_frame", "CatchErrorsWrapper.__call__"),
    ("torch._dynamo.convert_frame", "ConvertFrameAssert.__call__"),
    ("torch._dynamo.convert_frame", "ConvertFrame.__call__"),
})

DYNAMO_ENTRY = Rule(Action.SKIP_TREE, "dynamo_entry", "TorchDynamo's compiler or code it compiled, with all it calls")
STDLIB = Rule(Action.SKIP, "stdlib", "the Python standard library")
GC_CALLBACK = Rule(Action.SKIP, "gc_callback", "a garbage-collector callback (gc.callbacks): it runs when the "
                   "collector does, inside whatever call allocated, not as part of the compiled code")
INDUCTOR = Rule(Action.SKIP, "inductor_generated", "code that inductor generated (its compiled graph)")
TRACE = Rule(Action.TRACE, "default", "user code or a third-party package")

_PACKAGE_TABLE = {pkg: Rule(Action.SKIP, name, reason)
                  for pkgs, name, reason in PACKAGE_RULES for pkg in pkgs}
_MODULE_TABLE = {module: Rule(action, name, reason)
                 for modules, action, name, reason in MODULE_RULES for module in modules}
_FILENAME_TABLE = tuple((prefix, Rule(Action.SKIP, name, reason))
                        for prefix, name, reason in GENERATED_FILENAME_RULES)
_STDLIB_NAMES = frozenset(sys.stdlib_module_names)


def _inductor_cache_dir():
    # Inductor's modules can exist only once inductor was imported; asking for the folder earlier
    # would import it (and create the folder) for nothing.
    utils = sys.modules.get("torch._inductor.runtime.cache_dir_utils")
    if utils is None:
        return None
    try:
        return os.path.abspath(utils.cache_dir()) + os.sep
    except Exception:  # a broken cache configuration must not break the user's call
        return None


def rule_for_module(module_name) -> Rule:
    """The rule for code of module `module_name` (None: code without a module name)."""
    if not isinstance(module_name, str) or not module_name:
        return TRACE
    rule = _MODULE_TABLE.get(module_name)
    if rule is not None:
        return rule
    top = module_name.partition(".")[0]
    rule = _PACKAGE_TABLE.get(top)
    if rule is not None:
        return rule
    if top in _STDLIB_NAMES:
        return STDLIB
    return TRACE


def rule_for_filename(filename: str):
    """The rule for generated code recognised by its filename, or None."""
    for prefix, rule in _FILENAME_TABLE:
        if filename.startswith(prefix):
            return rule
    if filename.startswith(os.sep):
        cache = _inductor_cache_dir()
        if cache is not None and filename.startswith(cache):
            return INDUCTOR
    return None


def lookup(code: types.CodeType, f_globals) -> Rule:
    """The rule for a frame running `code` with globals `f_globals`."""
    rule = rule_for_filename(code.co_filename)
    if rule is not None:
        return rule
    if any(getattr(cb, "__code__", None) is code for cb in gc.callbacks):
        return GC_CALLBACK
    name = f_globals.get("__name__") if isinstance(f_globals, dict) else None
    if (name, code.co_qualname) in DYNAMO_ENTRY_POINTS:
        return DYNAMO_ENTRY
    return rule_for_module(name)


# ---- torch's wrappers around a user's module --------------------------------------------------
# `tjc.compile(DDP(model))`: the wrapper's forward manages communication state outside any graph
# (DDP's reducer, its buffer broadcast, FSDP1's unsharding) and calls the wrapped module. As under
# torch.compile, the wrapper's forward runs as written, as torch's code always does, and the
# wrapped module's frames, called from it, are compiled. (module, qualname) of each such forward:
WRAPPER_FORWARDS = frozenset({
    ("torch.nn.parallel.distributed", "DistributedDataParallel.forward"),
    ("torch.nn.parallel.data_parallel", "DataParallel.forward"),
    ("torch.distributed.fsdp.fully_sharded_data_parallel", "FullyShardedDataParallel.forward"),
})


def is_wrapper_forward(fn) -> bool:
    """Whether `fn` is the forward of one of torch's wrappers around a user's module."""
    return (getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)) in WRAPPER_FORWARDS


# ---- torch callables the tracer never runs ----------------------------------------------------
# The tracer runs a torch callable on the example tensors to learn its result (tracer/variables/
# tensor.py). That is right for a tensor op and wrong for a call whose effect lies outside the
# tensors it is given (a global setting, a generator, a device): run while tracing, it would happen
# once more than in eager, or, where its result looked like a constant (set_flush_denormal returns
# a bool), only while tracing. Nor may a read of state that no guard checks (initial_seed,
# get_num_threads) become a constant of the graph. For these the graph breaks *before* the call,
# which then runs at run time, once per call. The decision is made from what the callable is,
# never by running it:
# - by name: a torch callable (no Tensor method) whose name says that it sets, resets or seeds
#   (set_num_threads, set_autocast_enabled, torch.cuda.reset_peak_memory_stats, manual_seed,
#   seed_all); no ATen op in torch's namespaces is named so;
# - by (module, name), the others: data, a new one is a row. Looked up when asked, so that
#   torch.cuda and friends are imported only by code that uses them.
EFFECT_NAME_PREFIXES = ("set_", "_set_", "reset_", "manual_seed", "seed", "_seed")
GLOBAL_EFFECT_CALLABLES: tuple = (
    ("torch.random", ("initial_seed", "get_rng_state", "fork_rng"),
     "reads or saves the global random generator's state"),
    ("torch", ("get_num_threads", "get_num_interop_threads"), "reads a setting no guard checks"),
    ("torch", ("use_deterministic_algorithms",), "changes a global setting"),
    # Whether a `torch.autograd.profiler.profile()` block is running: no guard checks it.
    ("torch.autograd", ("_profiler_enabled",), "reads whether the autograd profiler runs"),
    ("torch.cuda", ("initial_seed", "get_rng_state", "get_rng_state_all"),
     "reads a CUDA random generator's state"),
    ("torch.cuda", ("synchronize", "empty_cache", "ipc_collect", "init"), "acts on the CUDA device"),
    ("torch.cuda", ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"),
     "reads the CUDA allocator's state"),
    # range_push returns an int: run while tracing, it would be a constant and never run again.
    ("torch.cuda.nvtx", ("range_push", "range_pop", "range_start", "range_end", "mark"),
     "marks a profiler range"),
)


def torch_callable_effect(fn):
    """Why the torch callable `fn` must not run while tracing (a global effect, or a read of state
    no guard checks), or None for a tensor op. Never runs `fn`."""
    objclass = getattr(fn, "__objclass__", None)
    if isinstance(objclass, type) and objclass.__name__ == "TensorBase":
        return None   # a Tensor method: a tensor op (Tensor.set_ and friends are refused by name elsewhere)
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return None
    if name.startswith(EFFECT_NAME_PREFIXES):
        return f"torch.{name}() changes global state (it would run while tracing)"
    for module_name, names, why in GLOBAL_EFFECT_CALLABLES:
        if name in names and getattr(sys.modules.get(module_name), name, None) is fn:
            return f"{module_name}.{name}() {why}"
    return None


# ---- functorch's transforms -------------------------------------------------------------------
# torch.vmap, torch.func.grad / vmap / jacrev / jacfwd / hessian / vjp / jvp / functional_call (and
# functorch's aliases) run the user's function under a transform: batching levels, nested autograd
# levels, swapped module state. The tracer models none of it. Run while tracing on the examples,
# the function's Python effects happened once, at trace time; the wrapper they return, put in the
# graph as a node, would be emitted under the name it copies from the function it wraps
# (`functools.wraps`: `torch.vmap(torch.sum)` calls itself `torch.sum`), so the graph would call the
# unbatched op or a name that does not exist. So a transform and every function it returns run as
# written, at a graph break before the call. They are recognised by the module their *code* runs
# in (their globals' `__name__`), which wrapping does not change, never by `__module__`.
# torch's higher-order control flow is treated alike where it is not traced into branch graphs
# (torch.cond and control_flow.map are: tracer/variables/torch_objects/control_flow.py; torch.while_loop
# and refused calls are not): called from Python it compiles its branches with TorchDynamo itself,
# which must not run inside tjc's trace; as written, at run time, it matches eager.
FUNCTORCH_CODE_MODULES = ("torch._functorch", "functorch", "torch._higher_order_ops")


def functorch_transform(fn):
    """Why calling `fn` must run as written (a functorch transform, or a function one returned), or
    None. Never runs `fn`."""
    fn = getattr(fn, "__func__", fn)   # a bound method: its function
    module_name = getattr(fn, "__globals__", {}).get("__name__") if isinstance(fn, types.FunctionType) else None
    if not isinstance(module_name, str):
        return None
    if not any(module_name == m or module_name.startswith(m + ".") for m in FUNCTORCH_CODE_MODULES):
        return None
    return (f"{getattr(fn, '__qualname__', fn)} is functorch or higher-order-op code ({module_name}): it is not "
            "traced, the call runs as written")
