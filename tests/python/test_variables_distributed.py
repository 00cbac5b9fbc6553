"""torch.distributed collectives in compiled code (tracer/variables/parallel/distributed.py).

Two processes join a gloo group over 127.0.0.1 and run each scenario of distributed_worker.py
eagerly and compiled on the same inputs. Every call must issue the collectives eager issues, no
more (a trace never runs one) and no fewer, and return eager's values on each rank; also where the
ranks recompile at different times, across a graph break, with async_op=True, and with the eager,
aot_eager and inductor backends. The processes are bounded (each collective by the group's timeout,
each process by PROCESS_TIMEOUT_S), so a rank that desyncs fails the test instead of hanging it.

The scenarios run in one pair of processes shared by the module's tests, the one that may desync
the ranks last."""
import pathlib

import pytest

torch = pytest.importorskip("torch")

import torch.distributed as dist  # noqa: E402

from torch_jit_cache.testing.ranks import free_ports, run_ranks, scenario  # noqa: E402

pytestmark = [pytest.mark.torch,
              pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                 reason="torch.distributed with gloo is not available in this build")]

WORKER = pathlib.Path(__file__).with_name("distributed_worker.py")
WORLD = 2
PROCESS_TIMEOUT_S = 150

# The scenarios, in the order one pair of processes runs them (starting a pair costs seconds of
# imports). The recompile-apart scenario is last: where it desyncs the ranks (it does on a tracer
# that issues collectives while tracing), every collective after it would be paired wrongly, and a
# rank may abort.
SCENARIOS = ["first_compile", "recompile", "every_collective_eager", "every_collective_aot_eager",
             "functional", "break_between", "async_op", "barrier", "dynamic", "gradients_eager",
             "gradients_aot_eager", "every_collective_inductor", "ddp_training_eager", "ddp_training_aot_eager",
             "fsdp2_outside_eager", "fsdp2_outside_aot_eager", "fsdp2_per_block_aot_eager", "fsdp2_no_sync_aot_eager",
             "recompile_apart"]


def _run_pair(scenarios, tmp_path) -> list:
    """Both ranks' results ({scenario: result}), or a failure naming what went wrong."""
    (port,) = free_ports(1)
    return run_ranks(WORKER, WORLD, lambda r, out: [r, WORLD, port, out, *scenarios], tmp_path, PROCESS_TIMEOUT_S)


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Each rank's results, the scenarios run once for the module's tests."""
    return _run_pair(SCENARIOS, tmp_path_factory.mktemp("ranks"))


def _scenario(ranks, name):
    """Both ranks' results of one scenario: {"eager": ..., "compiled": ...} per rank."""
    return scenario(ranks, name)


# The collective each c10d op issues: the in-place API and the functional ops gather and scatter
# through different ProcessGroup entry points (as under torch.compile), one collective each.
_KIND = {"c10d::_allgather_base_": "all_gather", "c10d::allgather_into_tensor_coalesced_": "all_gather",
         "c10d::_reduce_scatter_base_": "reduce_scatter", "c10d::reduce_scatter_tensor_coalesced_": "reduce_scatter"}


def _kinds(names):
    return [_KIND.get(n, n) for n in names]


def _same_as_eager(ranks, *, graphs=None, breaks=0):
    for rank, result in enumerate(ranks):
        eager, compiled = result["eager"], result["compiled"]
        for i, (e, c) in enumerate(zip(eager["calls"], compiled["calls"])):
            assert _kinds(c["collectives"]) == _kinds(e["collectives"]), \
                f"rank {rank}, call {i}: collectives {c['collectives']}, eager issued {e['collectives']}"
            assert c["out"] == e["out"], f"rank {rank}, call {i}: a result differs from eager's"
            assert c["args"] == e["args"], f"rank {rank}, call {i}: an argument was left unlike eager's"
        assert len(compiled["calls"]) == len(eager["calls"])
        if graphs is not None:
            expected = graphs[rank] if isinstance(graphs, list) else graphs
            assert compiled["graphs"] == expected, f"rank {rank}: {compiled['graphs']} graphs"
        assert compiled["breaks"] == breaks, f"rank {rank}: {compiled['breaks']} graph breaks"


def test_first_compile_issues_eagers_collectives(ranks):
    results = _scenario(ranks, "first_compile")
    assert results[0]["eager"]["calls"][0]["collectives"] == ["c10d::allreduce_"]
    _same_as_eager(results, graphs=1)


def test_a_recompile_issues_eagers_collectives(ranks):
    _same_as_eager(_scenario(ranks, "recompile"), graphs=2)


def test_ranks_that_recompile_at_different_times_stay_in_step(ranks):
    _same_as_eager(_scenario(ranks, "recompile_apart"), graphs=[1, 2])


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_every_collective_in_one_graph(ranks, backend):
    results = _scenario(ranks, f"every_collective_{backend}")
    assert results[0]["eager"]["calls"][0]["collectives"] == [
        "c10d::allreduce_", "c10d::_allgather_base_", "c10d::_reduce_scatter_base_", "c10d::broadcast_"]
    _same_as_eager(results, graphs=1)


def test_functional_collectives(ranks):
    _same_as_eager(_scenario(ranks, "functional"), graphs=1)


def test_a_graph_break_between_two_collectives(ranks):
    _same_as_eager(_scenario(ranks, "break_between"), graphs=2, breaks=1)


def test_async_op_waits_in_the_graph(ranks):
    _same_as_eager(_scenario(ranks, "async_op"), graphs=1)


def test_barrier_breaks_the_graph_before_it_runs(ranks):
    results = _scenario(ranks, "barrier")
    assert results[0]["eager"]["calls"][0]["collectives"] == ["c10d::barrier"]
    _same_as_eager(results, graphs=2, breaks=1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_in_place_collectives_are_invisible_to_autograd_as_in_eager(ranks, backend):
    # The gradient of a tensor all-reduced in place is not reduced, and a leaf parameter may be
    # written: eager's c10d ops bypass autograd, so the graph's copy_ runs with grad off.
    _same_as_eager(_scenario(ranks, f"gradients_{backend}"), graphs=1)


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_compiling_a_ddp_module_captures_the_model_whole(ranks, backend):
    """tjc.compile(DDP(model)): DDP's forward runs as written (its reducer and buffer sync), the
    model's forward is one graph with no break and nothing falls back; each step's loss, the
    all-reduced gradients and the parameters equal eager DDP's on every rank."""
    results = _scenario(ranks, f"ddp_training_{backend}")
    _same_as_eager(results, graphs=1)
    for rank, r in enumerate(results):
        assert r["compiled"]["fallbacks"] == 0, f"rank {rank}: {r['compiled']['fallbacks']} frames fell back"
        # Cut at DDP's 4 buckets, each piece compiled on its own, so that each bucket's all-reduce
        # starts while the backward of the pieces before it runs (backends/ddp_split.py); the
        # eager backend runs op by op and is not cut.
        pieces = 4 if backend == "aot_eager" else 0
        assert (r["compiled"]["pieces"], r["compiled"]["backend_calls"]) == (pieces, max(pieces, 1)), r["compiled"]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_a_model_sharded_with_fully_shard_compiles_whole(ranks, backend):
    """tjc.compile(model) over FSDP2 blocks: each block's all-gather is in the graph (fsdp2.py), one
    graph and no break (before: one break per block, at FSDP2's pre-forward hook); each step's
    loss, every rank's gradient shards and parameter shards equal eager FSDP2's bit for bit."""
    results = _scenario(ranks, f"fsdp2_outside_{backend}")
    _same_as_eager(results, graphs=1)
    for rank, r in enumerate(results):
        assert r["compiled"]["fallbacks"] == 0, f"rank {rank}: {r['compiled']['fallbacks']} frames fell back"
        assert r["compiled"]["entries"] == 1 and r["compiled"]["alive"] == 0, \
            f"rank {rank}: the model or its entry outlived it ({r['compiled']})"


def test_blocks_compiled_then_sharded_trace_once(ranks):
    """torchtitan's order: each block compiled in place, then fully_shard; the blocks share one
    cache, so one graph for both (FSDP2's hooks run around each compiled forward)."""
    results = _scenario(ranks, "fsdp2_per_block_aot_eager")
    _same_as_eager(results, graphs=1)
    assert [r["compiled"]["backend_calls"] for r in results] == [1, 1]


def test_fsdp2_with_gradient_sync_off_runs_its_hooks(ranks):
    """Gradient sync off is not what the in-graph all-gather reproduces: each block's call is a
    graph break where FSDP2's hooks run, and the results are eager's."""
    results = _scenario(ranks, "fsdp2_no_sync_aot_eager")
    _same_as_eager(results, graphs=3, breaks=2)


def test_is_initialized_is_guarded_by_the_default_group(ranks):
    for r in ranks:
        assert r["results"].get("is_initialized") == {"before": -1.0, "after": float(WORLD), "graphs": 2}, r["log"]


def test_collectives_on_symbolic_sizes(ranks):
    _same_as_eager(_scenario(ranks, "dynamic"), graphs=1)


# -- one rank, in this process: what the trace records, refuses and guards ---------------------------
# A group of one (gloo over an in-memory store) issues real collectives without a second process.

@pytest.fixture(scope="module")
def world_of_one():
    import torch_jit_cache as tjc
    from torch.profiler import ProfilerActivity, profile

    assert not dist.is_initialized()
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)

    def count(fn, *args):
        """fn(*args) and the collectives it issued."""
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            out = fn(*args)
        return out, [e.name for e in prof.events() if e.name.startswith("c10d::")]
    count(torch.ones, 1)   # the profiler's first start
    tjc.reset()
    yield count
    tjc.reset()
    dist.destroy_process_group()


def _targets(gm):
    return [getattr(n.target, "__name__", str(n.target)) for n in gm.graph.nodes if n.op == "call_function"]


def test_the_graph_holds_functional_collectives_and_tracing_issues_none(world_of_one):
    import torch_jit_cache as tjc

    graphs = []

    def backend(gm, example_inputs):
        graphs.append(_targets(gm))
        return gm.forward

    def f(x):
        y = x * 2
        dist.all_reduce(y, op=dist.ReduceOp.MAX)
        return y + 1
    x = torch.ones(3)
    compiled = tjc.compile(f, backend=backend)
    for _ in range(2):
        out, issued = world_of_one(compiled, x)
        assert issued == ["c10d::allreduce_"]
        assert torch.equal(out, f(x))
    assert graphs == [["mul", "all_reduce.default", "wait_tensor.default", "copy_", "add"]]


def _all_to_all(y):
    out = torch.empty_like(y)
    dist.all_to_all_single(out, y)
    return out


def _on_a_rank_list(y):
    import torch.distributed._functional_collectives as fc
    return fc.all_reduce(y, "sum", [0])


def _barrier(y):
    dist.barrier()
    return y


@pytest.mark.parametrize("call, issues, reason", [
    (_all_to_all, "c10d::alltoall_base_", "all_to_all_single from torch.distributed: not captured"),
    (_on_a_rank_list, "c10d::allreduce_", "on a group the trace cannot name"),
    (_barrier, "c10d::barrier", "barrier from torch.distributed: not captured"),
], ids=["all_to_all_single", "group_as_rank_list", "barrier"])
@pytest.mark.filterwarnings("ignore:The combination of ranks:FutureWarning")   # torch's, run eagerly
def test_an_uncaptured_call_breaks_before_it_runs(world_of_one, call, issues, reason):
    import torch_jit_cache as tjc

    def f(x):
        y = x + 1
        return call(y) * 2
    x = torch.arange(4.0)
    report = tjc.explain(f)(x)
    assert report.graph_break_count >= 1
    assert any(reason in r for r in report.break_reasons), report.break_reasons
    tjc.reset()
    compiled = tjc.compile(f)
    for _ in range(2):
        out, issued = world_of_one(compiled, x)
        assert issued == [issues], "runs once, at run time"
        assert torch.equal(out, f(x))


def test_a_work_handle_that_escapes_runs_the_frame_uncompiled(world_of_one):
    import torch_jit_cache as tjc

    def f(x):
        y = x + 1
        work = dist.all_reduce(y, async_op=True)
        return work, y
    x = torch.arange(4.0)
    compiled = tjc.compile(f)
    for _ in range(2):
        (work, y), issued = world_of_one(compiled, x)
        assert issued == ["c10d::allreduce_"]
        work.wait()
        assert torch.equal(y, x + 1)


def test_rank_and_world_size_are_constants_guarded_by_the_default_group(world_of_one):
    import torch_jit_cache as tjc

    def f(x):
        return x + dist.get_rank() * 10 + dist.get_world_size() + dist.is_initialized()
    report = tjc.explain(f)(torch.ones(2))
    assert report.graph_break_count == 0 and report.graph_count == 1
    assert torch.equal(tjc.compile(f)(torch.ones(2)), torch.ones(2) + 2)
    guards = "\n".join(str(g) for g in report.guards)
    assert "__globals__['_world'].default_pg" in guards and "ID_MATCH: <ProcessGroup" in guards


def test_a_group_argument_is_guarded_by_identity_and_held_weakly(world_of_one):
    import weakref

    import torch_jit_cache as tjc
    from torch_jit_cache.testing import CompileCounter

    def f(x, group):
        y = x * 2
        dist.all_reduce(y, group=group)
        return y + group.size() + dist.get_rank(group)
    counter = CompileCounter()
    compiled = tjc.compile(f, backend=counter)
    x = torch.ones(2)
    groups = [dist.new_group([0]), dist.new_group([0])]
    for g in groups + groups:
        out, issued = world_of_one(compiled, x, g)
        assert issued == ["c10d::allreduce_"] and torch.equal(out, f(x, g))
    assert counter.frame_count == 2, "one graph per group: each is guarded by identity"
    ref = weakref.ref(groups[0])
    dist.destroy_process_group(groups[0])
    del groups[0], g
    assert ref() is None, "the compiled code does not keep a group alive"


def _sharded(reshard_after_forward=True):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from distributed_worker import FSDPNet   # the model the two-rank FSDP2 scenarios train

    torch.manual_seed(0)
    model = FSDPNet()
    mesh = init_device_mesh("cpu", (1,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh)
    return model


@pytest.mark.parametrize("reshard_after_forward", [True, False])
def test_fsdp2_gathers_are_tagged_for_recompute_under_inductor(world_of_one, monkeypatch, reshard_after_forward):
    """reshard_after_forward=True: the nodes that gather a block's parameters carry the tags that
    make AOTAutograd's min-cut partitioner (inductor's) all-gather again in the backward instead of
    saving the gathered parameters; False, or another backend: no tag."""
    import torch_jit_cache as tjc
    from torch.utils.checkpoint import CheckpointPolicy
    from torch_jit_cache import backends

    tags = {}

    def spy(name):
        def backend(gm, example_inputs):
            tags[name] = [(getattr(n.target, "__name__", str(n.target)), n.meta.get("recompute"))
                          for n in gm.graph.nodes if n.op == "call_function"]
            return gm.forward
        return backend

    monkeypatch.setitem(backends._REGISTRY, "inductor", spy("inductor"))
    monkeypatch.setitem(backends._REGISTRY, "aot_eager", spy("aot_eager"))
    x = torch.randn(2, 4)
    for name in ("inductor", "aot_eager"):
        tjc.reset()
        model = _sharded(reshard_after_forward)
        want = _sharded(reshard_after_forward)(x)
        got = tjc.compile(model, backend=name)(x)
        assert torch.equal(got, want)
        assert (tjc.stats()["graphs"], tjc.stats()["graph_breaks"]) == (1, 0)
    gathers = [policy for target, policy in tags["inductor"] if "all_gather" in target]
    assert len(gathers) == 2, tags["inductor"]
    expected = CheckpointPolicy.MUST_RECOMPUTE if reshard_after_forward else None
    assert gathers == [expected, expected]
    assert all(policy is None for _, policy in tags["aot_eager"])
    tjc.reset()
