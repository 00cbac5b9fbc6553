"""GeneratorVariable: a generator function's call (a `def` with `yield`, a generator expression)
made in the trace, run lazily by a suspended child translator.

Calling a generator function runs nothing: the arguments are bound and a child translator is made
over the generator's code. Each `next` runs it up to its next YIELD_VALUE (the translator returns
there, `InstructionTranslator.run`) and hands out the yielded tracker; RETURN_VALUE ends it. So the
generator's body runs interleaved with its consumer exactly as Python runs it: a `for` loop over
it, next(), any()/all() (which stop at the first decisive item) take one item at a time.

Consumers that take every item at once (list(), tuple(), sum(), max(), `a, b = g`, `f(*g)`) drain
it through `unpack`, as Python does. Lazy consumers (zip, enumerate, map, filter, itertools.chain)
over a generator are traced through their Python versions (polyfills.py), themselves generators:
draining it early would move its body before code that runs between the items in Python.

A generator not started yet is rebuilt after the graph by calling its function again with the
same (rebuilt) arguments (`remake`): nothing of its body has run, in the trace or in eager. One
that has started is suspended inside its body and cannot be rebuilt (its frame is the trace's). A failure
while one made by the root frame is being advanced breaks the graph where it was made
(`created_at`); a break whose state holds one moves there too (tracer.trace): Python makes the
real generator there and the rest of the frame runs as written.
"""
from __future__ import annotations

import types

from ....guard.trace_result import CallOutput, ConstantOutput, DictOutput, TupleOutput, Unsupported, call_with
from ..base import TracedRaise, VariableTracker, unsupported


class GeneratorVariable(VariableTracker):
    yields_lazily = True

    def __init__(self, child, name: str, created_at=None):
        super().__init__(None)
        self.child = child            # the InstructionTranslator over the generator's code
        self.name = name
        self.created_at = created_at  # (index, arrival) in the root frame, if made there
        self.done = False
        self.running = False
        self.started = False
        # (function tracker, [arg trackers], {name: tracker}) that made it: what a generator not
        # started yet is made again from. A polyfilled builtin's names the builtin itself (map, a
        # constant, not a tracker).
        self.remake = None
        self.remake_watch = ()   # (dict tracker, its version when the builtin was made)

    kind = types.GeneratorType   # a polyfilled builtin's generator says the builtin's type (map, ...)

    def python_type(self):
        return self.kind

    def next_item(self):
        """The next yielded tracker, or None when the generator returns."""
        if self.done:
            return None
        if self.running:
            unsupported("ValueError: generator already executing")
        self.running = True
        self.started = True
        try:
            value = self.child.run()
        except TracedRaise as e:   # raised out of the body: the generator is finished, as in Python
            self.done = True
            if e.made_of is not None and issubclass(e.made_of[0], StopIteration) or \
                    e.value is not None and issubclass(e.value.cls, StopIteration):
                raise Unsupported("StopIteration raised in a generator (a RuntimeError in Python)") from None
            if self.created_at is not None and e.break_at is None:
                e.break_at = self.created_at
            raise
        except Unsupported as e:
            if self.created_at is not None and e.break_at is None:
                e.break_at = self.created_at
            raise
        finally:
            self.running = False
        if self.child.done:   # returned: StopIteration (its value is not used by consumers here)
            self.done = True
            return None
        return value

    def unpack(self, tx):
        items = []
        while (item := self.next_item()) is not None:
            items.append(item)
        return items

    def truthy(self, tx):
        return True

    def reconstruct(self, outputs):
        """Not started yet: its function called again with its rebuilt arguments, once."""
        if self.started or self.remake is None:
            unsupported(f"generator {self.name} is suspended at the graph break (it cannot be rebuilt)")
        if any(d.version != version for d, version in self.remake_watch):
            unsupported(f"a {self.kind.__name__} over a dict that changed since it was made")
        fn, args, kwargs = self.remake
        return outputs.once(self, lambda: CallOutput(ConstantOutput(call_with), ("fn", "args", "kwargs"), (
            outputs.rebuild(fn) if isinstance(fn, VariableTracker) else ConstantOutput(fn), TupleOutput(tuple(outputs.rebuild(a) for a in args)),
            DictOutput(tuple((k, outputs.rebuild(v)) for k, v in kwargs.items())))))

    def __repr__(self):
        return f"GeneratorVariable({self.name})"

