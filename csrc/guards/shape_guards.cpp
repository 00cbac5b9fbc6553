// ShapeGuards (SYMBOLIC_SHAPES) (see shape_guards.h).
#include "guards/shape_guards.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "common/py_errors.h"
#include "guards/guard_manager.h"
#include "guards/guard_text.h"

namespace tjc {

namespace {

// `source` + what is read: `L['x'].size()[1]`, `L['x'].stride()[0]`, `L['x'].storage_offset()`, `L['n']`.
std::string read_name(const std::string& source, SymbolRead read, int dim) {
  switch (read) {
    case SymbolRead::kSize:
      return absl::StrCat(source, ".size()[", dim, "]");
    case SymbolRead::kStride:
      return absl::StrCat(source, ".stride()[", dim, "]");
    case SymbolRead::kStorageOffset:
      return absl::StrCat(source, ".storage_offset()");
    case SymbolRead::kInt:
      return source;
  }
  return source;
}

std::string range_text(const std::string& name, const std::optional<int64_t>& min,
                       const std::optional<int64_t>& max) {
  if (min && max) return absl::StrCat(*min, " <= ", name, " <= ", *max);
  if (min) return absl::StrCat(name, " >= ", *min);
  if (max) return absl::StrCat(name, " <= ", *max);
  return absl::StrCat(name, ": any int");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// ShapeGuards.

absl::StatusOr<std::unique_ptr<ShapeGuards>> ShapeGuards::make(std::vector<Binding> bindings, size_t num_symbols,
                                                               std::vector<Range> ranges,
                                                               std::vector<ShapeProgram> exprs) {
  std::unique_ptr<ShapeGuards> out(new ShapeGuards());
  out->num_symbols_ = num_symbols;
  std::vector<bool> bound(num_symbols, false);
  bool reads_tensor = false;
  // Group the bindings by source (the node they read), keeping first-seen order.
  for (size_t i = 0; i < bindings.size(); ++i) {
    Binding& b = bindings[i];
    if (b.chain.empty()) return absl::InvalidArgumentError("symbolic_shapes: a binding has no node");
    if (b.symbol < 0 || static_cast<size_t>(b.symbol) >= num_symbols) {
      return absl::InvalidArgumentError(absl::StrCat("symbolic_shapes: symbol ", b.symbol, " out of range"));
    }
    if ((b.read == SymbolRead::kSize || b.read == SymbolRead::kStride) && b.dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbolic_shapes: ", b.chain.back()->source(), ": dim ", b.dim, " must be >= 0"));
    }
    reads_tensor = reads_tensor || b.read != SymbolRead::kInt;
  }
  std::vector<bool> grouped(bindings.size(), false);
  for (size_t i = 0; i < bindings.size(); ++i) {
    if (grouped[i]) continue;
    SourceReads source;
    source.chain = bindings[i].chain;
    source.is_int = bindings[i].read == SymbolRead::kInt;
    source.first = out->bindings_.size();
    const GuardManager* node = source.chain.back().get();
    for (size_t j = i; j < bindings.size(); ++j) {
      if (grouped[j] || bindings[j].chain.back().get() != node) continue;
      const Binding& b = bindings[j];
      if ((b.read == SymbolRead::kInt) != source.is_int) {
        return absl::InvalidArgumentError(absl::StrCat("symbolic_shapes: ", node->source(),
                                                       " is read both as an int and as a tensor"));
      }
      grouped[j] = true;
      if (!source.is_int) {
        const TensorField field = b.read == SymbolRead::kSize     ? TensorField::kSize
                                  : b.read == SymbolRead::kStride ? TensorField::kStride
                                                                  : TensorField::kStorageOffset;
        source.reads.push_back(TensorRead{field, b.dim});
      }
      const bool defines = !bound[b.symbol];
      bound[b.symbol] = true;
      out->bindings_.push_back(Read{b.symbol, defines, read_name(node->source(), b.read, b.dim)});
      ++source.count;
    }
    out->sources_.push_back(std::move(source));
  }
  out->symbol_names_.assign(num_symbols, "");
  for (const Read& r : out->bindings_) {
    if (r.defines) out->symbol_names_[r.symbol] = r.name;
  }
  for (size_t s = 0; s < num_symbols; ++s) {
    if (!bound[s]) return absl::InvalidArgumentError(absl::StrCat("symbolic_shapes: symbol ", s, " has no binding"));
  }
  for (const Range& r : ranges) {
    if (r.symbol < 0 || static_cast<size_t>(r.symbol) >= num_symbols) {
      return absl::InvalidArgumentError(absl::StrCat("symbolic_shapes: range of symbol ", r.symbol, " out of range"));
    }
    if (r.min && r.max && *r.min > *r.max) {
      return absl::InvalidArgumentError(absl::StrCat("symbolic_shapes: empty range [", *r.min, ", ", *r.max,
                                                     "] for ", out->symbol_names_[r.symbol]));
    }
  }
  out->ranges_ = std::move(ranges);
  for (ShapeProgram& program : exprs) {
    for (const int s : program.symbols()) {
      if (static_cast<size_t>(s) >= num_symbols) {
        return absl::InvalidArgumentError(absl::StrCat("symbolic_shapes: symbol ", s, " out of range"));
      }
    }
    std::string text = program.text(out->symbol_names_);
    out->exprs_.push_back(Expr{std::move(program), std::move(text)});
  }
  if (reads_tensor) {
    absl::StatusOr<TorchBackend*> backend = torch_backend();
    if (!backend.ok()) return backend.status();
    out->backend_ = *backend;
  }
  return out;
}

bool ShapeGuards::read_all(const FrameView& view, int64_t* raw) const noexcept {
  for (const SourceReads& s : sources_) {
    PyObject* value = fetch_along(s.chain, view);  // new ref or null
    if (TJC_UNLIKELY(value == nullptr)) {
      if (PyErr_Occurred()) clear_guard_error();
      return false;
    }
    bool ok = true;
    if (s.is_int) {
      // An exact int (bool is a subclass and is refused, as is any other subclass).
      ok = PyLong_CheckExact(value);
      if (ok) {
        int overflow = 0;
        const long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
        ok = overflow == 0 && !(v == -1 && PyErr_Occurred());
        for (size_t i = 0; i < s.count; ++i) raw[s.first + i] = v;
      }
    } else {
      ok = backend_->read_tensor_ints(value, s.reads.data(), s.reads.size(), raw + s.first);
    }
    Py_DECREF(value);
    if (TJC_UNLIKELY(!ok)) {
      if (PyErr_Occurred()) clear_guard_error();
      return false;
    }
  }
  return true;
}

bool ShapeGuards::check(const FrameView& view) noexcept {
  const size_t n = bindings_.size();
  int64_t inline_raw[kInline];
  int64_t inline_symbols[kInline];
  std::vector<int64_t> heap;  // empty (no allocation) unless the guard is larger than kInline
  int64_t* raw = inline_raw;
  int64_t* symbols = inline_symbols;
  if (TJC_UNLIKELY(n > kInline || num_symbols_ > kInline)) {
    heap.assign(n + num_symbols_, 0);
    raw = heap.data();
    symbols = heap.data() + n;
  }
  bool ok = read_all(view, raw);
  for (size_t i = 0; ok && i < n; ++i) {
    const Read& r = bindings_[i];
    if (r.defines) {
      symbols[r.symbol] = raw[i];
    } else {
      ok = symbols[r.symbol] == raw[i];  // the symbol's defining read came earlier
    }
  }
  for (size_t i = 0; ok && i < ranges_.size(); ++i) {
    const Range& r = ranges_[i];
    const int64_t v = symbols[r.symbol];
    ok = !(r.min && v < *r.min) && !(r.max && v > *r.max);
  }
  for (size_t i = 0; ok && i < exprs_.size(); ++i) {
    if (TJC_UNLIKELY(exprs_[i].program.evaluate(symbols) != ShapeVerdict::kTrue)) {
      ++exprs_[i].fail_count;
      if (i > 0) std::rotate(exprs_.begin(), exprs_.begin() + i, exprs_.begin() + i + 1);
      ok = false;
    }
  }
  if (TJC_UNLIKELY(!ok)) ++fail_count_;
  return ok;
}

std::optional<std::string> ShapeGuards::explain_read(const SourceReads& s, const FrameView& view,
                                                     int64_t* raw) const {
  const std::string& source = s.chain.back()->source();
  py::object value = py::reinterpret_steal<py::object>(fetch_along(s.chain, view));
  if (!value) {
    if (PyErr_Occurred()) return absl::StrCat(source, ": raised ", take_error_text());
    return absl::StrCat(source, ": missing");
  }
  if (s.is_int) {
    if (!PyLong_CheckExact(value.ptr())) {
      return absl::StrCat(source, ": expected an int, got ", short_type_name(value.ptr()));
    }
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow != 0 || (v == -1 && PyErr_Occurred())) {
      if (PyErr_Occurred()) clear_guard_error();
      return absl::StrCat(source, ": ", safe_repr(value.ptr()), " does not fit in int64");
    }
    for (size_t i = 0; i < s.count; ++i) raw[s.first + i] = v;
    return std::nullopt;
  }
  for (size_t i = 0; i < s.count; ++i) {
    if (!backend_->read_tensor_ints(value.ptr(), &s.reads[i], 1, raw + s.first + i)) {
      if (PyErr_Occurred()) clear_guard_error();
      return absl::StrCat(bindings_[s.first + i].name, ": cannot be read from a ", short_type_name(value.ptr()),
                          " (not a tensor with that dim, or its sizes are not plain ints)");
    }
  }
  return std::nullopt;
}

std::optional<std::string> ShapeGuards::explain(const FrameView& view) const {
  std::vector<int64_t> raw(bindings_.size(), 0);
  std::vector<int64_t> symbols(num_symbols_, 0);
  for (const SourceReads& s : sources_) {
    if (auto reason = explain_read(s, view, raw.data())) return reason;
  }
  for (size_t i = 0; i < bindings_.size(); ++i) {
    const Read& r = bindings_[i];
    if (r.defines) {
      symbols[r.symbol] = raw[i];
    } else if (symbols[r.symbol] != raw[i]) {
      const std::string& first = symbol_names_[r.symbol];
      return absl::StrCat(r.name, " == ", first, " (", r.name, " = ", raw[i], ", ", first, " = ", symbols[r.symbol],
                          ")");
    }
  }
  for (const Range& r : ranges_) {
    const int64_t v = symbols[r.symbol];
    const std::string& name = symbol_names_[r.symbol];
    if (r.min && v < *r.min) return absl::StrCat(name, ": ", v, " < min ", *r.min);
    if (r.max && v > *r.max) return absl::StrCat(name, ": ", v, " > max ", *r.max);
  }
  for (const Expr& e : exprs_) {
    const ShapeVerdict verdict = e.program.evaluate(symbols.data());
    if (verdict == ShapeVerdict::kTrue) continue;
    std::vector<std::string> values;
    for (const int s : e.program.symbols()) values.push_back(absl::StrCat(symbol_names_[s], " = ", symbols[s]));
    std::string out = e.text;
    if (!values.empty()) absl::StrAppend(&out, " (", absl::StrJoin(values, ", "), ")");
    if (verdict != ShapeVerdict::kFalse) absl::StrAppend(&out, ": ", shape_verdict_text(verdict));
    return out;
  }
  return std::nullopt;
}

std::vector<std::string> ShapeGuards::describe() const {
  std::vector<std::string> lines;
  for (const Range& r : ranges_) {
    lines.push_back(absl::StrCat("SYMBOLIC_SHAPES: ", range_text(symbol_names_[r.symbol], r.min, r.max)));
  }
  for (const Read& r : bindings_) {
    if (!r.defines) lines.push_back(absl::StrCat("SYMBOLIC_SHAPES: ", r.name, " == ", symbol_names_[r.symbol]));
  }
  for (const Expr& e : exprs_) lines.push_back(absl::StrCat("SYMBOLIC_SHAPES: ", e.text));
  return lines;
}

int64_t ShapeGuards::num_guards() const {
  int64_t repeated = 0;
  for (const Read& r : bindings_) repeated += r.defines ? 0 : 1;
  return static_cast<int64_t>(ranges_.size() + exprs_.size()) + repeated;
}

}  // namespace tjc
