// ShapeProgram: the postfix programs of SYMBOLIC_SHAPES expressions (see shape_program.h).
#include "guards/shape_program.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/check.h"
#include "common/enum_table.h"

namespace tjc {

namespace {

static_assert(rows_in_enum_order(kShapeOps, &ShapeOpSpec::op, ShapeOp::kWhere),
              "kShapeOps: one row per ShapeOp, in enum order");

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

}  // namespace tjc
