"""The HuggingFace models of the zoo under an older transformers (5.17.0, build/transformers-5.17,
installed by scripts/setup.sh) beside the pinned one (5.23.0): capture must not depend on one
release's code paths. Each model, built from its config with random weights, must give eager's
outputs on three calls, compile no more after the first call, and have no more graphs and breaks
than torch.compile on the same code, with no frame run uncompiled. Run in a child process that puts
the older release first on its path."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.torch

ROOT = Path(__file__).resolve().parents[3]
OLDER = ROOT / "build" / "transformers-5.17"
MODELS = ("bert", "gpt2", "llama", "t5", "bart")


@pytest.fixture(scope="module")
def older_release():
    if not (OLDER / "transformers").is_dir():
        pytest.fail(f"{OLDER} is missing: run `bash scripts/setup.sh` (its step 6 installs transformers 5.17.0)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(OLDER), str(ROOT)]), TJC_DISABLE_DISK_CACHE="1")
    done = subprocess.run([sys.executable, str(Path(__file__).with_name("transformers_versions_child.py")),
                           *MODELS], env=env, capture_output=True, text=True, timeout=900, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-4000:]
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["model"]: r for r in rows}


@pytest.mark.parametrize("name", MODELS)
def test_a_model_under_the_older_release_is_right_and_captured_as_by_torch_compile(older_release, name):
    r = older_release[name]
    assert r["transformers"] == "5.17.0"
    assert r["same"] == [True, True, True], "outputs differ from eager's"
    assert r["compiles"][0] == r["compiles"][-1], f"recompiled on later calls: {r['compiles']}"
    assert r["fallbacks"] == [], r["fallbacks"]
    assert (r["graphs"], r["breaks"]) <= (r["tc_graphs"], r["tc_breaks"]) and r["breaks"] <= r["tc_breaks"], \
        f"tjc {r['graphs']} graphs / {r['breaks']} breaks against torch.compile's {r['tc_graphs']} / " \
        f"{r['tc_breaks']}: {r['reasons']}"
