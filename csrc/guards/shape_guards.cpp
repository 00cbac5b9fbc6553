// ShapeGuards (SYMBOLIC_SHAPES) and its postfix ShapePrograms (see shape_guards.h).
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

constexpr bool shape_ops_in_order() {
  for (size_t i = 0; i < std::size(kShapeOps); ++i) {
    if (static_cast<size_t>(kShapeOps[i].op) != i) return false;
  }
  return static_cast<size_t>(ShapeOp::kWhere) + 1 == std::size(kShapeOps);
}
static_assert(shape_ops_in_order(), "kShapeOps: one row per ShapeOp, in enum order");

// ---- Python integer semantics on int64, every failure a verdict (never UB).

inline bool floordiv(int64_t a, int64_t b, int64_t* out, ShapeVerdict* why) noexcept {
  if (b == 0) {
    *why = ShapeVerdict::kZeroDivision;
    return false;
  }
  if (a == INT64_MIN && b == -1) {
    *why = ShapeVerdict::kOverflow;
    return false;
  }
  int64_t q = a / b;  // truncates toward zero
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  *out = q;
  return true;
}

inline bool pymod(int64_t a, int64_t b, int64_t* out, ShapeVerdict* why) noexcept {
  if (b == 0) {
    *why = ShapeVerdict::kZeroDivision;
    return false;
  }
  if (b == -1) {  // INT64_MIN % -1 is UB in C++; the answer is 0
    *out = 0;
    return true;
  }
  int64_t r = a % b;  // sign of a
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  *out = r;
  return true;
}

// torch.utils._sympy.functions.Mod.eval on integers, in its order: modulo by zero, then the
// answers it gives before its domain check (a == 0, a == b, a == -b, b == 1: 0), then the domain
// (a >= 0, b >= 1). Checking the domain first refused Mod(0, -2) == 0.
inline bool torch_mod(int64_t a, int64_t b, int64_t* out, ShapeVerdict* why) noexcept {
  if (b == 0) {
    *why = ShapeVerdict::kZeroDivision;
    return false;
  }
  if (a == 0 || a == b || (b != INT64_MIN && a == -b) || b == 1) {  // -INT64_MIN overflows; no a equals it
    *out = 0;
    return true;
  }
  if (a < 0 || b < 1) {
    *why = ShapeVerdict::kOutOfDomain;
    return false;
  }
  *out = a % b;
  return true;
}

// torch.utils._sympy.functions.ModularIndexing.eval on integers: 0 when a == 0 or c == 1 (even
// where a // b or % c would divide by zero), else Python's (a // b) % c; a // b must fit in int64.
inline bool modular_indexing(int64_t a, int64_t b, int64_t c, int64_t* out, ShapeVerdict* why) noexcept {
  if (a == 0 || c == 1) {
    *out = 0;
    return true;
  }
  int64_t q = 0;
  return floordiv(a, b, &q, why) && pymod(q, c, out, why);
}

// a ** e by squaring; an overflow only when the result overflows (the squared base is needed only
// while a higher bit of e remains, and then |result| >= |base squared| for |a| >= 2).
inline bool ipow(int64_t a, int64_t e, int64_t* out, ShapeVerdict* why) noexcept {
  if (e < 0) {
    *why = ShapeVerdict::kOutOfDomain;
    return false;
  }
  int64_t result = 1;
  int64_t base = a;
  while (e > 0) {
    if ((e & 1) != 0 && __builtin_mul_overflow(result, base, &result)) {
      *why = ShapeVerdict::kOverflow;
      return false;
    }
    e >>= 1;
    if (e > 0 && __builtin_mul_overflow(base, base, &base)) {
      *why = ShapeVerdict::kOverflow;
      return false;
    }
  }
  *out = result;
  return true;
}

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

std::string shape_verdict_text(ShapeVerdict verdict) {
  switch (verdict) {
    case ShapeVerdict::kTrue:
      return "true";
    case ShapeVerdict::kFalse:
      return "false";
    case ShapeVerdict::kOverflow:
      return "overflows int64";
    case ShapeVerdict::kZeroDivision:
      return "divides by zero";
    case ShapeVerdict::kOutOfDomain:
      return "is out of an operation's domain";
  }
  return "false";
}

// ---------------------------------------------------------------------------------------------
// ShapeProgram.

absl::StatusOr<ShapeOp> ShapeProgram::parse_op(std::string_view name) {
  for (const ShapeOpSpec& spec : kShapeOps) {
    if (name == spec.name) return spec.op;
  }
  return absl::InvalidArgumentError(absl::StrCat("symbolic_shapes: unknown op '", std::string(name), "'"));
}

absl::StatusOr<ShapeProgram> ShapeProgram::make(std::vector<ShapeInstr> code, size_t num_symbols) {
  size_t depth = 0;
  std::vector<int> symbols;
  for (const ShapeInstr& instr : code) {
    const ShapeOpSpec& spec = shape_op_spec(instr.op);
    if (instr.op == ShapeOp::kSymbol) {
      if (instr.operand < 0 || static_cast<uint64_t>(instr.operand) >= num_symbols) {
        return absl::InvalidArgumentError(
            absl::StrCat("symbolic_shapes: symbol ", instr.operand, " is not bound (", num_symbols, " symbols)"));
      }
      symbols.push_back(static_cast<int>(instr.operand));
    }
    if (depth < static_cast<size_t>(spec.arity)) {
      return absl::InvalidArgumentError(absl::StrCat("symbolic_shapes: '", spec.name, "' needs ", spec.arity,
                                                     " operands, the program has ", depth));
    }
    depth = depth - static_cast<size_t>(spec.arity) + 1;
    if (depth > kMaxDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("symbolic_shapes: the expression needs a stack deeper than ", kMaxDepth));
    }
  }
  if (depth != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("symbolic_shapes: a program must leave one value, this one leaves ", depth));
  }
  std::sort(symbols.begin(), symbols.end());
  symbols.erase(std::unique(symbols.begin(), symbols.end()), symbols.end());
  return ShapeProgram(std::move(code), std::move(symbols));
}

ShapeVerdict ShapeProgram::evaluate(const int64_t* symbols) const noexcept {
  int64_t stack[kMaxDepth];  // make() proved the depth
  size_t top = 0;            // values in stack[0, top)
  ShapeVerdict why = ShapeVerdict::kFalse;
  for (const ShapeInstr& instr : code_) {
    switch (instr.op) {
      case ShapeOp::kSymbol:
        stack[top++] = symbols[instr.operand];
        continue;
      case ShapeOp::kConst:
        stack[top++] = instr.operand;
        continue;
      case ShapeOp::kAbs: {
        int64_t& a = stack[top - 1];
        if (a == INT64_MIN) return ShapeVerdict::kOverflow;
        a = a < 0 ? -a : a;
        continue;
      }
      case ShapeOp::kNeg: {
        int64_t& a = stack[top - 1];
        if (a == INT64_MIN) return ShapeVerdict::kOverflow;
        a = -a;
        continue;
      }
      case ShapeOp::kNot:
        stack[top - 1] = stack[top - 1] == 0 ? 1 : 0;
        continue;
      case ShapeOp::kWhere: {
        const int64_t c = stack[top - 3];
        stack[top - 3] = c != 0 ? stack[top - 2] : stack[top - 1];
        top -= 2;
        continue;
      }
      case ShapeOp::kModularIndexing: {
        int64_t& a = stack[top - 3];
        if (TJC_UNLIKELY(!modular_indexing(a, stack[top - 2], stack[top - 1], &a, &why))) return why;
        top -= 2;
        continue;
      }
      default:
        break;
    }
    // Binary ops: a (below) op b (top).
    const int64_t b = stack[--top];
    int64_t& a = stack[top - 1];
    bool ok = true;
    switch (instr.op) {
      case ShapeOp::kAdd:
        ok = !__builtin_add_overflow(a, b, &a);
        why = ShapeVerdict::kOverflow;
        break;
      case ShapeOp::kSub:
        ok = !__builtin_sub_overflow(a, b, &a);
        why = ShapeVerdict::kOverflow;
        break;
      case ShapeOp::kMul:
        ok = !__builtin_mul_overflow(a, b, &a);
        why = ShapeVerdict::kOverflow;
        break;
      case ShapeOp::kFloorDiv:
        ok = floordiv(a, b, &a, &why);
        break;
      case ShapeOp::kMod:
        ok = pymod(a, b, &a, &why);
        break;
      case ShapeOp::kNonNegMod:
        ok = torch_mod(a, b, &a, &why);
        break;
      case ShapeOp::kPow:
        ok = ipow(a, b, &a, &why);
        break;
      case ShapeOp::kMin:
        a = std::min(a, b);
        break;
      case ShapeOp::kMax:
        a = std::max(a, b);
        break;
      case ShapeOp::kEq:
        a = a == b;
        break;
      case ShapeOp::kNe:
        a = a != b;
        break;
      case ShapeOp::kLt:
        a = a < b;
        break;
      case ShapeOp::kLe:
        a = a <= b;
        break;
      case ShapeOp::kGt:
        a = a > b;
        break;
      case ShapeOp::kGe:
        a = a >= b;
        break;
      case ShapeOp::kAnd:
        a = (a != 0) && (b != 0);
        break;
      case ShapeOp::kOr:
        a = (a != 0) || (b != 0);
        break;
      default:  // handled above
        break;
    }
    if (TJC_UNLIKELY(!ok)) return why;
  }
  return stack[0] != 0 ? ShapeVerdict::kTrue : ShapeVerdict::kFalse;
}

namespace {

// One printed operand: its text and how tightly it binds; `negated` is the text of -x when this is
// `-1*x` or a negative constant, so `a + -1*b` prints as `a - b`.
struct Printed {
  std::string text;
  int precedence;
  std::optional<std::string> negated;
  int negated_precedence = kAtom;
  bool minus_one = false;
};

std::string wrap(const Printed& p, bool parens) { return parens ? absl::StrCat("(", p.text, ")") : p.text; }

}  // namespace

std::string ShapeProgram::text(const std::vector<std::string>& names) const {
  std::vector<Printed> stack;
  for (const ShapeInstr& instr : code_) {
    const ShapeOpSpec& spec = shape_op_spec(instr.op);
    switch (instr.op) {
      case ShapeOp::kSymbol:
        stack.push_back({static_cast<size_t>(instr.operand) < names.size() ? names[instr.operand]
                                                                           : absl::StrCat("s", instr.operand),
                         kAtom});
        continue;
      case ShapeOp::kConst: {
        Printed p{absl::StrCat(instr.operand), instr.operand < 0 ? 12 : kAtom};
        if (instr.operand < 0) p.negated = p.text.substr(1);
        p.minus_one = instr.operand == -1;
        stack.push_back(std::move(p));
        continue;
      }
      default:
        break;
    }
    std::vector<Printed> args(stack.end() - spec.arity, stack.end());
    stack.resize(stack.size() - static_cast<size_t>(spec.arity));
    Printed out{"", spec.precedence};
    if (spec.precedence == kAtom) {  // a call: min(a, b), abs(a)
      std::vector<std::string> texts;
      for (const Printed& a : args) texts.push_back(a.text);
      out.text = absl::StrCat(spec.text, "(", absl::StrJoin(texts, ", "), ")");
    } else if (instr.op == ShapeOp::kModularIndexing) {  // a // b % c, as Python parses it
      out.text = absl::StrCat(wrap(args[0], args[0].precedence < 11), " // ", wrap(args[1], args[1].precedence <= 11),
                              " % ", wrap(args[2], args[2].precedence <= 11));
    } else if (instr.op == ShapeOp::kWhere) {
      out.text = absl::StrCat(wrap(args[1], args[1].precedence <= 0), " if ", wrap(args[0], args[0].precedence <= 0),
                              " else ", wrap(args[2], args[2].precedence < 0));
    } else if (spec.arity == 1) {  // -a, not a
      out.text = absl::StrCat(spec.text, wrap(args[0], args[0].precedence < spec.precedence));
    } else if (instr.op == ShapeOp::kMul && args[0].minus_one) {  // -1*x prints as -x
      out.text = absl::StrCat("-", wrap(args[1], args[1].precedence < 12));
      out.precedence = 12;
      out.negated = args[1].text;
      out.negated_precedence = args[1].precedence;
    } else if (instr.op == ShapeOp::kAdd && args[1].negated) {  // a + -b prints as a - b
      out.text = absl::StrCat(wrap(args[0], args[0].precedence < 10), " - ",
                              args[1].negated_precedence <= 10 ? absl::StrCat("(", *args[1].negated, ")")
                                                               : *args[1].negated);
    } else {
      // Left-associative, except ** (right-associative).
      const bool pow = instr.op == ShapeOp::kPow;
      const bool left_parens = pow ? args[0].precedence <= spec.precedence : args[0].precedence < spec.precedence;
      const bool right_parens = pow ? args[1].precedence < spec.precedence : args[1].precedence <= spec.precedence;
      out.text = absl::StrCat(wrap(args[0], left_parens), spec.text, wrap(args[1], right_parens));
    }
    stack.push_back(std::move(out));
  }
  return stack.empty() ? std::string() : stack.back().text;
}

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
