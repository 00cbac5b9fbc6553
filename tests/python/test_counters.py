"""runtime/counters.py: the one home of the counters tjc.stats() reports, and the one default and ranking of
the cache limit (config.py, csrc/common/runtime_state.h)."""
import pytest

import torch_jit_cache as tjc
from torch_jit_cache import _C, runtime
from torch_jit_cache.runtime import counters


def test_pipeline_counters_merge_into_the_users_view():
    before = runtime.stats()
    counters.count("graphs", 2)
    counters.count("graph_breaks")
    counters.count("recompiles")
    counters.count("unsupported")
    view = tjc.stats()
    assert view["graphs"] == 2 and view["graph_breaks"] == 1 and view["recompiles"] == 1
    assert view["fallbacks"] == before["fallbacks"] + 1   # a frame that could not compile falls back
    assert "unsupported" not in view
    assert "graphs" not in runtime.stats()   # the runtime's own view stays the runtime's


def test_reset_zeros_every_counter():
    counters.count("graphs")
    tjc.reset()
    assert set(tjc.stats().values()) == {0}


def test_an_unknown_counter_is_a_key_error():
    with pytest.raises(KeyError):
        counters.count("graph")


def test_the_cache_limit_default_is_the_runtimes(monkeypatch):
    monkeypatch.delenv("TJC_CACHE_LIMIT", raising=False)
    field = type(tjc.config).__dataclass_fields__["cache_limit"]
    assert field.default_factory() == _C.DEFAULT_CACHE_LIMIT == 8
    monkeypatch.setenv("TJC_CACHE_LIMIT", "3")
    assert field.default_factory() == 3


def test_one_ranking_of_cache_limits():
    old = tjc.config.cache_limit
    try:
        tjc.config.cache_limit = 5
        assert _C._cache_limit() == 5
        assert runtime.CacheOwner().effective_cache_limit == 5   # no limit of its own: the config's
        assert runtime.CacheOwner(3).effective_cache_limit == 3  # a compile() call's own wins
    finally:
        tjc.config.cache_limit = old
