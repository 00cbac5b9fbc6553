#!/usr/bin/env bash
# Sets up everything the build and the tests need, then builds the extension for each Python.
# Idempotent and quick when nothing changed: every step checks before it acts and says what it does.
#
#   bash scripts/setup.sh          everything (what scripts/test.sh needs)
#   bash scripts/setup.sh --demo   only what the demo and a user's own scripts need: abseil, .venv
#                                  (3.11 + torch), one Release build of _C/_C_torch without the C++
#                                  test binary, the package installed in .venv
#
#   1. Debian packages: abseil, GoogleTest, python3.11-dbg, python3.11-dev (only the missing ones;
#      --demo: abseil alone).
#   2. Virtual environments from pyenv's Pythons:
#        .venv        3.11 + torch==2.13.0 (requirements-dev.txt)
#        .venv-3.12   3.12, torch-free     (requirements-runtime.txt)
#        .venv-3.13   3.13, torch-free     (requirements-runtime.txt)
#      reinstalled only when the requirement files change (a stamp holds their hash).
#   3. `setup.py build_ext --inplace` per environment: CMake + Ninja in build/py3XX-release, the .so
#      files in torch_jit_cache/ (their names carry the Python version, so all three coexist).
#      _C_torch is built where torch imports (.venv). Ninja rebuilds only what changed.
#      .venv then gets the package installed (editable, --no-build-isolation, --no-deps): a script in
#      any folder imports torch_jit_cache, and pytest finds the --refleaks plugin (pytest11 entry
#      point). Redone only when pyproject.toml or setup.py change (a stamp holds their hash).
#   4. .venv-dbg: Debian's debug CPython (python3.11-dbg, sys.gettotalrefcount) with the torch-free
#      requirements, and _C built against its headers (_C.cpython-311d-x86_64-linux-gnu.so, beside
#      the release one) for scripts/test.sh's hunt-leaks stage. Skipped, with a message, where
#      python3.11-dbg is missing (TJC_SKIP_APT=1 on a machine without it).
#
# Environment:
#   TJC_SKIP_APT=1            skip step 1 (the packages are installed some other way)
#   TJC_PYTHONS="3.11 3.12"   set up only these Pythons (default: 3.11 3.12 3.13)
#   TJC_BUILD_TYPE, TJC_SANITIZE, TJC_JOBS, TJC_BUILD_TESTS   passed on to setup.py (see README.md)
#   TJC_ALLOW_TORCH_DOWNLOAD=1  let pip fetch torch from the registry instead of the wheel on disk
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

source scripts/common.sh
STEP="setup"
say() { printf '[%s] %s\n' "$STEP" "$*"; }
die() { printf '[%s] error: %s\n' "$STEP" "$*" >&2; exit 1; }
T0=$SECONDS
step() {  # step N TOTAL WHAT: the progress prefix of the lines that follow
  STEP="setup $1/$2 $(printf '%3ss' $((SECONDS - T0)))"
  say "$3"
}

DEMO=0
case ${1:-} in
  --demo) DEMO=1 ;;
  "") ;;
  *) die "unknown argument '$1' (usage: scripts/setup.sh [--demo])" ;;
esac
if ((DEMO)); then
  # The demo runs on 3.11 with torch; the C++ tests and the debug interpreter are the test suite's.
  PYTHONS=(3.11)
  export TJC_BUILD_TESTS=OFF TJC_SKIP_DBG=1
  APT_PACKAGES=(libabsl-dev)
else
  PYTHONS=(${TJC_PYTHONS:-3.11 3.12 3.13})
  export TJC_BUILD_TESTS=${TJC_BUILD_TESTS:-ON}
  APT_PACKAGES=(libabsl-dev libgtest-dev python3.11-dbg python3.11-dev)
fi
STEPS=5

requirements_file() {  # the requirement file for a Python version
  if [[ $1 == 3.11 ]]; then echo requirements-dev.txt; else echo requirements-runtime.txt; fi
}
is_version() {  # is_version PYTHON 3.11: does that interpreter run and have that version?
  "$1" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$2'.split('.'))))" 2>/dev/null
}

# --- 1. Debian packages --------------------------------------------------------------------------
step 1 $STEPS "Debian packages"
if [[ ${TJC_SKIP_APT:-0} == 1 ]]; then
  say "apt: skipped (TJC_SKIP_APT=1)"
else
  command -v dpkg-query >/dev/null ||
    die "dpkg-query not found: install ${APT_PACKAGES[*]} (or their equivalents) by hand and set TJC_SKIP_APT=1"
  missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null) == ii* ]] || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    say "apt: ${APT_PACKAGES[*]} already installed"
  else
    sudo=()
    if ((EUID != 0)); then
      command -v sudo >/dev/null || die "apt: need root to install ${missing[*]} (or set TJC_SKIP_APT=1)"
      sudo=(sudo -n)
    fi
    say "apt: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
fi

# --- 2. Virtual environments ---------------------------------------------------------------------
find_python() {  # find_python 3.11: print an interpreter of that version (pyenv first), or fail
  local version=$1 candidates=() prefix dir
  if command -v pyenv >/dev/null && prefix=$(pyenv prefix "$version" 2>/dev/null); then
    candidates+=("$prefix/bin/python$version")
  fi
  # Newest patch release first; only plain X.Y.Z folders (not 3.11.7-debug or 3.11t).
  while read -r dir; do
    [[ -n $dir ]] && candidates+=("$dir/bin/python$version")
  done < <(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".* 2>/dev/null |
             grep -E "/$version\.[0-9]+$" | sort -V -r)
  if command -v "python$version" >/dev/null; then candidates+=("$(command -v "python$version")"); fi
  for candidate in "${candidates[@]}"; do
    if [[ -x $candidate ]] && is_version "$candidate" "$version"; then
      echo "$candidate"
      return 0
    fi
  done
  return 1
}

# What must import in each environment before its stamp is trusted.
import_check() {
  if [[ $1 == 3.11 ]]; then
    echo "import torch, numpy, pybind11, bytecode, pytest, hypothesis, setuptools, cmake, ninja"
  else
    echo "import pybind11, bytecode, pytest, hypothesis, setuptools, cmake, ninja"
  fi
}

# torch comes from the CPU wheel on disk (pip's find-links; PIP_FIND_LINKS=/opt/wheels on this kind of
# machine) and never from the registry, whose torch==2.13.0 for Linux is a CUDA build of several GB:
# it is installed first with --no-index, so a missing wheel fails at once instead of downloading.
# The other requirements then find torch==2.13.0 satisfied and leave it alone.
install_torch_from_disk() {  # install_torch_from_disk VENV_PYTHON REQUIREMENT_FILE
  local pin
  pin=$(grep -E '^torch==' "$2") || die "$2 must pin torch with =="
  if [[ ${TJC_ALLOW_TORCH_DOWNLOAD:-0} == 1 ]]; then
    say "$venv: TJC_ALLOW_TORCH_DOWNLOAD=1: torch may come from the registry"
    return 0
  fi
  say "$venv: installing $pin from the wheel on disk (--no-index; about a minute)"
  "$1" -m pip install --quiet --progress-bar off --no-index --no-deps "$pin" ||
    die "no wheel for $pin on disk (pip's find-links, e.g. PIP_FIND_LINKS=/opt/wheels); refusing to download a CUDA torch of several GB. TJC_ALLOW_TORCH_DOWNLOAD=1 downloads anyway."
}

setup_venv() {  # setup_venv 3.11
  local version=$1 venv req python stamp want
  venv=$(venv_dir "$version")
  req=$(requirements_file "$version")
  python=$venv/bin/python
  if [[ -x $python ]] && is_version "$python" "$version"; then
    say "$venv: exists ($("$python" -c 'import sys; print(sys.version.split()[0])'))"
  else
    local base
    base=$(find_python "$version") ||
      die "no Python $version found (looked at \`pyenv prefix $version\`, ${PYENV_ROOT:-$HOME/.pyenv}/versions/$version.*, python$version on PATH)"
    say "$venv: creating with $base"
    rm -rf "$venv"
    "$base" -m venv "$venv"
  fi
  # The stamp names the requirement files' contents and the interpreter they were installed for.
  stamp=$venv/.tjc-requirements.sha256
  want=$({ cat requirements-runtime.txt "$req"; "$python" -c 'import sys; print(sys.version)'; } |
           sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(<"$stamp") == "$want" ]] && "$python" -c "$(import_check "$version")" 2>/dev/null; then
    say "$venv: requirements up to date ($req)"
    return 0
  fi
  [[ $version == 3.11 ]] && install_torch_from_disk "$python" "$req"
  say "$venv: installing $req (pip names each package as it goes)"
  # Not --quiet: on a fresh machine this downloads, and pip's "Collecting ..." lines are the progress.
  "$python" -m pip install --progress-bar off -r "$req" | grep -v '^Requirement already satisfied' || true
  [[ ${PIPESTATUS[0]} == 0 ]] || die "$venv: pip install -r $req failed (see above)"
  "$python" -c "$(import_check "$version")" || die "$venv: installed $req but the imports still fail"
  echo "$want" >"$stamp"
}

# --- 3. Build ------------------------------------------------------------------------------------
build() {  # build 3.11
  local venv
  venv=$(venv_dir "$1")
  say "$venv: building torch_jit_cache._C (setup.py build_ext --inplace; Ninja counts the steps, the first build takes a few minutes)"
  # The environment's bin/ goes first on PATH so that its cmake and ninja are the ones used.
  PATH="$ROOT/$venv/bin:$PATH" "$venv/bin/python" setup.py --quiet build_ext --inplace
  # The package checks at import that _C was built for this Python and this version.
  "${PY_ENV[@]}" "$venv/bin/python" -c "import torch_jit_cache" ||
    die "$venv: built, but \`import torch_jit_cache\` fails (see above)"
}

# --- 4. The package installed in .venv ----------------------------------------------------------
# Editable: the installed package is this checkout, so a rebuild (step 3) is seen at once. What pip
# writes (the import finder, the pytest11 entry point, `bytecode` as a dependency) depends only on
# pyproject.toml and setup.py; the stamp holds their hash and the checkout's path. --no-deps: the
# requirement files installed the dependencies, pinned; --no-build-isolation: an isolated build would
# fetch torch from the registry. The build pip runs is step 3's, found up to date.
install_editable() {  # install_editable 3.11
  local venv python stamp want
  venv=$(venv_dir "$1")
  python=$venv/bin/python
  stamp=$venv/.tjc-editable.sha256
  want=$({ cat pyproject.toml setup.py; echo "$ROOT"; } | sha256sum | cut -d' ' -f1)
  if [[ -f $stamp && $(<"$stamp") == "$want" ]] &&
     (cd / && "${PY_ENV[@]}" "$ROOT/$python" -c "import torch_jit_cache" 2>/dev/null); then
    say "$venv: torch_jit_cache installed (editable, $ROOT)"
    return 0
  fi
  say "$venv: installing torch_jit_cache (pip install --no-build-isolation --no-deps -e .)"
  PATH="$ROOT/$venv/bin:$PATH" "$python" -m pip install --quiet --progress-bar off \
    --no-build-isolation --no-deps -e . || die "$venv: pip install -e . failed (see above)"
  (cd / && "${PY_ENV[@]}" "$ROOT/$python" -c "import torch_jit_cache") ||
    die "$venv: installed, but \`import torch_jit_cache\` fails outside the checkout"
  echo "$want" >"$stamp"
}

step 2 $STEPS "virtual environments: ${PYTHONS[*]}"
for version in "${PYTHONS[@]}"; do
  case $version in 3.11 | 3.12 | 3.13) ;; *) die "TJC_PYTHONS: unsupported Python $version (3.11, 3.12, 3.13)" ;; esac
  setup_venv "$version"
done
step 3 $STEPS "build: ${PYTHONS[*]} (TJC_BUILD_TESTS=$TJC_BUILD_TESTS)"
for version in "${PYTHONS[@]}"; do
  build "$version"
done
step 4 $STEPS "the package installed in .venv"
if [[ " ${PYTHONS[*]} " == *" 3.11 "* ]]; then
  install_editable 3.11
else
  say ".venv: not set up in this run (TJC_PYTHONS=${PYTHONS[*]})"
fi

# --- 5. The debug interpreter ----------------------------------------------------------------------
# The build needs no change: setup.py hands CMake this interpreter, FindPython then picks its headers
# (/usr/include/python3.11d) and pybind11 its suffix (cpython-311d), and the build folder is
# build/py311d-<type>. Frame layout: 3.11.2's internal/pycore_frame.h, cpython/pystate.h and
# cpython/code.h are byte-identical to 3.11.7's, which csrc/cpython/ was checked against.
step 5 $STEPS "the debug interpreter (.venv-dbg)"
DBG_PYTHON=${TJC_DBG_PYTHON:-python3.11-dbg}
if [[ ${TJC_SKIP_DBG:-0} == 1 ]]; then
  say ".venv-dbg: skipped (TJC_SKIP_DBG=1)"
elif ! command -v "$DBG_PYTHON" >/dev/null ||
     ! "$DBG_PYTHON" -c "import sys; sys.exit(not hasattr(sys, 'gettotalrefcount'))" 2>/dev/null; then
  say ".venv-dbg: skipped: no debug CPython 3.11 ($DBG_PYTHON; Debian: apt-get install python3.11-dbg)"
else
  venv=.venv-dbg
  if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import sys; assert hasattr(sys, 'gettotalrefcount')" 2>/dev/null; then
    say "$venv: creating with $(command -v "$DBG_PYTHON")"
    rm -rf "$venv"
    "$DBG_PYTHON" -m venv "$venv"
  fi
  stamp=$venv/.tjc-requirements.sha256
  want=$({ cat requirements-runtime.txt; "$venv/bin/python" -c 'import sys; print(sys.version)'; } | sha256sum | cut -d' ' -f1)
  check="import pybind11, bytecode, pytest, hypothesis, setuptools, cmake, ninja"
  if [[ -f $stamp && $(<"$stamp") == "$want" ]] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    say "$venv: requirements up to date (requirements-runtime.txt)"
  else
    say "$venv: installing requirements-runtime.txt"
    # -W ignore: the debug build shows pip's own ResourceWarnings.
    "$venv/bin/python" -W ignore -m pip install --quiet --progress-bar off -r requirements-runtime.txt
    "$venv/bin/python" -c "$check" || die "$venv: installed requirements-runtime.txt but the imports still fail"
    echo "$want" >"$stamp"
  fi
  say "$venv: building torch_jit_cache._C against the debug headers"
  # No C++ test binary here: the gtest stages cover the release builds.
  PATH="$ROOT/$venv/bin:$PATH" TJC_BUILD_TESTS=OFF "$venv/bin/python" setup.py --quiet build_ext --inplace
  "$venv/bin/python" -c "import torch_jit_cache" || die "$venv: built, but \`import torch_jit_cache\` fails (see above)"
fi
say "done: ${PYTHONS[*]}$( ((DEMO)) && echo ' (demo set-up)')"
