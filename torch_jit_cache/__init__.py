"""torch_jit_cache: a JIT guard and code-cache runtime for CPython and PyTorch with a C++ core.

`torch_jit_cache.compile` compiles functions and modules (needs torch); `torch_jit_cache.runtime`
is the face of the C++ runtime for JIT authors (no torch needed).
"""
import sys

from .version import __version__  # _C is checked against it below

if not ((3, 11) <= sys.version_info[:2] <= (3, 13)):
    raise ImportError(
        f"torch_jit_cache supports CPython 3.11, 3.12 and 3.13, not {sys.version.split()[0]}"
    )

try:
    from . import _C
except ImportError as e:  # pragma: no cover - depends on the build
    raise ImportError(
        f"torch_jit_cache._C is not built for Python {sys.version_info[0]}.{sys.version_info[1]} "
        f"({e}); run scripts/setup.sh or `pip install --no-build-isolation -e .`"
    ) from e

if _C.__version__ != __version__ or tuple(_C.python_version) != sys.version_info[:2]:
    raise ImportError(
        f"torch_jit_cache._C was built for version {_C.__version__} on Python "
        f"{_C.python_version}, but this is {__version__} on {sys.version_info[:2]}: rebuild it"
    )

from . import runtime  # noqa: E402
from .config import config  # noqa: E402  (the settings instance, e.g. config.cache_limit)
from .api import cache_entries, compile, compile_, disable, explain, reset, stats  # noqa: E402
from .frontend.dynamic import mark_dynamic, mark_static, maybe_mark_dynamic  # noqa: E402
from .runtime.guard_collectives import set_enable_guard_collectives  # noqa: E402
from .frontend.proxies import allow_in_graph  # noqa: E402
from .frontend.stance import RecompileError, set_stance  # noqa: E402

__all__ = ["CompiledModule", "RecompileError", "allow_in_graph", "cache_entries", "compile", "compile_", "config",
           "disable", "explain", "mark_dynamic", "mark_static", "maybe_mark_dynamic", "reset", "runtime",
           "set_enable_guard_collectives", "set_stance", "stats"]


def __getattr__(name):
    # CompiledModule subclasses torch.nn.Module: imported on first use, so that importing this
    # package needs no torch.
    if name == "CompiledModule":
        from .frontend.module_wrapper import CompiledModule

        return CompiledModule
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
