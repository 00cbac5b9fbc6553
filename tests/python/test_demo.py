"""The README's demo must keep working: it runs the runtime end to end and checks its own results;
with torch installed it also prints each backend's numbers beside torch.compile's."""
import importlib.util
import re

from torch_jit_cache import demo

# The demo's torch part runs where torch is installed; the debug interpreter's venv has none, and
# there the demo is the runtime's part alone.
HAS_TORCH = importlib.util.find_spec("torch") is not None


def test_demo_runs_and_checks_itself(capsys):
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "WRONG RESULT" not in out
    assert "evicted=True" in out
    assert "1 entry left" in out
    if HAS_TORCH:
        for backend in ("eager", "inductor"):   # both backends' numbers, beside torch.compile's
            for compiler in ("tjc.compile", "torch.compile"):
                assert re.search(rf"^  {backend} +{re.escape(compiler)} +\d+ ms +[\d.]+ us$", out, re.M), \
                    (backend, compiler)
