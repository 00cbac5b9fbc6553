"""Guard collectives (torch_jit_cache/runtime/guard_collectives.py): with them on, a miss on one rank makes
every rank recompile at the same call; off, only the rank that missed recompiles.

Two processes join a gloo group over 127.0.0.1 and run guard_collectives_worker.py: a compiled
function called three times, rank 1's batch changing at the second call (its guards miss, rank 0's
hit). The processes are bounded (each collective by the group's timeout, each process by
PROCESS_TIMEOUT_S), so a vote without a partner fails the test instead of hanging it. The
single-process tests check the setting itself and the vote without a process group."""
import pathlib

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402
from torch_jit_cache.testing.ranks import free_ports, run_ranks, scenario  # noqa: E402

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.runtime import guard_collectives  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

WORKER = pathlib.Path(__file__).with_name("guard_collectives_worker.py")
WORLD = 2
PROCESS_TIMEOUT_S = 120

needs_gloo = pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                reason="torch.distributed with gloo is not available in this build")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Each rank's {scenario: result}, the worker run once for the module's tests."""
    ports = free_ports(2)
    return run_ranks(WORKER, WORLD, lambda r, out: [r, WORLD, *ports, out], tmp_path_factory.mktemp("guard_collectives"),
                     PROCESS_TIMEOUT_S)


def _scenario(ranks, name):
    results = scenario(ranks, name)
    for rank, result in enumerate(results):
        assert result["equal"] == [True] * 3, f"rank {rank}, {name}: a result differs from eager's"
    return results


@needs_gloo
def test_off_only_the_rank_that_missed_recompiles(ranks):
    r0, r1 = _scenario(ranks, "off")
    assert (r0["recompiles"], r1["recompiles"]) == (0, 1)
    assert (r0["compiles"], r1["compiles"]) == (1, 2)
    assert not r0["previous"] and not r0["was_enabled"]


@needs_gloo
def test_on_every_rank_recompiles_when_one_misses(ranks):
    r0, r1 = _scenario(ranks, "on")
    assert (r0["recompiles"], r1["recompiles"]) == (1, 1), "rank 0's hit was voted down"
    assert (r0["compiles"], r1["compiles"]) == (2, 2)
    assert (r0["forced_misses"], r1["forced_misses"]) == (1, 0)
    assert r0["was_enabled"] and r1["was_enabled"]


@needs_gloo
def test_on_with_a_collective_in_the_graph(ranks):
    r0, r1 = _scenario(ranks, "on_with_a_collective")
    assert (r0["recompiles"], r1["recompiles"]) == (1, 1)
    assert (r0["forced_misses"], r1["forced_misses"]) == (1, 0)


@needs_gloo
def test_on_without_a_process_group_votes_alone(ranks):
    r0, r1 = _scenario(ranks, "uninitialized")
    assert (r0["recompiles"], r1["recompiles"]) == (0, 1)
    assert r0["forced_misses"] == 0


@needs_gloo
def test_a_recreated_default_group_gets_a_new_vote_group(ranks):
    r0, r1 = _scenario(ranks, "reinit")
    assert all(r["results"]["vote_group_kept"] for r in ranks), "one vote group served the default group"
    assert (r0["recompiles"], r1["recompiles"]) == (1, 1)
    for r in (r0, r1):
        assert r["new_vote_group"], "the vote group was made for the new default group"
        assert r["old_vote_group_freed"], "the destroyed group's vote group is not kept alive"


def test_setting_returns_the_previous_one_and_reset_turns_it_off():
    assert tjc.set_enable_guard_collectives(True) is False
    assert tjc.set_enable_guard_collectives(True) is True
    assert tjc.set_enable_guard_collectives(True) is True
    tjc.reset()
    assert tjc.set_enable_guard_collectives(False) is False


def test_the_vote_without_a_process_group_is_the_local_result():
    assert not dist.is_initialized()
    assert guard_collectives._vote(True) is True
    assert guard_collectives._vote(False) is False
