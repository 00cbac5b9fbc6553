// Status helpers for the guard tree: which Python exception a builder error should become.
//
// absl::Status has no code for "wrong type of argument", so a TypeError travels as
// InvalidArgument with a payload; csrc/bindings/guard_bindings.cpp turns it into TypeError and
// every other status into the exception bindings::throw_if_error picks.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace tjc {

// absl::string_view, not std::string_view: Debian builds abseil for C++14, where they differ.
inline constexpr absl::string_view kPyExceptionPayload = "tjc.python_exception";

inline absl::Status type_error_status(absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(message);
  status.SetPayload(kPyExceptionPayload, absl::Cord("TypeError"));
  return status;
}

inline bool is_type_error(const absl::Status& status) {
  auto payload = status.GetPayload(kPyExceptionPayload);
  return payload.has_value() && *payload == "TypeError";
}

inline absl::Status frozen_status() {
  return absl::FailedPreconditionError("guard tree is frozen: it belongs to a cache entry");
}

}  // namespace tjc
