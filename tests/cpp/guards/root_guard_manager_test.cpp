// RootGuardManager: bind, freezing, frame-mode checks, weak identity and invalidation, speed.
#include "guards/root_guard_manager.h"

#include <chrono>
#include <cstdio>

#include "guards/guard_errors.h"
#include "guards/guard_test_util.h"

namespace tjc {
namespace {

using namespace tjc::testing;

PyCodeObject* code_of(py::handle fn) {
  return reinterpret_cast<PyCodeObject*>(fn.attr("__code__").ptr());
}

class Root : public ::testing::Test {
 protected:
  py::dict ns = run_python(
      "def f(x, *args, y=1, **kw):\n"
      "  z = x\n"
      "  return z\n"
      "def g(x):\n"
      "  return x\n"
      "class Linear:\n  pass\n");
};

TEST_F(Root, BindRefusesNonArgumentsAndUnknownNames) {
  {
    RootGuardManager root;
    ASSERT_TRUE(root.child(kLocal, s("z")).ok());  // a local, but unbound at frame entry
    absl::Status status = root.bind(code_of(ns["f"]));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(status.message(),
              "L['z']: 'z' is not an argument of f (only arguments are bound when the frame starts)");
    EXPECT_FALSE(root.bound());
    EXPECT_TRUE(root.child(kLocal, s("w")).ok());  // a failed bind does not freeze
  }
  {
    RootGuardManager root;
    ASSERT_TRUE(root.child(kClosure, s("x")).ok());
    absl::Status status = root.bind(code_of(ns["f"]));
    EXPECT_EQ(status.message(), "C['x']: 'x' is not a free variable of f");
  }
  {
    RootGuardManager root;
    for (const char* name : {"x", "args", "y", "kw"}) ASSERT_TRUE(root.child(kLocal, s(name)).ok());
    expect_ok(root.bind(code_of(ns["f"])));
    EXPECT_TRUE(root.bound());
    expect_ok(root.bind(code_of(ns["f"])));  // same code: no-op
    EXPECT_EQ(root.bind(code_of(ns["g"])).code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST_F(Root, BindFreezesTheTree) {
  RootGuardManager root;
  auto x = ok_or_die(root.child(kLocal, s("x")));
  expect_ok(x->add_leaf(LeafKind::kTypeMatch, py::type::of(py::int_(1))));
  expect_ok(root.bind(code_of(ns["g"])));
  absl::Status status = x->add_leaf(LeafKind::kEqualsMatch, py::int_(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "guard tree is frozen: it belongs to a cache entry");
  EXPECT_EQ(x->child(kAttr, s("real")).status().message(), status.message());
  EXPECT_EQ(root.child(kLocal, s("y")).status().message(), status.message());
  EXPECT_EQ(root.add_global_state().message(), status.message());
  // Asking for an existing source is still fine.
  EXPECT_EQ(ok_or_die(root.child(kLocal, s("x"))), x);
  EXPECT_EQ(root.num_guards(), 1);
}

TEST_F(Root, FrameModeNeedsTheBoundCode) {
  RootGuardManager root;
  expect_ok(ok_or_die(root.child(kLocal, s("x")))->add_leaf(LeafKind::kEqualsMatch, py::int_(1)));
  FakeFrame frame(ns["g"], {py::int_(1)});
  EXPECT_FALSE(root.check(frame.view));  // unbound: no slot indices
  EXPECT_EQ(root.explain(frame.view),
            "the guard tree is not bound to a code object (bind(code) first)");
  expect_ok(root.bind(code_of(ns["g"])));
  EXPECT_TRUE(root.check(frame.view));
  EXPECT_EQ(root.explain(frame.view), std::nullopt);
  FakeFrame other(ns["f"], {py::int_(1)});
  EXPECT_FALSE(root.check(other.view));
  // Mapping mode still works on a bound root.
  py::dict locals;
  locals["x"] = 1;
  EXPECT_TRUE(root.check(mapping_view(locals)));
}

TEST_F(Root, DeathOfAnIdentityTargetInvalidatesAndCallsBackOnce) {
  auto root = std::make_shared<RootGuardManager>();
  py::object m = ns["Linear"]();
  auto fc = ok_or_die(ok_or_die(root->child(kLocal, s("self")))->child(kAttr, s("fc")));
  expect_ok(fc->add_leaf(LeafKind::kIdMatch, m));
  EXPECT_TRUE(root->has_identity_guards());
  int calls = 0;
  root->set_invalidation_callback([&calls] { ++calls; });
  py::object self = ns["Linear"]();
  self.attr("fc") = m;
  py::dict locals;
  locals["self"] = self;
  EXPECT_TRUE(root->check(mapping_view(locals)));
  EXPECT_EQ(calls, 0);

  py::object probe = py::module_::import("weakref").attr("ref")(m);
  self.attr("fc") = py::none();
  m = py::object();  // the last strong reference: the tree must not have held one
  EXPECT_TRUE(probe().is_none());
  EXPECT_TRUE(root->invalidated());
  EXPECT_EQ(calls, 1);
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_FALSE(root->check(mapping_view(locals)));
  EXPECT_EQ(root->explain(mapping_view(locals)),
            "L['self'].fc: the guarded object is gone (it was deallocated)");
  EXPECT_EQ(root->debug_string().rfind("RootGuardManager (invalidated: L['self'].fc died)", 0), 0u);
  // A new callback on an invalidated root runs at once; the old one never again.
  int late = 0;
  root->set_invalidation_callback([&late] { ++late; });
  EXPECT_EQ(late, 1);
  EXPECT_EQ(calls, 1);
}

TEST_F(Root, InvalidationBeforeTheCallbackIsSetCallsItWhenSet) {
  RootGuardManager root;
  py::object m = ns["Linear"]();
  expect_ok(ok_or_die(root.child(kLocal, s("m")))->add_leaf(LeafKind::kIdMatch, m));
  m = py::object();
  EXPECT_TRUE(root.invalidated());
  int calls = 0;
  root.set_invalidation_callback([&calls] { ++calls; });
  EXPECT_EQ(calls, 1);
}

TEST_F(Root, HeapTypeDeathInvalidates) {
  RootGuardManager root;
  py::dict scope = run_python("class Temp:\n  pass\n");
  expect_ok(ok_or_die(root.child(kLocal, s("x")))->add_leaf(LeafKind::kTypeMatch, scope["Temp"]));
  scope.clear();  // the class dies (no instances, no subclasses; its MRO cycle needs a collect)
  py::module_::import("gc").attr("collect")();
  EXPECT_TRUE(root.invalidated());
  EXPECT_EQ(root.explain(mapping_view(py::dict())),
            "L['x']: the guarded object is gone (it was deallocated)");
}

TEST_F(Root, ChildOutlivingTheRootNeverCallsTheRootsCallback) {
  std::shared_ptr<GuardManager> child;
  bool called = false;
  py::object m = ns["Linear"]();
  {
    auto root = std::make_shared<RootGuardManager>();
    child = ok_or_die(root->child(kLocal, s("m")));
    expect_ok(child->add_leaf(LeafKind::kIdMatch, m));
    root->set_invalidation_callback([&called] { called = true; });
  }
  m = py::object();  // the child's weakref fires; the root (and its callback) are gone
  EXPECT_FALSE(called);
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(Root, CallbackMayDropTheRoot) {
  auto root = std::make_shared<RootGuardManager>();
  py::object m = ns["Linear"]();
  expect_ok(ok_or_die(root->child(kLocal, s("m")))->add_leaf(LeafKind::kIdMatch, m));
  std::shared_ptr<RootGuardManager>* holder = &root;
  root->set_invalidation_callback([holder] { holder->reset(); });  // frees the tree mid-callback
  m = py::object();
  EXPECT_EQ(root, nullptr);
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(Root, DroppingTheTreeDropsItsWeakrefs) {
  py::object m = ns["Linear"]();
  py::object weakref = py::module_::import("weakref");
  const Py_ssize_t before = py::len(weakref.attr("getweakrefs")(m));
  {
    RootGuardManager root;
    expect_ok(ok_or_die(root.child(kLocal, s("m")))->add_leaf(LeafKind::kIdMatch, m));
    EXPECT_EQ(py::len(weakref.attr("getweakrefs")(m)), before + 1);
  }
  EXPECT_EQ(py::len(weakref.attr("getweakrefs")(m)), before);
}

TEST_F(Root, CheckIsFast) {
  // One local, TYPE_MATCH + EQUALS_MATCH, frame mode (what the runtime calls). Printed for the
  // record; the bound is loose because this may be a Debug build on a shared machine.
  RootGuardManager root;
  auto x = ok_or_die(root.child(kLocal, s("x")));
  expect_ok(x->add_leaf(LeafKind::kTypeMatch, py::type::of(py::int_(1))));
  expect_ok(x->add_leaf(LeafKind::kEqualsMatch, py::int_(3)));
  expect_ok(root.bind(code_of(ns["g"])));
  FakeFrame frame(ns["g"], {py::int_(3)});
  constexpr int kIterations = 1000000;
  bool all = true;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kIterations; ++i) all &= root.check(frame.view);
  auto elapsed = std::chrono::steady_clock::now() - start;
  double ns_per_check = std::chrono::duration<double, std::nano>(elapsed).count() / kIterations;
  std::printf("[   INFO   ] one-local TYPE_MATCH+EQUALS_MATCH check: %.1f ns\n", ns_per_check);
  EXPECT_TRUE(all);
  EXPECT_LT(ns_per_check, 2000.0);
}

}  // namespace
}  // namespace tjc
