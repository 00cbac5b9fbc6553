// GuardManager nodes: tree building, evaluation order, fail-fast reordering, text.
#include "guards/guard_manager.h"

#include "guards/guard_errors.h"
#include "guards/guard_test_util.h"

namespace tjc {
namespace {

using namespace tjc::testing;

std::vector<std::string> child_sources(const GuardManager& node) {
  std::vector<std::string> out;
  for (const auto& child : node.children()) out.push_back(child->source());
  return out;
}

TEST(GuardManager, SameSourceGivesSameChild) {
  RootGuardManager root;
  auto x1 = ok_or_die(root.child(kLocal, s("x")));
  auto x2 = ok_or_die(root.child(kLocal, s("x")));
  EXPECT_EQ(x1, x2);
  EXPECT_NE(ok_or_die(root.child(kGlobal, s("x"))), x1);  // G['x'] is another source
  auto self = ok_or_die(root.child(kLocal, s("self")));
  EXPECT_EQ(ok_or_die(self->child(kAttr, s("fc"))), ok_or_die(self->child(kAttr, s("fc"))));
  auto xs = ok_or_die(root.child(kLocal, s("xs")));
  // 1 and True are equal but distinct keys for a non-dict __getitem__.
  EXPECT_NE(ok_or_die(xs->child(kItem, py::int_(1))), ok_or_die(xs->child(kItem, py::bool_(true))));
  EXPECT_EQ(ok_or_die(xs->child(kItem, py::int_(1))), ok_or_die(xs->child(kItem, py::int_(1))));
  EXPECT_EQ(ok_or_die(self->child(kType)), ok_or_die(self->child(kType)));
  EXPECT_EQ(root.children().size(), 4u);
}

TEST(GuardManager, SourcesNest) {
  RootGuardManager root;
  auto fc1 = ok_or_die(ok_or_die(root.child(kLocal, s("self")))->child(kAttr, s("fc1")));
  auto w = ok_or_die(fc1->child(kAttr, s("weight")));
  EXPECT_EQ(w->source(), "L['self'].fc1.weight");
  auto k = ok_or_die(ok_or_die(root.child(kGlobal, s("cfg")))->child(kItem, s("k")));
  EXPECT_EQ(k->source(), "G['cfg']['k']");
  EXPECT_EQ(ok_or_die(k->child(kType))->source(), "type(G['cfg']['k'])");
}

TEST(GuardManager, RootRefusesValueGuardsAndValueChildren) {
  RootGuardManager root;
  EXPECT_FALSE(root.add_leaf(LeafKind::kTypeMatch, py::type::of(py::int_(1))).ok());
  EXPECT_FALSE(root.child(kAttr, s("x")).ok());
  EXPECT_FALSE(root.child(kItem, s("x")).ok());
  EXPECT_EQ(root.num_guards(), 0);
}

TEST(GuardManager, ChildOutlivesRoot) {
  std::shared_ptr<GuardManager> x;
  {
    auto root = std::make_shared<RootGuardManager>();
    x = ok_or_die(root->child(kLocal, s("x")));
    expect_ok(x->add_leaf(LeafKind::kEqualsMatch, py::int_(1)));
  }
  // The subtree is intact and still buildable (the tree was never frozen).
  expect_ok(x->add_leaf(LeafKind::kTypeMatch, py::type::of(py::int_(1))));
  EXPECT_EQ(x->num_guards(), 2);
  EXPECT_EQ(x->debug_string(), "L['x']\n| EQUALS_MATCH: 1\n| TYPE_MATCH: int");
}

TEST(GuardManager, StopsAtFirstFailure) {
  py::dict ns = run_python(
      "calls = []\n"
      "class Probe:\n"
      "  @property\n"
      "  def a(self):\n    calls.append('a'); return 1\n"
      "  @property\n"
      "  def b(self):\n    calls.append('b'); return 2\n");
  RootGuardManager root;
  auto p = ok_or_die(root.child(kLocal, s("p")));
  expect_ok(ok_or_die(p->child(kAttr, s("a")))->add_leaf(LeafKind::kEqualsMatch, py::int_(99)));  // fails
  expect_ok(ok_or_die(p->child(kAttr, s("b")))->add_leaf(LeafKind::kEqualsMatch, py::int_(2)));
  py::dict locals;
  locals["p"] = ns["Probe"]();
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_EQ(py::len(ns["calls"]), 1u);  // b was never read
}

TEST(GuardManager, FailFastMovesTheFailingChildFirstOnlyAfterAFailure) {
  RootGuardManager root;
  for (const char* name : {"a", "b", "c"}) {
    expect_ok(ok_or_die(root.child(kLocal, s(name)))->add_leaf(LeafKind::kEqualsMatch, py::int_(1)));
  }
  py::dict locals;
  locals["a"] = 1;
  locals["b"] = 1;
  locals["c"] = 1;
  const std::vector<std::string> initial = {"L['a']", "L['b']", "L['c']"};
  EXPECT_TRUE(root.check(mapping_view(locals)));
  EXPECT_EQ(child_sources(root), initial);  // success never reorders
  locals["c"] = 2;
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_EQ(child_sources(root), (std::vector<std::string>{"L['c']", "L['a']", "L['b']"}));
  EXPECT_EQ(root.children()[0]->fail_count(), 1);
  locals["c"] = 1;
  EXPECT_TRUE(root.check(mapping_view(locals)));
  locals["b"] = 2;
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_EQ(child_sources(root), (std::vector<std::string>{"L['b']", "L['c']", "L['a']"}));
  // explain() only reads: no counts, no reordering.
  locals["a"] = 2;
  locals["b"] = 1;
  EXPECT_EQ(root.explain(mapping_view(locals)), "L['a'] == 1 failed: got 2");
  EXPECT_EQ(child_sources(root), (std::vector<std::string>{"L['b']", "L['c']", "L['a']"}));
}

TEST(GuardManager, FailFastReordersLeaves) {
  RootGuardManager root;
  auto x = ok_or_die(root.child(kLocal, s("x")));
  expect_ok(x->add_leaf(LeafKind::kNotNone));
  expect_ok(x->add_leaf(LeafKind::kTypeMatch, py::type::of(py::int_(1))));
  expect_ok(x->add_leaf(LeafKind::kEqualsMatch, py::int_(3)));
  py::dict locals;
  locals["x"] = 3;
  EXPECT_TRUE(root.check(mapping_view(locals)));
  EXPECT_EQ(x->leaves()[0]->kind(), LeafKind::kNotNone);
  locals["x"] = 4;
  EXPECT_FALSE(root.check(mapping_view(locals)));
  EXPECT_EQ(x->leaves()[0]->kind(), LeafKind::kEqualsMatch);
  EXPECT_EQ(x->leaves()[0]->fail_count(), 1);
  EXPECT_EQ(x->leaves()[1]->kind(), LeafKind::kNotNone);
}

TEST(GuardManager, DebugStringIsStableText) {
  py::dict ns = run_python("class Linear:\n  pass\nm = Linear()\n");
  RootGuardManager root;
  auto x = ok_or_die(root.child(kLocal, s("x")));
  expect_ok(x->add_leaf(LeafKind::kTypeMatch, py::type::of(py::int_(1))));
  expect_ok(x->add_leaf(LeafKind::kEqualsMatch, py::int_(3)));
  auto self = ok_or_die(root.child(kLocal, s("self")));
  expect_ok(ok_or_die(self->child(kAttr, s("fc")))->add_leaf(LeafKind::kIdMatch, ns["m"]));
  auto d = ok_or_die(root.child(kLocal, s("d")));
  expect_ok(d->add_leaf(LeafKind::kDictKeys, py::eval("['k']")));
  expect_ok(ok_or_die(d->child(kItem, s("k")))->add_leaf(LeafKind::kNoneMatch));
  expect_ok(ok_or_die(root.child(kGlobal, s("SCALE")))->add_leaf(LeafKind::kEqualsMatch, py::float_(2.5)));
  expect_ok(ok_or_die(root.child(kBuiltin, s("len")))->add_leaf(LeafKind::kIdMatch, builtins_dict()["len"]));
  EXPECT_EQ(root.debug_string(),
            "RootGuardManager\n"
            "+- L['x']\n"
            "|  | TYPE_MATCH: int\n"
            "|  | EQUALS_MATCH: 3\n"
            "+- L['self']\n"
            "|  +- L['self'].fc\n"
            "|  |  | ID_MATCH: <Linear object> (weak)\n"
            "+- L['d']\n"
            "|  | DICT_KEYS: ['k']\n"
            "|  +- L['d']['k']\n"
            "|  |  | NONE_MATCH\n"
            "+- G['SCALE']\n"
            "|  | EQUALS_MATCH: 2.5\n"
            "+- B['len']\n"
            "|  | ID_MATCH: <built-in function len> (weak)");
  EXPECT_EQ(root.num_guards(), 7);
}

}  // namespace
}  // namespace tjc
