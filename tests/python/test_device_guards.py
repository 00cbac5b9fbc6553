"""A tensor on another device (type or index) fails its TENSOR_MATCH guard and recompiles, with the
device named in the reason. On the CPU the other device is `meta`; with two CUDA devices, cuda:1."""
import logging

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("seeded_fresh_caches")]


def f(x):
    return torch.sin(x) * 2 + 1


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_a_tensor_on_another_device_recompiles(backend):
    cf = tjc.compile(f, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(cf(x), f(x))
    out = cf(torch.randn(3, device="meta"))
    assert out.device.type == "meta" and out.shape == (3,)
    assert tjc.stats()["recompiles"] == 1
    devices = sorted(str(e.guards).count("meta") for e in tjc.cache_entries(f))
    assert devices == [0, 1]   # each entry guards its own device
    torch.testing.assert_close(cf(x), f(x))   # the CPU entry still serves CPU tensors
    assert tjc.stats()["recompiles"] == 1


def test_the_recompile_reason_names_the_device(caplog, monkeypatch):
    monkeypatch.setattr(tjc.config, "log", frozenset({"recompiles"}))
    caplog.set_level(logging.INFO, logger="torch_jit_cache")
    cf = tjc.compile(f, backend="eager")
    cf(torch.randn(3))
    cf(torch.randn(3, device="meta"))
    assert "meta" in caplog.text and "cpu" in caplog.text


@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2,
                    reason="needs two CUDA devices")
def test_another_cuda_index_recompiles():
    cf = tjc.compile(f, backend="eager")
    cf(torch.randn(3, device="cuda:0"))
    out = cf(torch.randn(3, device="cuda:1"))
    assert out.device == torch.device("cuda:1")
    assert tjc.stats()["recompiles"] == 1
