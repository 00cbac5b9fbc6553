"""What the benchmark scripts share: best-of timing, the table's rule line, the JSON result file.

Each script is run directly (`python benchmarks/<script>.py`), so this folder is on sys.path.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

# tjc's on-disk cache is off for the benchmarks and the processes they start (a second run must
# measure what the first did, not load what it left in ~/.cache/torch_jit_cache), unless the
# environment says otherwise or a benchmark turns it on for its own children in their own folder
# (compile_time.py's process start rows).
os.environ.setdefault("TJC_DISABLE_DISK_CACHE", "1")
if "torch_jit_cache.config" in sys.modules and os.environ["TJC_DISABLE_DISK_CACHE"] == "1":
    sys.modules["torch_jit_cache.config"].config.disk_cache = False


def best_us(fn, x, repeat: int) -> float:
    """The fastest of `repeat` calls of fn(x), in microseconds."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(x)
        best = min(best, time.perf_counter() - t0)
    return best * 1e6


def print_head(head: str) -> None:
    print(head)
    print("-" * len(head))


def write_results(path, torch_version, **fields) -> None:
    """benchmarks/results/<name>.json: the Python and torch versions, then `fields`."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"python": platform.python_version(), "torch": torch_version, **fields},
                              indent=2))
    print(f"wrote {out}")


def options(doc: str, name: str, extra=None):
    """--quick (fewer calls, a smoke run) and --json (default benchmarks/results/<name>.json);
    `extra(parser)` adds a script's own options."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    parser.add_argument("--json", default=str(Path(__file__).parent / "results" / f"{name}.json"))
    if extra is not None:
        extra(parser)
    return parser.parse_args()


def run_json_child(cmd, env, what: str) -> dict:
    """Runs `cmd` (a variant of a script, in a fresh process) and returns the JSON object its last
    line of output prints; on failure prints its stderr's end and stops, naming `what`."""
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"{what} failed with exit code {done.returncode}")
    return json.loads(done.stdout.strip().splitlines()[-1])
