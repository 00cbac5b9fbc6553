// ExtraState: lookup order (most recently hit first), eviction when a guarded object dies, parking
// of evictions and clears that happen during a lookup, entries outliving their code object.
#include "runtime/extra_state.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include "common/runtime_state.h"
#include "guards/guard_test_util.h"
#include "runtime/cache_owner.h"

namespace tjc {
namespace {

namespace py = pybind11;
using testing::FakeFrame;
using testing::run_python;

ExtraState* g_state_under_test = nullptr;
constexpr uint64_t kShared = 0;  // CacheOwner::shared().id()

}  // namespace
}  // namespace tjc

// Lets Python code that runs inside a lookup look at the ExtraState being looked up.
PYBIND11_EMBEDDED_MODULE(tjc_extra_state_test, m) {
  m.def("linked", []() { return tjc::g_state_under_test->entries().size(); });
  m.def("live", []() { return tjc::g_state_under_test->live_entries(); });
  m.def("clear", []() { tjc::g_state_under_test->clear("cleared from __eq__"); });
}

namespace tjc {
namespace {

using enum AccessorKind;

std::shared_ptr<RootGuardManager> equals_root(const char* name, py::object value) {
  auto root = std::make_shared<RootGuardManager>();
  auto child = root->child(kLocal, py::str(name));
  EXPECT_TRUE(child.ok());
  EXPECT_TRUE((*child)->add_leaf(LeafKind::kEqualsMatch, value).ok());
  return root;
}

// L[name].attr == value: reading the attribute runs Python (a property) inside the lookup.
std::shared_ptr<RootGuardManager> attr_equals_root(const char* name, const char* attr, py::object value) {
  auto root = std::make_shared<RootGuardManager>();
  auto child = root->child(kLocal, py::str(name));
  EXPECT_TRUE(child.ok());
  auto grandchild = (*child)->child(kAttr, py::str(attr));
  EXPECT_TRUE(grandchild.ok());
  EXPECT_TRUE((*grandchild)->add_leaf(LeafKind::kEqualsMatch, value).ok());
  return root;
}

std::shared_ptr<RootGuardManager> identity_root(const char* name, py::object value) {
  auto root = std::make_shared<RootGuardManager>();
  auto child = root->child(kLocal, py::str(name));
  EXPECT_TRUE(child.ok());
  EXPECT_TRUE((*child)->add_leaf(LeafKind::kIdMatch, value).ok());
  return root;
}

class ExtraStateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scope_ = run_python(
        "class Obj:\n"
        "    pass\n"
        "def f(x, y):\n"
        "    return x\n");
    fn_ = scope_["f"];
    code_ = reinterpret_cast<PyCodeObject*>(fn_.attr("__code__").ptr());
    state_ = ExtraState::get_or_create(code_);
    ASSERT_NE(state_, nullptr);
    g_state_under_test = state_;
    runtime_state().stats = RuntimeStats();
  }
  void TearDown() override { g_state_under_test = nullptr; }

  std::shared_ptr<CacheEntry> add(std::shared_ptr<RootGuardManager> root, uint64_t owner = kShared) {
    EXPECT_TRUE(root->bind(code_).ok());
    // A distinct code object, as a transforming JIT returns.
    return state_->add(fn_.attr("__code__").attr("replace")(py::arg("co_name") = "f_transformed"), std::move(root), owner);
  }

  py::dict scope_;
  py::object fn_;
  PyCodeObject* code_ = nullptr;
  ExtraState* state_ = nullptr;
};

TEST_F(ExtraStateTest, GetOrCreateIsStablePerCode) {
  EXPECT_EQ(ExtraState::get(code_), state_);
  EXPECT_EQ(ExtraState::get_or_create(code_), state_);
  EXPECT_EQ(state_->action(kShared), FrameAction::kDefault);
}

TEST_F(ExtraStateTest, LookupMovesTheHitToTheFront) {
  auto one = add(equals_root("x", py::int_(1)));
  auto two = add(equals_root("x", py::int_(2)));
  ASSERT_EQ(state_->entries().front(), two) << "newest first";
  FakeFrame frame(fn_, {py::int_(1), py::none()});
  EXPECT_EQ(state_->lookup(frame.view, kShared), one);
  EXPECT_EQ(state_->entries().front(), one) << "the hit moved to the front";
  FakeFrame miss(fn_, {py::int_(3), py::none()});
  EXPECT_EQ(state_->lookup(miss.view, kShared), nullptr);
  EXPECT_EQ(state_->entries().front(), one) << "a miss reorders nothing";
}

TEST_F(ExtraStateTest, EntryIsEvictedAndFreedWhenItsGuardedObjectDies) {
  py::object obj = scope_["Obj"]();
  auto entry = add(identity_root("y", obj));
  std::weak_ptr<RootGuardManager> guards = entry->guards();
  FakeFrame frame(fn_, {py::int_(1), obj});
  EXPECT_EQ(state_->lookup(frame.view, kShared), entry);
  frame = FakeFrame(fn_, {py::int_(1), py::none()});
  obj = py::object();
  EXPECT_TRUE(entry->evicted());
  EXPECT_EQ(state_->entries().size(), 0u);
  EXPECT_EQ(entry->code(), nullptr) << "the payload is released at once";
  EXPECT_TRUE(guards.expired()) << "the guard tree is freed with the entry's payload";
  EXPECT_EQ(runtime_state().stats.evictions, 1u);
}

TEST_F(ExtraStateTest, EvictionDuringALookupIsParkedUntilTheLookupEnds) {
  py::dict ns = run_python(
      "import tjc_extra_state_test as t\n"
      "class Obj:\n"
      "    pass\n"
      "holder = [Obj()]\n"
      "seen = []\n"
      "class KillOnRead:\n"
      "    @property\n"
      "    def v(self):\n"
      "        holder.clear()\n"
      "        seen.append((t.linked(), t.live()))\n"
      "        return 0\n");
  // Checked second: guards L['y'] by identity. Checked first: L['x'].v == 1, where reading
  // x.v runs Python that kills the object the second entry guards.
  auto victim = add(identity_root("y", ns["holder"].attr("__getitem__")(0)));
  auto first = add(attr_equals_root("x", "v", py::int_(1)));
  FakeFrame frame(fn_, {ns["KillOnRead"](), py::none()});
  EXPECT_EQ(state_->lookup(frame.view, kShared), nullptr);
  py::list seen = ns["seen"];
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].cast<py::tuple>()[0].cast<size_t>(), 1u)
      << "during the lookup the evicted entry is still linked (entries() lists live ones: 1)";
  EXPECT_TRUE(victim->evicted());
  EXPECT_EQ(state_->entries().size(), 1u);
  EXPECT_EQ(state_->entries().front(), first);
  EXPECT_EQ(victim->code(), nullptr) << "released when the lookup ended";
}

TEST_F(ExtraStateTest, ClearDuringALookupIsParked) {
  py::dict ns = run_python(
      "import tjc_extra_state_test as t\n"
      "class ClearOnRead:\n"
      "    @property\n"
      "    def v(self):\n"
      "        t.clear()\n"
      "        return 0\n");
  auto a = add(attr_equals_root("x", "v", py::int_(1)));
  auto b = add(attr_equals_root("x", "v", py::int_(2)));
  FakeFrame frame(fn_, {ns["ClearOnRead"](), py::none()});
  EXPECT_EQ(state_->lookup(frame.view, kShared), nullptr);
  EXPECT_TRUE(a->evicted() && b->evicted());
  EXPECT_EQ(state_->live_entries(), 0u);
  EXPECT_EQ(a->code(), nullptr);
  EXPECT_EQ(b->code(), nullptr);
}

TEST_F(ExtraStateTest, RunningEntryKeepsItsPayloadUntilTheRunEnds) {
  auto entry = add(equals_root("x", py::int_(1)));
  {
    EntryRun run(entry);
    state_->evict(entry.get(), "test");
    EXPECT_TRUE(entry->evicted());
    EXPECT_EQ(state_->entries().size(), 0u) << "unlinked at once";
    EXPECT_NE(entry->code(), nullptr) << "but the running code is kept";
  }
  EXPECT_EQ(entry->code(), nullptr) << "released when the run ended";
}

TEST_F(ExtraStateTest, EntriesOutliveTheirCodeObject) {
  auto entry = add(equals_root("x", py::int_(1)));
  scope_ = py::dict();
  fn_ = py::object();
  g_state_under_test = nullptr;
  // The function and its globals dict form a cycle of the test's own; collect it so the code
  // object dies, and its ExtraState with it.
  py::module_::import("gc").attr("collect")();
  EXPECT_TRUE(entry->evicted());
  EXPECT_EQ(entry->eviction_reason(), "its code object was freed");
  EXPECT_EQ(entry->code(), nullptr);
}

TEST_F(ExtraStateTest, AnEntryRunningTheOriginalCodeDoesNotKeepItAlive) {
  auto root = equals_root("x", py::int_(1));
  ASSERT_TRUE(root->bind(code_).ok());
  auto entry = state_->add(fn_.attr("__code__"), std::move(root), kShared);  // the original code itself
  EXPECT_EQ(entry->code(), code_);
  py::object weak = py::module_::import("weakref").attr("ref")(fn_.attr("__code__"));
  scope_ = py::dict();
  fn_ = py::object();
  g_state_under_test = nullptr;
  py::module_::import("gc").attr("collect")();  // the test's own function<->globals cycle
  EXPECT_TRUE(weak().is_none()) << "no cycle code -> co_extra -> entry -> code";
  EXPECT_TRUE(entry->evicted());
}

TEST_F(ExtraStateTest, ClearResetsTheActionButNotAnExplicitDisable) {
  state_->set_action(kShared, FrameAction::kRunOnly);
  state_->clear("reset");
  EXPECT_EQ(state_->action(kShared), FrameAction::kDefault);
  state_->disable();
  state_->clear("reset");
  EXPECT_EQ(state_->action(kShared), FrameAction::kSkip);
}

// Each owner (compile() call) sees only its own entries and decisions.
TEST_F(ExtraStateTest, LookupSeesOnlyTheOwnersEntries) {
  CacheOwner first;
  CacheOwner second;
  auto mine = add(equals_root("x", py::int_(1)), first.id());
  FakeFrame frame(fn_, {py::int_(1), py::none()});
  EXPECT_EQ(state_->lookup(frame.view, first.id()), mine);
  EXPECT_EQ(state_->lookup(frame.view, second.id()), nullptr) << "another owner's entry is not used";
  EXPECT_EQ(state_->live_entries(first.id()), 1u);
  EXPECT_EQ(state_->live_entries(second.id()), 0u);
  EXPECT_EQ(state_->entries(second.id()).size(), 0u);
  EXPECT_EQ(state_->entries().size(), 1u) << "entries() lists every owner's";
}

TEST_F(ExtraStateTest, ActionsArePerOwnerButDisableIsForAll) {
  CacheOwner first;
  CacheOwner second;
  state_->set_action(first.id(), FrameAction::kSkip);
  EXPECT_EQ(state_->action(first.id()), FrameAction::kSkip);
  EXPECT_EQ(state_->action(second.id()), FrameAction::kDefault);
  state_->disable();
  EXPECT_EQ(state_->action(second.id()), FrameAction::kSkip);
}

TEST_F(ExtraStateTest, AnOwnersDeathEvictsItsEntriesOnly) {
  auto owner = std::make_unique<CacheOwner>();
  auto theirs = add(equals_root("x", py::int_(1)), owner->id());
  auto shared = add(equals_root("x", py::int_(1)), kShared);
  state_->set_action(owner->id(), FrameAction::kRunOnly);
  owner.reset();
  EXPECT_TRUE(theirs->evicted());
  EXPECT_EQ(theirs->code(), nullptr) << "released at once";
  EXPECT_FALSE(shared->evicted());
  EXPECT_EQ(state_->entries().size(), 1u);
}

// The limit counts, per guarded object, the entries that guard the same one.
TEST_F(ExtraStateTest, EntriesCountedForTheLimitArePerIdentityGuardedLocal) {
  py::object a = scope_["Obj"]();
  py::object b = scope_["Obj"]();
  add(identity_root("y", a));
  add(identity_root("y", a));
  add(identity_root("y", b));
  add(equals_root("x", py::int_(1)));  // guards no identity: counts for every object
  FakeFrame with_a(fn_, {py::int_(1), a});
  FakeFrame with_b(fn_, {py::int_(1), b});
  FakeFrame with_none(fn_, {py::int_(1), py::none()});
  EXPECT_EQ(state_->entries_counted_for_limit(with_a.view, kShared), 3u);
  EXPECT_EQ(state_->entries_counted_for_limit(with_b.view, kShared), 2u);
  EXPECT_EQ(state_->entries_counted_for_limit(with_none.view, kShared), 1u);
  CacheOwner other;
  EXPECT_EQ(state_->entries_counted_for_limit(with_a.view, other.id()), 0u);
}

// A compile in progress is seen by others, and its end wakes its waiters.
TEST_F(ExtraStateTest, CompileTicketIsSharedUntilTheCompileEnds) {
  CacheOwner owner;
  EXPECT_EQ(state_->compiling(owner.id()), nullptr);
  auto ticket = state_->begin_compile(owner.id());
  EXPECT_EQ(state_->compiling(owner.id()), ticket);
  EXPECT_EQ(state_->compiling(kShared), nullptr) << "per owner";
  auto nested = state_->begin_compile(owner.id());
  EXPECT_EQ(state_->compiling(owner.id()), ticket) << "a recursive compile keeps the outer ticket";
  state_->end_compile(owner.id(), nested);
  EXPECT_EQ(state_->compiling(owner.id()), ticket);
  state_->end_compile(owner.id(), ticket);
  EXPECT_EQ(state_->compiling(owner.id()), nullptr);
  ticket->wait();  // returns at once: finished
}

TEST_F(ExtraStateTest, WatchedCodeTurnsSkipTreeAfterQuietRunsAndSkipAfterABusyOne) {
  state_->set_action(kShared, FrameAction::kSkipWatch);
  for (int i = 1; i < kQuietRunsForSkipTree; ++i) {
    state_->note_watched_run(kShared, /*quiet=*/true);
    EXPECT_EQ(state_->action(kShared), FrameAction::kSkipWatch);
  }
  state_->note_watched_run(kShared, /*quiet=*/true);
  EXPECT_EQ(state_->action(kShared), FrameAction::kSkipTree);
  state_->note_watched_run(kShared, /*quiet=*/false);  // decided already: a late report changes nothing
  EXPECT_EQ(state_->action(kShared), FrameAction::kSkipTree);

  state_->set_action(kShared, FrameAction::kSkipWatch);
  state_->note_watched_run(kShared, /*quiet=*/true);
  state_->note_watched_run(kShared, /*quiet=*/false);
  EXPECT_EQ(state_->action(kShared), FrameAction::kSkip);
  state_->clear("reset");  // reset() forgets what the watching decided, quiet runs included
  EXPECT_EQ(state_->action(kShared), FrameAction::kDefault);
  state_->set_action(kShared, FrameAction::kSkipWatch);
  state_->note_watched_run(kShared, /*quiet=*/true);
  EXPECT_EQ(state_->action(kShared), FrameAction::kSkipWatch);
  // Watching is per owner: another owner's busy run decides nothing for this one.
  state_->set_action(kShared + 1, FrameAction::kSkipWatch);
  state_->note_watched_run(kShared + 1, /*quiet=*/false);
  EXPECT_EQ(state_->action(kShared + 1), FrameAction::kSkip);
  EXPECT_EQ(state_->action(kShared), FrameAction::kSkipWatch);
}

}  // namespace
}  // namespace tjc
