"""What an entry's key and staleness checks are made of: versions, code digests, file digests,
torch's global state.

`versions()` is what made an entry, stored in it and part of its key (a process made by other code
or settings finds another folder):
  - the entry format, Python's version and the platform;
  - torch's version and git revision (a source build keeps `__version__` across commits);
  - this package's version and a digest of its own files: the content of every `.py` file under
    the package and of the built extensions this interpreter loads (`_C`, `_C_torch`), so an editable
    install edited, rebuilt or checked out at another commit never loads an entry its older code
    made. Hashed once per process, on the first store or load (3.5 to 8 ms for ~100 files and
    1.2 MB of extensions, measured on 2 shared cores): never at import, never with the cache off.
    Content, not sizes and mtimes: an archive or a copy that keeps mtimes must not pass for other
    code. A file modified after the package was imported leaves the process without a digest (the
    files are no longer the code it runs): it then stores and loads nothing;
  - the hash of torch.fx.experimental's config (`torch.fx.experimental._config`: how a ShapeEnv
    makes symbols and shape guards, duck sizing, specialisation limits): it decides what a trace
    records. `import torch` has imported it already, and torch caches its hash until a setting
    changes, so reading it costs a dict lookup.

Not keyed, and why: an entry stores the graph as the tracer made it, before any backend; on load
the backend compiles it again under this process's settings, as a fresh compile would. So
`torch._functorch.config` (AOTAutograd: aot_eager, inductor) and `torch._inductor.config` act on the
load's own compile, and inductor's FX graph cache and AOTAutograd's cache key those settings
themselves; importing them on the eager backend's load path would cost ~1 s for nothing.
`torch._dynamo.config` is never read by this package's tracer. This package's own trace settings
(`capture_scalar_outputs`, `capture_dynamic_output_shape_ops`, `dynamic=`, the backend and its
options) are in `key()` itself.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import os
import sys
import time
import types

from ...version import __version__
from ...config import config

FORMAT = 5   # 3: guards stored by their kind's codec (TENSOR_MATCH by its leaf's state); 4: outputs,
             # side effects and graph breaks as data (output_codec); 5: what stats() counted ("made")

# The package's root folder (torch_jit_cache/): one folder up per dot of this module's name, so
# that it holds wherever this module sits in the package.
PACKAGE_ROOT = os.path.abspath(__file__)
for _ in range(__name__.count(".")):
    PACKAGE_ROOT = os.path.dirname(PACKAGE_ROOT)


# When the package was imported (this module is imported with it; only the tracer's modules wait
# for the first trace). A package file modified after it may not be the code this process runs.
# (File times come from a clock a few ms coarser: an edit that close to the import goes unseen.)
_IMPORTED_AT_NS = time.time_ns()


class PackageChanged(Exception):
    """A package file changed since the import: nothing says which code an entry was made by, so
    none is stored or loaded (store and load log it under `disk_cache`)."""


def versions() -> tuple:
    import torch
    digest = package_digest(PACKAGE_ROOT, _IMPORTED_AT_NS)
    if digest is None:
        raise PackageChanged("torch_jit_cache's own files changed since it was imported")
    return (FORMAT, sys.version, sys.platform, torch.__version__, torch.version.git_version, __version__,
            digest, trace_config())


def trace_config() -> str:
    """The hash of the torch settings that change what a trace records (see the module's docstring)."""
    import torch.fx.experimental._config as fx_config
    return fx_config.get_hash().hex()


def _package_files(root: str):
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                yield os.path.join(folder, name)
    # The extensions this interpreter loads: per module, the first of its suffixes that exists, in
    # the import system's order. The builds for other Pythons beside them (cpython-312, 311d) are not
    # this process's code: rebuilding one must not make another's entries stale (a 3.12 build made
    # every 3.11 process of that moment store and load nothing).
    for module in ("_C", "_C_torch"):
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(root, module + suffix)
            if os.path.exists(path):
                yield path
                break


@functools.lru_cache(maxsize=None)   # keyed by a folder name: once per process and folder
def package_digest(root: str, unchanged_since_ns: int | None = None) -> str | None:
    """A sha256 over the relative path and content of each of the package's files under `root`;
    None where a file was modified after `unchanged_since_ns` (time.time_ns())."""
    h = hashlib.sha256()
    for path in _package_files(root):
        h.update(os.path.relpath(path, root).encode() + b"\0")
        with open(path, "rb") as f:
            if unchanged_since_ns is not None and os.fstat(f.fileno()).st_mtime_ns > unchanged_since_ns:
                return None
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def _const_digest(value, h) -> None:
    if isinstance(value, types.CodeType):
        code_digest(value, h)
    elif isinstance(value, (tuple, list)):
        h.update(f"{type(value).__name__}({len(value)}".encode())
        for item in value:
            _const_digest(item, h)
    elif isinstance(value, frozenset):   # str hashes (and so the order) differ per process
        h.update(f"frozenset({sorted(repr(v) for v in value)!r}".encode())
    else:
        h.update(f"{type(value).__name__}:{value!r};".encode())


def code_digest(code, h) -> None:
    """Feeds `code` into the hash `h`: bytecode, exception table, names, flags and constants, nested
    codes included."""
    h.update(code.co_code)
    h.update(code.co_exceptiontable)
    h.update(repr((code.co_qualname, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
                   code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags)).encode())
    for const in code.co_consts:
        _const_digest(const, h)


def code_digest_hex(code) -> str:
    h = hashlib.sha256()
    code_digest(code, h)
    return h.hexdigest()


def key(compiler, code) -> str:
    h = hashlib.sha256()
    h.update(repr((versions(), code.co_filename, code.co_qualname, code.co_firstlineno, compiler.backend,
                   compiler.backend_patches, compiler.dynamic, config.capture_scalar_outputs,
                   config.capture_dynamic_output_shape_ops)).encode())
    code_digest(code, h)
    return h.hexdigest()[:32]


def key_dir(compiler, code) -> str:
    import os
    return os.path.join(config.cache_dir, f"v{FORMAT}", key(compiler, code))


def global_state() -> dict:
    """The state a GLOBAL_STATE leaf made now compares with, read by the leaf itself (csrc
    GlobalStateFacts): the entry's guard tree is built on load, where it records the state of that
    moment, so the state the graph was compiled under is compared with it first."""
    from ... import _C
    return _C.global_state_state()


def file_digest(path: str):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None
