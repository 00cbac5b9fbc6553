"""The page's inline style sheet and script: the page opens from disk and fetches nothing.

The page is whole without the script (every frame, break, guard and graph is in the HTML); the
script adds the frame filter, the expand/collapse buttons and the jump from a timeline bar to its
compile, and marks `<body data-ready="1">` once it has run (what the browser test checks).
"""

CSS = """
:root { --fg:#1d2330; --muted:#667085; --line:#e3e7ee; --bg:#f7f8fa; --card:#fff; --brk:#fff1e6;
        --brk-edge:#f08c2e; --bad:#fde2e1; --bad-edge:#d92d20; --ok:#2e7d32; --accent:#3563e9; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
       background: var(--bg); }
header { padding: 12px 20px; background: #1d2330; color: #fff; display: flex; gap: 12px; align-items: center;
         flex-wrap: wrap; }
header h1 { font-size: 18px; margin: 0; font-weight: 600; }
header .meta { color: #c3cad8; font-size: 13px; }
header input { margin-left: auto; padding: 5px 9px; border-radius: 5px; border: 0; min-width: 180px; }
header button { padding: 5px 10px; border-radius: 5px; border: 0; background: #3a4458; color: #fff;
                cursor: pointer; }
main.procs { display: grid; gap: 16px; padding: 16px; align-items: start; }
section.proc { min-width: 0; }
h2 { font-size: 16px; margin: 0 0 10px; }
h3 { font-size: 15px; margin: 0; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 12px 14px;
        margin-bottom: 14px; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(105px, 1fr)); gap: 8px; }
.stat { background: var(--bg); border-radius: 6px; padding: 8px 10px; }
.stat b { display: block; font-size: 20px; }
.stat span { color: var(--muted); font-size: 12px; }
.stat.warn b { color: var(--bad-edge); }
table.stages { border-collapse: collapse; width: 100%; margin-top: 10px; font-size: 13px; }
table.stages td { padding: 2px 6px; white-space: nowrap; }
table.stages td.bar { width: 60%; }
.bar i { display: block; height: 10px; background: var(--accent); border-radius: 3px; min-width: 1px; }
.timeline .row { display: flex; align-items: center; gap: 8px; margin: 3px 0; }
.timeline .label { width: 200px; flex: none; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
                   font-family: ui-monospace, monospace; font-size: 12px; }
.timeline .track { position: relative; flex: 1; height: 16px; background: var(--bg); border-radius: 3px; }
.timeline .track a { position: absolute; top: 2px; height: 12px; border-radius: 2px; min-width: 4px; }
.t-first { background: var(--accent); } .t-recompile { background: var(--bad-edge); }
.t-loaded { background: var(--ok); } .t-fallback { background: #7a5af8; } .t-skip { background: #98a2b3; }
.legend span { display: inline-block; margin-right: 12px; font-size: 12px; color: var(--muted); }
.legend i { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
.frame { scroll-margin-top: 10px; }
.where { color: var(--muted); font-size: 12px; font-family: ui-monospace, monospace; }
.badge { display: inline-block; font-size: 11px; padding: 1px 7px; border-radius: 9px; background: var(--bg);
         border: 1px solid var(--line); margin-left: 6px; }
.badge.bad { background: var(--bad); border-color: var(--bad-edge); }
.badge.brk { background: var(--brk); border-color: var(--brk-edge); }
pre, table.src { font: 12px/1.45 ui-monospace, "SFMono-Regular", Menlo, monospace; }
pre { background: var(--bg); padding: 8px 10px; border-radius: 6px; overflow-x: auto; margin: 6px 0; }
table.src { border-collapse: collapse; width: 100%; margin: 8px 0; background: var(--bg); border-radius: 6px; }
table.src td { padding: 0 8px; vertical-align: top; white-space: pre; }
table.src td.n { color: var(--muted); text-align: right; width: 1%; user-select: none; }
table.src tr.brk td { background: var(--brk); }
table.src tr.brk td.n { border-left: 3px solid var(--brk-edge); }
table.src td.why { white-space: normal; color: #b54708; font-family: system-ui, sans-serif; width: 40%; }
.compile { border-top: 1px solid var(--line); padding: 8px 0; scroll-margin-top: 10px; }
.compile:target { background: #eef3ff; }
.compile .head { display: flex; gap: 10px; flex-wrap: wrap; align-items: baseline; }
.compile .head .t { color: var(--muted); font-size: 12px; }
ul.failures { margin: 4px 0; padding-left: 18px; }
ul.failures li { color: var(--bad-edge); }
ul.failures code { color: var(--fg); }
pre.guards { max-height: 340px; overflow: auto; }
pre.guards span { display: block; }
pre.guards span.failed { background: var(--bad); box-shadow: inset 3px 0 var(--bad-edge); }
pre.guards em.why { color: var(--bad-edge); font-style: normal; font-family: system-ui, sans-serif; }
details > summary { cursor: pointer; color: var(--accent); margin: 4px 0; }
.stagesline { font-size: 12px; color: var(--muted); }
.reason { color: #b54708; }
.hidden { display: none; }
"""

JS = """
(function () {
  var box = document.getElementById("filter");
  var frames = Array.prototype.slice.call(document.querySelectorAll(".frame"));
  var count = document.getElementById("shown");
  function apply() {
    var q = (box.value || "").toLowerCase(), shown = 0;
    frames.forEach(function (f) {
      var hit = !q || f.getAttribute("data-name").toLowerCase().indexOf(q) >= 0;
      f.classList.toggle("hidden", !hit);
      if (hit) shown++;
    });
    count.textContent = shown + " of " + frames.length + " frames shown";
  }
  box.addEventListener("input", apply);
  function toggleAll(open) {
    document.querySelectorAll("details").forEach(function (d) { d.open = open; });
  }
  document.getElementById("expand").addEventListener("click", function () { toggleAll(true); });
  document.getElementById("collapse").addEventListener("click", function () { toggleAll(false); });
  document.querySelectorAll(".track a").forEach(function (a) {
    a.addEventListener("click", function () {
      var target = document.getElementById(a.getAttribute("href").slice(1));
      if (!target) return;
      target.querySelectorAll("details").forEach(function (d) { d.open = true; });
    });
  });
  // A guard tree opens scrolled to its first failed line.
  document.querySelectorAll("pre.guards").forEach(function (pre) {
    var bad = pre.querySelector("span.failed");
    if (bad) pre.scrollTop = Math.max(0, bad.offsetTop - pre.offsetTop - 40);
  });
  apply();
  document.body.setAttribute("data-ready", "1");
})();
"""
