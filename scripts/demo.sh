#!/usr/bin/env bash
# Sets up what the demo needs (scripts/setup.sh --demo: abseil, .venv with torch, one Release build,
# the package installed in .venv), then runs the demo with Python 3.11 and torch:
#   bash scripts/demo.sh [ARGS...]    (ARGS go to `python -m torch_jit_cache.demo`)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh --demo
if [[ ! -f torch_jit_cache/demo.py && ! -f torch_jit_cache/demo/__main__.py ]]; then
  echo "[demo] error: torch_jit_cache/demo.py does not exist in this checkout yet" >&2
  exit 1
fi
echo "[demo] .venv/bin/python -m torch_jit_cache.demo $*"
exec .venv/bin/python -m torch_jit_cache.demo "$@"
