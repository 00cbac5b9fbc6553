"""tracer/variables/python_objects/imports.py through the public API: import statements inside traced functions.

The contract: importing a module already loaded is traced (no break), and the module's attributes
are read through a guarded source; importing a module not loaded yet breaks the graph so the import
runs (and its side effects happen) at run time; a module imported inside a function that the frame
does not otherwise reach breaks rather than guessing. Each compares with eager and counts graphs and
breaks."""
import sys

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.testing import CompileCounter  # noqa: E402

from context_helpers import eager_and_compiled, explain_counts, leaves  # noqa: E402


# -- imports --------------------------------------------------------------------------------------

def _import_plain(x):
    import math
    return x * math.pi


def _import_dotted_as(x):
    import torch.nn.functional as F
    return F.relu(x)


def _import_from(x):
    from torch.nn import functional
    from torch import sigmoid
    return sigmoid(functional.gelu(x))


def _import_in_try(x):
    # transformers' is_torchdynamo_compiling() and friends: an import inside a try block, where no
    # graph break can be made (the whole frame ran uncompiled before).
    try:
        import torch.fx
        y = isinstance(x, torch.fx.Proxy)
    except ImportError:
        y = True
    return x + 1 if not y else x - 1


@pytest.mark.parametrize("fn", [_import_plain, _import_dotted_as, _import_from, _import_in_try])
def test_import_of_a_loaded_module_is_traced(fn):
    graphs, breaks = eager_and_compiled(fn, leaves((3, 4)))
    assert (graphs, breaks) == (1, 0)
    assert explain_counts(fn, torch.randn(3, 4))[2] == []


def test_import_of_a_module_not_loaded_yet_breaks_and_imports_it():
    name = "tjc_test_fresh_module_for_import"
    sys.modules.pop(name, None)

    def fn(x):
        y = x + 1
        try:
            import tjc_test_fresh_module_for_import  # noqa: F401
        except ImportError:
            pass
        return y * 2

    graphs, breaks, fallbacks = explain_counts(fn, torch.randn(2))
    assert fallbacks and "not imported yet" in fallbacks[0]   # inside try: no break there
    assert graphs == 0

    def fn2(x):
        import json  # noqa: F401  (stdlib, maybe not loaded: either traced or broken on)
        import tjc_never_existing_module_xyz  # noqa: F401
        return x

    with pytest.raises(ModuleNotFoundError):   # raises where eager raises, never in the tracer
        tjc.compile(fn2)(torch.randn(2))


def test_module_imported_inside_reaches_its_attributes_through_a_guarded_source():
    mod = type(sys)("tjc_test_patched_module")
    mod.scale = lambda t: t * 2
    sys.modules["tjc_test_patched_module"] = mod
    g = {"__name__": "tjc_caller", "tjc_test_patched_module": mod}
    exec("def fn(x):\n    import tjc_test_patched_module as m\n    return m.scale(x)\n", g)
    fn = g["fn"]
    try:
        compiled = tjc.compile(fn, backend=CompileCounter())
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), x * 2)
        mod.scale = lambda t: t * 3   # a monkeypatch after compiling must be seen
        torch.testing.assert_close(compiled(x), x * 3)
    finally:
        del sys.modules["tjc_test_patched_module"]


def _fresh_module(name, **attrs):
    mod = type(sys)(name)
    vars(mod).update(attrs)
    sys.modules[name] = mod
    return mod


def test_module_imported_inside_that_the_frame_does_not_reach_is_read_through_sys_modules():
    # Not a global of the function: its tracker's source is sys.modules[name] (imports.py), guarded
    # by identity, and its attributes through that source. (Before: a graph break at the import.)
    mod = _fresh_module("tjc_test_unreachable_module", scale=lambda t: t * 2)
    g = {"__name__": "tjc_caller2"}
    exec("def fn(x):\n    y = x + 1\n    import tjc_test_unreachable_module as m\n    return m.scale(y)\n", g)
    try:
        graphs, breaks, fallbacks = explain_counts(g["fn"], torch.randn(3))
        assert (graphs, breaks, fallbacks) == (1, 0, [])
        counter = CompileCounter()
        compiled = tjc.compile(g["fn"], backend=counter)
        x = torch.randn(3)
        torch.testing.assert_close(compiled(x), (x + 1) * 2)
        mod.scale = lambda t: t * 3                                  # a monkeypatch: recompiles
        torch.testing.assert_close(compiled(x), (x + 1) * 3)
        _fresh_module("tjc_test_unreachable_module", scale=lambda t: t - 5)   # another module object
        torch.testing.assert_close(compiled(x), (x + 1) - 5)
        assert counter.frame_count == 3
        torch.testing.assert_close(compiled(x), (x + 1) - 5)
        assert counter.frame_count == 3
    finally:
        del sys.modules["tjc_test_unreachable_module"]


def test_from_import_of_a_module_the_frame_does_not_reach():
    mod = _fresh_module("tjc_test_from_module", OFFSET=1.5)
    g = {"__name__": "tjc_caller3"}
    exec("def fn(x):\n    from tjc_test_from_module import OFFSET\n    import tjc_test_from_module\n"
         "    return x + OFFSET, tjc_test_from_module\n", g)
    try:
        assert explain_counts(g["fn"], torch.randn(3)) == (1, 0, [])
        compiled = tjc.compile(g["fn"], backend="eager")
        x = torch.randn(3)
        out, m = compiled(x)
        torch.testing.assert_close(out, x + 1.5)
        assert m is mod                                              # the module itself, returned
        mod.OFFSET = -2.0                                            # the constant read is guarded
        torch.testing.assert_close(compiled(x)[0], x - 2.0)
    finally:
        del sys.modules["tjc_test_from_module"]


def test_module_under_another_name_in_sys_modules_breaks_cleanly():
    # sys.modules["tjc_alias_key"] holds a module whose __name__ is another: no source reaches it by
    # its name, so the import breaks and runs as written.
    mod = type(sys)("tjc_not_its_key")
    mod.scale = lambda t: t * 4
    sys.modules["tjc_alias_key"] = mod
    g = {"__name__": "tjc_caller4"}
    exec("def fn(x):\n    import tjc_alias_key as m\n    return m.scale(x)\n", g)
    try:
        graphs, breaks, fallbacks = explain_counts(g["fn"], torch.randn(3))
        assert breaks == 1 and fallbacks == []
        x = torch.randn(3)
        torch.testing.assert_close(tjc.compile(g["fn"])(x), x * 4)
    finally:
        del sys.modules["tjc_alias_key"]


def test_torch_imported_inside_survives_a_graph_break():
    def fn(x):
        import torch
        y = x + 1
        print("", end="")
        return torch.relu(y)

    graphs, breaks, fallbacks = explain_counts(fn, torch.randn(3))
    assert (graphs, breaks, fallbacks) == (2, 1, [])
    x = torch.randn(3)
    torch.testing.assert_close(tjc.compile(fn)(x), fn(x))


def test_transformers_import_helpers_are_traced():
    iu = pytest.importorskip("transformers.utils.import_utils")

    def fn(x):
        if iu.is_torchdynamo_compiling() and not iu.is_jit_tracing() and not iu.is_torch_fx_proxy(x):
            return x + 1
        return x - 1

    graphs, breaks, fallbacks = explain_counts(fn, torch.randn(2))
    assert (graphs, breaks, fallbacks) == (1, 0, [])
    x = torch.randn(2)
    torch.testing.assert_close(tjc.compile(fn)(x), x + 1)   # as under torch.compile
