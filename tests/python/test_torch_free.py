"""The runtime needs no torch: _C, runtime, guards and codegen import and work where torch cannot be
imported, and none of them even tries to import it.

Every environment of scripts/setup.sh has torch now, so these tests block it: a fresh interpreter
whose meta-path finder records every attempt to import torch (or torch.*) and fails it, as on a
machine without torch. They run on 3.11, 3.12 and 3.13 in the pytest stages, and in the hunt-leaks
stage under the debug interpreter, whose .venv-dbg has no torch at all (setup.sh and test.sh check
that). Torch-free.
"""
import subprocess
import sys
from pathlib import Path

import pytest

# The work happens in a child interpreter, so a reference count in this one would measure nothing:
# scripts/hunt_leaks.py and `pytest --refleaks` run these once.
pytestmark = pytest.mark.no_refleaks

ROOT = Path(__file__).resolve().parents[2]   # this checkout's package, not an installed copy

# Runs first in the child: torch cannot be imported, and each attempt is written down.
BLOCK_TORCH = """
import sys

class BlockTorch:
    attempts = []

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            BlockTorch.attempts.append(name)
            raise ImportError(f"torch is blocked in this test ({name})")
        return None

sys.meta_path.insert(0, BlockTorch())
"""

# A JIT's whole cycle through the runtime: a miss calls the callback, whose guard tree (built by
# guards.GuardBuilder from GuardSpecs) and code (built by codegen) are cached; the next call with the
# same argument is a hit run from C++, a call with another type misses again.
RUNTIME_CYCLE = """
import torch_jit_cache
from torch_jit_cache import _C, runtime
from torch_jit_cache.guard import tree as guards
from torch_jit_cache.pipeline import codegen
from torch_jit_cache.guard.sources import LocalSource
from torch_jit_cache.guard.trace_result import ConstantOutput, GuardKind, GuardSpec

def f(x):
    return x + 1

def jit(frame, entries):
    if frame.f_code is not f.__code__:
        return runtime.RUN_ORIGINAL
    builder = guards.GuardBuilder()
    x = frame.f_locals["x"]
    builder.add(GuardSpec(LocalSource("x"), GuardKind.TYPE_MATCH, type(x)))
    builder.add(GuardSpec(LocalSource("x"), GuardKind.EQUALS_MATCH, x))
    code = codegen.build_transformed_code(f.__code__, None, [], ConstantOutput(x + 100))
    return runtime.GuardedCode(code, builder.root)

torch_jit_cache.reset()
with runtime.eval_frame(jit):
    results = [f(1), f(1), f(2), f(1.5)]
assert results == [101, 101, 102, 101.5], results
entries = runtime.cache_entries(f)
assert len(entries) == 3 and sum(e.hits for e in entries) == 1, entries
assert any("TYPE_MATCH: float" in str(e.guards) for e in entries), [str(e.guards) for e in entries]
torch_jit_cache.reset()
"""


def run_blocked(script: str) -> str:
    """Runs BLOCK_TORCH + script in a fresh interpreter; fails if torch was asked for."""
    tail = ("\nassert not BlockTorch.attempts, f'torch was imported: {BlockTorch.attempts}'"
            "\nassert 'torch' not in sys.modules\nprint('ok')\n")
    done = subprocess.run([sys.executable, "-c", BLOCK_TORCH + script + tail], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.endswith("ok\n"), done.stdout + done.stderr
    return done.stdout


def test_runtime_modules_import_without_torch():
    run_blocked("import torch_jit_cache, torch_jit_cache._C, torch_jit_cache.runtime, "
                "torch_jit_cache.guard.tree, torch_jit_cache.pipeline.codegen, torch_jit_cache.guard.sources, "
                "torch_jit_cache.guard.trace_result, torch_jit_cache.config, torch_jit_cache.testing\n")


def test_runtime_guards_and_codegen_work_without_torch():
    run_blocked(RUNTIME_CYCLE)


def test_tensor_guards_say_torch_is_missing():
    # What needs torch fails with a clear error, not an ImportError from deep inside.
    run_blocked("""
from torch_jit_cache import _C
try:
    _C._torch_backend_name()
except RuntimeError as e:
    assert str(e).startswith("torch is not installed"), e
else:
    raise AssertionError("_torch_backend_name() worked without torch")
BlockTorch.attempts.clear()   # asking for the backend may look for torch; that is the point
""")
