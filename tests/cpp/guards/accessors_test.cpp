// Accessors: how each source reaches its value, in mapping and frame mode.
#include "guards/accessors.h"

#include "absl/strings/str_cat.h"
#include "guards/guard_errors.h"

#include "guards/guard_test_util.h"

namespace tjc {
namespace {

using namespace tjc::testing;

TEST(Accessors, LocalInMappingMode) {
  RootGuardManager root;
  auto x = ok_or_die(root.child(kLocal, s("x")));
  expect_ok(x->add_leaf(LeafKind::kEqualsMatch, py::int_(3)));
  py::dict present;
  present["x"] = 3;
  EXPECT_TRUE(root.check(mapping_view(present)));
  py::dict absent;
  EXPECT_FALSE(root.check(mapping_view(absent)));
  EXPECT_EQ(root.explain(mapping_view(absent)), "L['x']: missing");
  EXPECT_FALSE(PyErr_Occurred());
}

TEST(Accessors, GlobalReadsGlobalsNotBuiltins) {
  RootGuardManager root;
  expect_ok(ok_or_die(root.child(kGlobal, s("len")))->add_leaf(LeafKind::kNotNone));
  py::dict locals, globals;
  EXPECT_FALSE(root.check(mapping_view(locals, globals)));  // len is only a builtin
  EXPECT_EQ(root.explain(mapping_view(locals, globals)), "G['len']: missing");
  globals["len"] = 1;
  EXPECT_TRUE(root.check(mapping_view(locals, globals)));
}

TEST(Accessors, BuiltinReadsBuiltins) {
  RootGuardManager root;
  expect_ok(ok_or_die(root.child(kBuiltin, s("len")))->add_leaf(LeafKind::kIdMatch, builtins_dict()["len"]));
  py::dict locals, globals;
  EXPECT_TRUE(root.check(mapping_view(locals, globals)));
  py::dict other_builtins;
  other_builtins["len"] = py::module_::import("builtins").attr("abs");
  EXPECT_FALSE(root.check(mapping_view(locals, globals, other_builtins)));
  EXPECT_EQ(ok_or_die(root.child(kBuiltin, s("len")))->source(), "B['len']");
}

TEST(Accessors, AttrMissingIsFailureWithErrorCleared) {
  py::dict ns = run_python("class A:\n  pass\na = A()\na.fc = 5\n");
  RootGuardManager root;
  auto a = ok_or_die(root.child(kLocal, s("a")));
  expect_ok(ok_or_die(a->child(kAttr, s("fc")))->add_leaf(LeafKind::kEqualsMatch, py::int_(5)));
  py::dict locals;
  locals["a"] = ns["a"];
  EXPECT_TRUE(root.check(mapping_view(locals)));
  locals["a"] = ns["A"]();  // no attribute fc
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_FALSE(PyErr_Occurred());
  std::string reason = root.explain(mapping_view(locals)).value_or("");
  EXPECT_EQ(reason.rfind("L['a'].fc: raised AttributeError: ", 0), 0u) << reason;
  EXPECT_FALSE(PyErr_Occurred());
}

TEST(Accessors, ItemFastPathsAndGenericGetItem) {
  RootGuardManager root;
  auto xs = ok_or_die(root.child(kLocal, s("xs")));
  expect_ok(ok_or_die(xs->child(kItem, py::int_(2)))->add_leaf(LeafKind::kEqualsMatch, py::int_(30)));
  expect_ok(ok_or_die(xs->child(kItem, py::int_(-1)))->add_leaf(LeafKind::kEqualsMatch, py::int_(30)));
  EXPECT_EQ(ok_or_die(xs->child(kItem, py::int_(2)))->source(), "L['xs'][2]");
  py::dict locals;
  locals["xs"] = py::eval("[10, 20, 30]");
  EXPECT_TRUE(root.check(mapping_view(locals)));
  locals["xs"] = py::eval("(10, 20, 30)");
  EXPECT_TRUE(root.check(mapping_view(locals)));
  locals["xs"] = py::eval("[10, 20]");  // index 2 out of range: missing, not an error
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_EQ(root.explain(mapping_view(locals)), "L['xs'][2]: missing");
  locals["xs"] = py::eval("range(10, 40, 10)");  // generic __getitem__
  EXPECT_TRUE(root.check(mapping_view(locals)));
  locals["xs"] = py::eval("range(2)");  // IndexError from __getitem__
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_FALSE(PyErr_Occurred());
}

TEST(Accessors, DictItemAndKeyErrorFromMapping) {
  py::dict ns = run_python(
      "class M:\n  def __getitem__(self, k):\n    raise KeyError(k)\n");
  RootGuardManager root;
  auto d = ok_or_die(root.child(kLocal, s("d")));
  expect_ok(ok_or_die(d->child(kItem, s("k")))->add_leaf(LeafKind::kEqualsMatch, py::int_(1)));
  EXPECT_EQ(ok_or_die(d->child(kItem, s("k")))->source(), "L['d']['k']");
  py::dict locals;
  locals["d"] = py::eval("{'k': 1}");
  EXPECT_TRUE(root.check(mapping_view(locals)));
  locals["d"] = py::eval("{'j': 1}");
  EXPECT_FALSE(root.check(mapping_view(locals)));
  locals["d"] = ns["M"]();
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_EQ(root.explain(mapping_view(locals)), "L['d']['k']: raised KeyError: 'k'");
}

TEST(Accessors, ItemKeysMustBeImmutableBuiltins) {
  RootGuardManager root;
  auto d = ok_or_die(root.child(kLocal, s("d")));
  absl::StatusOr<std::shared_ptr<GuardManager>> child = d->child(kItem, py::list());
  ASSERT_FALSE(child.ok());
  EXPECT_TRUE(is_type_error(child.status()));
}

TEST(Accessors, TypeAccessor) {
  RootGuardManager root;
  auto t = ok_or_die(ok_or_die(root.child(kLocal, s("x")))->child(kType));
  EXPECT_EQ(t->source(), "type(L['x'])");
  expect_ok(t->add_leaf(LeafKind::kIdMatch, py::type::of(py::int_(1))));
  py::dict locals;
  locals["x"] = 7;
  EXPECT_TRUE(root.check(mapping_view(locals)));
  locals["x"] = "7";
  EXPECT_FALSE(root.check(mapping_view(locals)));
}

// vars(x): the instance __dict__ as object's lookup finds it; the class's own __getattribute__
// (which would raise here, and counts its calls) never runs.
TEST(Accessors, InstanceDictRunsNoClassHook) {
  py::dict ns = run_python(
      "class Hooked:\n"
      "    calls = 0\n"
      "    def __getattribute__(self, name):\n"
      "        type(self).calls += 1\n"
      "        raise AttributeError(name)\n"
      "h = Hooked.__new__(Hooked)\n"
      "object.__setattr__(h, 'k', 1)\n");
  RootGuardManager root;
  auto d = ok_or_die(ok_or_die(root.child(kLocal, s("x")))->child(kInstanceDict));
  EXPECT_EQ(d->source(), "vars(L['x'])");
  expect_ok(d->add_leaf(LeafKind::kDictKeys, py::make_tuple(s("k"))));
  py::dict locals;
  locals["x"] = ns["h"];
  EXPECT_TRUE(root.check(mapping_view(locals)));
  EXPECT_EQ(ns["Hooked"].attr("calls").cast<int>(), 0);
  locals["x"] = 7;  // no __dict__: the access raises, the guard fails
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_FALSE(PyErr_Occurred());
}

TEST(Accessors, FrameModeLocalsByArgumentSlot) {
  py::dict ns = run_python("def f(a, b, *args, c, **kw):\n  d = 1\n  return a\n");
  RootGuardManager root;
  expect_ok(ok_or_die(root.child(kLocal, s("b")))->add_leaf(LeafKind::kEqualsMatch, py::int_(2)));
  expect_ok(ok_or_die(root.child(kLocal, s("c")))->add_leaf(LeafKind::kEqualsMatch, py::int_(4)));
  expect_ok(root.bind(reinterpret_cast<PyCodeObject*>(ns["f"].attr("__code__").ptr())));
  // Slots: a, b, c (kw-only), args, kw -- CPython orders kw-only before *args/**kw.
  FakeFrame frame(ns["f"], {py::int_(1), py::int_(2), py::int_(4), py::tuple(), py::dict()});
  EXPECT_TRUE(root.check(frame.view));
  frame.localsplus[1] = py::int_(9).ptr();  // b
  EXPECT_FALSE(root.check(frame.view));
  EXPECT_EQ(root.explain(frame.view), "L['b'] == 2 failed: got 9");
  frame.localsplus[1] = nullptr;  // unbound
  EXPECT_EQ(root.explain(frame.view), "L['b']: missing");
  EXPECT_FALSE(root.check(frame.view));
}

TEST(Accessors, FrameModeClosureReadsCellContents) {
  py::dict ns = run_python(
      "def outer():\n"
      "  n = 3\n"
      "  def inner(x):\n"
      "    return x + n\n"
      "  return inner\n"
      "def outer_empty():\n"
      "  def inner(x):\n"
      "    return x + n\n"
      "  return inner\n"
      "  n = 1\n"
      "f = outer()\n"
      "g = outer_empty()\n");
  RootGuardManager root;
  expect_ok(ok_or_die(root.child(kClosure, s("n")))->add_leaf(LeafKind::kEqualsMatch, py::int_(3)));
  EXPECT_EQ(ok_or_die(root.child(kClosure, s("n")))->source(), "C['n']");
  expect_ok(root.bind(reinterpret_cast<PyCodeObject*>(ns["f"].attr("__code__").ptr())));
  FakeFrame frame(ns["f"], {py::int_(1)});
  EXPECT_TRUE(root.check(frame.view));
  // The same code with an empty cell (outer_empty's `n` was never assigned).
  FakeFrame empty(ns["g"], {py::int_(1)});
  empty.view.code = frame.view.code;
  EXPECT_FALSE(root.check(empty.view));
  EXPECT_EQ(root.explain(empty.view), "C['n']: missing");
  EXPECT_FALSE(PyErr_Occurred());
}

// closure_cell reads the cell object itself: an identity relation compares it with the same cell
// reached through a function's __closure__; mapping mode has no cells (missing).
TEST(Accessors, FrameModeClosureCellReadsTheCellItself) {
  py::dict ns = run_python(
      "def outer():\n"
      "  n = 3\n"
      "  def helper():\n"
      "    return n\n"
      "  def inner(x, h):\n"
      "    return x + n + h()\n"
      "  return inner, helper\n"
      "f, h = outer()\n"
      "g, other = outer()\n");
  RootGuardManager root;
  auto cell = ok_or_die(root.child(kClosureCell, s("n")));
  EXPECT_EQ(cell->source(), "cell(C['n'])");
  auto through_h = ok_or_die(ok_or_die(ok_or_die(root.child(kLocal, s("h")))->child(kAttr, s("__closure__")))
                                 ->child(kItem, py::int_(0)));
  expect_ok(root.add_identity_relation({cell, through_h}, {0, 0}));
  expect_ok(root.bind(reinterpret_cast<PyCodeObject*>(ns["f"].attr("__code__").ptr())));
  FakeFrame same(ns["f"], {py::int_(1), ns["h"]});
  EXPECT_TRUE(root.check(same.view));
  FakeFrame other(ns["f"], {py::int_(1), ns["other"]});  // a helper over another call's cell
  EXPECT_FALSE(root.check(other.view));
  py::dict locals;
  locals["h"] = ns["h"];
  locals["n"] = 3;
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_FALSE(PyErr_Occurred());
}

// kAccessorSpecs is the one home of what each kind is: every kind builds from its row, where its row
// says (the root for kFrame kinds, a value's node for kParent ones), and prints its row's text.
TEST(Accessors, EveryKindBuildsFromItsRow) {
  RootGuardManager root;
  auto x = ok_or_die(root.child(kLocal, s("x")));
  for (const AccessorSpec& spec : kAccessorSpecs) {
    if (spec.reads == Reads::kNothing) continue;
    SCOPED_TRACE(spec.builder);
    // A key is an int, but where the kind takes (args, kwargs) or a type.
    py::object key = spec.kind == AccessorKind::kCall    ? py::object(py::make_tuple(py::tuple(), py::tuple()))
                     : spec.kind == AccessorKind::kApply ? py::reinterpret_borrow<py::object>(
                                                               reinterpret_cast<PyObject*>(&PyLong_Type))
                                                         : py::object(py::int_(2));
    const char* key_text = spec.kind == AccessorKind::kCall    ? "((), ())"
                           : spec.kind == AccessorKind::kApply ? "<class 'int'>"
                                                               : "2";
    py::object operand = spec.operand == Operand::kName  ? py::object(s("n"))
                         : spec.operand == Operand::kKey ? key
                                                         : py::object();
    GuardManager& parent = spec.reads == Reads::kFrame ? static_cast<GuardManager&>(root) : *x;
    GuardManager& wrong = spec.reads == Reads::kFrame ? *x : static_cast<GuardManager&>(root);
    auto node = ok_or_die(parent.child(spec.kind, operand));
    EXPECT_EQ(node->accessor().kind(), spec.kind);
    EXPECT_EQ(node.get(), ok_or_die(parent.child(spec.kind, operand)).get());
    std::string expected = absl::StrCat(spec.prefix, spec.reads == Reads::kParent ? "L['x']" : "", spec.infix,
                                        spec.operand == Operand::kName  ? "n"
                                        : spec.operand == Operand::kKey ? key_text
                                                                        : "",
                                        spec.suffix);
    EXPECT_EQ(node->source(), expected);
    absl::Status refused = wrong.child(spec.kind, operand).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find(spec.example), std::string::npos) << refused.message();
  }
  EXPECT_EQ(ok_or_die(root.child(kBuiltin, s("len")))->source(), "B['len']");
  EXPECT_EQ(ok_or_die(x->child(kType))->source(), "type(L['x'])");
  EXPECT_FALSE(root.child(kRoot).ok());
  EXPECT_FALSE(PyErr_Occurred());
}

}  // namespace
}  // namespace tjc
