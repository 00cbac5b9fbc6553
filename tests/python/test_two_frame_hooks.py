"""TorchDynamo's frame hook and ours in one process.

torch.cond, control_flow.map and while_loop, run as written, compile their functions with
TorchDynamo, which installs its own PEP 523 hook over whatever is there and chains to it. When
TorchDynamo refuses such a call (it raises), torch 2.13 leaves its hook installed; ours, installed
by the next compiled call, then chains to TorchDynamo's, and TorchDynamo's next compile chains back
to ours: every frame that neither hook takes went round the two hooks forever, and a compiled call
that eager ends with an exception hung instead (docs/frame_hook.md, "Two hooks in one process").

And when TorchDynamo's last user leaves, TorchDynamo puts back the evaluator it found, removing ours
if ours sat above its own; the runtime must install ours again on the next compiled call.

Each check runs in a fresh interpreter: the hook TorchDynamo leaves behind would otherwise stay for
the rest of the test session, and a hang must fail the test (by its timeout), not stall the suite.
"""
import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch]

# Prints one JSON line of results; every check is ours, compared with eager in the same process.
_SCRIPT = textwrap.dedent("""
    import faulthandler, json, sys
    faulthandler.dump_traceback_later(50, exit=True)   # a hang prints where it is and fails
    import torch
    import torch_jit_cache as tjc
    from functorch.experimental.control_flow import map as cf_map

    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.seen = torch.tensor(0)

        def forward(self, rows):
            def body(row):
                self.seen += 1          # a side effect: TorchDynamo refuses the map
                return row * 2
            return cf_map(body, rows)

    def outcome(fn, *args):
        try:
            return "returned", fn(*args)
        except Exception as e:          # noqa: BLE001 - the exception's type is the result
            return "raised", type(e).__name__

    out = {}
    rows = torch.randn(3, 2)
    # 1. Eager raises (TorchDynamo's refusal), and leaves TorchDynamo's hook installed.
    out["eager"] = outcome(Counter(), rows)[1]
    # 2. The same call inside a compiled call: the map runs as written and raises as eager does.
    out["compiled"] = outcome(tjc.compile(Counter(), backend="eager"), rows)[1]

    # 3. torch.compile called inside a compiled call, with both hooks chained: equal to eager.
    inner = torch.compile(lambda t: torch.sin(t) * 3, backend="eager")

    def outer(t):
        return inner(t + 1) - 1         # the torch.compile call runs as written, at a graph break

    x = torch.randn(4)
    compiled_outer = tjc.compile(outer, backend="eager")
    out["nested_equal"] = bool(torch.equal(compiled_outer(x), outer(x)))

    # 4. Ours still intercepts afterwards: a compiled function compiles once and then hits its entry.
    double = tjc.compile(lambda t: t * 2, backend="eager")
    double(x)
    hits = tjc.stats()["hits"]
    out["still_hits"] = bool(torch.equal(double(x), x * 2)) and tjc.stats()["hits"] == hits + 1
    print(json.dumps(out))
""")


# TorchDynamo's last user leaving puts back the evaluator TorchDynamo found, even while ours sits
# above TorchDynamo's: ours is gone from the interpreter. Before, our flag still said "installed",
# the next compiled call did not install it again, and nothing compiled for the rest of the process.
_REMOVED_SCRIPT = textwrap.dedent("""
    import json
    import torch
    import torch._C._dynamo.eval_frame as dynamo_hook
    import torch_jit_cache as tjc
    from torch_jit_cache.testing import CompileCounter

    def leave(t):
        dynamo_hook.set_eval_frame(None)   # TorchDynamo's last user leaves
        return t

    def f(t):
        u = t + 1
        leave(u)
        return u * 2

    dynamo_hook.set_eval_frame(False)      # TorchDynamo in use (run-only): its hook installed
    first = tjc.compile(f, backend="eager")(torch.ones(2)).tolist()
    counter = CompileCounter()
    later = tjc.compile(lambda t: t * 3, backend=counter)
    later(torch.ones(2))
    print(json.dumps({"first": first, "later_compiles": counter.frame_count}))
""")


def _run_script(script):
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_compiled_calls_still_compile_after_dynamo_put_back_the_evaluator_it_found():
    out = _run_script(_REMOVED_SCRIPT)
    assert out == {"first": [4.0, 4.0], "later_compiles": 1}


@pytest.fixture(scope="module")
def results():
    return _run_script(_SCRIPT)


def test_a_refused_map_run_as_written_raises_as_eager_after_dynamo_left_its_hook(results):
    assert results["eager"] == "UncapturedHigherOrderOpError"
    assert results["compiled"] == results["eager"]


def test_torch_compile_inside_a_compiled_call_matches_eager_with_both_hooks_chained(results):
    assert results["nested_equal"]


def test_compiled_calls_still_hit_their_entries_after_the_hooks_were_chained(results):
    assert results["still_hits"]
