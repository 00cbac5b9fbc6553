"""PyTorch's own Dynamo tests, case by case: tjc against torch.compile, each against eager.

Runs test files read from PyTorch's test/dynamo into the git-ignored folder .upstream/ (how to read
them in: docs/upstream_tests.md; upstream_files.py checks them against .upstream/MANIFEST.json).
Every compiled callable a test makes is a case (upstream_worker.py says how a case runs); per file
group the table gives, for tjc and for torch.compile (both backend "eager"): cases, wrong, crashed,
hung, captured whole; then the reasons, grouped, of the cases torch.compile captures whole and tjc
does not.

  whole (tjc)            every call: same result as eager, 0 graph breaks, 0 frames run uncompiled
                         (tjc.stats() graph_breaks and fallbacks; frames skipped by the trace rules
                         or for doing no tensor work count as neither)
  whole (torch.compile)  every call: same result as eager, no graph_break counted, every frame
                         Dynamo started converting counted ok (counters["frames"] total == ok)
  wrong                  a call returned another value than eager (or left its arguments different)
  crashed                a call raised where eager returned (or raised another type), or the
                         worker process died during the case
  hung                   the test passed the per-test timeout while the case ran

Usage: python benchmarks/upstream_tests.py [--files GLOB] [--jobs N] [--json OUT]
                                           [--compare OLD.json] [--timeout S] [--chunk N]
Without .upstream/ it prints "not fetched" and exits 0.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import fnmatch
import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path

_HERE = Path(__file__).resolve().parent
ROOT = _HERE.parent
UPSTREAM = ROOT / ".upstream"
WORKER = _HERE / "upstream_worker.py"

# The files, as globs under .upstream/test/dynamo (helper modules they import are not run).
FILES = ("_test_misc_part*.py", "_repros_part2.py", "_repros_part3.py", "test_ctx_manager.py",
         "test_exceptions.py", "test_dicts.py", "test_sets.py", "test_generator.py", "test_list.py") + tuple(
    f"cpython/3_13/test_{name}.py" for name in (
        "list", "dict", "set", "iter", "itertools", "functools", "operator", "collections", "contextlib",
        "exceptions", "generators", "raise", "sort", "math", "bool", "int", "float"))


def group_of(rel: str) -> str:
    name = Path(rel).stem
    if name.startswith("_test_misc_part"):
        return "misc"
    if name.startswith("_repros_part"):
        return "repros"
    return f"cpython/{name}" if "cpython" in rel else name


def test_files(root: Path, pattern: str | None) -> list:
    base = root / "test" / "dynamo"
    found = []
    for glob in FILES:
        for p in sorted(base.glob(glob)):
            rel = str(p.relative_to(base))
            if pattern and not fnmatch.fnmatch(rel, pattern) and not fnmatch.fnmatch(p.name, pattern):
                continue
            if rel not in found:
                found.append(rel)
    return found


# -- running workers ------------------------------------------------------------------------------
# The interpreter of the CPython suites' workers: they are CPython 3.13's own tests and import
# test.support helpers that 3.11 lacks (--cpython-python; by default the checkout's .venv-3.13).
PYTHONS = {"default": sys.executable, "cpython": sys.executable}


def _worker(root: Path, path: Path, mode: str, ids=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TJC_DISABLE_DISK_CACHE="1", OMP_NUM_THREADS="1")
    python = PYTHONS["cpython" if "cpython" in path.parts else "default"]
    proc = subprocess.Popen([python, str(WORKER), str(root), str(path), mode],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=env, cwd=str(path.parent))
    proc.stdin.write(json.dumps(ids or []).encode())
    proc.stdin.close()
    return proc


def _lines(proc, deadline_of):
    """The worker's JSON lines; yields ("timeout", None) when deadline_of() passes."""
    buf = b""
    fd = proc.stdout.fileno()
    while True:
        left = deadline_of() - time.monotonic()
        if left <= 0:
            yield "timeout", None
            return
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                yield "line", json.loads(line)
            except ValueError:
                continue


def run_file(root: Path, rel: str, chunk: int, timeout: float) -> dict:
    """Runs a file's tests, `chunk` to a worker: the first worker lists them and runs the first
    chunk. A worker that dies or passes the per-test timeout is replaced; its running test is
    marked (and the case it was in), and the tests after it go on in a new worker."""
    path = root / "test" / "dynamo" / rel
    cases, tests = {}, {}
    ids, error, todo = None, None, []
    while ids is None or todo:
        batch = todo[:chunk]
        proc = _worker(root, path, "first" if ids is None else "run", chunk if ids is None else batch)
        current, running, started = None, None, time.monotonic()
        kind = None
        # per test; the first worker's import and listing get 300 s
        for kind, msg in _lines(proc, lambda: started + (timeout if ids is not None else max(timeout, 300))):
            if kind == "timeout":
                break
            ev = msg.get("ev")
            if ev == "tests":
                ids, error = msg["tests"], msg.get("error")
                todo, batch = list(ids), ids[:chunk]
            elif ev == "start":
                current, running, started = msg["test"], None, time.monotonic()
            elif ev == "running":
                running = (msg["case"], msg["engine"])
            elif ev == "case":
                msg.pop("ev")
                msg["file"] = rel
                cases[(msg["test"], msg["case"])] = msg
            elif ev == "done":
                tests[msg["test"]] = {"outcome": msg["outcome"], "seconds": msg["seconds"],
                                      "detail": msg.get("detail", "")}
                current, running = None, None
        timed_out = kind == "timeout"
        if timed_out:
            proc.kill()
        rc = proc.wait()
        if ids is None:   # it died or hung before listing the tests
            ids, error = [], f"listing the tests failed (exit {rc})"
            break
        if current is None and rc != 0 and not timed_out:
            # died between tests: the next one of its batch is marked
            current = next((t for t in batch if t not in tests), None)
        if current is not None:
            status = "hung" if timed_out else "crashed"
            tests[current] = {"outcome": status, "seconds": round(time.monotonic() - started, 3),
                              "detail": f"worker {'timed out' if timed_out else f'exited {rc}'}"}
            if running is not None:
                # A case first recorded here died in its first call: the engines after it never ran.
                rec = cases.setdefault((current, running[0]), {
                    "test": current, "case": running[0], "kind": "?", "fn": "?", "calls": 1, "file": rel,
                    "tjc": {"status": "not run", "breaks": 0, "fallbacks": 0, "reasons": []},
                    "tc": {"status": "not run", "breaks": 0, "fallbacks": 0, "reasons": []}})
                rec[running[1]]["status"] = status
                rec[running[1]]["reasons"].append(f"process {'hung' if timed_out else f'died ({rc})'}")
        for t in batch:   # a worker that ended without a reason: its remaining tests are errors
            if t not in tests and current is None:
                tests[t] = {"outcome": "error", "seconds": 0, "detail": f"worker ended early (exit {rc})"}
        todo = [t for t in todo if t not in tests]
    return {"cases": list(cases.values()), "tests": tests, "listing": {"tests": len(ids), "error": error}}


# -- the report -----------------------------------------------------------------------------------
_NORMALISE = [
    (re.compile(r"0x[0-9a-f]+"), "0x?"),
    (re.compile(r"\bat [^\s:]+\.py:\d+"), "at <file>"),
    (re.compile(r"[\w./-]+\.py(:\d+)?"), "<file>"),
    (re.compile(r"<locals>\.[\w.]+"), "<locals>.<name>"),
    (re.compile(r"\b(test_\w+|[a-z]\w*\.<locals>)"), "<test>"),
    (re.compile(r"\(line \d+\)|line \d+"), "line N"),
    (re.compile(r"\b\d+(\.\d+)?\b"), "N"),
]


_INNER = re.compile(r"\b(\w+Variable|slice)\((?:[^()]|\([^()]*\))*\)")


def _fold(m) -> str:
    """Tracker(contents) -> Tracker(…), keeping the type an opaque or user object was of."""
    inner = m.group(0)[len(m.group(1)) + 1:]
    word = re.match(r"[A-Za-z_]\w*", inner)
    keep = word.group(0) if word and m.group(1) in _KEEP_TYPE else ""
    return f"{m.group(1)}({keep}…)"


_KEEP_TYPE = {"OpaqueVariable", "UserObjectVariable", "NewObjectVariable", "ClassVariable"}


def reason_group(reason: str) -> str:
    """A reason with the names and numbers of one place taken out, so one cause groups together
    (a tracker's contents too: ListVariable([...]) reads ListVariable(...))."""
    text = reason.split("\n")[0]
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    for _ in range(10):
        shorter = _INNER.sub(_fold, text)
        if shorter == text:
            break
        text = shorter
    return text[:200]


def summarise(cases: list, tests: dict) -> dict:
    groups = collections.OrderedDict()
    for c in cases:
        g = groups.setdefault(group_of(c["file"]), {"tests": 0, "cases": 0, "tjc": collections.Counter(),
                                                     "tc": collections.Counter(), "tc_only": 0})
        g["cases"] += 1
        for eng in ("tjc", "tc"):
            g[eng][c[eng]["status"]] += 1
        if c["tc"]["status"] == "whole" and c["tjc"]["status"] != "whole":
            g["tc_only"] += 1
    for tid, t in tests.items():
        g = groups.setdefault(group_of(t["file"]), {"tests": 0, "cases": 0, "tjc": collections.Counter(),
                                                     "tc": collections.Counter(), "tc_only": 0})
        g["tests"] += 1
    return {k: {"tests": v["tests"], "cases": v["cases"], "tjc": dict(v["tjc"]), "tc": dict(v["tc"]),
                "tc_only": v["tc_only"]} for k, v in groups.items()}


def table(groups: dict) -> list:
    head = (f"{'group':28} {'tests':>5} {'cases':>5} | {'tjc whole':>9} {'wrong':>5} {'crash':>5} {'hung':>4} | "
            f"{'tc whole':>8} {'wrong':>5} {'crash':>5} {'hung':>4} | {'tc-only':>7}")
    lines = [head, "-" * len(head)]
    total = {"tests": 0, "cases": 0, "tjc": collections.Counter(), "tc": collections.Counter(), "tc_only": 0}
    for name, g in list(groups.items()) + [("total", None)]:
        if g is None:
            g = total
        else:
            total["tests"] += g["tests"]
            total["cases"] += g["cases"]
            total["tjc"].update(g["tjc"])
            total["tc"].update(g["tc"])
            total["tc_only"] += g["tc_only"]
        j, t = g["tjc"], g["tc"]
        lines.append(f"{name:28} {g['tests']:5} {g['cases']:5} | {j.get('whole', 0):9} {j.get('wrong', 0):5} "
                     f"{j.get('crashed', 0):5} {j.get('hung', 0):4} | {t.get('whole', 0):8} {t.get('wrong', 0):5} "
                     f"{t.get('crashed', 0):5} {t.get('hung', 0):4} | {g['tc_only']:7}")
    return lines


def top_reasons(cases: list, n: int) -> list:
    """(count, sample test, reason group) for cases torch.compile captures whole and tjc does not."""
    groups = collections.Counter()
    sample = {}
    for c in cases:
        if c["tc"]["status"] != "whole" or c["tjc"]["status"] == "whole":
            continue
        reasons = c["tjc"]["reasons"] or [f"({c['tjc']['status']}, no reason recorded)"]
        for key in {reason_group(r) for r in reasons}:
            groups[key] += 1
            sample.setdefault(key, (c["test"], next(r for r in reasons if reason_group(r) == key)))
    return [(count, sample[key][0], key, sample[key][1]) for key, count in groups.most_common(n)]


def reasons_text(result: dict, n: int) -> str:
    """The top `n` reason groups of the cases torch.compile captures whole and tjc does not (count,
    a sample test, the group, one full reason), then every case tjc got wrong or crashed on."""
    lines = [f"Top {n} reason groups, cases torch.compile captures whole and tjc does not "
             "(count | sample test | reason group | one reason as recorded)"]
    for count, sample, key, reason in top_reasons(result["cases"], n):
        lines.append(f"{count:4} | {sample} | {key} | {reason.splitlines()[0][:300]}")
    lines += ["", "tjc wrong or crashed (file | test#case | tjc | torch.compile | last reason)"]
    for c in result["cases"]:
        if c["tjc"]["status"] in ("wrong", "crashed"):
            last = (c["tjc"]["reasons"] or [""])[-1].splitlines()
            lines.append(f"{c['file']} | {c['test']}#{c['case']} | {c['tjc']['status']} | {c['tc']['status']} | "
                         f"{(last[0] if last else '')[:300]}")
    return "\n".join(lines) + "\n"


def compare(old_path: str, new: dict) -> list:
    old = json.loads(Path(old_path).read_text())
    lines = ["", f"Compared with {old_path}:"]
    for name in sorted(set(old["groups"]) | set(new["groups"])):
        o, g = old["groups"].get(name), new["groups"].get(name)
        ow = o["tjc"].get("whole", 0) if o else 0
        nw = g["tjc"].get("whole", 0) if g else 0
        if ow != nw:
            lines.append(f"  {name}: tjc whole {ow} -> {nw}")
    before = {(c["test"], c["case"]): c["tjc"]["status"] for c in old["cases"]}
    for c in new["cases"]:
        was = before.get((c["test"], c["case"]))
        if was is not None and was != c["tjc"]["status"]:
            lines.append(f"  {c['test']}#{c['case']}: {was} -> {c['tjc']['status']}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", help="glob on the path under test/dynamo or the file name")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default=str(_HERE / "results" / "upstream.json"))
    ap.add_argument("--compare")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per test")
    ap.add_argument("--chunk", type=int, default=60, help="tests per worker process")
    ap.add_argument("--root", default=str(UPSTREAM), help=argparse.SUPPRESS)
    ap.add_argument("--reasons", type=int, default=40)
    ap.add_argument("--reasons-out", help="also write the reasons and the wrong/crashed cases to this file")
    ap.add_argument("--from-json", help="print the table of a saved result instead of running")
    ap.add_argument("--cpython-python", default=os.environ.get("TJC_UPSTREAM_CPYTHON_PYTHON"),
                    help="interpreter (3.13, with torch) for the cpython/3_13 suites")
    args = ap.parse_args(argv)
    default_313 = ROOT / ".venv-3.13" / "bin" / "python"
    PYTHONS["cpython"] = args.cpython_python or (str(default_313) if default_313.exists() else sys.executable)
    if args.from_json:
        result = json.loads(Path(args.from_json).read_text())
        print("\n".join(table(result["groups"])))
        if args.reasons_out:
            Path(args.reasons_out).write_text(reasons_text(result, args.reasons))
        if args.compare:
            print("\n".join(compare(args.compare, result)))
        return 0
    root = Path(args.root)
    if not (root / "test" / "dynamo").is_dir():
        print(f"upstream tests: not fetched ({root} is missing; docs/upstream_tests.md says how to read them in)")
        return 0
    files = test_files(root, args.files)
    cases, tests, listing = [], {}, {}
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {pool.submit(run_file, root, rel, args.chunk, args.timeout): rel for rel in files}
        for fut in concurrent.futures.as_completed(futures):
            rel = futures[fut]
            out = fut.result()
            listing[rel] = out["listing"]
            if out["listing"]["error"]:
                print(f"{rel}: import failed: {out['listing']['error'].strip().splitlines()[-1]}", file=sys.stderr)
            cases += out["cases"]
            for tid, t in out["tests"].items():
                tests[f"{rel}::{tid}"] = dict(t, file=rel)
            print(f"  {rel}: {len(out['tests'])} tests, {len(out['cases'])} cases "
                  f"({time.monotonic() - t0:.0f} s)", file=sys.stderr)
    cases.sort(key=lambda c: (c["file"], c["test"], c["case"]))
    groups = summarise(cases, tests)
    result = {"files": listing, "groups": groups, "cases": cases, "tests": tests,
              "seconds": round(time.monotonic() - t0, 1)}
    print("\n".join(table(groups)))
    reasons = top_reasons(cases, args.reasons)
    result["top_reasons"] = [{"count": c, "sample": s, "group": g, "reason": r} for c, s, g, r in reasons]
    if reasons:
        print(f"\nWhy tjc does not capture whole what torch.compile does ({len(reasons)} reason groups over "
              f"{sum(g['tc_only'] for g in groups.values())} cases):")
        for count, sample, key, _ in reasons:
            print(f"  {count:4}  {key}   [{sample}]")
    if args.compare:
        print("\n".join(compare(args.compare, result)))
    if args.reasons_out:
        Path(args.reasons_out).write_text(reasons_text(result, args.reasons))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1, default=repr))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
