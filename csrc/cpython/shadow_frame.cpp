// Shadow frames: running transformed code in a fresh interpreter frame in place of the original.
//
// What this follows, per version (read, then written for our needs):
//   3.11.7: Python/pystate.c (push_chunk, _PyThreadState_BumpFramePointerSlow,
//           _PyThreadState_PopFrame), Python/frame.c (_PyFrame_Clear, take_ownership).
//   3.12.1: Python/pystate.c (push_chunk, _PyThreadState_PushFrame/PopFrame),
//           Python/ceval.c (_PyEvalFrameClearAndPop), Python/frame.c (_PyFrame_ClearExceptCode).
//   3.13.0: the same, with _PyEval_FrameClearAndPop exported and used directly.
// None of the pushing/clearing helpers are exported on 3.11/3.12, hence our own versions.
//
// Rejected alternative: copying the original frame's free-variable slots into the shadow frame
// (TorchDynamo's approach). It double-counts closure cells when the original frame already ran
// COPY_FREE_VARS (FastToLocals does that) and the shadow runs it again: a reference leak of every
// cell on 3.11+. We never copy free variables: the shadow frame's free slots start NULL and its own
// COPY_FREE_VARS fills them from the function's closure, so they are counted exactly once,
// whatever happened to the original frame. The original's slots are released with the original.
#include <cstring>

#include "common/check.h"
#include "cpython/frame.h"
#include "cpython/internal.h"

namespace tjc::cpython {
namespace {

constexpr size_t kChunkBytes = 16 * 1024;  // DATA_STACK_CHUNK_SIZE
constexpr size_t kMinimumOverhead = 1000;  // MINIMUM_OVERHEAD, in slots

size_t frame_slots(PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030C0000
  return static_cast<size_t>(code->co_framesize);
#else
  return static_cast<size_t>(code->co_nlocalsplus + code->co_stacksize) + FRAME_SPECIALS_SIZE;
#endif
}

// Reserves `nslots` words on the thread's frame data stack. The chunks come from the same arena
// allocator CPython's own push uses, so CPython's pop (which frees them on 3.12+) can free ours.
PyObject** push_frame_memory(PyThreadState* tstate, size_t nslots) {
  if (tstate->datastack_top != nullptr &&
      nslots < static_cast<size_t>(tstate->datastack_limit - tstate->datastack_top)) {
    PyObject** res = tstate->datastack_top;
    tstate->datastack_top += nslots;
    return res;
  }
  size_t bytes = kChunkBytes;
  while (bytes < sizeof(PyObject*) * (nslots + kMinimumOverhead)) bytes *= 2;
  PyObjectArenaAllocator arena;
  PyObject_GetArenaAllocator(&arena);
  auto* chunk = static_cast<_PyStackChunk*>(arena.alloc(arena.ctx, bytes));
  if (chunk == nullptr) {
    PyErr_NoMemory();
    return nullptr;
  }
  chunk->previous = tstate->datastack_chunk;
  chunk->size = bytes;
  chunk->top = 0;
  if (tstate->datastack_chunk != nullptr) {
    tstate->datastack_chunk->top = static_cast<size_t>(tstate->datastack_top - &tstate->datastack_chunk->data[0]);
  }
  tstate->datastack_chunk = chunk;
  tstate->datastack_limit = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(chunk) + bytes);
  // A root chunk (no previous) skips its first slot so that popping never frees it.
  PyObject** res = &chunk->data[chunk->previous == nullptr ? 1 : 0];
  tstate->datastack_top = res + nslots;
  return res;
}

#if PY_VERSION_HEX < 0x030D0000
void pop_frame_memory(PyThreadState* tstate, IFrame* frame) {
  PyObject** base = reinterpret_cast<PyObject**>(frame);
  _PyStackChunk* chunk = tstate->datastack_chunk;
  TJC_CHECK(chunk != nullptr);
  if (base == &chunk->data[0]) {
    _PyStackChunk* previous = chunk->previous;
    TJC_CHECK(previous != nullptr);
    tstate->datastack_top = &previous->data[previous->top];
    tstate->datastack_chunk = previous;
    tstate->datastack_limit = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(previous) + previous->size);
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    arena.free(arena.ctx, chunk, chunk->size);
  } else {
    TJC_DCHECK(tstate->datastack_top >= base);
    tstate->datastack_top = base;
  }
}
#endif

#if PY_VERSION_HEX < 0x030C0000
// 3.11: a frame object that outlives its interpreter frame (a traceback holds it) takes a copy of
// the frame's data and links to its caller's frame object (Python/frame.c: take_ownership).
void take_ownership_311(PyFrameObject* f, IFrame* frame) {
  const size_t size = reinterpret_cast<char*>(&frame->localsplus[frame->stacktop]) - reinterpret_cast<char*>(frame);
  std::memcpy(reinterpret_cast<void*>(f->_f_frame_data), frame, size);
  IFrame* copy = reinterpret_cast<IFrame*>(f->_f_frame_data);
  f->f_frame = copy;
  copy->owner = FRAME_OWNED_BY_FRAME_OBJECT;
  if (_PyFrame_IsIncomplete(copy)) {
    copy->prev_instr = _PyCode_CODE(copy->f_code) + copy->f_code->_co_firsttraceable;
  }
  // The shadow frame has been unlinked, so the thread's current frame is its caller.
  if (f->f_back == nullptr && copy->previous != nullptr) {
    PyFrameObject* back = PyEval_GetFrame();  // borrowed
    if (back != nullptr) f->f_back = reinterpret_cast<PyFrameObject*>(Py_NewRef(back));
  }
  copy->previous = nullptr;
  if (!PyObject_GC_IsTracked(reinterpret_cast<PyObject*>(f))) PyObject_GC_Track(f);
}

// 3.11: the evaluator does not clear an entry frame; whoever pushed it does (Python/frame.c:
// _PyFrame_Clear), then pops it.
void clear_and_pop_311(PyThreadState* tstate, IFrame* frame) {
  if (frame->frame_obj != nullptr) {
    PyFrameObject* f = frame->frame_obj;
    frame->frame_obj = nullptr;
    if (Py_REFCNT(f) > 1) {
      take_ownership_311(f, frame);
      Py_DECREF(f);
      pop_frame_memory(tstate, frame);
      return;
    }
    Py_DECREF(f);
  }
  for (int i = 0; i < frame->stacktop; ++i) Py_XDECREF(frame->localsplus[i]);
  Py_XDECREF(frame->f_locals);
  Py_DECREF(frame->f_func);
  Py_DECREF(frame->f_code);
  pop_frame_memory(tstate, frame);
}
#endif

int num_argument_slots(PyCodeObject* code) {
  return code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
         ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
}

}  // namespace

PyObject* eval_shadow_frame(PyThreadState* tstate, Frame* frame, PyCodeObject* code, EvalFrameFunc eval) {
  PyFunctionObject* func = iframe_function(frame);
  TJC_CHECK(func != nullptr);
  PyObject** memory = push_frame_memory(tstate, frame_slots(code));
  if (memory == nullptr) return nullptr;
  IFrame* shadow = reinterpret_cast<IFrame*>(memory);
  // The shadow runs the original function object with the transformed code: globals,
  // builtins, closure and defaults are the function's; only the instructions differ.
  Py_INCREF(func);
#if PY_VERSION_HEX >= 0x030C0000
  _PyFrame_Initialize(shadow, func, nullptr, code, 0);
#else
  shadow->f_func = func;
  shadow->f_code = reinterpret_cast<PyCodeObject*>(Py_NewRef(code));
  shadow->f_builtins = func->func_builtins;
  shadow->f_globals = func->func_globals;
  shadow->f_locals = nullptr;
  shadow->stacktop = code->co_nlocalsplus;
  shadow->frame_obj = nullptr;
  shadow->prev_instr = _PyCode_CODE(code) - 1;
  shadow->is_entry = false;
  shadow->owner = FRAME_OWNED_BY_THREAD;
  for (int i = 0; i < code->co_nlocalsplus; ++i) shadow->localsplus[i] = nullptr;
#endif
  // Arguments occupy the first slots of both codes (check_shadow_compatible); cell variables
  // that are arguments still hold the raw value here, and the shadow's MAKE_CELL wraps them.
  const int nargs = num_argument_slots(iframe_code(frame));
  for (int i = 0; i < nargs; ++i) shadow->localsplus[i] = Py_XNewRef(frame->localsplus[i]);

  PyObject* result = eval(tstate, shadow, 0);
#if PY_VERSION_HEX < 0x030C0000
  clear_and_pop_311(tstate, shadow);
#endif
  // 3.12+: the evaluator cleared and popped the shadow frame itself.
  return result;
}

void release_unevaluated_frame(PyThreadState* tstate, Frame* frame) {
#if PY_VERSION_HEX >= 0x030D0000
  _PyEval_FrameClearAndPop(tstate, frame);
#elif PY_VERSION_HEX >= 0x030C0000
  // Python/ceval.c _PyEvalFrameClearAndPop + Python/frame.c _PyFrame_ClearExceptCode, for a frame
  // that never ran: it has no frame object (nothing could see it) and is not a generator's.
  TJC_CHECK(frame->frame_obj == nullptr);
  TJC_CHECK(frame->owner == FRAME_OWNED_BY_THREAD);
  for (int i = 0; i < frame->stacktop; ++i) Py_XDECREF(frame->localsplus[i]);
  Py_XDECREF(frame->f_locals);
  Py_DECREF(frame->f_funcobj);
  Py_DECREF(frame->f_code);
  pop_frame_memory(tstate, frame);
#else
  (void)tstate;
  (void)frame;
#endif
}

void copy_free_vars_like_fast_to_locals(Frame* frame) {
  PyCodeObject* code = iframe_code(frame);
  PyFunctionObject* func = iframe_function(frame);
  const int nfree = code->co_nfreevars;
  if (nfree == 0 || func == nullptr || func->func_closure == nullptr) return;
  const int offset = code->co_nlocalsplus - nfree;
  if (frame->localsplus[offset] != nullptr) return;
  for (int i = 0; i < nfree; ++i) {
    frame->localsplus[offset + i] = Py_NewRef(PyTuple_GET_ITEM(func->func_closure, i));
  }
  // Mark COPY_FREE_VARS (instruction 0, no inline caches) as run, as FastToLocals does.
#if PY_VERSION_HEX >= 0x030D0000
  frame->instr_ptr = _PyCode_CODE(code) + 1;
#else
  frame->prev_instr = _PyCode_CODE(code);
#endif
}

}  // namespace tjc::cpython
