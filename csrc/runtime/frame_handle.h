// FrameHandle: the `frame` a cache-miss callback receives — a view of a frame that has not
// started, valid only while the callback runs.
//
// Ownership: borrows the interpreter frame; the hook invalidates the handle when the callback
// returns, after which every attribute raises RuntimeError instead of reading freed memory. The
// lazily built f_locals dict and f_back are owned by the handle until then.
//
// Threads: GIL held; only the thread that handles the miss creates and invalidates it.
#pragma once

#include <pybind11/pybind11.h>

#include "cpython/frame.h"
#include "guards/frame_view.h"

namespace tjc {

namespace py = pybind11;

class FrameHandle {
 public:
  FrameHandle(cpython::Frame* frame, py::object f_back) : frame_(frame), f_back_(std::move(f_back)) {}

  bool valid() const { return frame_ != nullptr; }
  // Drops everything the handle holds: a handle the callback kept (in a closure, a list) must not
  // keep the caller's frame object alive — that frame's locals can hold the callback, and a
  // pybind11 object is invisible to the cycle collector, so the cycle would never be freed.
  void invalidate() {
    frame_ = nullptr;
    f_locals_ = py::object();
    f_back_ = py::object();
  }
  // nullptr once invalid; callers (bindings) raise.
  cpython::Frame* frame() const { return frame_; }
  const py::object& f_back() const { return f_back_; }
  py::object& f_locals_cache() { return f_locals_; }

 private:
  cpython::Frame* frame_;
  py::object f_back_;
  py::object f_locals_;
};

}  // namespace tjc
