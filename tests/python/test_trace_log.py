"""runtime/trace_log.py: TJC_TRACE_DIR's structured trace, record by record.

Contracts tested: off by default (no file, no record, hooks pass through); one JSON-lines file per
process, opened on the first record, starting with a "process" record and ending with the final
tjc.stats(); per compile the frame, the trigger (the failing guard of each missed entry, naming the
entry's compile), stage timings, graph code and op count, guards, the break with its reason, its
file:line and the line of the frame where it is cut, resume functions and disk-cache events;
fallbacks and cache-limit hits; a folder that cannot be written warns once and never fails the
program, whose results stay eager's.
"""
import json
import logging
import os
import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache.runtime import trace_log  # noqa: E402
from torch_jit_cache.config import config  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def trace_dir(tmp_path, monkeypatch):
    """Tracing on into a fresh folder for the test, off after it."""
    folder = tmp_path / "trace"
    monkeypatch.setattr(config, "trace_dir", str(folder))
    tjc.reset()
    yield folder
    tjc.reset()


def records(folder, kind=None) -> list:
    files = sorted(folder.glob("tjc_trace*.jsonl"))
    assert len(files) == 1, files
    out = [json.loads(line) for line in files[0].read_text().splitlines()]
    return [r for r in out if kind is None or r["type"] == kind]


def helper(x):
    print("side effect")   # graph break inside the inlined call
    return x * 2


def with_break(x, n):
    y = torch.sin(x) + n
    y = helper(y)          # the frame is cut here
    return y.cos()


def line_of(fn, text) -> int:
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, line in enumerate(lines) if text in line)


def test_off_by_default_writes_nothing_and_hooks_pass_through(monkeypatch):
    assert config.trace_dir == "" and not trace_log.enabled()

    called = []   # a hook's failure is swallowed (it never fails the program): record, then assert
    for name in ("_write", "_source", "_frame", "_break", "_give_up"):
        monkeypatch.setattr(trace_log, name, lambda *args, name=name: called.append(name))
    f = tjc.compile(with_break)
    for n in (1, 2):   # a compile with a break, then a recompile
        x = torch.randn(4)
        torch.testing.assert_close(f(x, n), with_break(x, n))
    assert called == [], "a hook went past its flag check while tracing is off"
    assert trace_log.file_path() is None
    assert trace_log.timed("stage", lambda a: a + 1, 1) == 2
    assert getattr(trace_log._local, "compile", None) is None


def test_config_trace_dir_is_a_path():
    with pytest.raises(TypeError, match="config.trace_dir must be a path"):
        config.trace_dir = 3


def test_a_compile_record_holds_frame_stages_graph_guards_break_and_resume(trace_dir):
    f = tjc.compile(with_break)
    x = torch.randn(4)
    torch.testing.assert_close(f(x, 1), with_break(x, 1))
    first = records(trace_dir)[0]
    assert first["type"] == "process" and first["pid"] == os.getpid() and first["v"] == trace_log.VERSION
    assert first["cwd"] == os.getcwd() and first["argv"] == sys.argv
    compiles = records(trace_dir, "compile")
    main = next(c for c in compiles if c["frame"]["name"] == "with_break")
    assert main["frame"] == {"name": "with_break", "file": __file__, "line": with_break.__code__.co_firstlineno}
    assert main["trigger"] == {"kind": "first call", "failures": []}
    names = [name for name, _ in main["stages"]]
    for stage in ("trace", "backend compile", "codegen", "guard building"):
        assert stage in names
    assert all(seconds >= 0 for _, seconds in main["stages"])
    assert main["seconds"] >= sum(s for _, s in main["stages"]) - 1e-3
    assert main["result"] == "entry"
    assert main["graph"]["op_count"] == 2 and main["graph"]["ops"] == ["sin", "add"]
    assert "torch.sin" in main["graph"]["code"]
    assert "L['n']" in main["guards"] and "EQUALS_MATCH: 1" in main["guards"]
    brk = main["break"]
    assert brk["reason"].startswith("print()")
    assert (brk["file"], brk["line"]) == (__file__, line_of(helper, 'print("side effect")'))
    assert brk["frame_line"] == line_of(with_break, "y = helper(y)")
    assert brk["in_callee"] is True and brk["counted"] is True
    assert main["resume"] == [f"with_break.<resume at line {brk['frame_line']}>"]
    resumed = [c for c in compiles if c["frame"]["name"] == main["resume"][0]]
    assert len(resumed) == 1 and resumed[0]["graph"]["ops"] == ["cos"]
    sources = {(r["file"], r["line"]): r["lines"] for r in records(trace_dir, "source")}
    block = sources[(__file__, with_break.__code__.co_firstlineno)]
    assert block[0] == "def with_break(x, n):" and "y = helper(y)" in block[2]


def test_a_recompile_names_the_guard_that_failed_in_each_entry(trace_dir):
    f = tjc.compile(with_break)
    for n, x in ((1, torch.randn(4)), (2, torch.randn(4)), (2, torch.randn(8, 3))):
        torch.testing.assert_close(f(x, n), with_break(x, n))
    mains = [c for c in records(trace_dir, "compile") if c["frame"]["name"] == "with_break"]
    assert [c["trigger"]["kind"] for c in mains] == ["first call", "recompile", "recompile"]
    assert mains[1]["trigger"]["failures"] == [{"entry": mains[0]["id"], "guard": "L['n'] == 1 failed: got 2"}]
    failures = {f["entry"]: f["guard"] for f in mains[2]["trigger"]["failures"]}
    assert failures == {mains[0]["id"]: "L['n'] == 1 failed: got 2",
                        mains[1]["id"]: "L['x'].dim(): expected 1, got 2"}


def test_a_fallback_is_recorded_with_its_reason(trace_dir, monkeypatch):
    monkeypatch.setattr(config, "trace_budget", 50)

    def long_loop(x):
        for _ in range(100):
            x = x + 1
        return x

    f = tjc.compile(long_loop)
    x = torch.zeros(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(f(x), long_loop(x))
    (record,) = [c for c in records(trace_dir, "compile") if c["frame"]["name"].endswith("long_loop")]
    assert record["result"] == "fallback" and "budget" in record["reason"]
    assert record["graph"] is None


def test_cache_limit_hits_are_recorded(trace_dir):
    def scaled(x, n):
        return x * n

    f = tjc.compile(scaled, cache_limit=1)
    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        trace_log.configure(str(trace_dir))   # the warning hook, installed inside this block
        for n in (1, 2, 3):
            torch.testing.assert_close(f(x, n), scaled(x, n))
    (hit,) = records(trace_dir, "cache_limit")
    assert "reached the cache limit" in hit["message"] and "'" + scaled.__qualname__ + "'" in hit["message"]


def test_disk_cache_stores_and_loads_are_recorded(trace_dir, disk_cache_on):
    def add_one(x):
        return torch.cos(x) + 1

    x = torch.randn(3)
    tjc.compile(add_one)(x)
    torch.testing.assert_close(tjc.compile(add_one)(x), add_one(x))   # another compile() call: loaded
    stored, loaded = [c for c in records(trace_dir, "compile") if c["frame"]["name"].endswith("add_one")]
    assert [e["action"] for e in stored["disk_cache"]] == ["store"] and stored["result"] == "entry"
    assert [e["action"] for e in loaded["disk_cache"]] == ["load"] and loaded["result"] == "loaded"
    assert loaded["disk_cache"][0]["detail"].startswith(str(disk_cache_on))
    assert "disk cache load" in [name for name, _ in loaded["stages"]]
    assert loaded["guards"] == stored["guards"]


def test_an_unwritable_folder_warns_once_and_the_program_runs(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.setattr(config, "trace_dir", str(blocker / "trace"))
    caplog.set_level(logging.WARNING, logger="torch_jit_cache")
    f = tjc.compile(with_break)
    for n in (1, 2, 3):
        x = torch.randn(4)
        torch.testing.assert_close(f(x, n), with_break(x, n))
    warned = [r.getMessage() for r in caplog.records if "structured trace" in r.getMessage()]
    assert len(warned) == 1 and "turned off" in warned[0]
    assert not trace_log.enabled()
    tjc.reset()


def test_each_process_writes_its_file_with_the_final_stats(tmp_path):
    """TJC_TRACE_DIR in a child process: its file ends with tjc.stats() as the process left it."""
    program = ("import torch, torch_jit_cache as tjc\n"
               "f = tjc.compile(lambda x: x.sin() * 2)\n"
               "f(torch.ones(2)); f(torch.ones(2))\n")
    env = {**os.environ, "TJC_TRACE_DIR": str(tmp_path), "PYTHONPATH": ROOT, "RANK": "3"}
    subprocess.run([sys.executable, "-c", program], env=env, check=True, timeout=300)
    (path,) = tmp_path.glob("tjc_trace*.jsonl")
    assert path.name.startswith("tjc_trace.rank3.pid")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0]["type"] == "process" and lines[0]["rank"] == 3
    assert lines[-1]["type"] == "stats"
    assert lines[-1]["stats"]["graphs"] == 1 and lines[-1]["stats"]["hits"] == 1


def test_cache_hits_never_reach_the_trace_while_it_is_on(trace_dir, monkeypatch):
    """The hit path is C++: with tracing on, hits call no hook (and no Python) of the trace."""
    f = tjc.compile(with_break)
    x = torch.randn(4)
    f(x, 1)
    called = []
    for name in ("begin", "end", "timed", "traced", "entry_made", "resume_functions", "disk_cache", "fallback"):
        monkeypatch.setattr(trace_log, name, lambda *args, name=name: called.append(name))
    hits = tjc.stats()["hits"]
    for _ in range(1000):
        f(x, 1)
    assert tjc.stats()["hits"] - hits == 2000   # the frame and its resume function, each call
    assert called == []
