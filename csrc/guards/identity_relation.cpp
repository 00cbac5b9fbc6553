// IdentityRelation: how several sources alias each other, checked at the root (see identity_relation.h).
#include "guards/identity_relation.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "common/py_errors.h"
#include "guards/guard_text.h"
#include "guards/guard_manager.h"

namespace tjc {

absl::StatusOr<std::unique_ptr<IdentityRelation>> IdentityRelation::make(std::vector<Member> members) {
  if (members.size() < 2) return absl::InvalidArgumentError("an identity relation needs two sources or more");
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    if (m.chain.empty()) return absl::InvalidArgumentError("identity relation: a source has no node");
    if (m.cls < 0 || static_cast<size_t>(m.cls) > i || members[m.cls].cls != m.cls) {
      return absl::InvalidArgumentError(absl::StrCat(
          "identity relation: class ", m.cls, " of ", m.chain.back()->source(),
          " must name the first earlier source that is the same object (or itself)"));
    }
  }
  return std::unique_ptr<IdentityRelation>(new IdentityRelation(std::move(members)));
}

PyObject* IdentityRelation::fetch(const Member& member, const FrameView& view) noexcept {
  return fetch_along(member.chain, view);
}

// values[i] are alive (held) while compared: an address cannot be reused between two fetches.
bool IdentityRelation::compare(PyObject* const* values) const noexcept {
  const size_t n = members_.size();
  for (size_t i = 1; i < n; ++i) {
    const int cls = members_[i].cls;
    for (size_t j = 0; j < i; ++j) {
      // Same object now iff same class when compiled. Classes are canonical (the first member),
      // so members j < i share i's class exactly when members_[j].cls == cls.
      if ((values[i] == values[j]) != (members_[j].cls == cls)) return false;
    }
  }
  return true;
}

bool IdentityRelation::check(const FrameView& view) const noexcept {
  const size_t n = members_.size();
  PyObject* inline_values[kInlineSources];
  std::vector<PyObject*> heap_values;  // empty (no allocation) unless n > kInlineSources
  PyObject** values = inline_values;
  if (TJC_UNLIKELY(n > kInlineSources)) {
    heap_values.assign(n, nullptr);
    values = heap_values.data();
  }
  size_t fetched = 0;
  bool ok = true;
  for (; fetched < n; ++fetched) {
    values[fetched] = fetch(members_[fetched], view);
    if (TJC_UNLIKELY(values[fetched] == nullptr)) {
      if (PyErr_Occurred()) clear_guard_error();
      ok = false;
      break;
    }
  }
  if (ok) ok = compare(values);
  for (size_t i = 0; i < fetched; ++i) Py_DECREF(values[i]);
  return ok;
}

std::optional<std::string> IdentityRelation::explain(const FrameView& view) const {
  const size_t n = members_.size();
  std::vector<py::object> values;
  values.reserve(n);
  for (const Member& member : members_) {
    py::object value = py::reinterpret_steal<py::object>(fetch(member, view));
    if (!value) {
      const std::string& source = member.chain.back()->source();
      if (PyErr_Occurred()) return absl::StrCat(source, ": raised ", take_error_text());
      return absl::StrCat(source, ": missing");
    }
    values.push_back(std::move(value));
  }
  for (size_t i = 1; i < n; ++i) {
    for (size_t j = 0; j < i; ++j) {
      const bool same_now = values[i].ptr() == values[j].ptr();
      const bool same_then = members_[j].cls == members_[i].cls;
      if (same_now == same_then) continue;
      const std::string& a = members_[j].chain.back()->source();
      const std::string& b = members_[i].chain.back()->source();
      if (same_now) return absl::StrCat(a, " is ", b, ", which were distinct objects when compiled");
      return absl::StrCat(a, " is not ", b, ", which were the same object when compiled");
    }
  }
  return std::nullopt;
}

// OBJECT_ALIASING: L['a'].x is not L['b'].x          (two classes)
// OBJECT_ALIASING: L['p'] is L['q']
// OBJECT_ALIASING: {L['a'], L['c']} {L['b']} (one object per group, groups distinct)
std::string IdentityRelation::describe() const {
  std::vector<std::vector<std::string>> groups;
  std::vector<int> group_of(members_.size(), -1);
  for (size_t i = 0; i < members_.size(); ++i) {
    const int cls = members_[i].cls;
    if (static_cast<size_t>(cls) == i) {
      group_of[i] = static_cast<int>(groups.size());
      groups.emplace_back();
    } else {
      group_of[i] = group_of[cls];
    }
    groups[group_of[i]].push_back(members_[i].chain.back()->source());
  }
  if (members_.size() == 2) {
    return absl::StrCat("OBJECT_ALIASING: ", groups.size() == 1 ? absl::StrJoin(groups[0], " is ")
                                                                  : absl::StrCat(groups[0][0], " is not ",
                                                                                 groups[1][0]));
  }
  std::string out = "OBJECT_ALIASING:";
  for (const auto& group : groups) absl::StrAppend(&out, " {", absl::StrJoin(group, ", "), "}");
  absl::StrAppend(&out, " (one object per group, groups distinct)");
  return out;
}

}  // namespace tjc
