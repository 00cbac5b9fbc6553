"""SKIP_TREE_IF_QUIET: a code that runs uncompiled takes the frames it calls along, with the hook
off, once two of its runs compiled nothing and hit no entry (why: with the hook
installed, 3.11 does not inline Python calls, and pure-Python work inside a compiled call ran
25-50% slower than eager). Torch-free: runs on 3.11, 3.12 and 3.13."""
import sys

import pytest

import torch_jit_cache as tjc
from torch_jit_cache import runtime

from jit_helpers import ConstantJit, call_compiled


SEEN = []  # per call of leaf(): whether the hook was installed


@pytest.fixture(autouse=True)
def empty_seen(fresh_runtime):
    yield
    # Emptied after every test: hunt-leaks repeats each test and counts references, and a list that
    # keeps a True per call reads as a leak of one reference per call.
    SEEN.clear()


def leaf(i):
    SEEN.append(runtime.hook_installed())
    return i + 1


def outer(n):
    return sum(leaf(i) for i in range(n))


def scaled(x):
    return x * 10


def outer_with_compiled_callee(n):
    return leaf(n) + scaled(n)


class Policy:
    """SKIP_TREE_IF_QUIET for `outer*`, SKIP for helpers, ConstantJit (10 -> 20) for `scaled`."""

    def __init__(self):
        self.asked = []
        self.jit = ConstantJit(10, 20, guard_types=("x",))

    def __call__(self, frame, entries):
        name = frame.f_code.co_name
        self.asked.append(name)
        if name.startswith("outer"):
            return runtime.SKIP_TREE_IF_QUIET
        if name == "scaled":
            return self.jit(frame, entries)
        return runtime.SKIP


def test_quiet_code_turns_skip_tree_and_runs_its_callees_without_the_hook():
    policy = Policy()
    SEEN.clear()
    assert call_compiled(policy, outer, 3) == 6
    assert runtime.frame_action(outer) == "skip-watch"
    assert SEEN == [True] * 3          # watched: callees still intercepted
    assert call_compiled(policy, outer, 3) == 6
    assert runtime.frame_action(outer) == "skip-tree"
    asked = len(policy.asked)
    SEEN.clear()
    assert call_compiled(policy, outer, 3) == 6
    assert SEEN == [False] * 3         # the hook is off below a skip-tree frame
    assert len(policy.asked) == asked  # nothing below it was offered to the callback
    assert runtime.hook_installed() is False


def test_skip_tree_turns_skip_tree_on_the_first_run():
    # SKIP_TREE (another compiler's entry points): no watched runs, its callees are never offered.
    asked = []

    def policy(frame, entries):
        asked.append(frame.f_code.co_name)
        return runtime.SKIP_TREE if frame.f_code.co_name == "outer" else runtime.SKIP

    SEEN.clear()
    assert call_compiled(policy, outer, 3) == 6
    assert runtime.frame_action(outer) == "skip-tree"
    assert SEEN == [False] * 3
    assert asked == ["outer"]


def test_code_whose_callees_compile_stays_a_plain_skip():
    policy = Policy()
    for _ in range(3):
        assert call_compiled(policy, outer_with_compiled_callee, 1) == 2 + 20
    assert runtime.frame_action(outer_with_compiled_callee) == "skip"
    [entry] = runtime.cache_entries(scaled)
    assert entry.hits == 2             # the callee kept running compiled


def test_reset_forgets_skip_tree():
    policy = Policy()
    for _ in range(2):
        call_compiled(policy, outer, 1)
    assert runtime.frame_action(outer) == "skip-tree"
    tjc.reset()
    assert runtime.frame_action(outer) == "default"


def raises_below(n):
    leaf(n)
    raise ValueError(n)


def outer_raising(n):
    return raises_below(n)


def test_exception_through_a_skip_tree_frame_restores_the_callback():
    policy = Policy()
    refs = sys.getrefcount(policy)
    for _ in range(4):
        with pytest.raises(ValueError):
            call_compiled(policy, outer_raising, 1)
    assert runtime.frame_action(outer_raising) == "skip-tree"

    def after_the_error():
        try:
            outer_raising(1)
        except ValueError:
            pass
        return scaled(1)   # the callback is back: intercepted and compiled

    assert call_compiled(policy, after_the_error) == 20
    assert sys.getrefcount(policy) == refs
