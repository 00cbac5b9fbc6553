// The leaf kinds a node accepts (see leaf_kinds.h).
#include "guards/leaf_kinds.h"

#include <iterator>

#include "absl/strings/str_cat.h"
#include "common/check.h"
#include "common/enum_table.h"

namespace tjc {

static_assert(rows_in_enum_order(kLeafSpecs, &LeafSpec::kind, LeafKind::kTensorMatch),
              "kLeafSpecs: one row per node LeafKind, in enum order");

const LeafSpec& leaf_spec(LeafKind kind) {
  const auto index = static_cast<size_t>(kind);
  TJC_CHECK(index < std::size(kLeafSpecs));
  return kLeafSpecs[index];
}

const LeafSpec* find_leaf_spec(std::string_view name) {
  for (const LeafSpec& spec : kLeafSpecs) {
    if (name == spec.name) return &spec;
  }
  return nullptr;
}

std::string leaf_call_text(const LeafSpec& spec) { return absl::StrCat(spec.name, "(", spec.arg, ")"); }

absl::StatusOr<LeafPtr> make_leaf(LeafKind kind, const LeafArgs& args, const std::shared_ptr<TreeState>& state,
                                  const std::string& source) {
  switch (kind) {
    case LeafKind::kTypeMatch:
      return make_type_match(args.value, state, source);
    case LeafKind::kIdMatch:
      return make_id_match(args.value, state, source, args.hold);
    case LeafKind::kEqualsMatch:
      return make_equals_match(args.value, source);
    case LeafKind::kNoneMatch:
      return make_none_match();
    case LeafKind::kNotNone:
      return make_not_none();
    case LeafKind::kBoolMatch:
      return make_bool_match(args.flag);
    case LeafKind::kLength:
      return make_length(args.length);
    case LeafKind::kDictKeys:
      return make_dict_keys(args.value, source);
    case LeafKind::kSetItems:
      return make_set_items(args.value, source);
    case LeafKind::kTensorMatch:
      return make_tensor_match(args.value, source, args.dynamic);
    case LeafKind::kGlobalState:
      break;
  }
  return absl::InvalidArgumentError("global_state() is a leaf of the root: call it on the GuardManager");
}

}  // namespace tjc
