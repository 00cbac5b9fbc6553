"""The README's demo must keep working: it runs the runtime end to end and checks its own results."""
from torch_jit_cache import demo


def test_demo_runs_and_checks_itself(capsys):
    assert demo.main() == 0
    out = capsys.readouterr().out
    assert "WRONG RESULT" not in out
    assert "evicted=True" in out
    assert "1 entry left" in out
