#!/usr/bin/env bash
# Checks that torch_jit_cache installs into a user's own virtual environment, as docs/usage.md says:
#
#   1. a "user" venv that already has torch==2.13.0 (from the wheel on disk) and the build tools:
#      `pip wheel --no-build-isolation --no-deps <checkout>` builds the package into a wheel (the
#      build `pip install --no-build-isolation <checkout>` runs: pip builds a wheel and installs it);
#   2. the same venv: that wheel installs, with the `test` extra;
#   3. a fresh venv with torch==2.13.0: the same wheel installs (its declared dependencies from the
#      registry, with the `test` extra for pytest);
#   4. in each venv, from an empty folder: tests/install/test_installed_package.py under
#      `python -m pytest --refleaks` (the installed package is imported, compiles and hits, _C_torch
#      is there, the dependencies are declared, the pytest11 plugin is discovered).
# One build serves both installs (it used to be built twice, once per command).
#
#   bash scripts/check_install.sh [JUNIT_XML]
#
# The venvs, the wheel and the CMake build folder live in build/install-check/ (the venvs are made
# anew each run, so their headers are new and the build is a full one: about 3 minutes on 2 cores,
# seconds where ccache holds it: the paths under the checkout reach ccache relative, so another
# clone's or an earlier run's install check hits);
# the smoke tests run in a temporary folder outside the checkout. Needs what scripts/setup.sh --demo sets up (.venv
# for the Python, abseil for the build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
XML=${1:-}
WORK=$ROOT/build/install-check
source scripts/common.sh
find_ccache
T0=$SECONDS
say() { printf '[install-check %3ss] %s\n' $((SECONDS - T0)) "$*"; }
die() { printf '[install-check] error: %s\n' "$*" >&2; exit 1; }

[[ -x .venv/bin/python ]] || die ".venv is missing: run scripts/setup.sh --demo first"
BASE=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
TORCH_PIN=$(grep -E '^torch==' requirements-dev.txt) || die "requirements-dev.txt must pin torch with =="
# The build tools a user installs beside torch, at the versions the project's set-up pins.
BUILD_PINS=($(grep -E '^(setuptools|wheel|pybind11|cmake|ninja)==' requirements-runtime.txt))

rm -rf "$WORK/user-venv" "$WORK/fresh-venv" "$WORK/wheelhouse"
mkdir -p "$WORK/wheelhouse"
# The smoke tests run outside the checkout, where no pyproject.toml or conftest of ours is found.
RUN=$(mktemp -d -t tjc-install-check.XXXXXX)
trap 'rm -rf "$RUN"' EXIT

new_venv() {  # new_venv DIR: a venv with torch from the wheel on disk (never the registry's CUDA build)
  "$BASE" -m venv "$1"
  "$1/bin/python" -m pip install --quiet --progress-bar off --no-index --no-deps "$TORCH_PIN" ||
    die "no wheel for $TORCH_PIN on disk (pip's find-links); refusing to download another torch"
  # Then torch's own dependencies (typing_extensions, sympy, ...): torch is satisfied and stays.
  "$1/bin/python" -m pip install --quiet --progress-bar off "$TORCH_PIN"
}

smoke() {  # smoke VENV NAME: the installed-package tests, run from an empty folder
  local dir=$RUN/$2
  mkdir -p "$dir"
  cp tests/install/test_installed_package.py "$dir/"
  say "$2: python -m pytest --refleaks test_installed_package.py (in $dir)"
  # TJC_DISABLE_DISK_CACHE: the smoke test counts traces, and must not load what a previous check
  # left in ~/.cache/torch_jit_cache (nor write there).
  (cd "$dir" && env -u PYTHONPATH TJC_DISABLE_DISK_CACHE=1 "$1/bin/python" -m pytest --refleaks -p no:cacheprovider -q \
     --rootdir "$dir" test_installed_package.py --junitxml="$RUN/$2.xml")
}

say "user venv: $TORCH_PIN from the wheel on disk, then ${BUILD_PINS[*]}"
new_venv "$WORK/user-venv"
"$WORK/user-venv/bin/python" -m pip install --quiet --progress-bar off "${BUILD_PINS[@]}"

export TJC_BUILD_DIR=$WORK/build TJC_BUILD_TESTS=OFF
say "user venv: pip wheel --no-build-isolation --no-deps $ROOT (ccache: ${TJC_CCACHE:-none})"
PATH="$WORK/user-venv/bin:$PATH" "$WORK/user-venv/bin/python" -m pip wheel --quiet --progress-bar off \
  --no-build-isolation --no-deps -w "$WORK/wheelhouse" "$ROOT"
wheel=$(ls "$WORK"/wheelhouse/torch_jit_cache-*.whl) || die "pip wheel made no wheel"
say "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"

say "user venv: pip install the wheel, with the test extra"
"$WORK/user-venv/bin/python" -m pip install --quiet --progress-bar off "$wheel[test]"
smoke "$WORK/user-venv" user-venv

say "fresh venv: $TORCH_PIN from the wheel on disk, then the wheel with its dependencies"
new_venv "$WORK/fresh-venv"
"$WORK/fresh-venv/bin/python" -m pip install --quiet --progress-bar off "$wheel[test]"
smoke "$WORK/fresh-venv" fresh-venv
if [[ -n $XML ]]; then  # one JUnit report for scripts/test.sh: both runs' suites under one root
  "$WORK/fresh-venv/bin/python" - "$XML" "$RUN"/{user,fresh}-venv.xml <<'PY'
import sys
import xml.etree.ElementTree as ET

root = ET.Element("testsuites")
for path in sys.argv[2:]:
    tree = ET.parse(path).getroot()
    root.extend(tree.iter("testsuite"))
ET.ElementTree(root).write(sys.argv[1])
PY
fi
rm -rf "$WORK/user-venv" "$WORK/fresh-venv"  # about 2 GB; kept only when a step failed, to look into
say "passed: the checkout's wheel built in a user's venv, installed there and in a fresh one"
