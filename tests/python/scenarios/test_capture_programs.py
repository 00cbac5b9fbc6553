"""The capture programs (capture_programs.py) under tjc.compile: every one gives
eager's outputs (side effects included) on its first and second call, and those tjc captured whole
when this list was written still are (benchmarks/capture.py measures them against torch.compile;
a program that comes to be captured whole joins the list).

A program that is not captured whole still has to be right: it runs with breaks or uncompiled."""
import warnings

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from capture_programs import PROGRAMS  # noqa: E402
from context_helpers import assert_same  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

WHOLE = {
    "any_all_generators", "attention_generator_unpack", "autocast_cpu_block", "closure_counter",
    "comprehension_over_zip", "config_object_branch", "custom_getattr", "dataclass_output",
    "decorator_wrapping", "defaultdict_accumulate", "dict_items_comprehension", "dict_iteration_in_loop",
    "dict_keys_values", "dict_update_and_get", "divmod_pow_int_ops", "dtype_device_branches",
    "einsum_and_softmax", "embedding_with_buffer", "enum_by_value", "enum_comparison", "for_else",
    "for_range_break", "forward_hook", "frozenset_constant", "generator_context_manager",
    "generator_expression_sum", "getattr_setattr_hasattr", "if_on_shape", "indexing_masks",
    "inference_mode_block", "inheritance_super", "inplace_on_clone", "isinstance_and_type_checks",
    "iter_next", "iterate_tensor_rows", "itertools_chain_product", "kwargs_unpacking", "lambda_sort_key",
    "list_mutation", "map_filter_lambda", "math_module", "min_max_abs_round", "mish_hardtanh", "mobile_block",
    "module_dict_items", "module_list_residual", "module_reading_config", "named_parameters_keys",
    "namedtuple_fields", "nested_comprehension", "nested_functions_with_defaults", "new_tensors_from_python",
    "no_grad_block", "nullcontext_block", "numpy_interop", "object_equality_dunder", "operator_module",
    "ordered_dict", "parse_with_fallbacks", "partial_application", "pooling_upsample",
    "python_scalars_and_tensors", "raise_and_catch_custom", "recursion", "reversed_and_sorted",
    "set_membership", "shape_arithmetic", "slicing_lists", "string_formatting", "tensor_list_ops",
    "tensor_method_through_class", "ternary_and_boolops", "truthiness_of_bool", "truthiness_of_len",
    "try_except_caught", "try_finally", "tuple_unpack_star", "user_context_manager", "user_generator",
    "user_object_methods", "validation_error_caught", "while_loop_constant", "zip_enumerate",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_eager_and_keeps_its_capture(name):
    make = PROGRAMS[name].make
    fn, args = make()
    expected = [fn(*args), fn(*args)]
    fn, args = make()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # a fallback's warning: the program still has to be right
        compiled = tjc.compile(fn)
        got = [compiled(*args), compiled(*args)]
    assert_same(got, expected)
    if name in WHOLE:
        fn, args = make()
        report = tjc.explain(fn)(*args)
        assert (report.graph_count, report.graph_break_count, report.fallbacks) == (1, 0, []), \
            f"{name} was captured whole: {report.break_reasons} {report.fallbacks}"


def test_the_whole_list_names_programs_that_exist():
    assert WHOLE <= set(PROGRAMS)
