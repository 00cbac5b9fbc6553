"""Graph breaks: where a frame may be cut at an unsupported instruction, and the resume functions.

The package, one room per step:
  plan.py     where the code may be cut, and what runs there (BreakPlan), or BreakRefused
  state.py    the stack, locals and switches at the cut, as output specs (the second trace's end)
  driver.py   the one loop that traces a frame again: at the break, where a generator was made,
              with static shapes, and past every break for fullgraph=True's list
  passing.py  how fullgraph=True's listing traces past the breaks it has found
  resume.py   the resume functions, one per target, and which codes are resume codes
  emit.py     the transformed code's end: the instruction and the resume calls
Only plan.py, resume.py and emit.py are imported here (no torch: codegen and the runtime's
torch-free tests import this package); state.py and driver.py are imported where a frame is traced.

When the trace of a frame fails at a raw instruction of the ROOT frame (or inside a call the root
inlined: the failure is then the root's CALL), the driver (driver.py) traces the frame again and
stops at that instruction's boundary (translator.py `stop_at`): the stack and locals there are the
interpreter's. The transformed code (codegen.build_transformed_code, graph_break/emit.py) then

1. calls the graph captured so far;
2. rebuilds the live stack and locals from graph outputs, constants and sources, into temporaries
   (all of them before step 3, so the unsupported instruction cannot change what they load), loads
   the targets and values of the side effects recorded before the break the same way, and then
   replays those effects in program order (tracer/side_effects.py);
3. pushes the items the unsupported instruction consumes (NULLs of a pending call re-pushed as
   NULL) and runs that instruction as ordinary bytecode, at its own line;
4. calls a resume function with the live locals and the stack items (NULLs left out), and returns
   what it returns. A conditional jump calls one of two resume functions, one per target.

A resume function is a new code object made from the original's bytecode: a prologue pushes the
stack items back (PUSH_NULL where a NULL was) and jumps to the instruction after the break; the rest
is the original body, unchanged. It is a normal frame: under the hook it is traced, cached on its
own code, and may break again. It is a constant of the transformed code, so it dies with the cache
entry that made it.

Loops: a loop's iterator on the stack whose items the trace knows (a tuple, a range, enumerate or
zip, an nn.ModuleList, a container the trace built) is passed as the tuple of the items it has
still to yield, and the prologue makes it an iterator again (slot ITER), so the resume function's
trace reads the rest of the loop; a list or dict read from the frame keeps Python's own iterator
(the rest of the frame may change it), which no trace can read. A break in every iteration makes
one resume function per iteration, in a chain at most `max_depth` long (config.max_resume_depth).

Inside grad-mode with blocks (`with torch.no_grad()`, `enable_grad()`, `set_grad_enabled(flag)`;
tracer/variables/torch_objects/contexts.py), as TorchDynamo does: the blocks around the instruction are read
from the exception table (bytecode/analysis.py `with_block_exits`: each with body's handler is PUSH_EXC_INFO,
WITH_EXCEPT_START at the depth of the block's exit plus one; its cleanup's handler is whatever
encloses the block), and the trace says which grad mode each one sets (trace_result.EnteredContext
in the exit's stack slot). The graph ends in the frame's own mode; step 3 runs the instruction in
the innermost block's mode, inside a protected range whose handler sets the frame's mode back and
re-raises (what the blocks' exits do in eager when the exception leaves them), and sets it back
before step 4 on the normal path. The resume function's prologue enters the blocks again in
order, outermost first: `torch.no_grad()` or `torch.enable_grad()` (a constant), BEFORE_WITH,
POP_TOP, which leaves a new exit where the original's exception table expects one; the body's
with-block handler and the exit call at the end of the block are the original's, unchanged. So
the rest of the block, and its exit, run as in eager, and the mode after the call is eager's.

Inside autocast blocks (`with torch.autocast("cpu", ...)`, `torch.amp.autocast(...)`) the same
way, with the block's arguments: the graph leaves every autocast block it entered before its end;
step 3 enters `torch.autocast(*args)` around the instruction (BEFORE_WITH, its exit kept in a
temporary: trace_result.ContextSwitch) and calls that exit with (None, None, None) after it, on
both paths, innermost first; the resume function's prologue enters the block again with
`functools.partial(torch.autocast, *args)()` (the EnteredContext's constant). Entering and leaving
a real block, rather than setting the state, keeps torch's autocast nesting count and weight cache
as a block's would be (the cache does not outlive one graph or the instruction: a weight cast
before the break is cast again after it).

A raise (RAISE_VARARGS) is cut with no target: the transformed code runs it after the graph and no
resume function follows. Nothing the transformed code or a resume function keeps in a local may be
the exception (exception -> traceback -> frame -> exception keeps every local of the frames it
passed alive until gc): the break code deletes its temporaries before the instruction
runs and before the resume call, and a resume function's prologue deletes its stack arguments.

What may not be cut here, and falls back to running the whole frame uncompiled (never a wrong
result):
- a frame that names `locals`, `vars`, `exec`, `eval`, `_getframe` or `currentframe`
  (plan.py `_INTROSPECTION`, by the loads of those names): it would see the compiler's locals, not eager's;
- an instruction inside a try block, or inside a with block of anything but a grad mode, a CPU
  autocast, an inference mode or a TorchDynamo-only block (the exception table would need the
  block's setup replayed in the resume function); an exception raised and caught in the trace is no
  break (tracer/handlers/exceptions.py). Inside a Python-written context manager's block the cut
  moves before its with statement where the trace saw what pushed the context manager
  (driver.py `_trace_moving`, rebuild.py BlockAtBreak), as it moves for a live generator; the
  fallback text names the break first, then why it could not be cut there;
- jumps other than the POP_JUMP_IF family, and anything outside `_BREAKABLE`. LOAD_GLOBAL of a
  callable and method loads (LOAD_METHOD, the method forms of LOAD_ATTR and LOAD_SUPER_ATTR, which
  push NULL or self as only the run knows) are cut too: the callable is loaded plainly (a bound
  method) and the resume function pushes a NULL where the version puts it;
- grad-mode blocks a resume function could not enter again in order (the mode at the break is not
  the innermost block's, or a block's exit restores another mode than the block around it sets),
  and autocast blocks on the stack that are not the trace's open blocks, in order.

Cells: the resume code's free variables are the original's cell variables, then its free
variables (instructions on a cell variable are made to read a free variable); the transformed code
makes the resume function per call, closing over the frame's real cells, so a closure made before
the break and the rest of the frame share them. Stores the trace made to the frame's own cells are
side effects replayed in step 2; a store to a free variable is itself a break (STORE_DEREF runs on
the real cell), since a function read through another path may share the cell.

A live local that is unbound at the break (assigned on a path not taken, or read only on another
path, such as a with block's handler reading what the body assigns) is left out of the resume
function's arguments: unbound there too, so a later read raises UnboundLocalError as it would have.

Side effects: the tracer records attribute stores and deletions on plain user objects and
nn.Modules, global stores and deletions, and mutation of lists and dicts read from the frame
(tracer/side_effects.py), and step 2 replays them, in program order, before the instruction runs:
the instruction (a print, say) and the resume function see the state eager would have there. The
state rebuilt in step 2 reloads objects read from the frame from their sources (the very objects
the effects were applied to), and all loads happen before the first effect is applied, so an
effect cannot redirect a source path. Tensor effects are the graph's own (in-place ops, run by the
graph in program order); containers the trace built are rebuilt from their items, once. What the
tracer refuses to record (a property setter, a custom __setattr__, a tensor attribute, nonlocal
stores, a mutation it cannot prove unaliased) is itself the unsupported instruction: it runs as
bytecode at the break, after the recorded effects, which is program order.
"""
from __future__ import annotations

from ..bytecode.analysis import BreakRefused
from .plan import BreakPlan, plan_break
from .resume import is_resume_code, resume_functions, stack_args

__all__ = ["BreakPlan", "BreakRefused", "plan_break", "is_resume_code", "resume_functions", "stack_args"]
