"""setup.py drives CMake: it builds torch_jit_cache._C (and _C_torch when torch is importable)."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def project_version() -> str:
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'^version\s*=\s*"([^"]+)"', text, re.M).group(1)


def torch_cmake_prefix() -> str | None:
    """The libtorch CMake prefix when torch is importable and the build is not told otherwise."""
    if os.environ.get("TJC_WITH_TORCH", "auto") == "0":
        return None
    try:
        import torch.utils  # noqa: F401
    except ImportError:
        if os.environ.get("TJC_WITH_TORCH") == "1":
            raise
        return None
    import torch
    return torch.utils.cmake_prefix_path


def ccache_settings() -> tuple[list[str], dict[str, str]]:
    """CMake arguments and environment that put ccache in front of the compiler, when TJC_CCACHE
    names a ccache binary, or is 1 for the one on PATH (scripts/setup.sh and check_install.sh set
    it; a user's own `pip install` compiles without it unless asked).

    base_dir is the checkout: every path under it (the sources, the build folders, the venvs'
    pybind11 and torch headers) reaches the compiler relative to the build folder, so two clones in
    other folders, with venvs of the same names, share one cache. hash_dir off: the Debug build's
    -g would otherwise put the build folder's absolute path into every key. The sloppiness is what
    ccache asks for with precompiled headers, and lets a fresh clone's new file times hit."""
    launcher = os.environ.get("TJC_CCACHE", "")
    if launcher.lower() in ("1", "on", "yes", "auto"):
        launcher = shutil.which("ccache") or ""
    if launcher.lower() in ("", "0", "off", "no"):
        return [], {}
    env = {
        "CCACHE_BASEDIR": str(ROOT),
        "CCACHE_NOHASHDIR": "1",
        "CCACHE_SLOPPINESS": "pch_defines,time_macros,include_file_mtime,include_file_ctime",
    }
    env = {k: os.environ.get(k, v) for k, v in env.items()}
    return [f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}"], env


class CMakeExtension(Extension):
    """A module CMake builds. Every module is declared so that `build_ext --inplace` and editable
    installs copy it next to the package; one CMake run (for the first) builds them all."""

    def __init__(self, name: str, optional: bool = False):
        super().__init__(name, sources=[], optional=optional)


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if ext is not self.extensions[0]:
            return  # built by the CMake run of the first extension
        build_type = os.environ.get("TJC_BUILD_TYPE", "Release")
        sanitize = os.environ.get("TJC_SANITIZE", "OFF")
        # One build folder per Python, build type and sanitizer setting, so that switching between
        # them never forces a full rebuild (scripts/test.sh finds the C++ test binary by this name).
        tag = f"py{sys.version_info[0]}{sys.version_info[1]}{sysconfig.get_config_var('ABIFLAGS') or ''}"
        tag += f"-{build_type.lower()}" + ("-asan" if sanitize.upper() in ("ON", "1", "TRUE") else "")
        build_dir = Path(os.environ.get("TJC_BUILD_DIR", ROOT / "build" / tag))
        build_dir.mkdir(parents=True, exist_ok=True)
        # CMake writes the modules inside its own build folder; they are copied to where setuptools
        # wants them after every build. Were CMake to write them there directly, two build folders
        # would share one output, and Ninja in one would keep the other's newer file as up to date.
        modules_dir = build_dir / "modules"
        args = [
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DCMAKE_BUILD_TYPE={build_type}",
            f"-DTJC_OUTPUT_DIR={modules_dir}",
            f"-DTJC_VERSION={project_version()}",
            # Off unless asked for: a user's `pip install` needs neither GoogleTest nor the binary
            # (scripts/setup.sh asks for it; its --demo set-up does not).
            f"-DTJC_BUILD_TESTS={os.environ.get('TJC_BUILD_TESTS', 'OFF')}",
            f"-DTJC_SANITIZE={sanitize}",
            "-G", "Ninja",
        ]
        # Anything else CMake should be told, e.g. where a carried abseil lies (scripts/gpu_check.sh):
        # split as a shell would, after the arguments above, so it can override them.
        ccache_args, ccache_env = ccache_settings()
        # Always passed: a build folder configured with ccache once keeps the launcher in its cache
        # otherwise.
        args += ccache_args or ["-DCMAKE_CXX_COMPILER_LAUNCHER="]
        args += shlex.split(os.environ.get("TJC_CMAKE_ARGS", ""))
        prefix = torch_cmake_prefix()
        if prefix:
            args += ["-DTJC_WITH_TORCH=ON", f"-DCMAKE_PREFIX_PATH={prefix}"]
        else:
            args += ["-DTJC_WITH_TORCH=OFF"]
        subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir), *args])
        jobs = os.environ.get("TJC_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", str(build_dir), "-j", jobs], env={**os.environ, **ccache_env})
        for module in self.extensions:
            target = Path(self.get_ext_fullpath(module.name)).resolve()
            built = modules_dir / target.name
            if built.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                # A fresh timestamp: `--inplace` then copies it on to the package, which it skips
                # for a source older than the copy there (e.g. after a Debug build).
                shutil.copy(built, target)
            elif target.exists():
                target.unlink()  # e.g. _C_torch from an earlier build with torch


# _C_torch is optional: CMake builds it only where torch imports (and once its sources exist).
setup(
    ext_modules=[CMakeExtension("torch_jit_cache._C"), CMakeExtension("torch_jit_cache._C_torch", optional=True)],
    cmdclass={"build_ext": CMakeBuild},
)
