// The eval-frame hook's installation: only while a thread has a callback, chained to whatever
// evaluator was installed before it, and that evaluator restored afterwards.
#include "runtime/eval_frame.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include "guards/guard_test_util.h"
#include "runtime/thread_state.h"

namespace tjc {
namespace {

namespace py = pybind11;

int g_counted_frames = 0;

// Another PEP 523 user, installed before ours: counts the frames it sees.
PyObject* counting_eval(PyThreadState* tstate, cpython::Frame* frame, int throw_flag) {
  ++g_counted_frames;
  return cpython::default_eval_frame_func()(tstate, frame, throw_flag);
}

TEST(EvalFrameHook, ChainsToAndRestoresThePreviousEvaluator) {
  py::dict ns = testing::run_python(
      "seen = []\n"
      "def cb(frame, entries):\n"
      "    seen.append(frame.f_code.co_name)\n"
      "    return None\n"
      "def work(x):\n"
      "    return x + 1\n");
  ASSERT_FALSE(hook_installed());
  cpython::set_eval_frame_func(&counting_eval);
  g_counted_frames = 0;
  py::object prior = set_eval_frame(py::none());
  EXPECT_TRUE(prior.is_none());
  EXPECT_EQ(cpython::get_eval_frame_func(), &counting_eval);

  // With a callback set, frames go through our hook, which hands what it does not run itself
  // to the evaluator that was there before.
  prior = set_eval_frame(ns["cb"]);
  EXPECT_TRUE(prior.is_none());
  EXPECT_TRUE(hook_installed());
  EXPECT_EQ(previous_eval_frame(), &counting_eval);
  const int before = g_counted_frames;
  // (The callback path needs the Python classes of the _C module, which this binary does not
  // load; the Python tests cover it.) Frames run while the hook is suspended pass through our
  // hook to the evaluator that was there before.
  ThreadState& ts = thread_state();
  ts.suspended++;
  EXPECT_EQ(ns["work"](1).cast<int>(), 2);
  ts.suspended--;
  EXPECT_EQ(g_counted_frames, before + 1);
  EXPECT_EQ(py::len(ns["seen"]), 0u);

  prior = set_eval_frame(py::none());
  EXPECT_TRUE(prior.is(ns["cb"]));
  EXPECT_FALSE(hook_installed());
  EXPECT_EQ(cpython::get_eval_frame_func(), &counting_eval) << "the earlier evaluator is back";
  cpython::set_eval_frame_func(cpython::default_eval_frame_func());
  EXPECT_EQ(cpython::get_eval_frame_func(), cpython::default_eval_frame_func());
}

}  // namespace
}  // namespace tjc
