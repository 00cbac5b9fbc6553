// Tables of rows indexed by an enum (kAccessorSpecs, kShapeOps, kLeafSpecs): one check that row i
// is the row of enum value i, so a lookup by kind is an index and a missing or misplaced row fails
// the build.
#pragma once

#include <cstddef>

namespace tjc {

// Whether `rows[i].*key` is enum value i for every row and `last` is the last row's value.
template <typename Row, size_t N, typename Enum>
constexpr bool rows_in_enum_order(const Row (&rows)[N], Enum Row::*key, Enum last) {
  for (size_t i = 0; i < N; ++i) {
    if (static_cast<size_t>(rows[i].*key) != i) return false;
  }
  return static_cast<size_t>(last) + 1 == N;
}

}  // namespace tjc
