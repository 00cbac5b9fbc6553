#!/usr/bin/env bash
# Prepares build/gpu-carry/ here, on the development machine, for scripts/gpu_check.sh on a lent GPU
# machine, which has Python 3.12, torch, CMake, ninja, pytest and hypothesis but no network, no abseil
# and no `bytecode` (/work/.library/device/KINDS.md lists its packages):
#   absl/            Debian 12's abseil, the version the project builds against: libabsl-dev (headers,
#                    CMake config) and libabsl20220623 (the shared libraries), `apt-get download` +
#                    `dpkg -x`; its CMake files find their prefix from their own place, so the folder
#                    works wherever it lands
#   python-include/  CPython 3.12's headers from this machine's 3.12 (pyenv's), which gpu_check.sh
#                    uses only where the GPU machine's python3 has no Python.h of its own
#   wheels/          the pure-Python packages missing there, at requirements-runtime.txt's pins:
#                    bytecode (the runtime's) and pybind11 (the build's; the image's may be older)
# Then prints the `carry` list to pass to the device tool's run. build/ is ignored by git; the folder
# is a few MB (the tool carries at most 64 MiB). Idempotent: rerun it to refresh the folder.
#
#   bash scripts/gpu_carry.sh        (needs apt-get and pip with network access; no root needed)
#
# Environment: TJC_CARRY_PYTHON   the Python whose pip downloads the wheels (default: .venv's, else python3)
#              TJC_CARRY_PY312    a Python 3.12 whose headers to carry (default: .venv-3.12's, else pyenv's)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CARRY=build/gpu-carry
say() { printf '[gpu_carry] %s\n' "$*"; }
die() { printf '[gpu_carry] error: %s\n' "$*" >&2; exit 1; }

ABSL_PACKAGES=(libabsl-dev libabsl20220623)
WHEELS=(bytecode pybind11)

rm -rf "$CARRY"
mkdir -p "$CARRY/debs" "$CARRY/absl" "$CARRY/wheels"

# --- abseil -------------------------------------------------------------------------------------
say "abseil: apt-get download ${ABSL_PACKAGES[*]}"
# apt-get download writes into the current folder; as root it warns that _apt cannot write there.
(cd "$CARRY/debs" && apt-get download "${ABSL_PACKAGES[@]}" 2> >(grep -v 'unsandboxed as root' >&2)) ||
  die "apt-get download ${ABSL_PACKAGES[*]} failed (is the Debian mirror reachable?)"
for deb in "$CARRY"/debs/*.deb; do
  dpkg -x "$deb" "$CARRY/absl"
done
config=$(find "$CARRY/absl" -name abslConfig.cmake -print -quit)
[[ -n $config ]] || die "no abslConfig.cmake in the extracted packages"
ls "$CARRY"/absl/usr/lib/x86_64-linux-gnu/libabsl_status.so.* >/dev/null 2>&1 ||
  die "no libabsl_status.so.* in the extracted packages"
rm -rf "$CARRY/debs" "$CARRY/absl/usr/share/doc"

# --- CPython 3.12's headers ---------------------------------------------------------------------
py312=${TJC_CARRY_PY312:-}
if [[ -z $py312 ]]; then
  for candidate in .venv-3.12/bin/python "$(pyenv prefix 3.12 2>/dev/null)/bin/python3.12" \
                   "$(command -v python3.12 || true)"; do
    if [[ -x $candidate ]]; then py312=$candidate; break; fi
  done
fi
[[ -n $py312 ]] || die "no Python 3.12 here to take headers from (set TJC_CARRY_PY312)"
include=$("$py312" -c "import sys, sysconfig; assert sys.version_info[:2] == (3, 12); print(sysconfig.get_paths()['include'])") ||
  die "$py312 is not a Python 3.12"
[[ -f $include/Python.h ]] || die "$include has no Python.h"
mkdir -p "$CARRY/python-include"
cp -r "$include" "$CARRY/python-include/python3.12"
"$py312" -c "import sys; print(sys.version.split()[0])" >"$CARRY/python-include/VERSION"

# --- wheels -------------------------------------------------------------------------------------
python=${TJC_CARRY_PYTHON:-}
if [[ -z $python ]]; then
  if [[ -x .venv/bin/python ]]; then python=.venv/bin/python; else python=python3; fi
fi
pins=()
for name in "${WHEELS[@]}"; do
  pin=$(grep -E "^$name==" requirements-runtime.txt) || die "requirements-runtime.txt does not pin $name"
  pins+=("$pin")
done
say "wheels: ${pins[*]} (pure Python, for CPython 3.12)"
"$python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform any -d "$CARRY/wheels" "${pins[@]}" ||
  die "pip download ${pins[*]} failed"

git check-ignore -q "$CARRY" || die "$CARRY is not ignored by git (.gitignore should hold /build/)"
say "$CARRY: $(du -sh "$CARRY" | cut -f1) (absl: $(basename "$(dirname "$config")"), python headers $(<"$CARRY/python-include/VERSION"), wheels: $(cd "$CARRY/wheels" && echo *))"
say "pass to the device tool's run:  carry: [\"$CARRY\"]   command: bash scripts/gpu_check.sh"
echo "[\"$CARRY\"]"
