"""The on-disk cache's keys (torch_jit_cache/pipeline/disk_cache/keys.py): an entry is found only by the code
and the settings that made it. The end-to-end check runs child processes on a copy of the package in
a temporary folder, as an editable install that is then edited."""
import json
import importlib.machinery
import os
import shutil
import subprocess
import sys
import time
import types

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.torch

from torch_jit_cache.pipeline.disk_cache import keys  # noqa: E402

PACKAGE = keys.PACKAGE_ROOT

CHILD = '''
import json, torch, torch_jit_cache as tjc
def f(x):
    return torch.sin(x) + 1
x = torch.randn(3)
ok = torch.equal(tjc.compile(f, backend="eager")(x), f(x))   # no TJC_* variable here: name the backend
print("RESULT " + json.dumps({"ok": ok, "package": tjc.__file__, **tjc.stats()}))
'''


def _copy_package(tmp_path):
    root = tmp_path / "site"
    shutil.copytree(PACKAGE, root / "torch_jit_cache", ignore=shutil.ignore_patterns("__pycache__"))
    return root / "torch_jit_cache"


def test_package_digest_covers_every_python_file_and_the_extension(tmp_path):
    copy = _copy_package(tmp_path)
    digest = keys.package_digest(str(copy))
    assert digest == keys.package_digest(PACKAGE)   # content, not where it lies or its mtimes
    for name in ("pipeline/disk_cache/keys.py", "tracer/__init__.py"):
        edited = tmp_path / f"edited-{name.replace('/', '-')}"
        shutil.copytree(copy, edited)
        with open(edited / name, "a") as f:
            f.write("\n# edited\n")
        assert keys.package_digest(str(edited)) != digest, name
    # Another Python's build beside this one's (the set-up builds 3.12's and 3.13's in the same
    # folder) is not this process's code: rebuilding it changes nothing (it did, and a 3.12 build
    # made every 3.11 process of that moment store and load nothing).
    other = tmp_path / "other-build"   # a folder of its own: package_digest is cached per folder
    shutil.copytree(copy, other)
    (other / "_C.cpython-399-x86_64-linux-gnu.so").write_bytes(b"another Python's build")
    assert keys.package_digest(str(other)) == digest
    own = {os.path.basename(p) for p in keys._package_files(str(copy)) if not p.endswith(".py")}
    assert "_C" + importlib.machinery.EXTENSION_SUFFIXES[0] in own
    extensions = [p for p in os.listdir(copy) if p.startswith("_C")]
    for i, extension in enumerate(extensions):   # a rebuilt extension
        rebuilt = tmp_path / f"rebuilt-{i}"
        shutil.copytree(copy, rebuilt)
        with open(rebuilt / extension, "ab") as f:
            f.write(b"\0")
        assert (keys.package_digest(str(rebuilt)) != digest) == (extension in own), extension


def test_a_file_modified_after_the_import_leaves_no_digest(tmp_path):
    copy = _copy_package(tmp_path)   # copied with the files' mtimes
    edited = tmp_path / "edited"
    shutil.copytree(copy, edited)
    imported = time.time_ns()
    with open(edited / "pipeline" / "codegen.py", "a") as f:
        f.write("\n# edited while a process runs\n")
    # a second later (the kernel stamps files from a clock coarser than time.time_ns())
    os.utime(edited / "pipeline" / "codegen.py", ns=(imported + 10**9, imported + 10**9))
    assert keys.package_digest(str(copy), imported) == keys.package_digest(PACKAGE)
    assert keys.package_digest(str(edited), imported) is None
    assert keys.package_digest(str(edited)) not in (None, keys.package_digest(PACKAGE))


def _scaled(x):
    return torch.cos(x) * 3


@pytest.mark.usefixtures("fresh_caches")
def test_a_process_whose_package_changed_stores_and_loads_nothing(disk_cache_on, tmp_path, monkeypatch):
    # The files no longer say which code this process runs: no entry is keyed by them.
    import torch_jit_cache as tjc
    x = torch.randn(3)
    tjc.compile(_scaled)(x)
    assert tjc.stats()["disk_cache_stores"] == 1
    tjc.reset()
    monkeypatch.setattr(keys, "_IMPORTED_AT_NS", 0)   # as if every file were edited since
    assert torch.equal(tjc.compile(_scaled)(x), _scaled(x))
    assert (tjc.stats()["disk_cache_hits"], tjc.stats()["disk_cache_stores"], tjc.stats()["graphs_traced"]) == (0, 0, 1)


def _run(script, package_parent, cache):
    env = {k: v for k, v in os.environ.items() if not k.startswith("TJC_")}
    env.update(TJC_CACHE_DIR=str(cache), PYTHONPATH=str(package_parent))
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    stats = json.loads(line[len("RESULT "):])
    assert stats["ok"], proc.stdout + proc.stderr
    return stats


def test_an_edited_package_does_not_load_what_its_older_code_stored(tmp_path):
    # An editable install: the same folder, one file edited between two runs. The entry the first
    # run stored was made by other code (here a comment; in life a fixed tracer): not loaded.
    copy = _copy_package(tmp_path)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    cache = tmp_path / "cache"
    first = _run(script, copy.parent, cache)
    assert first["package"].startswith(str(copy)), first["package"]
    assert (first["graphs_traced"], first["disk_cache_stores"]) == (1, 1)
    second = _run(script, copy.parent, cache)
    assert (second["graphs_traced"], second["disk_cache_hits"]) == (0, 1)   # unchanged code loads
    with open(copy / "pipeline" / "codegen.py", "a") as f:
        f.write("\n# edited\n")
    edited = _run(script, copy.parent, cache)
    assert (edited["graphs_traced"], edited["disk_cache_hits"], edited["disk_cache_stores"]) == (1, 0, 1)


def _f(x):
    return x + 1


COMPILER = types.SimpleNamespace(backend="eager", backend_patches=None, dynamic=None)


def test_torch_trace_settings_are_in_the_key():
    import torch.fx.experimental._config as fx_config
    before = keys.key(COMPILER, _f.__code__)
    with fx_config.patch(use_duck_shape=not fx_config.use_duck_shape):
        assert keys.key(COMPILER, _f.__code__) != before
    with fx_config.patch(symbol_guard_limit_before_specialize=7):
        assert keys.key(COMPILER, _f.__code__) != before
    assert keys.key(COMPILER, _f.__code__) == before


def test_backend_settings_are_not_in_the_key():
    # The backend compiles again on load under this process's settings (keys.py's docstring):
    # the same stored graph serves both, and the eager load path imports neither config.
    import torch._functorch.config as functorch_config
    before = keys.key(COMPILER, _f.__code__)
    with functorch_config.patch(enable_autograd_cache=not functorch_config.enable_autograd_cache):
        assert keys.key(COMPILER, _f.__code__) == before
