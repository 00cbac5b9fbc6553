"""The differential fuzzer (program_fuzzer.py) at its CI count: random model-style programs compiled
and compared with eager over calls with changes the guards must notice. TJC_FUZZ_COUNT and
TJC_FUZZ_SEED run more or other programs; `python tests/python/scenarios/program_fuzzer.py --count 2000`
is the long run."""
import os

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

import program_fuzzer  # noqa: E402

COUNT = int(os.environ.get("TJC_FUZZ_COUNT", "200"))
SEED = int(os.environ.get("TJC_FUZZ_SEED", "0"))


def test_random_programs_match_eager():
    made_graphs = 0
    for seed in range(SEED, SEED + COUNT):
        outcome = program_fuzzer.check_program(seed)   # raises Mismatch with the program text
        made_graphs += outcome.graphs > 0
    # The fuzzer proves nothing if everything fell back: most programs must really be compiled.
    assert made_graphs >= 0.8 * COUNT, f"only {made_graphs} of {COUNT} programs made a graph"


@pytest.mark.parametrize("change", sorted(program_fuzzer.CHANGES))
def test_each_change_is_exercised_and_matches_eager(change):
    # Every kind of change, on a few programs each: a change kind that a sampled run happens to
    # miss is still checked here.
    for seed in range(SEED, SEED + 4):
        program_fuzzer.check_program(seed, change_names=[change])


def test_the_fuzzer_catches_a_wrong_result():
    def off_by_one(gm, example_inputs):
        def run(*args):
            out = gm(*args)
            return tuple(o + 1 if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in out) \
                if isinstance(out, (tuple, list)) else out
        return run

    with pytest.raises(program_fuzzer.Mismatch, match="program seed 0"):
        program_fuzzer.check_program(0, backend=off_by_one)
