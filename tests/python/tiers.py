"""The test tiers: which CI stages run each test file (scripts/test.sh, `pytest --tiers ...`).

This table is the one place that decides it. Every test file under tests/python is in it
(tests/python/test_tiers.py fails otherwise), and a test function may be listed by itself
("file.py::test_name") to leave its file's tier. conftest.py reads the table: `--tiers a,b` keeps
the tests of those tiers and deselects the rest.

  core      the C++ core (runtime, frame hook, guard trees, code cache) and the tracer's calls into
            it: compiled calls end to end, guards built and checked, resume functions, lifetimes.
            Runs on every Python and under the sanitizers (pytest 3.11, 3.12, 3.13, asan 3.11).
  versions  what differs between Python versions without being C++: the bytecode layer, the
            tracer's opcode handlers and version tables, the object model as each version's
            bytecode reaches it. Runs on every Python (pytest 3.11, 3.12, 3.13).
  once      version-neutral: backends, distributed, the disk format, the benchmarks' helpers, the
            model scenarios, logging and counters. Python code above the tracer whose behaviour
            does not depend on the interpreter's version; runs once (pytest 3.11).

The torch-free tests (no `torch` marker) run in hunt-leaks 3.11-dbg whatever their tier.
"""
from __future__ import annotations

TIERS = ("core", "versions", "once")

# Paths are relative to tests/python. Sorted by tier, then by name.
TIER_OF: dict[str, str] = {
    # --- core -----------------------------------------------------------------------------------
    "scenarios/test_compiled_lifetimes.py": "core",
    "test_aliasing_guards.py": "core",
    "test_backend_guards.py": "core",
    "test_cache_owners.py": "core",
    "test_codegen.py": "core",
    "test_compile.py": "core",
    "test_compile_threads.py": "core",
    "test_constant_guards.py": "core",
    "test_convert_frame.py": "core",
    "test_device_guards.py": "core",
    "test_dynamic.py": "core",
    "test_error_paths.py": "core",
    "test_fast_sources.py": "core",
    "test_faults.py": "core",
    "test_faults_compile.py": "core",
    "test_function_guards.py": "core",
    "test_graph_breaks.py": "core",
    "test_graph_breaks_closures.py": "core",
    "test_graph_breaks_locals.py": "core",
    "test_guard_fuzz.py": "core",
    "test_guard_kinds.py": "core",
    "test_guards.py": "core",
    "test_guards_dict_tags.py": "core",
    "test_import.py": "core",
    "test_instance_sharing.py": "core",
    "test_process_lived.py": "core",
    "test_process_state.py": "core",
    "test_runtime.py": "core",
    "test_runtime_calls.py": "core",
    "test_runtime_guard_hook.py": "core",
    "test_runtime_lifetimes.py": "core",
    "test_runtime_skip_tree.py": "core",
    "test_shape_guards.py": "core",
    "test_stance.py": "core",
    "test_tensor_match.py": "core",
    "test_torch_free.py": "core",
    # --- versions -------------------------------------------------------------------------------
    "test_allow_in_graph.py": "versions",
    "test_attribute_lookup.py": "versions",
    "test_attribute_protocol.py": "versions",
    "test_autocast_contexts.py": "versions",
    "test_builtin_module_subclass.py": "versions",
    "test_bytecode_analysis.py": "versions",
    "test_bytecode_emitter.py": "versions",
    "test_bytecode_instructions.py": "versions",
    "test_bytecode_resume.py": "versions",
    "test_class_statements.py": "versions",
    "test_compile_modules.py": "versions",
    "test_container_methods.py": "versions",
    "test_context_exceptions.py": "versions",
    "test_cross_version_graphs.py": "versions",
    "test_dynamo_contexts.py": "versions",
    "test_explanation.py": "versions",
    "test_fake_shapes.py": "versions",
    "test_functorch_calls.py": "versions",
    "test_grad_contexts.py": "versions",
    "test_graph_break_driver.py": "versions",
    "test_graph_break_plan.py": "versions",
    "test_higher_order_ops.py": "versions",
    "test_inference_mode.py": "versions",
    "test_module_wrapper.py": "versions",
    "test_module_wrapper_callers.py": "versions",
    "test_numpy_values.py": "versions",
    "test_ordered_dict.py": "versions",
    "test_output_identity.py": "versions",
    "test_output_identity_codegen.py": "versions",
    "test_python_constructs.py": "versions",
    "test_refleaks.py": "versions",
    "test_side_effects.py": "versions",
    "test_sources.py": "versions",
    "test_trace_budget.py": "versions",
    "test_trace_exception_links.py": "versions",
    "test_trace_exceptions.py": "versions",
    "test_trace_rules.py": "versions",
    "test_trace_side_effects.py": "versions",
    "test_traced_model_outputs.py": "versions",
    "test_traced_objects.py": "versions",
    "test_tracer.py": "versions",
    "test_tracer_modules.py": "versions",
    "test_tracer_rebuild.py": "versions",
    "test_unbacked.py": "versions",
    "test_variables_builder.py": "versions",
    "test_variables_builtins.py": "versions",
    "test_variables_builtins_identity.py": "versions",
    "test_variables_builtins_paths.py": "versions",
    "test_variables_cells.py": "versions",
    "test_variables_classes.py": "versions",
    "test_variables_constant.py": "versions",
    "test_variables_containers.py": "versions",
    "test_variables_contexts.py": "versions",
    "test_variables_copying.py": "versions",
    "test_variables_dict_subclasses.py": "versions",
    "test_variables_frame_iterators.py": "versions",
    "test_variables_function_attributes.py": "versions",
    "test_variables_functions.py": "versions",
    "test_variables_generators.py": "versions",
    "test_variables_imports.py": "versions",
    "test_variables_instance_checks.py": "versions",
    "test_variables_iterators.py": "versions",
    "test_variables_methods.py": "versions",
    "test_variables_model_output.py": "versions",
    "test_variables_new_object.py": "versions",
    "test_variables_new_object_dunder_new.py": "versions",
    "test_variables_nn_module.py": "versions",
    "test_variables_object_hooks.py": "versions",
    "test_variables_opaque_calls.py": "versions",
    "test_variables_open_object.py": "versions",
    "test_variables_operators.py": "versions",
    "test_variables_partials.py": "versions",
    "test_variables_polyfills.py": "versions",
    "test_variables_pure.py": "versions",
    "test_variables_sets.py": "versions",
    "test_variables_symbolic.py": "versions",
    "test_variables_tensor.py": "versions",
    "test_variables_tensor_grad.py": "versions",
    "test_variables_truthiness.py": "versions",
    "test_variables_user_object.py": "versions",
    "test_variables_value_sizes.py": "versions",
    "test_variables_weakrefs.py": "versions",
    # --- once -----------------------------------------------------------------------------------
    "scenarios/test_capture_programs.py": "once",
    "scenarios/test_hf_bert.py": "once",
    "scenarios/test_hf_model_idioms.py": "once",
    "scenarios/test_model_breaks.py": "once",
    "scenarios/test_model_zoo.py": "once",
    "scenarios/test_program_fuzzer.py": "once",
    "scenarios/test_results_equal_eager.py": "once",
    "scenarios/test_staged_blocks.py": "once",
    "scenarios/test_transformers_versions.py": "once",
    "scenarios/test_warm_start.py": "once",
    "test_backend_sharing.py": "once",
    "test_backends.py": "once",
    "test_compile_modes.py": "once",
    "test_compile_options.py": "once",
    "test_counters.py": "once",
    "test_cudagraphs.py": "once",
    "test_ddp_split.py": "once",
    "test_demo.py": "once",
    "test_disk_cache.py": "once",
    "test_disk_cache_breaks.py": "once",
    "test_disk_cache_guards.py": "once",
    "test_disk_cache_keys.py": "once",
    "test_disk_cache_modules.py": "once",
    "test_disk_cache_output_codec.py": "once",
    "test_guard_codec.py": "once",
    "test_guard_collectives.py": "once",
    "test_import_layers.py": "once",
    "test_install.py": "once",
    "test_log.py": "once",
    "test_tiers.py": "once",
    "test_trace_memory.py": "once",
    "test_upstream_harness.py": "once",
    "test_variables_distributed.py": "once",
    # Model- and backend-level tests of files in other tiers (among the suite's 30 slowest): what
    # they check is the model's training or inductor's output, which no Python version changes.
    "test_backend_guards.py::test_inductor_conv_channels": "once",
    "test_builtin_module_subclass.py::test_bart_trains_as_eager_across_recompiles_under_aot_eager": "once",
    "test_builtin_module_subclass.py::test_gradients_reach_the_weight_under_inductor": "once",
    "test_module_wrapper_callers.py::test_ddp_sees_the_compiled_modules_parameters": "once",
    "test_unbacked.py::test_moe_routing_compiles_in_one_graph": "once",
}


def tier_of(nodeid: str) -> str | None:
    """The tier of a test, from its pytest node id relative to tests/python
    ("scenarios/test_x.py::test_y[param]"): the test's own row, else its file's, else None."""
    path, _, rest = nodeid.partition("::")
    name = rest.split("[", 1)[0]
    return TIER_OF.get(f"{path}::{name}") or TIER_OF.get(path)
