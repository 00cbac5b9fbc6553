"""InstructionTranslator: the symbolic interpreter over one code object's instructions.

It holds the value stack, the fast locals, the cells, and a reference to the shared OutputGraph
(fx graph, graph inputs, guards). It runs the version-neutral instructions of bytecode/instructions.py: each
is dispatched by its normalized opname through handlers.DISPATCH, with the translator passed
explicitly. Inlined calls run a child translator on the same OutputGraph.

Boundaries: at the start of every raw instruction (`Inst.first`) the tracked stack and locals are
the interpreter's (instructions.py keeps each expansion's stack effect). The translator records the
index of the last boundary (`self.boundary`); a failure names it, and a graph break traces the frame
again and stops there (`stop_at`), holding that very state. Nothing is copied per instruction:
a handler may pop and then fail, which is why the second trace stops before the instruction runs.
"""
from __future__ import annotations

import inspect

from ..bytecode.analysis import is_with_handler
from ..bytecode.instructions import DecodeError, decode
from ..guard.sources import BuiltinSource, ClosureSource, FrameCellSource, GlobalSource, LocalSource
from ..guard.tree import has_accessor
from ..guard.trace_result import TraceBudgetExceeded, Unsupported
from . import variables
from .handlers import DISPATCH
from .variables import CellVariable, ConstantVariable
from .variables.base import TracedRaise, unsupported
from .variables.torch_objects.contexts import accepts_exception
from .variables.python_objects.exceptions import chain_context, raised_value
from .variables.python_objects.generators import GeneratorVariable
from .variables.torch_objects.numpy_tensors import call_numpy_function, has_numpy_tensor, numpy_function_of
from .variables.python_objects.object_protocol import InstanceDictView

MAX_INLINE_DEPTH = 32
_CO_GENERATOR = 0x20   # inspect.CO_GENERATOR


def _frame_global_source(tx, name):
    return GlobalSource(name)


def _varkw_name(code):
    """The name of the code's **kwargs parameter, or None. (A resume function has none: it takes
    the original's kwargs as a plain argument, graph_break/resume.py.)"""
    if not code.co_flags & inspect.CO_VARKEYWORDS:
        return None
    return code.co_varnames[code.co_argcount + code.co_kwonlyargcount
                            + bool(code.co_flags & inspect.CO_VARARGS)]


def _reraises(inst) -> bool:
    """Whether `inst` raises the exception its frame's handler holds (RERAISE, a bare raise)."""
    return inst.op == "RERAISE" or (inst.op == "RAISE_VARARGS" and inst.arg == 0)


class _Null:
    """The NULL that 3.11 pushes below a callable (PUSH_NULL, LOAD_GLOBAL's low bit)."""

    def __repr__(self):
        return "NULL"


class InstructionTranslator:
    NULL = _Null()

    def __init__(self, code, output, f_globals, *, arg_values=None, raw_args=None,
                 free_cells=None, global_source=None, depth=0, stop_at=None, pass_over=None):
        """`raw_args` (root frame): real argument values, wrapped with LocalSource when first
        read. `arg_values` (inlined call): trackers bound to parameter names. `free_cells`: one
        CellVariable per co_freevars entry."""
        self.code = code
        self.output = output
        self.f_globals = f_globals
        self.depth = depth
        try:
            self.instructions = decode(code).insts
        except DecodeError as e:
            unsupported(str(e))
        self.stack: list = []
        self.locals: dict = dict(arg_values or {})
        self.raw_args: dict = dict(raw_args or {})
        self.cells: dict = dict(zip(code.co_freevars, free_cells or ()))
        self.kw_names = None
        self.namespace = None   # a class body's namespace of trackers (run_class_body)
        self.ip = 0
        self.result = None
        self.done = False
        self.suspended = False
        self.generators: list = []   # root frame: the generators it made, in order (graph_break/driver.py)
        self._global_source = global_source
        self.boundary = 0   # index of the raw instruction being run (see the module docstring)
        # Root frame only: how often each boundary was reached, so a failure can name the arrival
        # it happened at, and a second trace (`stop_at`: (index, arrival)) stops right there with
        # the interpreter's stack and locals (graph breaks, graph_break/driver.py).
        self.arrivals = [0] * len(self.instructions) if depth == 0 else None
        self.stop_at = stop_at
        self.stopped = False
        # Root frame, fullgraph=True listing every break (graph_break/passing.py): a hook
        # `pass_over(tx, inst)` that may run the instruction at `ip` abstractly instead of its
        # handler (True: it did), so the trace reaches the next break instead of stopping at one.
        self.pass_over = pass_over
        # Root frame: per exception (by its tracker's id) that unwound into a with block's handler,
        # where it was first raised in this frame: (instruction, break_at). If the block's
        # __exit__ does not suppress it and it leaves the frame, the frame is cut there, at its
        # raise, as if no handler had run (the cut trace stops before any of them).
        self.with_unwinds: dict = {}

    # -- stack ----------------------------------------------------------------------------------
    def push(self, v):
        self.stack.append(v)

    def pop(self):
        if not self.stack:
            unsupported("stack underflow (tracer bug)")
        return self.stack.pop()

    def popn(self, n: int) -> list:
        if n == 0:
            return []
        if len(self.stack) < n:
            unsupported("stack underflow (tracer bug)")
        items = self.stack[-n:]
        del self.stack[-n:]
        return items

    def jump_to(self, index: int):
        self.ip = index

    def next_op(self):
        """The normalized op of the next raw instruction (None past the end): a call that must be
        followed by BEFORE_WITH checks it (contexts.py)."""
        ip = self.ip
        while ip < len(self.instructions) and not self.instructions[ip].first:
            ip += 1
        return self.instructions[ip].op if ip < len(self.instructions) else None

    # -- names ----------------------------------------------------------------------------------
    def has_local(self, name) -> bool:
        return name in self.locals or name in self.raw_args

    def load_local(self, name):
        if name not in self.locals:
            if name not in self.raw_args:
                unsupported(f"local variable {name!r} referenced before assignment")
            if name == _varkw_name(self.code):
                # CPython makes the **kwargs dict anew for every call: it is no other object the
                # trace reaches, now or at a later call (side_effects.py, aliasing).
                self.output.side_effects.fresh(LocalSource(name))
            self.locals[name] = self.wrap(self.raw_args.pop(name), LocalSource(name))
        return self.locals[name]

    def cell(self, name) -> CellVariable:
        if name not in self.cells:
            unsupported(f"unknown cell {name!r}")
        return self.cells[name]

    def global_source(self, tx, name):
        return self.global_resolver()(tx, name)

    def global_resolver(self):
        """How this frame's globals are named as sources, as a callable (tx, name) that does not
        hold the translator: a function made here keeps it, and a translator held by a function
        its own locals hold would be a cycle, keeping every traced value until gc."""
        return self._global_source or _frame_global_source

    def _root_global(self, name) -> bool:
        """Whether global `name` of this code is the traced frame's own G[name] (not another
        function's __globals__, which may be another dict at a later call)."""
        return self.f_globals is self.output.root_globals and \
            isinstance(self.global_source(self, name), GlobalSource)

    def load_global(self, name):
        effects = self.output.side_effects
        if not self._root_global(name):
            effects.note_foreign_global(name)
        elif effects.touches_global(name):
            return effects.global_value(name)   # stored earlier in this trace (deleted: refused)
        if name in self.f_globals:
            return self.wrap(self.f_globals[name], self.global_source(self, name))
        builtins = self.output.root_builtins
        if not isinstance(builtins, dict):
            builtins = vars(builtins)
        if name in builtins:
            return self.wrap(builtins[name], BuiltinSource(name))
        unsupported(f"NameError: name {name!r} is not defined")

    def store_global(self, name, value):
        if not self._root_global(name):
            unsupported(f"store to global {name!r} of another module")
        self.output.side_effects.store_global(name, value)

    def delete_global(self, name):
        if not self._root_global(name):
            unsupported(f"deletion of global {name!r} of another module")
        effects = self.output.side_effects
        if effects.touches_global(name):
            effects.global_value(name)   # deleted twice: NameError in Python, refused here
        elif name not in self.f_globals:
            unsupported(f"NameError: deletion of global {name!r}, which is not defined")
        else:
            self.load_global(name)   # its guards fail when the global is gone at a later call
        effects.delete_global(name)

    # -- services for variables ------------------------------------------------------------------
    def wrap(self, value, source, guard: bool = True):
        return variables.wrap(self, value, source, guard)

    def wrap_constant(self, value):
        return variables.wrap_constant(value)

    def instance_dict_view(self, var, obj):
        """`obj.__dict__` of the object `var` tracks (variables/python_objects/object_protocol.py), offered here so
        that attribute.py, which object_protocol.py builds on, makes one without importing it."""
        return InstanceDictView(var, obj)

    def fold(self, fn, args: list, kwargs: dict):
        """fn(*args) on constants while tracing (variables/builtin_functions/pure.py), offered here so that trackers
        below pure.py (constant.py) fold without importing it."""
        return variables.fold(self, fn, args, kwargs)

    def call(self, fn, args: list, kwargs: dict):
        if fn is self.NULL:
            unsupported("call of NULL (tracer bug)")
        if has_numpy_tensor(args, kwargs):   # numpy on arrays traced as tensors (numpy_tensors.py)
            value = numpy_function_of(self, fn)
            if value is not None:
                return call_numpy_function(self, value, list(args), dict(kwargs))
        return fn.call_function(self, list(args), dict(kwargs))

    def inline_call(self, fn, args: list, kwargs: dict):
        if self.depth >= MAX_INLINE_DEPTH:
            unsupported(f"inlining deeper than {MAX_INLINE_DEPTH} calls")
        bound = fn.bind_args(self, args, kwargs)
        child = InstructionTranslator(fn.code, self.output, fn.f_globals, arg_values=bound,
                                      free_cells=fn.cells(self),
                                      global_source=fn.global_source, depth=self.depth + 1)
        if fn.code.co_flags & _CO_GENERATOR:   # runs nothing yet: each next() runs it to a yield
            where = (self.boundary, self.arrivals[self.boundary]) if self.arrivals is not None else None
            gen = GeneratorVariable(child, fn.code.co_name, created_at=where)
            gen.remake = (fn, list(args), dict(kwargs))
            if where is not None:
                self.generators.append(gen)
            return gen
        return child.run()

    def run_class_body(self, fn) -> dict:
        """Run a class statement's body function `fn` inlined, its locals a fresh namespace; return
        that namespace (name -> tracker, in definition order). class_statements.py."""
        if self.depth >= MAX_INLINE_DEPTH:
            unsupported(f"inlining deeper than {MAX_INLINE_DEPTH} calls")
        if fn.code.co_argcount or fn.code.co_flags & (_CO_GENERATOR | inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
            unsupported(f"class body {fn.code.co_name} is not a plain body function")
        child = InstructionTranslator(fn.code, self.output, fn.f_globals, free_cells=fn.cells(self),
                                      global_source=fn.global_source, depth=self.depth + 1)
        child.namespace = {}
        child.run()
        return child.namespace

    def yield_value(self, value):
        """YIELD_VALUE: `run` returns `value` to the generator's consumer (generators.py)."""
        if self.depth == 0:
            unsupported("yield in the traced frame itself (tracer bug: generators are not compiled)")
        self.result = value
        self.suspended = True

    def return_value(self, value):
        self.result = value
        self.done = True

    # -- the loop -------------------------------------------------------------------------------
    def run(self):
        """Interpret until RETURN_VALUE; return the returned tracker."""
        output = self.output
        while not self.done:
            if self.ip >= len(self.instructions):
                unsupported("fell off the end of the code")
            inst = self.instructions[self.ip]
            if inst.first:
                self.boundary = self.ip
                if self.arrivals is not None:
                    self.arrivals[self.ip] += 1
            if self.arrivals is not None:   # the root frame: a cut may stop or pass over here
                if self.stop_at == (self.ip, self.arrivals[self.boundary]):
                    self.stopped = True
                    return None
                if self.pass_over is not None and self.pass_over(self, inst):
                    continue
            self.ip += 1
            output.steps_left -= 1
            if output.steps_left < 0:
                self._fail(TraceBudgetExceeded(
                    f"the trace ran past its budget of {output.step_budget} instructions (a long Python "
                    "loop; config.trace_budget / TJC_TRACE_BUDGET raises it)"), inst, breakable=False)
            try:
                fn = DISPATCH.get(inst.op)
                if fn is None:
                    unsupported(f"opcode {inst.instr.name}")
                fn(self, inst)
                if self.suspended:   # YIELD_VALUE: the next run() goes on after it
                    self.suspended = False
                    return self.result
            except TracedRaise as e:
                if not self._handle(e, inst):
                    self._fail(e, inst)
            except Unsupported as e:
                self._fail(e, inst)
            except Exception as e:  # a tracer bug must not become a wrong result: fall back
                err = Unsupported(f"internal error {type(e).__name__}: {e}")
                err.__cause__ = e
                self._fail(err, inst)
        return self.result

    def _handle(self, raised: TracedRaise, inst) -> bool:
        """Unwinds to the handler of `inst` in the exception table, as the interpreter does: the
        stack cut to the handler's depth, f_lasti pushed where it asks, then the exception; True
        where it did. False where `inst` has no handler (the raise leaves the frame), where the
        handler is a with block's whose exit on the stack takes no exception (`accepts_exception`),
        or where the raise site does not model the exception (`_fail` refuses those). A new raise
        sets the exception's __context__ here, as the interpreter does when it raises: nothing
        between the raise and its first handler changes what the trace handles."""
        if inst.handler is None:
            return False
        value = raised_value(raised)
        target, depth, push_lasti = inst.handler
        if value is None or len(self.stack) < depth:
            return False
        if is_with_handler(self.instructions, inst.handler):
            # WITH_EXCEPT_START calls the block's exit with the exception (handlers/exceptions.py).
            if depth < 1 or not accepts_exception(self.stack[depth - 1]):
                return False
            if self.arrivals is not None and id(value) not in self.with_unwinds:
                self.with_unwinds[id(value)] = (inst, self._break_at(inst), value)
        if raised.fresh:   # what the interpreter does as it raises: nothing ran since in this trace
            chain_context(value, self.output.handled_exception)
            raised.fresh = False
        # The tracer's exception is done with: its traceback holds the frames it crossed (their
        # trackers), kept alive with it otherwise until the collector runs.
        raised.__traceback__ = raised.__context__ = raised.__cause__ = None
        del self.stack[depth:]
        if push_lasti:   # read by RERAISE n to set the traceback's line, which the trace has not
            self.push(ConstantVariable(inst.index))
        self.push(value)
        self.jump_to(target)
        return True

    def _break_at(self, inst) -> tuple:
        """(where a failure at `inst` cuts the root frame, the arrival there). The bool() ending a
        3.13 COMPARE_OP is cut on its own, after the comparison."""
        return (inst.index if inst.op == "TO_BOOL" else self.boundary, self.arrivals[self.boundary])

    def _fail(self, e: Unsupported, inst, breakable: bool = True):
        located = None
        try:
            if isinstance(e, TracedRaise) and _reraises(inst):
                unwound = self.with_unwinds.get(id(raised_value(e)))
            elif inst.op == "WITH_EXCEPT_START" and self.stack:   # an exit failed to trace
                unwound = self.with_unwinds.get(id(self.stack[-1]))
            else:
                unwound = None
            if unwound is not None and e.break_at is None:
                # Only with blocks' exits saw it, and none suppressed it (or one could not be
                # traced): cut at its raise, before any exit ran.
                inst, e.break_at = unwound[0], unwound[1]
            # An exception a handler of this frame has seen leaves it by RERAISE (or a bare raise)
            # with the state there holding it (raised: not rebuilt): no cut; the frame runs as
            # written. One leaving an inlined call is cut at the call, which eager runs again.
            breakable = breakable and not (isinstance(e, TracedRaise) and _reraises(inst))
            if self.arrivals is not None and breakable and e.break_at is None:
                # A failure in the root frame, or in a call it inlined at this instruction.
                e.break_at = self._break_at(inst)
            # A KeyError or IndexError the trace models may be caught by a caller (Mapping and
            # Sequence mixins) only where no try or with block of the code it crossed would have
            # caught it first.
            caught_here = isinstance(e, TracedRaise) and inst.handler is not None
            leaves = (self.depth == 0 and isinstance(e, TracedRaise) and not caught_here
                      and raised_value(e) is not None and not self.output.has_tensor_work())
            kind = type(e) if isinstance(e, TracedRaise) and not caught_here else Unsupported
            if isinstance(e, TraceBudgetExceeded):
                kind = TraceBudgetExceeded
            if e.lineno and not caught_here:  # raised in an inlined call: keep the innermost place
                e.in_callee = e.in_callee or self.depth > 0
                e.leaves_without_tensor_work = leaves
                raise e
            located = kind(e.reason, filename=e.filename if e.lineno else self.code.co_filename,
                           lineno=e.lineno or inst.lineno,
                           instruction=e.instruction if e.lineno else inst.describe())
            located.break_at = e.break_at
            if isinstance(located, TracedRaise):   # what a try block of a caller catches
                located.value, located.made_of, located.fresh = e.value, e.made_of, e.fresh
            located.in_callee = self.depth > 0
            located.leaves_without_tensor_work = leaves
            raise located from e.__cause__
        finally:
            # The exception's traceback holds this frame: dropping our names for it breaks the
            # exception <-> frame cycle that would keep every traced value alive until gc.
            e = located = None

    @staticmethod
    def root_cells(code, f_locals, output=None, closure=None) -> list:
        """The root frame's free variables; with its `closure`, each the one tracker of its real
        cell in the trace (a store to it is replayed into that cell: cells.py), whose source is the
        cell itself (FrameCellSource), so that reaching it again through a function's `__closure__`
        pins the two paths as one cell (ALIAS_OF) and a cell of the same name elsewhere as another
        (DISTINCT_FROM)."""
        cells = []
        with_source = has_accessor("closure_cell")
        for i, name in enumerate(code.co_freevars):
            real = closure[i] if closure is not None and len(closure) == len(code.co_freevars) else None
            where = FrameCellSource(name) if with_source and real is not None else None

            def make(name=name, real=real, where=where):
                if name in f_locals:
                    return CellVariable(lazy=(f_locals[name], ClosureSource(name)), writable=False,
                                        frame_name=name, real=real, cell_source=where)
                return CellVariable(writable=False, frame_name=name, real=real, cell_source=where)
            cells.append(make() if real is None or output is None else output.side_effects.real_cell(real, where, make))
        return cells
