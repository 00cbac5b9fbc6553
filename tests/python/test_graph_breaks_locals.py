"""Graph breaks in frames that read their own locals (locals(), vars(), eval, frame objects): such a
frame is never cut (graph_break._INTROSPECTION), so it sees eager's locals on every version and says
why it was not cut, while an attribute merely named like those builtins (`obj.eval()`) still breaks."""
import contextlib
import io
import logging

import pytest

torch = pytest.importorskip("torch")

import torch_jit_cache as tjc  # noqa: E402
from torch_jit_cache import graph_break  # noqa: E402

from context_helpers import check_graphs_and_breaks  # noqa: E402

pytestmark = pytest.mark.torch


# -- frames that read their own locals (locals(), vars(), eval, frame objects) ----------------
# A resume function has the live locals only, and the break instruction runs among the
# transformed code's temporaries: such a frame is never cut (graph_break._INTROSPECTION), it runs
# uncompiled where its trace fails, and every version's eager semantics (3.13's PEP 667 snapshot,
# 3.11/3.12's one dict per frame) hold as they are.

def _locals_after_break(x):
    a = x + 1
    b = 5
    print("", end="")
    return x + len(locals()) + b, a


def _locals_item_after_break(x):
    a = x + 1
    print("", end="")
    return locals()["a"] * 2


def _vars_after_break(x):
    a = x * 3
    print("", end="")
    return sorted(vars()), a


def _locals_before_break(x):
    snapshot = locals()
    a = x + 1
    print("", end="")
    c = a * 2
    locals()   # 3.11/3.12: refreshes `snapshot` (one dict per frame); 3.13: a new snapshot
    return sorted(snapshot), c


def _eval_after_break(x):
    a = x + 1
    print("", end="")
    return eval("a * 2")


def _frame_after_break(x):
    import inspect
    a = x - 1
    print("", end="")
    return sorted(inspect.currentframe().f_locals), a


def _locals_in_resume_after_stack_items(x):
    a = x + 1
    out = (a, print("", end=""))
    return x + len(locals()), out[0]


@pytest.mark.parametrize("fn", [_locals_after_break, _locals_item_after_break, _vars_after_break,
                                _locals_before_break, _eval_after_break, _frame_after_break,
                                _locals_in_resume_after_stack_items])
def test_a_frame_reading_its_locals_sees_eager_locals(fn):
    x = torch.randn(3)
    expected = fn(x)
    compiled = tjc.compile(fn)
    with contextlib.redirect_stdout(io.StringIO()):
        for _ in range(2):
            got = compiled(x)
            assert type(got) is type(expected)
            for g, e in zip(got if isinstance(got, tuple) else (got,),
                            expected if isinstance(expected, tuple) else (expected,)):
                if isinstance(e, torch.Tensor):
                    torch.testing.assert_close(g, e)
                else:
                    assert g == e


def test_a_frame_reading_its_locals_is_not_cut_and_says_why(caplog):
    tjc.reset()   # the reason is warned once per process until reset
    with caplog.at_level(logging.WARNING, logger="torch_jit_cache"):
        with contextlib.redirect_stdout(io.StringIO()):
            tjc.compile(_locals_after_break)(torch.randn(3))
    assert any("reads its own locals (locals)" in r.getMessage() for r in caplog.records)
    with pytest.raises(graph_break.BreakRefused, match="reads its own locals"):
        graph_break.plan_break(_locals_after_break.__code__, 0)


class _HasEvalAndVars:
    """Attributes named like the introspection builtins: `obj.eval()` reads no frame's locals."""

    def __init__(self):
        self.vars = 2

    def eval(self):
        return self


def _attribute_named_eval_then_break(x, obj):
    y = x.sin()
    obj.eval()
    print("", end="")
    return y * obj.vars


def test_an_attribute_named_like_locals_readers_still_breaks():
    # Refused by name before: `model.eval()` in forward made every break of the frame a fallback.
    check_graphs_and_breaks(_attribute_named_eval_then_break, torch.randn(3), _HasEvalAndVars(), graphs=2, breaks=1)
