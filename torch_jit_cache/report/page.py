"""The report page: one self-contained HTML document (inline CSS and JS, no fetch) from the processes
model.py read. Every value from the trace is escaped; the page holds everything without its script.

Layout, per process (several side by side, one column each): a summary (counts and compile time by
stage), a timeline of compiles per frame, then per frame its source with each break marked at its
line and the reason beside it, and its compiles: what triggered each (the guard that failed, linked
to the entry it failed in, and highlighted in that entry's guards), stage timings, the break and
resume functions, guards and graph code (collapsible).
"""
from __future__ import annotations

import datetime
import html

from . import assets
from .model import Frame, Process, failing_guard_lines

_RESULT_CLASS = {"entry": "t-first", "no graph": "t-first", "loaded": "t-loaded", "fallback": "t-fallback",
                 "skip": "t-skip", "error": "t-fallback", "interrupted": "t-fallback"}


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def render(procs: list, title: str = "") -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    n_frames = sum(len(p.frames) for p in procs)
    columns = f"repeat({max(1, len(procs))}, minmax({'560px' if len(procs) > 1 else '0'}, 1fr))"
    body = "".join(_process(p, i) for i, p in enumerate(procs)) or \
        "<section class='proc card'>No trace files (tjc_trace*.jsonl) found.</section>"
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>torch_jit_cache compile report{': ' + esc(title) if title else ''}</title>"
        f"<style>{assets.CSS}</style></head>\n<body>\n"
        "<header><h1>torch_jit_cache compile report</h1>"
        f"<span class='meta'>{len(procs)} process{'es' if len(procs) != 1 else ''} &middot; "
        f"{n_frames} frames &middot; made {esc(when)}</span>"
        "<input id='filter' type='search' placeholder='filter frames by name' aria-label='filter frames'>"
        "<span class='meta' id='shown'></span>"
        "<button id='expand' type='button'>expand all</button><button id='collapse' type='button'>collapse all</button>"
        "</header>\n"
        f"<main class='procs' style='grid-template-columns: {columns}'>\n{body}</main>\n"
        f"<script>{assets.JS}</script>\n</body></html>\n"
    )


def _process(proc: Process, index: int) -> str:
    pid = f"p{index}"
    info = proc.info
    where = " &middot; ".join(esc(x) for x in (
        info.get("host"), f"Python {info.get('python')}" if info.get("python") else None,
        f"torch {info.get('torch')}" if info.get("torch") else None) if x)
    argv = proc.short(" ".join(info.get("argv") or []))
    parts = [f"<section class='proc' id='{pid}'>",
             f"<div class='card'><h2>{esc(proc.label)}</h2><div class='where'>{where}</div>"
             f"<div class='where'>{esc(argv)}</div>",
             _summary(proc), "</div>",
             _timeline(proc, pid),
             _events(proc)]
    parts += [_frame(proc, frame, pid, n) for n, frame in enumerate(proc.frames.values())]
    if proc.skipped:
        parts.append(f"<div class='card'>{proc.skipped} unreadable or newer-format lines skipped in "
                     f"{esc(proc.path)}</div>")
    parts.append("</section>\n")
    return "".join(parts)


def _summary(proc: Process) -> str:
    s = proc.summary()
    stats = [("frames", s["frames"], False), ("graphs", s["graphs"], False),
             ("graph breaks", s["graph_breaks"], s["graph_breaks"] > 0),
             ("recompiles", s["recompiles"], s["recompiles"] > 0), ("fallbacks", s["fallbacks"], s["fallbacks"] > 0),
             ("cache-limit hits", s["cache_limit_hits"], s["cache_limit_hits"] > 0),
             ("compile time", f"{s['compile_seconds']:.2f} s", False)]
    cards = "".join(f"<div class='stat{' warn' if warn else ''}' data-stat='{esc(name)}'><b>{esc(value)}</b>"
                    f"<span>{esc(name)}</span></div>" for name, value, warn in stats)
    stages = sorted(proc.stage_seconds().items(), key=lambda kv: -kv[1])
    top = max((v for _, v in stages), default=0) or 1
    rows = "".join(f"<tr><td>{esc(name)}</td><td>{seconds * 1000:.1f} ms</td>"
                   f"<td class='bar'><i style='width:{100 * seconds / top:.1f}%'></i></td></tr>"
                   for name, seconds in stages)
    extra = ""
    if proc.stats:
        extra = "<details><summary>final tjc.stats()</summary><pre>" + esc(
            "\n".join(f"{k}: {v}" for k, v in proc.stats.items())) + "</pre></details>"
    else:
        extra = "<p class='stagesline'>No final counters: the process did not exit normally (or is running).</p>"
    return (f"<div class='cards'>{cards}</div>"
            f"<table class='stages' aria-label='compile time by stage'>{rows}</table>{extra}")


def _timeline(proc: Process, pid: str) -> str:
    begin = proc.start_time()
    span = (proc.end_time() - begin) or 1.0
    rows = []
    for n, frame in enumerate(proc.frames.values()):
        bars = []
        for c in frame.compiles:
            left = 100 * ((c.get("start") or 0) - begin) / span
            width = 100 * (c.get("seconds") or 0) / span
            kind = "t-recompile" if c.get("trigger", {}).get("kind") == "recompile" else \
                _RESULT_CLASS.get(c.get("result"), "t-first")
            tip = f"#{c.get('id')} {c.get('trigger', {}).get('kind')} at {c.get('start', 0):.3f} s, " \
                  f"{(c.get('seconds') or 0) * 1000:.1f} ms, {c.get('result')}"
            bars.append(f"<a class='{kind}' href='#{pid}-c{esc(c.get('id'))}' title='{esc(tip)}' "
                        f"style='left:{min(left, 99.5):.2f}%;width:{max(width, 0.4):.2f}%'></a>")
        for r in frame.fallbacks:
            left = 100 * ((r.get("time") or 0) - begin) / span
            bars.append(f"<a class='t-fallback' href='#{pid}-f{n}' title='{esc('fallback: ' + str(r.get('reason')))}' "
                        f"style='left:{min(left, 99.5):.2f}%;width:0.4%'></a>")
        rows.append(f"<div class='row'><span class='label' title='{esc(frame.name)}'>"
                    f"<a href='#{pid}-f{n}'>{esc(frame.name)}</a></span><div class='track'>{''.join(bars)}</div></div>")
    legend = "".join(f"<span><i class='{cls}'></i>{name}</span>" for name, cls in (
        ("first compile", "t-first"), ("recompile", "t-recompile"), ("loaded from disk", "t-loaded"),
        ("fallback", "t-fallback"), ("skipped: no tensor work", "t-skip")))
    return (f"<div class='card timeline'><h3>Timeline <span class='stagesline'>({begin:.2f} to {begin + span:.2f} s "
            f"after torch_jit_cache was imported)</span></h3><div class='legend'>{legend}</div>{''.join(rows)}</div>")


def _events(proc: Process) -> str:
    items = [f"<li>cache limit: {esc(proc.short(r.get('message')))}</li>" for r in proc.cache_limits]
    items += [f"<li>fallback: <code>{esc((r.get('frame') or {}).get('name'))}</code>: "
              f"<span class='reason'>{esc(proc.short(r.get('reason')))}</span></li>" for r in proc.fallbacks]
    items += [f"<li>fallback: <code>{esc((c.get('frame') or {}).get('name'))}</code> ran uncompiled: "
              f"<span class='reason'>{esc(proc.short(c.get('reason')))}</span></li>"
              for c in proc.compiles if c.get("result") in ("fallback", "error")]
    if not items:
        return ""
    return f"<div class='card events'><h3>Fallbacks and cache-limit hits</h3><ul>{''.join(items)}</ul></div>"


def _frame(proc: Process, frame: Frame, pid: str, n: int) -> str:
    breaks = frame.breaks_by_line()
    badges = f"<span class='badge'>{len(frame.compiles)} compile{'s' if len(frame.compiles) != 1 else ''}</span>"
    if frame.recompiles:
        badges += f"<span class='badge bad'>{frame.recompiles} recompile{'s' if frame.recompiles != 1 else ''}</span>"
    if breaks:
        badges += "<span class='badge brk'>graph break</span>"
    if frame.fallbacks or any(c.get("result") == "fallback" for c in frame.compiles):
        badges += "<span class='badge bad'>fallback</span>"
    parts = [f"<div class='card frame' id='{pid}-f{n}' data-name='{esc(frame.name)}'>",
             f"<h3>{esc(frame.name)}{badges}</h3>",
             f"<div class='where'>{esc(proc.short(frame.file))}:{esc(frame.line)}</div>",
             _source(proc, frame, breaks)]
    failed = _failures_by_entry(frame)
    parts += [_compile(proc, c, pid, failed.get(c.get("id"), [])) for c in frame.compiles]
    parts += [f"<div class='compile'><span class='reason'>ran uncompiled: {esc(r.get('reason'))}</span></div>"
              for r in frame.fallbacks]
    parts.append("</div>")
    return "".join(parts)


def _source(proc: Process, frame: Frame, breaks: dict) -> str:
    if frame.source is None:
        if not breaks:
            return ""
        items = "".join(f"<li>line {esc(line)}: <span class='reason'>{esc(proc.short(text))}</span> {_ids(ids)}</li>"
                        for line, found in sorted(breaks.items()) for text, ids in found.items())
        return f"<ul class='breaks'>{items}</ul>"
    rows = []
    for i, text in enumerate(frame.source):
        line = frame.line + i
        found = breaks.get(line)
        why = "<br>".join(f"{esc(proc.short(t))} {_ids(ids)}" for t, ids in found.items()) if found else ""
        cls = " class='brk'" if found else ""
        rows.append(f"<tr{cls} data-line='{line}'><td class='n'>{line}</td><td>{esc(text)}</td>"
                    f"<td class='why'>{why}</td></tr>")
    return f"<table class='src'>{''.join(rows)}</table>"


def _ids(ids) -> str:
    return "(compile " + ", ".join(f"#{esc(i)}" for i in ids) + ")"


def _failures_by_entry(frame: Frame) -> dict:
    """{entry's compile id: [(recompile id, failure text)]}: the guards that later recompiles of the
    frame found failing in each entry."""
    out: dict = {}
    for c in frame.compiles:
        for f in c.get("trigger", {}).get("failures") or ():
            out.setdefault(f.get("entry"), []).append((c.get("id"), f.get("guard") or ""))
    return out


def _compile(proc: Process, c: dict, pid: str, failed_here: list) -> str:
    trigger = c.get("trigger") or {}
    kind = trigger.get("kind", "?")
    head = (f"<div class='head'><b>#{esc(c.get('id'))} {esc(kind)}</b>"
            f"<span class='t'>at {c.get('start') or 0:.3f} s &middot; {(c.get('seconds') or 0) * 1000:.1f} ms "
            f"&middot; {esc(c.get('result'))}</span></div>")
    parts = [f"<div class='compile' id='{pid}-c{esc(c.get('id'))}' data-kind='{esc(kind)}'>", head]
    if trigger.get("failures"):
        items = []
        for f in trigger["failures"]:
            entry = f.get("entry")
            ref = f"<a href='#{pid}-c{esc(entry)}'>entry #{esc(entry)}</a>" if entry is not None else "an entry"
            items.append(f"<li>{ref} failed: <code class='failed-guard'>{esc(f.get('guard'))}</code></li>")
        parts.append(f"<ul class='failures'>{''.join(items)}</ul>")
    if c.get("reason"):
        parts.append(f"<div class='reason'>runs uncompiled: {esc(proc.short(c['reason']))}</div>")
    brk = c.get("break")
    if brk:
        where = f" at {esc(proc.short(brk.get('file')))}:{esc(brk.get('line'))}" if brk.get("file") else ""
        cut = f" (frame cut at line {esc(brk.get('frame_line'))})" if brk.get("frame_line") else ""
        parts.append(f"<div class='break'>graph break: <span class='reason'>{esc(brk.get('reason'))}</span>"
                     f"{where}{cut}</div>")
    if c.get("resume"):
        # Linked to the resume function's own frame (same file), where it was compiled.
        frames = {(f.name, f.file): i for i, f in enumerate(proc.frames.values())}
        file = (c.get("frame") or {}).get("file")
        parts.append("<div class='stagesline'>resume functions: " + ", ".join(
            f"<a href='#{pid}-f{frames[(r, file)]}'><code>{esc(r)}</code></a>" if (r, file) in frames else
            f"<code>{esc(r)}</code>" for r in c["resume"]) + "</div>")
    for event in c.get("disk_cache") or ():
        parts.append(f"<div class='stagesline'>disk cache {esc(event.get('action'))}: {esc(event.get('detail'))}</div>")
    if c.get("stages"):
        parts.append("<div class='stagesline'>" + " &middot; ".join(
            f"{esc(name)} {seconds * 1000:.1f} ms" for name, seconds in c["stages"]) + "</div>")
    if c.get("guards"):
        parts.append(_guards(c["guards"], failed_here))
    graph = c.get("graph")
    if graph:
        ops = ", ".join(graph.get("ops") or [])
        parts.append(f"<details class='graph'><summary>graph: {esc(graph.get('op_count'))} ops ({esc(ops)})</summary>"
                     f"<pre class='code'>{esc(graph.get('code'))}</pre></details>")
    parts.append("</div>")
    return "".join(parts)


def _guards(text: str, failed_here: list) -> str:
    """The guard tree, each line a span; the lines a later recompile found failing highlighted, with
    the failure in words beside them."""
    why: dict = {}
    for recompile, failure in failed_here:
        for i in failing_guard_lines(text, failure):
            why.setdefault(i, []).append(f"failed on #{recompile}: {failure}")
    spans = "".join(
        f"<span class='failed'>{esc(line)}<em class='why'> \u2190 {esc('; '.join(why[i]))}</em></span>" if i in why else
        f"<span>{esc(line)}</span>" for i, line in enumerate(text.splitlines()))
    opened = " open" if why else ""
    label = f"guards ({len(why)} line{'s' if len(why) != 1 else ''} failed later)" if why else "guards"
    return f"<details class='guards'{opened}><summary>{label}</summary><pre class='guards'>{spans}</pre></details>"
