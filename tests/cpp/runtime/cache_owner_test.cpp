// CacheOwner: ids are unique and never reused; the shared owner is id 0; an owner's death evicts its
// entries in every code and forgets its decisions, and leaves other owners' alone.
#include "runtime/cache_owner.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <memory>

#include "guards/guard_test_util.h"
#include "runtime/extra_state.h"

namespace tjc {
namespace {

namespace py = pybind11;

TEST(CacheOwner, IdsAreUniqueAndTheSharedOwnerIsZero) {
  EXPECT_EQ(CacheOwner::shared().id(), 0u);
  uint64_t first_id;
  {
    CacheOwner first;
    first_id = first.id();
    EXPECT_NE(first_id, 0u);
  }
  CacheOwner second(3);
  EXPECT_GT(second.id(), first_id) << "an id is never reused, even after its owner died";
  EXPECT_EQ(second.cache_limit(), 3);
}

TEST(CacheOwner, DeathEvictsItsEntriesInEveryCodeAndForgetsItsDecisions) {
  py::dict ns = testing::run_python(
      "def f(x):\n"
      "    return x\n"
      "def g(x):\n"
      "    return x\n");
  auto state_of = [&](const char* name) {
    auto* code = reinterpret_cast<PyCodeObject*>(ns[name].attr("__code__").ptr());
    return ExtraState::get_or_create(code);
  };
  auto entry_in = [&](const char* name, uint64_t owner) {
    auto root = std::make_shared<RootGuardManager>();
    EXPECT_TRUE(root->bind(reinterpret_cast<PyCodeObject*>(ns[name].attr("__code__").ptr())).ok());
    py::object code = ns[name].attr("__code__").attr("replace")(py::arg("co_name") = "transformed");
    return state_of(name)->add(code, std::move(root), owner);
  };
  auto owner = std::make_unique<CacheOwner>();
  const uint64_t id = owner->id();
  auto in_f = entry_in("f", id);
  auto in_g = entry_in("g", id);
  auto other = entry_in("f", CacheOwner::shared().id());
  state_of("g")->set_action(id, FrameAction::kSkip);
  owner.reset();
  EXPECT_TRUE(in_f->evicted());
  EXPECT_TRUE(in_g->evicted());
  EXPECT_EQ(in_f->eviction_reason(), "its compile() wrapper was freed");
  EXPECT_EQ(in_f->code(), nullptr) << "the payload is released at once";
  EXPECT_FALSE(other->evicted());
  EXPECT_EQ(state_of("g")->action(id), FrameAction::kDefault) << "its decisions are forgotten";
  EXPECT_EQ(state_of("f")->entries().size(), 1u);
  state_of("f")->clear("test over");
}

}  // namespace
}  // namespace tjc
