"""torch_jit_cache/torch_compat.py lists every private torch name the package reads, and each one
resolves on the installed torch.

Runs wherever torch imports: on 2.13.0 in every pytest stage, on 2.14.1 in scripts/test.sh's
torch 2.14 stage, on the GPU machine's 2.11 in scripts/gpu_check.sh. A failure on a new torch names
the rows to look at; a failure after a code change names the row to add.
"""
import re
import subprocess
import sys
from pathlib import Path

import pytest

import torch_compat_scan as scan
from torch_jit_cache import torch_compat
from torch_jit_cache.torch_compat import NATIVE, ROWS

ROOT = Path(__file__).resolve().parents[2]
# Tests that read source files or run a child interpreter: a reference count in this process would
# measure nothing (scripts/hunt_leaks.py and `pytest --refleaks` run them once).
READS_SOURCES = pytest.mark.no_refleaks

# Underscore attributes the scan finds that are the package's own, not torch's (a name torch's
# Module or Tensor happens to have too).
OWN_ATTRIBUTES = {
    "_values": "ModelOutputVariable._values, a tracker's own method (model_output.py)",
    "_grad": "TensorVariable._grad, a tracker's own method (tensor.py)",
}


def _covering(name: str) -> list:
    """The rows that list `name`: the row itself, or rows naming something under it (a module read
    by name in sys.modules, whose members the rows list)."""
    return [row for row in ROWS if row.name == name or row.name.startswith(name + ".")]


@READS_SOURCES
def test_rows_are_unique_and_their_users_exist():
    names = [row.name for row in ROWS]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    package = ROOT / "torch_jit_cache"
    for row in ROWS:
        assert row.users, row.name
        for user in row.users:
            path = package.joinpath(*user.split("."))
            assert path.with_suffix(".py").is_file() or (path / "__init__.py").is_file(), (row.name, user)
        assert torch_compat._minor(row.releases[0]) <= torch_compat._minor(row.releases[1]), row


@READS_SOURCES
def test_the_package_reaches_no_unlisted_private_name():
    unlisted, wrong_users = [], []
    for name, users in sorted(scan.dotted_names().items()):
        rows = _covering(name)
        if not rows:
            unlisted.append(f"{name}  (read by {', '.join(sorted(users))})")
            continue
        listed = {f"torch_jit_cache.{u}" for row in rows for u in row.users}
        if not users <= listed:
            wrong_users.append(f"{name}: also read by {sorted(users - listed)}")
    assert not unlisted, "private torch names missing from torch_compat.ROWS:\n  " + "\n  ".join(unlisted)
    assert not wrong_users, "torch_compat.ROWS users to add:\n  " + "\n  ".join(wrong_users)


@READS_SOURCES
def test_the_scan_finds_what_it_must():
    # The scan is what makes the list complete: it must see imports, attribute chains from an
    # imported alias, getattr with a constant, and dotted strings.
    found = scan.dotted_names()
    assert "torch_jit_cache.tracer.fake_shapes" in found["torch._subclasses.fake_tensor.FakeTensorMode"]
    assert "torch._inductor.config.triton.cudagraphs" in found          # inductor_config.triton.cudagraphs
    assert "torch.fx.graph_module._loader" in found                     # getattr(torch.fx.graph_module, "_loader", None)
    assert "torch._dynamo" in found                                     # sys.modules.get("torch._dynamo")
    assert "torch.fx.experimental.symbolic_shapes.ShapeEnv" in found    # unstable although public-looking
    assert not scan.is_private("torch.nn.functional.relu")
    assert scan.is_private("torch.distributed.fsdp._fully_shard._fsdp_state")


@pytest.mark.torch
def test_underscore_members_of_modules_and_tensors_are_listed():
    pytest.importorskip("torch")
    listed = {row.name: row for row in ROWS}
    problems = []
    for attribute, (users, owners) in sorted(scan.torch_object_attributes().items()):
        if attribute in OWN_ATTRIBUTES:
            continue
        rows = [listed[o] for o in owners if o in listed]
        if not rows:
            problems.append(f"{' or '.join(owners)}  (read by {', '.join(sorted(users))})")
        elif not users <= {f"torch_jit_cache.{u}" for row in rows for u in row.users}:
            problems.append(f"{rows[0].name}: users {sorted(users)}")
    assert not problems, "torch_compat.ROWS to add or complete:\n  " + "\n  ".join(problems)


@pytest.mark.torch
def test_every_row_resolves_on_the_installed_torch():
    torch = pytest.importorskip("torch")
    version = torch.__version__
    missing = []
    for row in ROWS:
        if not row.serves(version):
            continue
        try:
            ok = row.check(torch) if row.check else (torch_compat.resolve(row.name), True)[1]
        except Exception as e:  # noqa: BLE001  (any failure to resolve is the finding)
            ok = f"{type(e).__name__}: {e}"
        if ok is not True:
            missing.append(f"{row.name}: {ok or 'check returned False'} (read by {', '.join(row.users)})")
    assert not missing, f"private torch names that torch {version} lacks:\n  " + "\n  ".join(missing)


@pytest.mark.torch
def test_the_installed_torch_is_one_the_rows_know():
    # A torch outside every row's releases (a 2.15) resolves nothing above: say so instead.
    torch = pytest.importorskip("torch")
    lowest = min(torch_compat._minor(row.releases[0]) for row in ROWS)
    highest = max(torch_compat._minor(row.releases[1]) for row in ROWS)
    assert lowest <= torch_compat._minor(torch.__version__) <= highest, (torch.__version__, lowest, highest)


@READS_SOURCES
def test_native_names_csrc_uses_are_listed():
    listed = {row.name for row in NATIVE}
    used = set()
    for path in sorted((ROOT / "csrc").rglob("*")):
        if path.suffix not in (".h", ".cpp"):
            continue
        text = path.read_text()
        used |= set(re.findall(r"#include <((?:torch/csrc|c10/core/impl|ATen/core/dispatch)/[^>]+)>", text))
        used |= set(re.findall(r"\b(?:c10|at|torch)::(?:\w+::)*impl::\w+", text))
    assert used, "the scan of csrc/ found nothing: its patterns no longer match the sources"
    assert used <= listed, f"add to torch_compat.NATIVE: {sorted(used - listed)}"


@READS_SOURCES
def test_the_compat_module_imports_without_torch():
    blocker = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch' or name.startswith('torch.'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from torch_jit_cache import torch_compat\n"
        "assert torch_compat.ROWS and 'torch' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", blocker], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.torch
def test_custom_class_base_is_the_installed_torchs_own_name():
    # 2.14 renamed torch._opaque_base to torch._custom_class_base and logs a deprecation when the old
    # module is imported; the tracer's isinstance table must take the name the installed torch has,
    # and tracing must not print torch's deprecation to the user.
    script = (
        "import torch, torch_jit_cache as tjc\n"
        "from torch_jit_cache.torch_compat import custom_class_base\n"
        "base, meta = custom_class_base()\n"
        "assert type(torch.Generator) is meta, (type(torch.Generator), meta)\n"
        "def f(x, g):\n"
        "    return x + 1 if isinstance(g, torch.Generator) else x - 1\n"
        "x, g = torch.ones(3), torch.Generator()\n"
        "assert torch.equal(tjc.compile(f, backend='eager')(x, g), f(x, g))\n"
        "assert torch.equal(tjc.compile(f, backend='eager')(x, 3), f(x, 3))\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.endswith("ok\n"), done.stdout + done.stderr
    assert "deprecated" not in done.stderr, done.stderr
