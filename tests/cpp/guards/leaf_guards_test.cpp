// Leaf guards: each one passes, fails, words its failure, and refuses what it must not hold.
#include "guards/leaf_guards.h"

#include "guards/guard_errors.h"
#include "guards/guard_test_util.h"
#include "guards/torch_backend.h"

namespace tjc {
namespace {

using namespace tjc::testing;

class LeafGuards : public ::testing::Test {
 protected:
  std::shared_ptr<TreeState> state = std::make_shared<TreeState>();
  const std::string source = "L['x']";
  py::dict ns = run_python(
      "class Foo:\n  pass\n"
      "class BadEq:\n"
      "  def __eq__(self, other):\n    raise ValueError('boom')\n"
      "  __hash__ = object.__hash__\n"
      "class BadLen:\n"
      "  def __len__(self):\n    raise RuntimeError('no len')\n"
      "foo = Foo()\n");
};

TEST_F(LeafGuards, TypeMatch) {
  LeafPtr leaf = ok_or_die(make_type_match(py::type::of(py::int_(0)), state, source));
  EXPECT_TRUE(leaf->check(py::int_(5).ptr()));
  EXPECT_FALSE(leaf->check(py::str("5").ptr()));
  EXPECT_FALSE(leaf->check(Py_True));  // bool is a subclass, not the type
  EXPECT_EQ(leaf->explain(py::str("5").ptr(), source), "type(L['x']) is int failed: got str");
  EXPECT_EQ(leaf->explain(py::int_(5).ptr(), source), std::nullopt);
  EXPECT_EQ(leaf->describe(), "TYPE_MATCH: int");
  EXPECT_EQ(state->weak_watches, 0);  // int is a static type: held strongly, never dies
}

TEST_F(LeafGuards, TypeMatchHoldsHeapTypesWeakly) {
  py::object cls = ns["Foo"];
  LeafPtr leaf = ok_or_die(make_type_match(cls, state, source));
  EXPECT_EQ(state->weak_watches, 1);
  EXPECT_TRUE(leaf->check(ns["foo"].ptr()));
  EXPECT_EQ(leaf->describe(), "TYPE_MATCH: Foo (weak)");  // exec'd code has no __module__
  EXPECT_EQ(leaf->explain(py::int_(1).ptr(), source), "type(L['x']) is Foo failed: got int");
  auto refused = make_type_match(py::int_(3), state, source);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(is_type_error(refused.status()));
  leaf.reset();
  EXPECT_EQ(state->weak_watches, 0);
}

TEST_F(LeafGuards, IdMatch) {
  py::object foo = ns["foo"];
  LeafPtr leaf = ok_or_die(make_id_match(foo, state, source));
  EXPECT_TRUE(leaf->check(foo.ptr()));
  py::object other = ns["Foo"]();
  EXPECT_FALSE(leaf->check(other.ptr()));
  EXPECT_EQ(leaf->describe(), "ID_MATCH: <Foo object> (weak)");
  std::string reason = leaf->explain(other.ptr(), source).value_or("");
  EXPECT_EQ(reason.rfind("L['x'] is <Foo object> at 0x", 0), 0u) << reason;
  EXPECT_NE(reason.find("failed: got <Foo object> at 0x"), std::string::npos) << reason;
}

TEST_F(LeafGuards, IdMatchRefusesNonWeakrefable) {
  auto refused = make_id_match(py::int_(1000), state, source);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(is_type_error(refused.status()));
  EXPECT_EQ(refused.status().message(),
            "L['x']: ID_MATCH needs a weakrefable object, got int; guard by value (equals_match) "
            "or type (type_match) instead");
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(LeafGuards, IdMatchHoldsSingletonsStrongly) {
  LeafPtr leaf = ok_or_die(make_id_match(py::none(), state, source));
  EXPECT_EQ(state->weak_watches, 0);
  EXPECT_TRUE(leaf->check(Py_None));
  EXPECT_EQ(leaf->describe(), "ID_MATCH: None");
}

TEST_F(LeafGuards, IdMatchStrongHoldsWhatCannotBeWeaklyReferenced) {
  // torch.dtype is not weakrefable; Python asks for a strong hold (guard/tree.py). An int stands in.
  py::object big = py::int_(100000);
  LeafPtr leaf = ok_or_die(make_id_match(big, state, source, IdHold::kStrong));
  EXPECT_EQ(state->weak_watches, 0);
  EXPECT_TRUE(leaf->check(big.ptr()));
  py::object other = py::int_(100001);
  EXPECT_FALSE(leaf->check(other.ptr()));
  EXPECT_EQ(leaf->describe(), "ID_MATCH: <int object>");  // strong: no "(weak)"
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(LeafGuards, EqualsMatchIsTypeExact) {
  LeafPtr leaf = ok_or_die(make_equals_match(py::int_(3), source));
  EXPECT_TRUE(leaf->check(py::int_(3).ptr()));
  EXPECT_FALSE(leaf->check(py::int_(4).ptr()));
  EXPECT_FALSE(leaf->check(py::float_(3.0).ptr()));  // 3.0 == 3, but another type
  EXPECT_EQ(leaf->explain(py::int_(4).ptr(), "L['n']"), "L['n'] == 3 failed: got 4");
  EXPECT_EQ(leaf->explain(py::str("a").ptr(), "L['n']"), "L['n'] == 3 failed: got 'a'");
  EXPECT_EQ(leaf->describe(), "EQUALS_MATCH: 3");
}

TEST_F(LeafGuards, EqualsMatchRefusesMutableOrUserValues) {
  for (py::object value : std::vector<py::object>{py::list(), ns["foo"], py::eval("(1, [2])")}) {
    auto refused = make_equals_match(value, source);
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(is_type_error(refused.status()));
    EXPECT_NE(refused.status().message().find("guard by identity (id_match) instead"),
              std::string::npos);
  }
  EXPECT_TRUE(make_equals_match(py::eval("(1, 'a', (None, 2.5, b'x'))"), source).ok());
}

TEST_F(LeafGuards, EqualsMatchRaisingEqIsAFailureWithNoErrorLeft) {
  LeafPtr leaf = ok_or_die(make_equals_match(py::eval("(1,)"), source));
  py::tuple value = py::make_tuple(ns["BadEq"]());  // tuple == tuple calls BadEq.__eq__
  EXPECT_FALSE(leaf->check(value.ptr()));
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_EQ(leaf->explain(value.ptr(), source), "L['x'] == (1,) raised ValueError: boom");
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(LeafGuards, NoneNotNoneBool) {
  LeafPtr none = make_none_match();
  LeafPtr not_none = make_not_none();
  LeafPtr is_true = make_bool_match(true);
  EXPECT_TRUE(none->check(Py_None));
  EXPECT_FALSE(none->check(Py_False));
  EXPECT_EQ(none->explain(py::int_(0).ptr(), source), "L['x'] is None failed: got 0");
  EXPECT_TRUE(not_none->check(Py_False));
  EXPECT_FALSE(not_none->check(Py_None));
  EXPECT_EQ(not_none->explain(Py_None, source), "L['x'] is not None failed: got None");
  EXPECT_TRUE(is_true->check(Py_True));
  EXPECT_FALSE(is_true->check(py::int_(1).ptr()));  // identity with True, not truthiness
  EXPECT_EQ(is_true->explain(Py_False, source), "L['x'] is True failed: got False");
  EXPECT_EQ(is_true->describe(), "BOOL_MATCH: True");
}

TEST_F(LeafGuards, Length) {
  LeafPtr leaf = ok_or_die(make_length(2));
  EXPECT_TRUE(leaf->check(py::eval("[1, 2]").ptr()));
  EXPECT_TRUE(leaf->check(py::eval("'ab'").ptr()));
  EXPECT_TRUE(leaf->check(py::eval("{1: 2, 3: 4}").ptr()));
  EXPECT_FALSE(leaf->check(py::eval("(1,)").ptr()));
  EXPECT_EQ(leaf->explain(py::eval("(1,)").ptr(), source), "len(L['x']) == 2 failed: got 1");
  py::object bad = ns["BadLen"]();
  EXPECT_FALSE(leaf->check(bad.ptr()));
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_EQ(leaf->explain(bad.ptr(), source), "len(L['x']) raised RuntimeError: no len");
  EXPECT_FALSE(make_length(-1).ok());
}

TEST_F(LeafGuards, DictKeysInInsertionOrder) {
  LeafPtr leaf = ok_or_die(make_dict_keys(py::eval("['a', 'b']"), source));
  EXPECT_TRUE(leaf->check(py::eval("{'a': 1, 'b': 2}").ptr()));
  EXPECT_FALSE(leaf->check(py::eval("{'b': 2, 'a': 1}").ptr()));  // order matters
  EXPECT_FALSE(leaf->check(py::eval("{'a': 1}").ptr()));
  EXPECT_FALSE(leaf->check(py::eval("['a', 'b']").ptr()));
  EXPECT_EQ(leaf->describe(), "DICT_KEYS: ['a', 'b']");
  EXPECT_EQ(leaf->explain(py::eval("{'a': 1, 'c': 2}").ptr(), source),
            "L['x'].keys() == ['a', 'b'] failed: got ['a', 'c']");
  EXPECT_FALSE(make_dict_keys(py::make_tuple(ns["foo"]), source).ok());
}

TEST_F(LeafGuards, DictKeysWithTupleKeysCompareOnASnapshot) {
  LeafPtr leaf = ok_or_die(make_dict_keys(py::eval("[(1, 'a')]"), source));
  EXPECT_TRUE(leaf->check(py::eval("{(1, 'a'): 0}").ptr()));
  py::dict bad;
  bad[py::make_tuple(ns["BadEq"]())] = 0;
  EXPECT_FALSE(leaf->check(bad.ptr()));
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(LeafGuards, TorchLeavesGoThroughTheBackend) {
  // With the TEMP stub (no backend yet) the builder refuses with the backend's status; once the
  // backend lands this passes through to it, and a non-tensor is a TypeError.
  auto leaf = make_tensor_match(py::int_(1), source);
  ASSERT_FALSE(leaf.ok());
  absl::StatusOr<TorchBackend*> backend = torch_backend();
  if (!backend.ok()) {
    EXPECT_EQ(leaf.status(), backend.status());
    EXPECT_EQ(make_global_state().status(), backend.status());
  } else {
    EXPECT_TRUE(is_type_error(leaf.status())) << leaf.status();
  }
}

}  // namespace
}  // namespace tjc
