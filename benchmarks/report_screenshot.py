"""The compile report's screenshot for docs/compile_report.md: runs torch_jit_cache/testing/report_sample.py (a
graph break and two recompiles), copied as train.py, with TJC_TRACE_DIR in a child process, renders
the page with `python -m torch_jit_cache.report`, and has headless Chromium save it as a PNG.

Usage: python benchmarks/report_screenshot.py [-o docs/images/report.png] [--keep DIR]
           [--width 1280] [--height 1500]
Needs Debian's `chromium` (scripts/setup.sh installs it).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default=str(ROOT / "docs" / "images" / "report.png"))
    parser.add_argument("--keep", help="write the trace and report.html into this folder (kept)")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1500)
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        print("chromium not found (Debian: apt-get install chromium; scripts/setup.sh installs it)", file=sys.stderr)
        return 1
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tjc_report_"))
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("tjc_trace*.jsonl"):
        old.unlink()
    env = {**os.environ, "TJC_TRACE_DIR": str(folder), "TJC_DISABLE_DISK_CACHE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    # Run as a user's script in its own folder: the page shows paths relative to it ("train.py:21").
    shutil.copy(ROOT / "torch_jit_cache" / "testing" / "report_sample.py", folder / "train.py")
    subprocess.run([sys.executable, "train.py"], env=env, cwd=folder, check=True, stdout=subprocess.DEVNULL)
    page = folder / "report.html"
    subprocess.run([sys.executable, "-m", "torch_jit_cache.report", str(folder), "-o", str(page)], env=env,
                   check=True)
    out = Path(args.output).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={args.width},{args.height}", f"--screenshot={out}", page.as_uri()],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=180)
    print(f"wrote {out} from {page}")
    if not args.keep:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
