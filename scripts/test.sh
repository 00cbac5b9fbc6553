#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then runs every test. Each stage below is there for what no
# other stage checks; the test files are split into tiers (tests/python/tiers.py, the one table) so
# that a stage runs only the tests whose result it can change:
#   gtest py3.X          the C++ core's GoogleTest binary built against each Python's headers (the frame
#                        layer, csrc/cpython/, differs per version); 3.11's is required once tests/cpp/
#                        has sources
#   pytest 3.11          every tier (core, versions, once), torch 2.13.0: the only stage that runs the
#                        version-neutral tests (backends, distributed, disk format, benchmarks' helpers,
#                        model scenarios), and it fails if a test file has no tier
#   pytest 3.12, 3.13    tiers core + versions: what each Python's bytecode, frame hook and the tracer's
#                        version tables change (the same tests as 3.11's on another interpreter)
#   install check 3.11   pip install of a wheel built from the checkout in a user's venv with torch and in
#                        a fresh one, and the installed package's smoke test there (check_install.sh)
#   hunt-leaks 3.11-dbg  the torch-free tests (-m "not torch") under Debian's debug CPython, each run
#                        3 warm-up + 3 measured times (scripts/hunt_leaks.py, like regrtest -R 3:3); a
#                        test whose reference or block count grows fails the stage. .venv-dbg has no
#                        torch (checked here and by setup.sh), so this is also the stage that proves the
#                        runtime (_C, runtime, guards, codegen) imports and works without torch; the
#                        pytest stages prove it with torch blocked (tests/python/test_torch_free.py).
#                        Skipped where setup.sh could not make .venv-dbg (no python3.11-dbg).
#   pytest torch 2.14    the core subset on torch 2.14.1 (.venv-torch2.14; see torch214_stage)
#   asan 3.11            a Debug build with AddressSanitizer + UBSan: the C++ tests and the core tier on
#                        3.11 (the C++ core and the tracer's calls into it, not the model scenarios); any
#                        sanitizer report fails (TJC_SANITIZER_STAGE=0 skips it)
# After set-up and the C++ tests, the stages run in two lanes at once (the machine has 2 cores and a
# pytest run keeps about one busy): LANE_A and LANE_B below. The sanitizer stages swap the in-tree 3.11
# modules for theirs, so every stage that imports the in-tree 3.11 package runs before them in their
# lane (LANE_A); LANE_B's stages use no in-tree 3.11 module (cpython-312/313/311d; the install check
# builds in build/install-check with venvs of its own).
# Each lane's lines are prefixed with its name. TJC_TEST_LANES=1 runs the lanes one after the other.
# Every stage runs even when an earlier one failed; the exit status is non-zero if any failed.
#
# Time: each stage has a budget (BUDGET below, seconds on CI's 2 cores; the run's target is 40
# minutes). Before each stage a lane checks that what it has left, at budget, still ends within
# TJC_TEST_WARN_AT (45 minutes); if not, it says so at once, loudly, and the summary shows an
# OVER-45MIN row (a warning: a run that fails lands nothing, so only TJC_TEST_LIMIT fails it). Every
# stage is cut at TJC_TEST_LIMIT, and one cut short fails. Every pytest stage prints its 30 slowest tests (--durations=30).
# The run ends with the last 40 lines of each failed stage's output (every stage's whole output is
# in build/test-results/logs/), then one line per stage with its time against its budget, and a
# total line: "total: N passed, N failed, N skipped".
#
#   bash scripts/test.sh                 everything
#   bash scripts/test.sh -k guards -x    extra arguments go to every pytest stage
#
# Environment: everything scripts/setup.sh reads (TJC_SKIP_APT, TJC_PYTHONS, TJC_BUILD_TYPE, ...), and
#   TJC_STAGE_TIMEOUT   seconds one test stage may run (default 1800)
#   TJC_TEST_LIMIT      seconds the whole run may take, set-up included (default 4800; CI allows 5400);
#                       a stage gets what is left, and one cut short counts as failed
#   TJC_TEST_WARN_AT    seconds past which the budget projection warns loudly (default 2700: 45 minutes)
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
LIMIT=${TJC_TEST_LIMIT:-${TJC_TEST_DEADLINE:-4800}}
TARGET=2400
WARN_AT=${TJC_TEST_WARN_AT:-2700}

# The time plan: seconds per stage on CI's 2 cores (two lanes at once after set-up) for a machine whose
# compiler cache is cold, below TARGET: set-up 800 + C++ tests 45 + the longer lane (A 1280 and a
# torch-version stage of about 200; B 1250) = 2325 s. pytest 3.11 is the tiers measured on 3.11 on a
# quiet machine (core 97 s, versions 143 s, once 438 s). Where ccache holds the builds (CI's machine, after any run of the set-up there)
# set-up, the sanitizer build and the install check take far less (docs/ci.md has the measurements).
# A stage of no row has no budget (0).
declare -A BUDGET=(
  [setup]=800
  ["gtest py3.11"]=15 ["gtest py3.12"]=15 ["gtest py3.13"]=15
  ["pytest 3.11"]=650 ["pytest torch 2.14"]=300
  ["asan build 3.11"]=420 ["asan gtest 3.11"]=30 ["asan pytest 3.11"]=180
  ["hunt-leaks 3.11-dbg"]=400
  ["pytest 3.12"]=320 ["pytest 3.13"]=250
  ["install check 3.11"]=280
)

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
  case $2 in PASS|SKIP|NO-TESTS|OVER-45MIN) ;; *) bad=1; ((failed == 0)) && failed=1 ;; esac
  # '|' separates the fields: a whitespace IFS would merge an empty COUNTS with its neighbours.
  printf '%s|%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$3" "$4" "$passed" "$failed" "$skipped" "$bad" \
    >>"$SUMMARY_DIR/$LANE"
}

# run_stage NAME XML KIND COMMAND...: runs COMMAND with a time limit; KIND says how pytest's exit 5
# (no tests collected) counts: "required" (a failure) or "optional" (a warning).
# time_left NAME: prints the seconds stage NAME may run (what is left of LIMIT, at most
# STAGE_TIMEOUT); fails, with the stage recorded as not run, when nothing is left.
time_left() {
  local limit=$((LIMIT - (SECONDS - START)))
  ((limit > STAGE_TIMEOUT)) && limit=$STAGE_TIMEOUT
  if ((limit <= 0)); then
    say "$1: not run, the run's time limit (${LIMIT}s) has passed" >&2
    record "$1" TIMEOUT "not run" 0
    return 1
  fi
  echo "$limit"
}

run_stage() {
  local name=$1 xml=$2 kind=$3 rc=0 status counts passed failed skipped t0=$SECONDS limit
  shift 3
  limit=$(time_left "$name") || return 0
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
  local elapsed=$((SECONDS - START))
  say "summary ($elapsed s in all; target ${TARGET} s, limit ${LIMIT} s):"
  local name status counts seconds passed failed skipped bad failures=0 budget over
  local total_passed=0 total_failed=0 total_skipped=0
  while IFS='|' read -r name status counts seconds passed failed skipped bad; do
    budget=${BUDGET[$name]:-0} over=""
    ((seconds > budget)) && over="  OVER BUDGET by $((seconds - budget)) s"
    say "  $(printf '%-22s %-8s %-40s %5ss of %4ss budget' "$name" "$status" "$counts" "$seconds" "$budget")$over"
    failures=$((failures + bad)) total_passed=$((total_passed + passed))
    total_failed=$((total_failed + failed)) total_skipped=$((total_skipped + skipped))
  done < <(cat "$SUMMARY_DIR"/[0-9]* 2>/dev/null)
  if ((elapsed > TARGET)); then
    say "the run took $elapsed s, over its ${TARGET} s target (stages over budget are marked above)"
  fi
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
# Every Python has torch (scripts/setup.sh checks torch==2.13.0 imports). Which tiers of tests/python
# each stage runs (tests/python/tiers.py says which tests are in each, and why):
declare -A PYTEST_TIERS=([3.11]=core,versions,once [3.12]=core,versions [3.13]=core,versions)
ASAN_TIERS=core
# What every pytest stage is given: the 30 slowest tests in its log, then the command line's arguments.
PYTEST_ARGS=(--durations=30 "$@")

pytest_stage() {  # pytest_stage VERSION: that Python's tiers, with torch
  local version=$1 venv xml
  venv=$(venv_dir "$version")
  xml=$RESULTS/pytest-py${version/./}.xml
  run_stage "pytest $version" "$xml" required \
    "${PY_ENV[@]}" "$venv/bin/python" -m pytest tests/python --tiers "${PYTEST_TIERS[$version]}" \
    --junitxml="$xml" "${PYTEST_ARGS[@]}"
}

# --- the package installed into a user's venv ------------------------------------------------------
# Guards what a user's own `pip install --no-build-isolation` does: the build in a venv that has only
# torch and the build tools, the wheel's contents and metadata, the entry point, the installed package
# working from an empty folder (scripts/check_install.sh; a few minutes).
install_stage() {
  run_stage "install check 3.11" "$RESULTS/install-check.xml" required \
    bash scripts/check_install.sh "$RESULTS/install-check.xml"
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
# Guards reference and memory-block leaks (a debug interpreter's counts) and the runtime without torch.
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
# build/py311-debug-asan) runs the C++ tests and the core tier on 3.11; any report fails the stage
# (UBSan is built with -fno-sanitize-recover). Guards memory errors and undefined behaviour in the C++
# core and in the tracer's calls into it; the other tiers reach the same C++ through the same calls.
# Its modules replace the release ones in torch_jit_cache/ for these stages; the release modules are
# copied back after the last. TJC_SANITIZER_STAGE=0 leaves them out.
ASAN_BUILT=0
asan_build_stage() {
  local t0=$SECONDS limit
  limit=$(time_left "asan build 3.11") || return 0
  if TJC_SKIP_APT=1 TJC_SKIP_DBG=1 TJC_SKIP_TORCH214=1 TJC_PYTHONS=3.11 TJC_BUILD_TYPE=Debug TJC_SANITIZE=ON \
     timeout --kill-after=30 "$limit" bash scripts/setup.sh; then
    ASAN_BUILT=1
    record "asan build 3.11" PASS "" $((SECONDS - t0))
  else
    record "asan build 3.11" FAIL "" $((SECONDS - t0))
    release_modules
  fi
}
asan_gtest_stage() {
  if ((!ASAN_BUILT)); then record "asan gtest 3.11" SKIP "no asan build" 0; return 0; fi
  local purelib
  purelib=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  run_stage "asan gtest 3.11" "$RESULTS/asan-gtest.xml" required \
    env "LSAN_OPTIONS=suppressions=$ROOT/scripts/lsan.supp:print_suppressions=0" PYTHONPATH="$ROOT:$purelib" \
    build/py311-debug-asan/tjc_cpp_tests --gtest_output="xml:$RESULTS/asan-gtest.xml"
}
asan_pytest_stage() {
  if ((!ASAN_BUILT)); then record "asan pytest 3.11" SKIP "no asan build" 0; return 0; fi
  run_stage "asan pytest 3.11" "$RESULTS/asan-pytest.xml" required \
    env "LD_PRELOAD=$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)" \
    "ASAN_OPTIONS=detect_leaks=0" .venv/bin/python -m pytest tests/python --tiers "$ASAN_TIERS" \
    --junitxml="$RESULTS/asan-pytest.xml" "${PYTEST_ARGS[@]}"
  release_modules
}
release_modules() {  # back to the release modules for whoever uses the tree next
  TJC_SKIP_APT=1 TJC_SKIP_DBG=1 TJC_SKIP_TORCH214=1 TJC_PYTHONS=3.11 bash scripts/setup.sh >/dev/null
}

# --- the lanes --------------------------------------------------------------------------------------
# A new stage is a function that records one stage (run_stage or record), a case line below, a row
# in BUDGET, and its name in LANE_A or LANE_B. A stage that imports the in-tree 3.11 package goes in
# LANE_A before the sanitizer stages; the lanes' budgets should stay about equal.
stage() {  # stage NAME: runs the stage of that name (the lanes below list them in their order)
  case $1 in
    "pytest torch 2.14") torch214_stage ;;
    "pytest "*) pytest_stage "${1#pytest }" ;;
    "hunt-leaks 3.11-dbg") hunt_leaks_stage ;;
    "install check 3.11") install_stage ;;
    "asan build 3.11") asan_build_stage ;;
    "asan gtest 3.11") asan_gtest_stage ;;
    "asan pytest 3.11") asan_pytest_stage ;;
    *) say "no stage named '$1'"; record "$1" FAIL "no such stage" 0 ;;
  esac
}

# run_lane NAME STAGE...: the stages one after the other. Before each, what the lane has left at
# budget is added to the time so far; past LIMIT, the run fails there and then, loudly (once per
# lane), instead of running into CI's own cut-off; the stages still run, each within what is left.
run_lane() {
  local lane=$1 i j left end warned=0
  shift
  local stages=("$@")
  for ((i = 0; i < ${#stages[@]}; i++)); do
    left=0
    for ((j = i; j < ${#stages[@]}; j++)); do left=$((left + ${BUDGET[${stages[j]}]:-0})); done
    end=$((SECONDS - START + left))
    if ((end > WARN_AT && !warned)); then
      warned=1
      say "TIME BUDGET: lane $lane is at $((SECONDS - START)) s with ${left} s of stages left (${stages[*]:i}): it would end near $end s, past ${WARN_AT} s (45 minutes). See the summary's budget column"
      record "budget, lane $lane" OVER-45MIN "ends near ${end} s > ${WARN_AT} s" 0
    fi
    stage "${stages[i]}"
  done
}

has_python() { [[ " ${PYTHONS[*]} " == *" $1 "* ]]; }
LANE_A=() LANE_B=()
if has_python 3.11; then
  LANE_A+=("pytest 3.11")
  if ((!SANITIZE)) && [[ ${TJC_SKIP_TORCH214:-0} != 1 ]]; then LANE_A+=("pytest torch 2.14"); fi
  if [[ ${TJC_SANITIZER_STAGE:-1} != 0 ]] && ((!SANITIZE)); then
    LANE_A+=("asan build 3.11" "asan gtest 3.11" "asan pytest 3.11")
  fi
fi
LANE_B+=("hunt-leaks 3.11-dbg")
for version in "${PYTHONS[@]}"; do
  if [[ $version != 3.11 ]]; then LANE_B+=("pytest $version"); fi
done
if has_python 3.11 && ((!SANITIZE)); then LANE_B+=("install check 3.11"); fi

lane_budget() {  # lane_budget STAGE...: the sum of their budgets
  local name sum=0
  for name; do sum=$((sum + ${BUDGET[$name]:-0})); done
  echo "$sum"
}
say "time plan: $((SECONDS - START)) s so far; lane A $(lane_budget "${LANE_A[@]}") s and lane B $(lane_budget "${LANE_B[@]}") s at budget; target ${TARGET} s, limit ${LIMIT} s"
if ((LANES > 1)); then
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  say "two lanes at once: A (${LANE_A[*]}) and B (${LANE_B[*]})"
  (LANE=2-lane-A; run_lane A "${LANE_A[@]}") 2>&1 | sed -u 's/^/[A] /' &
  pid_a=$!
  (LANE=3-lane-B; run_lane B "${LANE_B[@]}") 2>&1 | sed -u 's/^/[B] /' &
  pid_b=$!
  wait "$pid_a" || true
  wait "$pid_b" || true
else
  # One lane: its time left is both lanes' stages.
  (LANE=2-lane-A; run_lane "A then B" "${LANE_A[@]}" "${LANE_B[@]}")
fi

finish
