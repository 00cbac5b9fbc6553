"""regex_values.py: a compiled regex the frame reaches, matched against constants while tracing
(its pattern and flags guarded by value), and the re.Match it returns read in the trace."""
import re
import weakref

import pytest

torch = pytest.importorskip("torch")
pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("fresh_caches")]

import torch_jit_cache as tjc  # noqa: E402


def _uses(x, pat):
    found = pat.search("xx-abc-42")
    out = [bool(found), pat.findall("a1 b22 c333"), pat.sub("#", "q7w8"), pat.split("1a2")]
    if found:
        out += [found.group(), found.span(), found.start(), found.end(), found.string]
    if pat.fullmatch("nothing here") is None:
        x = x + 1
    return x * len(out), out


@pytest.mark.parametrize("text", [r"\d+", r"[a-c]+"])
def test_search_methods_on_constants_fold(text):
    # Before: a break at each call ("a method written in C").
    pat = re.compile(text)
    x = torch.ones(2)
    got, expected = tjc.compile(_uses)(x, pat), _uses(x, pat)
    assert torch.equal(got[0], expected[0]) and got[1] == expected[1]
    assert tjc.stats()["graph_breaks"] == 0 and tjc.stats()["fallbacks"] == 0


def test_another_pattern_or_flags_recompiles():
    compiled = tjc.compile(_uses)
    x = torch.ones(2)
    for pat in (re.compile("[a-c]+"), re.compile("[a-c]+"), re.compile("[A-C]+"), re.compile("[A-C]+", re.I)):
        got, expected = compiled(x, pat), _uses(x, pat)
        assert torch.equal(got[0], expected[0]) and got[1] == expected[1]
    assert tjc.stats()["recompiles"] == 2 and tjc.stats()["graph_breaks"] == 0


def _wrong_kind(x, pat):
    try:
        pat.search("text")
    except TypeError as e:
        return x + 1, str(e)
    return x, None


def test_pythons_error_on_the_arguments_is_raised_in_the_trace():
    pat = re.compile(b"t")
    assert tjc.compile(_wrong_kind)(torch.zeros(1), pat)[1] == _wrong_kind(torch.zeros(1), pat)[1]
    assert tjc.stats()["graph_breaks"] == 0 and tjc.stats()["fallbacks"] == 0


def _returns_match(x, pat):
    return x + 1, pat.match("abc")


def test_a_match_leaving_the_trace_is_eagers_match():
    pat = re.compile("ab")
    got = tjc.compile(_returns_match)(torch.zeros(1), pat)[1]
    assert isinstance(got, re.Match) and got.group() == "ab"


def test_the_entry_does_not_keep_the_pattern_alive(no_gc):
    compiled = tjc.compile(_uses)
    pat = re.compile("[a-c]+q{0}")
    compiled(torch.ones(1), pat)
    ref = weakref.ref(pat)
    re.purge()   # re's own cache holds the compiled pattern too
    del pat
    assert ref() is None


def _module_functions(x, text):
    pat = re.compile(r"([a-z]+)(\d+)")
    m = pat.search(text)
    return (x + 1, m.group(1) if m else None, pat.groups, re.sub(r"\d", "#", text), re.match("z", text),
            bool(re.fullmatch(r"\w+", text)), re.findall(r"\d", text), re.split(",", "a,b"), re.escape("a.b"))


@pytest.mark.parametrize("text", ["ab12", "x9"])
def test_re_module_functions_on_constants_run_while_tracing(text):
    """re.compile/search/sub/... on constants (unittest's assertRaisesRegex compiles its pattern so):
    run while tracing, the Pattern a tracker whose methods fold. Before: re's own cache (a dict
    keyed by any pattern the process compiled) was a break, or the frame ran uncompiled."""
    x = torch.ones(2)
    before = tjc.stats()
    got, expected = tjc.compile(_module_functions)(x, text), _module_functions(x, text)
    assert torch.equal(got[0], expected[0]) and got[1:] == expected[1:]
    assert tjc.stats()["graph_breaks"] == before["graph_breaks"] and tjc.stats()["fallbacks"] == before["fallbacks"]


def _pattern_returned(x):
    return x + 1, re.compile("a+")


def _replacement_function(x, text):
    return x + 1, re.sub(r"\d", lambda m: str(int(m.group()) + 1), text)


def test_a_pattern_leaving_the_trace_and_other_arguments_run_as_eager():
    x = torch.ones(1)
    assert tjc.compile(_pattern_returned)(x)[1] == _pattern_returned(x)[1]
    assert tjc.compile(_replacement_function)(x, "a1b2")[1] == _replacement_function(x, "a1b2")[1] == "a2b3"
