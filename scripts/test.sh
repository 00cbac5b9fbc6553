#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs every test:
#   gtest py3.X          the GoogleTest binary of each Python's build (3.11's is required once
#                        tests/cpp/ has sources)
#   pytest 3.X (torch)   tests/python, all of it, with torch 2.13.0, on 3.11, 3.12 and 3.13 (no tests
#                        collected = failure)
#   install check 3.11   pip install / pip wheel of the checkout into new venvs with torch, and the
#                        installed package's smoke test there (scripts/check_install.sh)
#   hunt-leaks 3.11-dbg  the torch-free tests (-m "not torch") under Debian's debug CPython, each run
#                        3 warm-up + 3 measured times (scripts/hunt_leaks.py, like regrtest -R 3:3); a
#                        test whose reference or block count grows fails the stage. .venv-dbg has no
#                        torch (checked here and by setup.sh), so this is also the stage that proves the
#                        runtime (_C, runtime, guards, codegen) imports and works without torch; the
#                        pytest stages prove it with torch blocked (tests/python/test_torch_free.py).
#                        Skipped where setup.sh could not make .venv-dbg (no python3.11-dbg).
#   pytest torch 2.14    the core subset on torch 2.14.1 (.venv-torch2.14; see torch214_stage)
#   asan 3.11            a Debug build with AddressSanitizer + UBSan: the C++ tests and the 3.11 Python
#                        tests; any sanitizer report fails (TJC_SANITIZER_STAGE=0 skips it)
# After set-up and the C++ tests, the stages run in two lanes at once (the machine has 2 cores and a
# pytest run keeps about one busy): lane "3.11" runs pytest 3.11 and then the sanitizer stages, which
# swap the in-tree 3.11 modules for theirs; lane "3.12+" runs hunt-leaks, pytest 3.12, pytest 3.13 and
# the install check, which use no in-tree 3.11 module (cpython-312/313/311d; the install check builds
# in build/install-check with venvs of its own).
# Each lane's lines are prefixed with its name. TJC_TEST_LANES=1 runs the lanes one after the other.
# Every stage runs even when an earlier one failed; the exit status is non-zero if any failed.
# The run ends with the last 40 lines of each failed stage's output (every stage's whole output is
# in build/test-results/logs/), then one line per stage and a total line: "total: N passed, N
# failed, N skipped".
#
#   bash scripts/test.sh                 everything
#   bash scripts/test.sh -k guards -x    extra arguments go to every pytest stage
#
# Environment: everything scripts/setup.sh reads (TJC_SKIP_APT, TJC_PYTHONS, TJC_BUILD_TYPE, ...), and
#   TJC_STAGE_TIMEOUT   seconds one test stage may run (default 1800)
#   TJC_TEST_DEADLINE   seconds the whole run may take, set-up included (default 4800: CI allows 5400);
#                       a stage gets what is left, and one cut short counts as failed
#   TJC_TEST_LANES      2 (default): the two lanes run at once; 1: one after the other
#   OMP_NUM_THREADS     torch's threads per test process (default 1 while two lanes run: two processes
#                       of 2 spinning OpenMP threads each on 2 cores slow both down)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
START=$SECONDS

say() { printf '[test] %s\n' "$*"; }

PYTHONS=(${TJC_PYTHONS:-3.11 3.12 3.13})
BUILD_TYPE=${TJC_BUILD_TYPE:-Release}
BUILD_TYPE=${BUILD_TYPE,,}
source scripts/common.sh
((SANITIZE)) && BUILD_TYPE+=-asan
RESULTS=$ROOT/build/test-results
STAGE_TIMEOUT=${TJC_STAGE_TIMEOUT:-1800}
DEADLINE=${TJC_TEST_DEADLINE:-4800}

LANES=${TJC_TEST_LANES:-2}
# Stages record into one file per lane (a lane runs in a subshell of its own); finish reads them all.
SUMMARY_DIR=$(mktemp -d -t tjc-test-summary.XXXXXX)
trap 'rm -rf "$SUMMARY_DIR"' EXIT
LANE=0-setup         # the file the next record goes to

# record NAME STATUS COUNTS SECONDS [PASSED FAILED SKIPPED]: one stage's line. A stage whose STATUS
# is not PASS/SKIP/NO-TESTS counts as failed; one that failed without a failing test in its report (a
# crash, a timeout, no tests) still counts once in the total.
record() {
  local passed=${5:-0} failed=${6:-0} skipped=${7:-0} bad=0
  case $2 in PASS|SKIP|NO-TESTS) ;; *) bad=1; ((failed == 0)) && failed=1 ;; esac
  # '|' separates the fields: a whitespace IFS would merge an empty COUNTS with its neighbours.
  printf '%s|%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$passed" "$failed" "$skipped" "$bad" \
    >>"$SUMMARY_DIR/$LANE"
}

# run_stage NAME XML KIND COMMAND...: runs COMMAND with a time limit; KIND says how pytest's exit 5
# (no tests collected) counts: "required" (a failure) or "optional" (a warning).
run_stage() {
  local name=$1 xml=$2 kind=$3 rc=0 status counts passed failed skipped t0=$SECONDS limit
  shift 3
  limit=$((DEADLINE - (SECONDS - START)))
  ((limit > STAGE_TIMEOUT)) && limit=$STAGE_TIMEOUT
  if ((limit <= 0)); then
    say "$name: not run, the run's deadline (${DEADLINE}s) has passed"
    record "$name" TIMEOUT "not run" 0
    return 0
  fi
  say "$name: $(printf '%q ' "$@")"
  rm -f "$xml"
  # The stage's output goes to the lane as it comes and to a log; a failed stage's last lines are
  # repeated in the summary (a CI report keeps only the end of the output). PYTHONFAULTHANDLER: a
  # Python that dies of a signal prints every thread's traceback first.
  local log=$RESULTS/logs/${name//[^A-Za-z0-9.+-]/_}.log
  mkdir -p "$RESULTS/logs"
  set +e
  PYTHONFAULTHANDLER=1 timeout --kill-after=30 "$limit" "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  if [[ -f $xml ]]; then
    counts=$("$ROOT/.venv/bin/python" scripts/junit_summary.py "$xml" 2>/dev/null ||
             python3 scripts/junit_summary.py "$xml")
  else
    counts="0 passed, 0 failed, 0 skipped"
  fi
  read -r passed _ failed _ skipped _ <<<"${counts//,/}"
  if ((rc == 0)); then
    status=PASS
  elif ((rc == 5)) && [[ $kind == optional ]]; then
    status=NO-TESTS
    say "$name: no tests collected (pytest exit 5); counted as a warning for this stage"
  else
    if ((rc == 124 || rc == 137)); then status=TIMEOUT; else status="FAIL($rc)"; fi
    ((rc == 5)) && say "$name: no tests collected (pytest exit 5): this stage must run tests"
    [[ -f $xml ]] || say "$name: exit status $rc and no report ($xml): it died before pytest's end"
    printf '%s\n' "$log" >>"$SUMMARY_DIR/failed-logs"
  fi
  record "$name" "$status" "$counts" $((SECONDS - t0)) "$passed" "$failed" "$skipped"
}

finish() {
  # A failed stage's last lines first, so that the summary stays the end of the output.
  local log
  while read -r log; do
    echo
    say "the last 40 lines of $log:"
    tail -n 40 "$log" | sed 's/^/    /'
  done < <(cat "$SUMMARY_DIR/failed-logs" 2>/dev/null)
  echo
  say "summary ($((SECONDS - START))s in all):"
  local name status counts seconds passed failed skipped bad failures=0
  local total_passed=0 total_failed=0 total_skipped=0
  while IFS='|' read -r name status counts seconds passed failed skipped bad; do
    say "  $(printf '%-22s %-8s %-40s %5ss' "$name" "$status" "$counts" "$seconds")"
    failures=$((failures + bad)) total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed)) total_skipped=$((total_skipped + skipped))
  done < <(cat "$SUMMARY_DIR"/[0-9]* 2>/dev/null)
  if ((failures)); then say "FAILED: $failures stage(s)"; else say "all stages passed"; fi
  echo "total: $total_passed passed, $total_failed failed, $total_skipped skipped"
  if ((failures)); then exit 1; fi
  exit 0
}

# --- set-up --------------------------------------------------------------------------------------
t0=$SECONDS
if bash scripts/setup.sh; then
  record setup PASS "" $((SECONDS - t0))
else
  rc=$?
  record setup "FAIL($rc)" "" $((SECONDS - t0))
  finish
fi
mkdir -p "$RESULTS"
LANE=1-cpp

# --- C++ tests -----------------------------------------------------------------------------------
have_cpp_tests=0
if [[ ${TJC_BUILD_TESTS:-ON} != OFF && -n $(find tests/cpp -name '*.cpp' -print -quit 2>/dev/null) ]]; then
  have_cpp_tests=1
fi
for version in "${PYTHONS[@]}"; do
  tag=py${version/./}
  binary=build/$tag-$BUILD_TYPE/tjc_cpp_tests
  venv=$(venv_dir "$version")
  if ((have_cpp_tests)) && [[ -x $binary ]]; then
    # The binary embeds this Python; the package and the venv's site-packages go on its path.
    purelib=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
    run_stage "gtest py$version" "$RESULTS/gtest-$tag.xml" required \
      "${GTEST_ENV[@]}" env PYTHONPATH="$ROOT:$purelib${PYTHONPATH:+:$PYTHONPATH}" \
      "$binary" --gtest_output="xml:$RESULTS/gtest-$tag.xml"
  elif ((have_cpp_tests)) && [[ $version == 3.11 ]]; then
    say "gtest py$version: $binary was not built although tests/cpp/ has sources"
    record "gtest py$version" FAIL "binary missing" 0
  elif ((!have_cpp_tests)) && [[ $version == 3.11 ]]; then
    say "gtest: no C++ tests to run (tests/cpp/ has no sources, or TJC_BUILD_TESTS=OFF)"
    record "gtest" SKIP "no C++ tests" 0
  fi
done

# --- Python tests --------------------------------------------------------------------------------
# Every Python has torch (scripts/setup.sh checks torch==2.13.0 imports), so every stage runs all of
# tests/python, the torch tests included.
pytest_stages() {  # pytest_stages VERSION...: the whole suite on each
  local version venv xml
  for version in "$@"; do
    venv=$(venv_dir "$version")
    xml=$RESULTS/pytest-py${version/./}.xml
    run_stage "pytest $version (torch)" "$xml" required \
      "${PY_ENV[@]}" "$venv/bin/python" -m pytest tests/python --junitxml="$xml" "${PYTEST_ARGS[@]}"
  done
}


# --- the package installed into a user's venv ------------------------------------------------------
# pip install --no-build-isolation <checkout> into a venv with torch, pip wheel, the wheel into a fresh
# venv, and the installed-package smoke test in each (scripts/check_install.sh; a few minutes).
install_stage() {
  if [[ " ${PYTHONS[*]} " == *" 3.11 "* ]] && ((!SANITIZE)); then
    run_stage "install check 3.11" "$RESULTS/install-check.xml" required \
      bash scripts/check_install.sh "$RESULTS/install-check.xml"
  fi
}

# --- torch 2.14.1 ----------------------------------------------------------------------------------
# The one stage on the newest torch pyproject.toml declares (torch>=2.13,<2.15; every other stage has
# 2.13.0): TORCH_CORE_TESTS (scripts/common.sh: the model zoo, compile, dynamic shapes, graph breaks,
# fake tensors, the disk cache, the distributed pair, and test_torch_compat.py, which resolves every
# private torch name the package reads) in .venv-torch2.14, with _C/_C_torch built for 2.14.1
# (scripts/setup.sh step 7). Those modules have the in-tree 3.11 modules' names, so the stage runs in
# build/torch2.14/tree, a fresh copy of the checkout with them in place: no other stage's
# modules are touched, and it runs beside any stage.
torch214_stage() {
  local tree=build/torch2.14/tree modules=build/py311-release-torch2.14/modules
  if [[ ! -x .venv-torch2.14/bin/python ]] || ! compgen -G "$modules/_C_torch.cpython-311-*.so" >/dev/null ||
     ((SANITIZE)); then
    say "pytest torch 2.14: skipped: no .venv-torch2.14 with _C_torch built for it (TJC_SKIP_TORCH214=1?)"
    record "pytest torch 2.14" SKIP "no .venv-torch2.14" 0
    return 0
  fi
  rm -rf "$tree" && mkdir -p "$tree"
  # Everything a test may read from the checkout (README.md, csrc/, the requirement files); not the
  # build folders, venvs or .upstream.
  find . -mindepth 1 -maxdepth 1 ! -name build ! -name '.venv*' ! -name .upstream ! -name .git \
    -exec cp -r {} "$tree/" \;
  rm -f "$tree"/torch_jit_cache/*.so && cp "$modules"/_C*.cpython-311-*.so "$tree/torch_jit_cache/"
  run_stage "pytest torch 2.14" "$RESULTS/pytest-torch214.xml" required \
    env -C "$tree" "$ROOT/.venv-torch2.14/bin/python" -m pytest "${TORCH_CORE_TESTS[@]}" \
    --junitxml="$RESULTS/pytest-torch214.xml" "${PYTEST_ARGS[@]}"
}

# --- hunt-leaks under the debug interpreter ----------------------------------------------------------
hunt_leaks_stage() {
  if [[ -x .venv-dbg/bin/python ]] &&
     .venv-dbg/bin/python -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"; then
    # The stage that shows the runtime needs no torch must not have one (setup.sh refuses it too).
    say "hunt-leaks 3.11-dbg: .venv-dbg has torch installed; it must stay torch-free (rm -rf .venv-dbg; rerun)"
    record "hunt-leaks 3.11-dbg" FAIL "torch in .venv-dbg" 0
  elif [[ -x .venv-dbg/bin/python ]] && ls torch_jit_cache/_C.cpython-311d-*.so >/dev/null 2>&1; then
    xml=$RESULTS/hunt-leaks-py311d.xml
    run_stage "hunt-leaks 3.11-dbg" "$xml" required \
      "${PY_ENV[@]}" .venv-dbg/bin/python scripts/hunt_leaks.py -R 3:3 tests/python -m "not torch" \
      --junitxml="$xml" "${PYTEST_ARGS[@]}"
  else
    say "hunt-leaks 3.11-dbg: skipped: no .venv-dbg with a debug build of _C (python3.11-dbg missing?)"
    record "hunt-leaks 3.11-dbg" SKIP "no python3.11-dbg" 0
  fi
}

# --- sanitizers -----------------------------------------------------------------------------------
# A Debug build with AddressSanitizer + UndefinedBehaviorSanitizer (its own folder,
# build/py311-debug-asan) runs the C++ tests and the 3.11 Python tests; any report fails the stage
# (UBSan is built with -fno-sanitize-recover). Its modules replace the release ones in
# torch_jit_cache/ for these stages; the release modules are copied back afterwards.
# TJC_SANITIZER_STAGE=0 skips them (they add a few minutes of build on 2 cores).
sanitizer_stages() {
  if [[ ${TJC_SANITIZER_STAGE:-1} != 0 && $SANITIZE == 0 ]] && [[ " ${PYTHONS[*]} " == *" 3.11 "* ]]; then
    t0=$SECONDS
    if TJC_SKIP_APT=1 TJC_SKIP_DBG=1 TJC_PYTHONS=3.11 TJC_BUILD_TYPE=Debug TJC_SANITIZE=ON bash scripts/setup.sh; then
      record "asan build 3.11" PASS "" $((SECONDS - t0))
      ASAN_GTEST_ENV=(env "LSAN_OPTIONS=suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0")
      ASAN_PY_ENV=(env "LD_PRELOAD=$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
                   "ASAN_OPTIONS=detect_leaks=0")
      purelib=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
      run_stage "asan gtest 3.11" "$RESULTS/asan-gtest.xml" required \
        "${ASAN_GTEST_ENV[@]}" env PYTHONPATH="$ROOT:$purelib" \
        build/py311-debug-asan/tjc_cpp_tests --gtest_output="xml:$RESULTS/asan-gtest.xml"
      # Without the `heavy` tests (pyproject.toml's markers: minutes of model zoo and fuzzer in child
      # processes, cold then warm through the disk cache): this stage guards the C++ core and the
      # tracer's calls into it, which the other tests exercise, the disk cache's C++ guard states
      # included; the release stages run the heavy ones on every Python.
      run_stage "asan pytest 3.11" "$RESULTS/asan-pytest.xml" required \
        "${ASAN_PY_ENV[@]}" .venv/bin/python -m pytest tests/python -m "not heavy" --junitxml="$RESULTS/asan-pytest.xml" \
        "${PYTEST_ARGS[@]}"
    else
      record "asan build 3.11" FAIL "" $((SECONDS - t0))
    fi
    # Back to the release modules for whoever uses the tree next.
    TJC_SKIP_APT=1 TJC_SKIP_DBG=1 TJC_PYTHONS=3.11 bash scripts/setup.sh >/dev/null
  fi
}

# --- the two lanes ----------------------------------------------------------------------------------
PYTEST_ARGS=("$@")
LATER=()
for version in "${PYTHONS[@]}"; do
  if [[ $version != 3.11 ]]; then LATER+=("$version"); fi
done
lane_311() {
  LANE=2-lane-3.11
  if [[ " ${PYTHONS[*]} " == *" 3.11 "* ]]; then pytest_stages 3.11; fi
  sanitizer_stages
}
lane_later() {
  LANE=3-lane-3.12+
  # Hunt-leaks first: beside pytest 3.11 rather than the sanitizer run (in the run of 2026-11-26 it
  # died beside the sanitizer run, exit 1 and no report; alone and beside pytest 3.11 it passes).
  hunt_leaks_stage
  pytest_stages "${LATER[@]}"
  install_stage
  torch214_stage
}
if ((LANES > 1)); then
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  say "two lanes at once: 3.11 (pytest, sanitizers) and 3.12+ (hunt-leaks, pytest ${LATER[*]}, install check)"
  (lane_311) 2>&1 | sed -u 's/^/[3.11] /' &
  pid_311=$!
  (lane_later) 2>&1 | sed -u 's/^/[3.12+] /' &
  pid_later=$!
  wait "$pid_311" || true
  wait "$pid_later" || true
else
  (lane_311)
  (lane_later)
fi

finish
