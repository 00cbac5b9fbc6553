"""TENSOR_MATCH and GLOBAL_STATE, for both backends: libtorch (_C_torch) and the C-API fallback.

Both backends must accept and reject the same values and print the same text, so every test runs
against each. Where torch is installed the build makes _C_torch, so a missing libtorch backend is
a failure, unless the build was told not to make it (TJC_WITH_TORCH=0).
"""
import gc
import os
import weakref

import pytest

torch = pytest.importorskip("torch")
from torch_jit_cache import _C  # noqa: E402

pytestmark = pytest.mark.torch
LIBTORCH_OPTED_OUT = os.environ.get("TJC_WITH_TORCH") == "0"

BACKENDS = ["libtorch", "python-api"]


def _libtorch_available():
    try:
        _C._make_global_state_for_test("libtorch")
        return True
    except RuntimeError:
        return False


@pytest.fixture(params=BACKENDS)
def backend(request):
    if request.param == "libtorch" and not _libtorch_available():
        if not LIBTORCH_OPTED_OUT:
            pytest.fail("torch is installed but torch_jit_cache._C_torch is not built: "
                        + _C._torch_backend_fallback_reason())
        pytest.skip("torch_jit_cache._C_torch is not built: " + _C._torch_backend_fallback_reason())
    return request.param


def tm(example, backend):
    m = _C._make_tensor_match_for_test(example, backend)
    assert m.backend == backend
    return m


def assert_fails(m, value, reason, source="L['x']"):
    assert m.check(value) is False
    assert m.explain(value, source) == reason


# --- selection -------------------------------------------------------------------------------


def test_backend_name_is_libtorch_when_built():
    name = _C._torch_backend_name()
    assert name in ("libtorch", "python-api")
    if not LIBTORCH_OPTED_OUT:
        assert name == "libtorch", _C._torch_backend_fallback_reason()
        assert _C._torch_backend_fallback_reason() == ""


def test_unknown_backend_is_value_error():
    with pytest.raises(ValueError):
        _C._make_tensor_match_for_test(torch.zeros(1), "numpy")


def test_example_must_be_a_tensor(backend):
    with pytest.raises(ValueError, match="expected a torch.Tensor, got int"):
        tm(3, backend)


# --- facts -----------------------------------------------------------------------------------


def test_describe(backend):
    m = tm(torch.randn(8, 4), backend)
    assert m.describe() == (
        "TENSOR_MATCH: torch.Tensor, torch.float32, cpu, requires_grad=False, size=[8, 4], stride=[4, 1]"
    )


def test_same_facts_pass(backend):
    m = tm(torch.randn(8, 4), backend)
    assert m.check(torch.empty(8, 4)) is True
    assert m.explain(torch.empty(8, 4)) is None


def test_size_mismatch(backend):
    assert_fails(tm(torch.randn(8, 4), backend), torch.randn(16, 4), "L['x'].size()[0]: expected 8, got 16")


def test_dim_mismatch(backend):
    assert_fails(tm(torch.randn(8, 4), backend), torch.randn(8, 4, 1), "L['x'].dim(): expected 2, got 3")
    assert_fails(tm(torch.randn(8, 4), backend), torch.tensor(1.0), "L['x'].dim(): expected 2, got 0")


def test_stride_mismatch_non_contiguous(backend):
    m = tm(torch.randn(8, 4), backend)
    # Same sizes, other strides: a transpose and an explicit as_strided view.
    assert_fails(m, torch.randn(4, 8).t(), "L['x'].stride()[0]: expected 4, got 1")
    assert_fails(m, torch.randn(64).as_strided((8, 4), (4, 8)), "L['x'].stride()[1]: expected 1, got 8")
    # A guard made from a non-contiguous example wants that layout.
    nc = tm(torch.randn(4, 8).t(), backend)
    assert nc.describe().endswith("size=[8, 4], stride=[1, 8]")
    assert nc.check(torch.randn(4, 8).t()) is True
    assert_fails(nc, torch.randn(8, 4), "L['x'].stride()[0]: expected 1, got 4")


def test_dtype_mismatch(backend):
    assert_fails(
        tm(torch.randn(8, 4), backend),
        torch.randn(8, 4, dtype=torch.float64),
        "L['x'].dtype: expected torch.float32, got torch.float64",
    )


def test_device_mismatch(backend):
    # CPU-only machines have the meta device; the text is the same for cuda:0.
    assert_fails(
        tm(torch.randn(8, 4), backend),
        torch.empty(8, 4, device="meta"),
        "L['x'].device: expected cpu, got meta",
    )


def test_requires_grad(backend):
    m = tm(torch.randn(8, 4), backend)
    assert_fails(
        m, torch.randn(8, 4, requires_grad=True), "L['x'].requires_grad: expected False, got True"
    )
    g = tm(torch.randn(8, 4, requires_grad=True), backend)
    assert "requires_grad=True" in g.describe()
    assert g.check(torch.randn(8, 4, requires_grad=True)) is True
    assert_fails(g, torch.randn(8, 4), "L['x'].requires_grad: expected True, got False")


def test_source_prefix(backend):
    m = tm(torch.randn(8, 4), backend)
    assert m.explain(torch.randn(9, 4), "L['self'].w") == "L['self'].w.size()[0]: expected 8, got 9"


def test_dispatch_keys(backend):
    z = torch.randn(3, dtype=torch.complex64)
    m = tm(z, backend)
    assert m.check(z.conj()) is False  # same dtype/sizes, conjugate bit set
    reason = m.explain(z.conj())
    assert reason.startswith("L['x'] dispatch keys: expected DispatchKeySet(")
    assert "Conjugate" in reason.split("got")[1]


def test_thread_local_dispatch_state_is_part_of_the_match(backend):
    m = tm(torch.randn(8, 4), backend)
    x = torch.randn(8, 4)
    with torch.inference_mode():
        assert m.check(x) is False  # inference mode excludes the autograd keys
        assert "dispatch keys" in m.explain(x)
    assert m.check(x) is True


def test_sparse_layout_skips_strides(backend):
    s = torch.randn(4, 4).to_sparse()
    m = tm(s, backend)
    assert m.describe() == "TENSOR_MATCH: torch.Tensor, torch.float32, cpu, requires_grad=False, size=[4, 4]"
    assert m.check(torch.randn(4, 4).to_sparse()) is True
    assert m.check(torch.randn(4, 4)) is False
    dense = tm(torch.randn(4, 4), backend)
    assert dense.check(s) is False
    assert dense.explain(s) is not None


# --- types -----------------------------------------------------------------------------------


def test_parameter_vs_tensor(backend):
    t = tm(torch.randn(8, 4), backend)
    p = torch.nn.Parameter(torch.randn(8, 4), requires_grad=False)
    assert_fails(t, p, "type(L['x']): expected torch.Tensor, got torch.nn.Parameter")
    pm = tm(torch.nn.Parameter(torch.randn(8, 4)), backend)
    assert pm.describe().startswith("TENSOR_MATCH: torch.nn.Parameter, torch.float32, cpu, requires_grad=True")
    assert pm.check(torch.nn.Parameter(torch.randn(8, 4))) is True
    assert_fails(
        pm, torch.randn(8, 4, requires_grad=True), "type(L['x']): expected torch.nn.Parameter, got torch.Tensor"
    )


class MyTensor(torch.Tensor):
    pass


def test_user_subclass(backend):
    m = tm(torch.randn(2).as_subclass(MyTensor), backend)
    assert m.describe().startswith("TENSOR_MATCH: test_tensor_match.MyTensor, ")
    assert m.check(torch.randn(2).as_subclass(MyTensor)) is True
    assert_fails(m, torch.randn(2), "type(L['x']): expected test_tensor_match.MyTensor, got torch.Tensor")


@pytest.mark.parametrize("value", [3, 2.5, None, "x", [1, 2], object(), torch.float32, torch.Size([8, 4])])
def test_non_tensor_values_fail_without_error(backend, value):
    m = tm(torch.randn(8, 4), backend)
    assert m.check(value) is False  # a pending error would surface here as SystemError
    assert m.explain(value) == f"L['x']: expected a tensor, got {type(value).__name__}".replace(
        "got Size", "got torch.Size"
    ).replace("got dtype", "got torch.dtype")


def test_duck_typed_value_fails(backend):
    class Fake:
        dtype = torch.float32
        device = torch.device("cpu")
        requires_grad = False

        def size(self):
            return torch.Size([8, 4])

        def stride(self):
            return (4, 1)

    m = tm(torch.randn(8, 4), backend)
    assert m.check(Fake()) is False
    assert m.explain(Fake()).endswith("expected a tensor, got test_tensor_match.test_duck_typed_value_fails.<locals>.Fake")


# --- lifetimes -------------------------------------------------------------------------------


def test_example_tensor_is_not_kept_alive(backend):
    x = torch.randn(8, 4)
    r = weakref.ref(x)
    m = tm(x, backend)
    del x  # no gc.collect(): plain refcounting must free it
    assert r() is None
    assert m.check(torch.randn(8, 4)) is True


def test_user_subclass_is_not_kept_alive(backend):
    class Temp(torch.Tensor):
        pass

    t = torch.randn(2).as_subclass(Temp)
    m = tm(t, backend)
    assert m.check(t) is True
    r = weakref.ref(Temp)
    del t, Temp
    gc.collect()  # a class is always in a reference cycle with its own __mro__/__dict__
    assert r() is None, "the guard kept the user class alive"
    # The guard outlives its class: it still prints and rejects everything.
    assert "Temp" in m.describe()
    assert m.check(torch.randn(2)) is False
    assert m.explain(torch.randn(2)).startswith("type(L['x']): expected ")


def test_torch_types_are_held(backend):
    # Sanity: the guard works across many collections (torch-owned types are held strongly).
    m = tm(torch.nn.Parameter(torch.randn(2)), backend)
    gc.collect()
    assert m.check(torch.nn.Parameter(torch.randn(2))) is True


# --- both backends agree ---------------------------------------------------------------------


def test_backends_agree():
    if not _libtorch_available():
        pytest.skip("torch_jit_cache._C_torch is not built")
    examples = [torch.randn(8, 4), torch.randn(4, 8).t(), torch.nn.Parameter(torch.randn(3)), torch.zeros(2, dtype=torch.int64)]
    values = examples + [
        torch.randn(8, 4, dtype=torch.float16),
        torch.randn(3, requires_grad=True),
        torch.empty(8, 4, device="meta"),
        torch.zeros(2, dtype=torch.int32),
        torch.randn(2, 2, 2),
        5,
        None,
    ]
    for ex in examples:
        a, b = tm(ex, "libtorch"), tm(ex, "python-api")
        assert a.describe() == b.describe()
        for v in values:
            assert a.check(v) == b.check(v), (ex, v)
            assert a.explain(v, "G['t']") == b.explain(v, "G['t']"), (ex, v)


# --- GLOBAL_STATE ----------------------------------------------------------------------------

DEFAULT_GS = (
    "GLOBAL_STATE: grad_mode=True, default_dtype=torch.float32, deterministic=False, "
    "autocast_cpu=False, autocast_cuda=False"
)


def gs(backend):
    g = _C._make_global_state_for_test(backend)
    assert g.backend == backend
    return g


def test_global_state_describe_and_pass(backend):
    g = gs(backend)
    assert g.describe() == DEFAULT_GS
    assert g.check() is True
    assert g.explain() is None


def test_global_state_grad_mode(backend):
    g = gs(backend)
    with torch.no_grad():
        assert g.check() is False
        assert g.explain() == "GLOBAL_STATE: grad_mode: expected True, got False"
        inner = gs(backend)
        assert "grad_mode=False" in inner.describe()
        assert inner.check() is True
    assert g.check() is True
    assert inner.check() is False


def test_global_state_default_dtype(backend):
    g = gs(backend)
    torch.set_default_dtype(torch.float64)
    try:
        assert g.check() is False
        assert g.explain() == "GLOBAL_STATE: default_dtype: expected torch.float32, got torch.float64"
    finally:
        torch.set_default_dtype(torch.float32)
    assert g.check() is True


def test_global_state_deterministic(backend):
    g = gs(backend)
    torch.use_deterministic_algorithms(True)
    try:
        assert g.check() is False
        assert g.explain() == "GLOBAL_STATE: deterministic: expected False, got True"
        assert "deterministic=True" in gs(backend).describe()
    finally:
        torch.use_deterministic_algorithms(False)
    assert g.check() is True


def test_global_state_autocast(backend):
    g = gs(backend)
    with torch.autocast("cpu"):
        assert g.check() is False
        assert g.explain() == "GLOBAL_STATE: autocast_cpu: expected False, got True"
        inner = gs(backend)
        assert "autocast_cpu=True(torch.bfloat16)" in inner.describe()
    assert g.check() is True
    with torch.autocast("cpu", dtype=torch.float16):
        assert inner.check() is False
        assert inner.explain() == "GLOBAL_STATE: autocast_cpu_dtype: expected torch.bfloat16, got torch.float16"


def test_global_state_backends_agree():
    if not _libtorch_available():
        pytest.skip("torch_jit_cache._C_torch is not built")
    with torch.autocast("cpu"), torch.no_grad():
        a, b = gs("libtorch"), gs("python-api")
        assert a.describe() == b.describe()
    assert a.explain() == b.explain() == "GLOBAL_STATE: grad_mode: expected False, got True"


def test_without_torch_the_error_says_so():
    # A fresh interpreter where `import torch` fails: both backends are unavailable.
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from torch_jit_cache import _C\n"
        "try:\n"
        "    _C._torch_backend_name()\n"
        "except RuntimeError as e:\n"
        "    print('RuntimeError:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("RuntimeError: torch is not installed: tensor_match needs torch"), out


def test_checks_leak_no_references(backend):
    import sys

    x = torch.randn(8, 4)
    m = tm(torch.randn(8, 4), backend)
    miss = torch.randn(8, 4, dtype=torch.float64)
    before = sys.getrefcount(x), sys.getrefcount(miss), sys.getrefcount(torch.float32)
    for _ in range(1000):
        m.check(x)
        m.check(miss)
        m.explain(miss)
    assert (sys.getrefcount(x), sys.getrefcount(miss), sys.getrefcount(torch.float32)) == before
