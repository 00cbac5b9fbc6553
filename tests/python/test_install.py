"""The set-up's .venv has the package installed: a user's script in any folder imports it, and pytest
run in any project that uses the venv has --refleaks. scripts/check_install.sh checks the
other installs (pip install of the checkout, a wheel in a fresh venv)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP_VENV = ROOT / ".venv"

# Only the environment scripts/setup.sh installs the package into (.venv, Python 3.11) promises this;
# .venv-3.12, .venv-3.13 and .venv-dbg build in place for the tests and install nothing.
pytestmark = pytest.mark.skipif(
    Path(sys.prefix).resolve() != SETUP_VENV.resolve(),
    reason=f"scripts/setup.sh installs the package into {SETUP_VENV} only; this is {sys.prefix}",
)


def run_outside(tmp_path, *args):
    """Runs this interpreter in an empty folder outside the checkout, with no PYTHONPATH."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)


def test_a_script_in_another_folder_imports_the_checkout(tmp_path):
    script = tmp_path / "myscript.py"
    script.write_text("import torch_jit_cache, torch\n"
                      "f = torch_jit_cache.compile(lambda x: x * 2)\n"
                      "assert torch.equal(f(torch.ones(2)), torch.full((2,), 2.0))\n"
                      "print(torch_jit_cache.__file__)\n")
    assert not str(tmp_path.resolve()).startswith(str(ROOT))
    result = run_outside(tmp_path, str(script))
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).resolve() == (ROOT / "torch_jit_cache" / "__init__.py").resolve()


def test_pytest_in_another_project_has_refleaks(tmp_path):
    (tmp_path / "test_user.py").write_text(
        "import torch, torch_jit_cache as tjc\n"
        "model = tjc.compile(torch.nn.Linear(4, 4))\n"
        "x = torch.randn(2, 4)\n"
        "def test_hits_do_not_leak(request):\n"
        "    assert request.config.getoption('refleaks')\n"
        "    model(x)\n")
    help_text = run_outside(tmp_path, "-m", "pytest", "--help")
    assert help_text.returncode == 0, help_text.stderr
    assert "--refleaks" in help_text.stdout
    run = run_outside(tmp_path, "-m", "pytest", "--refleaks", "-q", "-p", "no:cacheprovider", "test_user.py")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 passed" in run.stdout
