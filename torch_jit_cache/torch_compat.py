"""The private torch names this package reads, one row each: the torch releases each serves and the
package modules that read it; and the branches where a release renamed one.

torch promises nothing about a name with a leading underscore, nor about torch.fx.experimental and
torch.fx.passes. Such a name can move or vanish in any release, and the failure then shows far from
its cause (an AttributeError in a tracer handler, a graph break with an odd reason). Here they are
all in one place, so that moving to a new torch starts with one test:

  tests/python/test_torch_compat.py
    - every row whose releases include the installed torch resolves there (imported, attribute by
      attribute, or by the row's own `check`);
    - the package's source reaches no private torch name that no row lists (it reads the AST:
      imports, attribute chains from imported names, `getattr(m, "name")`, dotted strings such as
      `sys.modules.get("torch._dynamo")`, and underscore attributes that torch's Module or Tensor
      has, `m._parameters`), and each row's `users` name the modules that read it;
    - every libtorch header and `impl` name csrc/ uses is a NATIVE row (those the C++ build checks).

Releases: TESTED is the range pyproject.toml declares (torch>=2.13,<2.15); scripts/test.sh runs the
whole suite on 2.13.0 and a core subset with this test on 2.14.1. GPU_MACHINE (2.11) is what the
GPU machine has: scripts/gpu_check.sh runs the same core subset and this test there. A row says the
releases it serves as (first, last) minor versions; a row that is not for every release names the
branch (a function below) that picks the one the installed torch has.

What 2.11 needs beyond the tested range: torch._opaque_base (2.14's torch._custom_class_base), and
the Python dispatcher around fake ops (enable_python_dispatcher's row); every other row reads the
same on 2.11 by torch's sources, which gpu_check.sh's run of test_torch_compat.py confirms or refutes.

Torch-free: importing this module imports no torch; only `resolve` and the branch functions do.
"""
from __future__ import annotations

import dataclasses
import importlib
import re
from typing import Callable

TESTED = ("2.13", "2.14")        # pyproject.toml's [torch] extra: torch>=2.13,<2.15
GPU_MACHINE = "2.11"             # the GPU machine's torch (scripts/gpu_check.sh)
EVERY = (GPU_MACHINE, TESTED[1])


@dataclasses.dataclass(frozen=True)
class Row:
    """A private torch name. `name` is dotted from `torch` (a module, then attributes); for an
    instance attribute that no class carries, `check(torch) -> bool` says whether it is there."""
    name: str
    users: tuple[str, ...]           # package modules, relative to torch_jit_cache
    releases: tuple[str, str] = EVERY
    note: str = ""
    check: Callable | None = None

    def serves(self, version: str) -> bool:
        return _minor(self.releases[0]) <= _minor(version) <= _minor(self.releases[1])


@dataclasses.dataclass(frozen=True)
class NativeRow:
    """A libtorch name or header outside torch's public C++ API that csrc/ compiles against: the C++
    build of `_C_torch` for each torch is its check (scripts/setup.sh builds one per torch)."""
    name: str
    users: tuple[str, ...]           # csrc/ files
    note: str = ""


def _minor(version: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()
    return int(major), int(minor)


def _r(name, *users, releases=EVERY, note="", check=None) -> Row:
    return Row(name, tuple(users), releases, note, check)


def _has_dynamo_mark(attribute: str, mark: str) -> Callable:
    def check(torch) -> bool:
        import torch._dynamo  # noqa: F401  (its marks are set by torch._dynamo's decorators)

        t = torch.empty(2)
        getattr(torch._dynamo, mark)(t, 0)
        return hasattr(t, attribute)
    return check


_OG, _TENSOR, _FAKE = "tracer.output_graph", "tracer.variables.torch_objects.tensor", "tracer.fake_shapes"
_CF = "tracer.variables.torch_objects.control_flow"
_DIST, _FSDP, _HOOKS = "tracer.variables.parallel.distributed", "tracer.variables.parallel.fsdp2", "tracer.variables.modules.module_hooks"
_GETATTRIBUTE = "tracer.variables.modules.module_getattribute"   # nn.Module.__call__'s reads, through a class's hook
_NN, _WRAP, _BACK = "tracer.variables.modules.nn_module", "frontend.module_wrapper", "backends"
_SYM = "torch.fx.experimental.symbolic_shapes."
_SAVED_HOOKS = "tracer.variables.torch_objects.saved_hooks_contexts"

ROWS: tuple[Row, ...] = (
    # --- torch._C: grad/inference mode, the tensor base class, API-usage logging -------------------
    _r("torch._C.TensorBase", _TENSOR, "guard.process_lived", "frontend.trace_rules",
       note="the C tensor type whose methods are torch's own (trace rules, identity guards)"),
    _r("torch._C._InferenceMode", _OG),
    _r("torch._C._autograd._get_data_attr", _TENSOR, note="x.data as a graph node"),
    _r("torch._C._autograd._saved_tensors_hooks_get_disabled_error_message", _SAVED_HOOKS),
    _r("torch._C._autograd._saved_tensors_hooks_disable", _SAVED_HOOKS),
    _r("torch._C._autograd._saved_tensors_hooks_enable", _SAVED_HOOKS),
    _r("torch._C._log_api_usage_once", "testing.stochastic_depth", _TENSOR),
    _r("torch._C._set_grad_enabled", "graph_break.state", _OG, "tracer.variables.torch_objects.grad_switches"),
    _r("torch._check", _TENSOR),
    _r("torch._check_is_size", _TENSOR),
    _r("torch._compile", _TENSOR, note="the module of torch._disable_dynamo's wrappers"),
    _r("torch._tensor", _TENSOR, note="the module of torch.Tensor's Python methods"),
    _r("torch._utils.is_compiling", _TENSOR),
    _r("torch._ops.OpOverload", _DIST, _TENSOR, "tracer.variables.torch_objects.op_writes"),
    _r("torch._ops.OpOverloadPacket", _DIST, "tracer.variables.torch_objects.op_writes"),
    _r("torch.fx._symbolic_trace", "pipeline.convert_frame", note="its is_fx_symbolic_tracing(), looked up by name"),
    _r("torch.ops.aten._local_scalar_dense.default", "tracer.variables.torch_objects.value_sizes"),
    _r("torch.ops.aten._unsafe_index", "tracer.variables.torch_objects.value_sizes"),
    _r("torch.ops.aten._assert_scalar.default", _FAKE),
    _r("torch.amp.autocast_mode._enter_autocast", _OG),
    _r("torch.amp.autocast_mode._exit_autocast", _OG),
    _r("torch.autograd.grad_mode._enter_inference_mode", _OG),
    _r("torch.autograd.grad_mode._exit_inference_mode", _OG),
    _r("torch.utils._contextlib._DecoratorContextManager.clone", "tracer.variables.torch_objects.contexts"),
    _r("torch.utils._python_dispatch.TorchDispatchMode", "tracer.variables.torch_objects.value_sizes"),
    _r("torch.utils._pytree.tree_map_only", "tracer.variables.modules.opaque_calls", "tracer.variables.torch_objects.numpy_tensors"),
    _r("torch.utils._pytree.tree_leaves", "tracer.variables.torch_objects.numpy_tensors"),
    _r("torch._numpy.ndarray", "tracer.variables.torch_objects.numpy_tensors",
       note="torch's numpy layer: a numpy array traced as a tensor runs its calls"),
    _r("torch.autograd.function._SingleLevelFunction.setup_context", "tracer.variables.torch_objects.autograd_functions",
       note="the setup_context a Function without its own has: forward then takes ctx"),
    _r("torch.utils._sympy.functions", "guard.shape_guards"),
    _r("torch._dispatch.python.enable_python_dispatcher", _FAKE,
       note="around every fake op: 2.11 needs it for ops on symbolic sizes (a matmul asks numel())"),
    # --- isinstance checks torch writes in Python (instance_checks.py) ------------------------------
    _r("torch.nn.parameter._BufferMeta", "tracer.variables.python_objects.instance_checks"),
    _r("torch.nn.parameter._ParameterMeta", "tracer.variables.python_objects.instance_checks"),
    _r("torch._library.fake_class_registry.FakeScriptObject", "tracer.variables.python_objects.instance_checks"),
    _r("torch._opaque_base.OpaqueBase", "torch_compat", releases=(GPU_MACHINE, "2.13"),
       note="2.14 renamed it CustomClassBase (importing the old module logs a deprecation): "
            "custom_class_base()"),
    _r("torch._opaque_base.OpaqueBaseMeta", "torch_compat", releases=(GPU_MACHINE, "2.13"),
       note="custom_class_base()"),
    _r("torch._custom_class_base.CustomClassBase", "torch_compat", releases=("2.14", "2.14"),
       note="custom_class_base()"),
    _r("torch._custom_class_base.CustomClassBaseMeta", "torch_compat", releases=("2.14", "2.14"),
       note="custom_class_base()"),
    # --- fake tensors and symbolic shapes (every trace) ---------------------------------------------
    _r("torch._subclasses.fake_tensor.FakeTensorMode", "pipeline.disk_cache.entries", _FAKE),
    _r("torch._subclasses.fake_tensor.FakeTensor.constant", "tracer.variables.torch_objects.value_sizes",
       check=lambda torch: _fake_constant(torch),
       note="an instance attribute: the value of a small tensor made from constants alone"),
    _r("torch._subclasses.fake_tensor.DataDependentOutputException", "tracer.variables.modules.opaque_calls"),
    _r("torch._subclasses.fake_tensor.DynamicOutputShapeException", "tracer.variables.modules.opaque_calls"),
    _r("torch._guards.Source", _FAKE, note="subclassed: its fields are read as cached properties"),
    _r("torch._guards.GuardSource.LOCAL", _FAKE),
    _r("torch._guards.detect_fake_mode", _BACK),
    _r(_SYM + "ShapeEnv", "pipeline.disk_cache.entries", _FAKE),
    _r(_SYM + "ShapeEnv._log_suppressed_dde", _FAKE,
       note="overridden: called for each comparison on unbacked symbols answered by a default"),
    _r(_SYM + "StatelessSymbolicContext", "pipeline.disk_cache.entries", _FAKE),
    _r(_SYM + "DimDynamic.DYNAMIC", "pipeline.disk_cache.entries", _FAKE),
    _r(_SYM + "DimDynamic.STATIC", "pipeline.disk_cache.entries", _FAKE),
    _r(_SYM + "DimDynamic.INFER_STRIDE", _FAKE),
    _r(_SYM + "GuardOnDataDependentSymNode", "tracer.variables.modules.opaque_calls", "tracer.variables.torch_objects.symbolic"),
    _r(_SYM + "compute_unbacked_bindings", _FAKE),
    _r(_SYM + "free_unbacked_symbols", _FAKE),
    _r(_SYM + "constrain_range", _FAKE),
    _r(_SYM + "has_free_unbacked_symbols", _FAKE),
    _r("torch.fx.experimental._config.get_hash", "pipeline.disk_cache.keys"),
    _r("torch.fx.passes.runtime_assert.insert_deferred_runtime_asserts", _FAKE),
    _r("torch.fx.passes.fake_tensor_prop.FakeTensorProp", _BACK),
    _r("torch.fx.passes.split_module.split_module", "backends.ddp_split"),
    # --- fx graph building ---------------------------------------------------------------------------
    _r("torch.fx.graph._is_from_torch", _OG),
    _r("torch.fx.graph_module._loader", _OG, note="read with getattr(..., None): optional"),
    _r("torch.fx.node._get_qualified_name", _OG),
    _r("torch.fx.node._side_effectful_functions", _OG),
    _r("torch._library.utils._RANDOM_FUNCTIONS", _OG, note="what Node.is_impure reads besides the side-effect set"),
    # --- backends: AOTAutograd, inductor and their configs -------------------------------------------
    _r("torch._functorch.aot_autograd.aot_module_simplified", _BACK),
    _r("torch._functorch.compilers.nop", _BACK),
    _r("torch._functorch.config.get_hash", "backends.sharing"),
    _r("torch._functorch.config.patch", _BACK),
    _r("torch._functorch", "frontend.trace_rules", note="a module-name prefix: code never intercepted"),
    _r("torch._higher_order_ops", "frontend.trace_rules", note="a module-name prefix: code never intercepted"),
    _r("torch._higher_order_ops.cond", _CF, note="torch.cond's module: its `cond` is traced into branch graphs"),
    _r("torch._higher_order_ops.map", _CF, note="control_flow.map's module: its `map` is traced into a body graph"),
    _r("torch.fx.graph_module._WrappedCall", "tracer.variables.modules.nn_module",
       note="a GraphModule's call: inlined as nn.Module.__call__ where it wraps no __call__ of its own"),
    _r("torch._inductor.compile_fx.compile_fx", _BACK),
    _r("torch._inductor.compile_fx", "demo", note="imported before the demo's timings start"),
    _r("torch._inductor.list_mode_options", "backends.modes"),
    _r("torch._inductor.config.get_config_copy", "backends.modes"),
    _r("torch._inductor.config.get_type", "backends.modes"),
    _r("torch._inductor.config.get_hash", "backends.sharing"),
    _r("torch._inductor.config.patch", _BACK, "demo"),
    _r("torch._inductor.config.freezing", "backends.sharing"),
    _r("torch._inductor.config.triton.cudagraphs", "backends.static_inputs"),
    _r("torch._inductor.runtime.cache_dir_utils.cache_dir", "frontend.trace_rules",
       note="looked up in sys.modules only"),
    # --- torch._dynamo, read only where the user's code imported it -------------------------------------
    _r("torch._dynamo.is_compiling", _TENSOR),
    _r("torch._dynamo.external_utils.is_compiling", _TENSOR),
    _r("torch._dynamo.error_on_graph_break", "tracer.variables.torch_objects.dynamo_contexts"),
    _r("torch._dynamo.convert_frame", "frontend.trace_rules",
       note="its eval-frame callbacks' __call__, compared by module and qualname (DYNAMO_ENTRY_POINTS; "
            "tests/python/test_trace_rules.py resolves each)"),
    _r("torch._dynamo.eval_frame", "frontend.trace_rules",
       note="torch.compile's compile_wrapper, compared by module and qualname (DYNAMO_ENTRY_POINTS)"),
    _r("torch._dynamo.reset", "demo", note="the demo runs torch.compile beside tjc, each backend from a clean cache"),
    _r("torch.Tensor._dynamo_dynamic_indices", "frontend.dynamic",
       check=_has_dynamo_mark("_dynamo_dynamic_indices", "mark_dynamic"),
       note="set by torch._dynamo.mark_dynamic; honoured as our own marks"),
    _r("torch.Tensor._dynamo_weak_dynamic_indices", "frontend.dynamic",
       check=_has_dynamo_mark("_dynamo_weak_dynamic_indices", "maybe_mark_dynamic")),
    _r("torch.Tensor._dynamo_static_indices", "frontend.dynamic",
       check=_has_dynamo_mark("_dynamo_static_indices", "mark_static")),
    _r("torch.Tensor._dynamo_static_input_type", "backends.static_inputs",
       check=lambda torch: _marked_static_address(torch)),
    # --- distributed ------------------------------------------------------------------------------------
    _r("torch.distributed._functional_collectives.REDUCE_OP_TO_STR", _DIST),
    _r("torch.distributed._functional_collectives.all_gather_tensor", _DIST),
    _r("torch.distributed._functional_collectives.all_reduce", _DIST),
    _r("torch.distributed._functional_collectives.broadcast", _DIST),
    _r("torch.distributed._functional_collectives.reduce_scatter_tensor", _DIST),
    _r("torch.distributed._functional_collectives.wait_tensor", _DIST),
    _r("torch.ops._c10d_functional.all_reduce", _DIST, note="ops by name: getattr(ns, name).default"),
    _r("torch.distributed.distributed_c10d._resolve_process_group", _DIST),
    _r("torch.distributed.distributed_c10d._world.default_pg", _DIST),
    _r("torch.distributed.fsdp._fully_shard._fsdp_common.FSDPMeshInfo", _FSDP),
    _r("torch.distributed.fsdp._fully_shard._fsdp_common.HSDPMeshInfo", _FSDP),
    _r("torch.distributed.fsdp._fully_shard._fsdp_common.TrainingState.IDLE", _FSDP),
    _r("torch.distributed.fsdp._fully_shard._fsdp_state", _FSDP),
    _r("torch.nn.parallel.distributed.DistributedDataParallel._get_active_ddp_module", "backends.ddp_split"),
    # --- nn.Module's and Tensor's underscore members ---------------------------------------------------
    _r("torch.nn.Module._parameters", "pipeline.disk_cache.graph_codec", "guard.fast_sources", "tracer.variables.modules.built_modules",
       _FSDP, _NN, "tracer.variables.modules.opaque_calls",
       check=lambda torch: hasattr(torch.nn.Module(), "_parameters")),
    _r("torch.nn.Module._buffers", "pipeline.disk_cache.graph_codec", "guard.fast_sources", "tracer.variables.modules.built_modules",
       _NN, "tracer.variables.modules.opaque_calls", check=lambda torch: hasattr(torch.nn.Module(), "_buffers")),
    _r("torch.nn.Module._modules", "pipeline.disk_cache.graph_codec", "guard.fast_sources", _NN, "tracer.variables.modules.opaque_calls",
       check=lambda torch: hasattr(torch.nn.Module(), "_modules")),
    *(_r(f"torch.nn.Module.{name}", _FSDP, _HOOKS, _GETATTRIBUTE, check=lambda torch, n=name: hasattr(torch.nn.Module(), n))
      for name in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks")),
    *(_r(f"torch.nn.Module.{name}", _HOOKS, check=lambda torch, n=name: hasattr(torch.nn.Module(), n))
      for name in ("_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs")),
    *(_r(f"torch.nn.modules.module.{name}", _HOOKS)
      for name in ("_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                   "_global_backward_pre_hooks")),
    _r("torch.nn.modules.module._global_buffer_registration_hooks", _NN),
    *(_r(f"torch.nn.functional.{name}", "tracer.variables.torch_objects.op_writes",
         note="mask helpers whose None result is a value (NONE_IS_A_VALUE)") for name in ("_canonical_mask", "_none_or_dtype")),
    _r("torch.nn.Module._compiled_call_impl", _WRAP, _NN, _GETATTRIBUTE,
       check=lambda torch: hasattr(torch.nn.Module(), "_compiled_call_impl")),
    *(_r(f"torch.nn.Module.{name}", _WRAP, note="overridden by the compiled module's class")
      for name in ("_apply", "_get_name", "_load_from_state_dict", "_save_to_state_dict",
                   "_replicate_for_data_parallel")),
    _r("torch.nn.Module._call_impl", _WRAP, _GETATTRIBUTE,
       note="overridden by the compiled module's class; what a module's own __getattribute__ must answer "
            "for `_call_impl` where nn.Module.__call__ reads it"),
    _r("torch.nn.RNNBase._flat_weights", "frontend.proxies", check=lambda torch: hasattr(torch.nn.LSTM(1, 1), "_flat_weights")),
    _r("torch.nn.RNNBase._flat_weight_refs", "frontend.proxies",
       check=lambda torch: hasattr(torch.nn.LSTM(1, 1), "_flat_weight_refs")),
    _r("torch.Tensor._cdata", "backends.sharing", "backends.static_inputs", _TENSOR),
    _r("torch.Tensor._is_view", _TENSOR),
    _r("torch.Tensor._version", _TENSOR),
)

NATIVE: tuple[NativeRow, ...] = (
    NativeRow("c10/core/impl/LocalDispatchKeySet.h", ("csrc/guards/torch_backend_libtorch.cpp",),
              "c10::impl::tls_local_dispatch_key_set: the thread's included/excluded keys (TENSOR_MATCH)"),
    NativeRow("c10::impl::tls_local_dispatch_key_set", ("csrc/guards/torch_backend_libtorch.cpp",)),
    NativeRow("c10::impl::LocalDispatchKeySet", ("csrc/guards/torch_backend_libtorch.cpp",)),
    NativeRow("torch/csrc/autograd/python_variable.h", ("csrc/guards/torch_backend_libtorch.cpp",),
              "THPVariable_Unpack, THPVariableClass: the tensor behind a Python object"),
    NativeRow("torch/csrc/DynamicTypes.h", ("csrc/guards/torch_backend_libtorch.cpp",),
              "torch::getTHPDtype: a dtype's Python object, for guard failure text"),
)


def _marked_static_address(torch) -> bool:
    import torch._dynamo

    t = torch.empty(2)
    torch._dynamo.mark_static_address(t)
    return hasattr(t, "_dynamo_static_input_type")


def _fake_constant(torch) -> bool:
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        t = torch.div(8, 4, rounding_mode="trunc")
    return getattr(t, "constant", None) is not None and int(t.constant) == 2


def resolve(name: str):
    """The object a dotted torch name reaches: the longest importable module prefix, then one
    attribute at a time. Raises ImportError / AttributeError where the installed torch lacks it."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(f"no module of {name} imports")


def installed_version() -> str:
    import torch

    return torch.__version__


def custom_class_base() -> tuple[type, type]:
    """(the base class of torch's custom-class objects, its metaclass): torch.Generator's metaclass
    among them. 2.14 names them CustomClassBase(Meta) in torch._custom_class_base; earlier releases
    OpaqueBase(Meta) in torch._opaque_base, which 2.14 keeps as an alias that logs a deprecation."""
    try:
        from torch._custom_class_base import CustomClassBase, CustomClassBaseMeta
        return CustomClassBase, CustomClassBaseMeta
    except ImportError:
        from torch._opaque_base import OpaqueBase, OpaqueBaseMeta
        return OpaqueBase, OpaqueBaseMeta
