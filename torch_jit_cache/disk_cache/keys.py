"""What an entry's key and staleness checks are made of: versions, code digests, file digests,
torch's global state."""
from __future__ import annotations

import hashlib
import sys
import types

from .. import __version__
from ..config import config

FORMAT = 3   # 2: which graph inputs are static (CUDA graphs); 3: outputs as data (output_codec)


def versions() -> tuple:
    import torch
    return (FORMAT, sys.version, torch.__version__, __version__, sys.platform)


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
    """Feeds `code` into the hash `h`: bytecode, names, flags and constants, nested codes included."""
    h.update(code.co_code)
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


def global_state() -> tuple:
    # What the GLOBAL_STATE guard compares (csrc/guards/tensor_text.h, GlobalStateFacts): the entry's
    # guard tree is built on load, where it records the state of that moment, so the state the graph
    # was compiled under is compared here first.
    import torch
    return (torch.is_grad_enabled(), str(torch.get_default_dtype()), torch.are_deterministic_algorithms_enabled(),
            torch.is_autocast_enabled("cpu"), str(torch.get_autocast_dtype("cpu")),
            torch.is_autocast_enabled("cuda"), str(torch.get_autocast_dtype("cuda")))


def file_digest(path: str):
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None
