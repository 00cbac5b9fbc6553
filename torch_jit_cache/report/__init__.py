"""The compile report: `python -m torch_jit_cache.report DIR [-o report.html]` renders the structured
trace a run wrote with TJC_TRACE_DIR=DIR (runtime/trace_log.py) as one self-contained HTML page.

    load(DIR) -> [Process]        model.py: the trace files read into processes, frames, compiles
    render([Process]) -> str      page.py: the page (inline CSS and JS, nothing fetched)
    main(argv) -> int             the command line

Imports only the standard library and trace_log (for the format version): it runs without torch.
"""
from __future__ import annotations

import argparse
import os
import sys

from .model import Frame, Process, failing_guard_lines, load
from .page import render

__all__ = ["Frame", "Process", "failing_guard_lines", "load", "render", "main"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m torch_jit_cache.report",
        description="Render the structured trace in DIR (written with TJC_TRACE_DIR=DIR) as one HTML page.")
    parser.add_argument("trace_dir", metavar="DIR", help="the folder of tjc_trace*.jsonl files (or one file)")
    parser.add_argument("-o", "--output", default="report.html", help="the page to write (default: report.html)")
    args = parser.parse_args(argv)
    if not os.path.exists(args.trace_dir):
        parser.error(f"{args.trace_dir}: no such file or folder")
    procs = load(args.trace_dir)
    if not procs:
        print(f"{args.trace_dir}: no tjc_trace*.jsonl files", file=sys.stderr)
        return 1
    page = render(procs, title=os.path.basename(os.path.abspath(args.trace_dir)))
    with open(args.output, "w", encoding="utf-8") as f:
        f.write(page)
    frames = sum(len(p.frames) for p in procs)
    print(f"wrote {args.output}: {len(procs)} process{'es' if len(procs) != 1 else ''}, {frames} frames")
    return 0
