// ShapeProgram: one boolean SYMBOLIC_SHAPES expression (`Eq(s0, s1)`, `Ne(Mod(s1, 2), 0)`) as flat
// postfix code over int64, compiled in Python (torch_jit_cache/guard/shape_guards.py) from sympy and
// checked by ShapeGuards (shape_guards.h). Booleans are 0 / 1.
//
// Semantics: Python's. Floor division and modulo round toward -inf; an intermediate that does not
// fit in int64, a division or modulo by zero, or an operand outside an op's domain (a negative
// exponent, torch's non-negative Mod on a negative) makes the expression FAIL: a guard that fails
// only recompiles, so it is always the safe answer. No undefined behaviour, no exception.
// torch's Mod and ModularIndexing follow their sympy eval on integers (torch.utils._sympy.functions)
// exactly, including the answers eval gives before it checks a domain: Mod(0, -2), Mod(-3, 1),
// Mod(-5, 5) and ModularIndexing(0, 0, c) are 0, not failures. A guard may fail only where torch's
// value is undefined or an intermediate needs more than int64; failing where torch has a value
// recompiles forever on that input (tests/python/test_shape_guards.py checks against sympy).
//
// Hot path: evaluate() allocates nothing (programs are at most kMaxDepth deep: make() refuses
// deeper ones) and formats no string; text() is out of line.
//
// Threads: a program is immutable once made; evaluate() needs no lock.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tjc {

// ---------------------------------------------------------------------------------------------
// ShapeProgram: one boolean expression as postfix code.

enum class ShapeOp : uint8_t {
  kSymbol,     // push symbols[operand]
  kConst,      // push operand
  kAdd, kSub, kMul,
  kFloorDiv,   // Python //
  kMod,        // Python % (sympy.Mod, PythonMod)
  kNonNegMod,  // torch's Mod: 0 when a == 0, a == +-b or b == 1; else defined for a >= 0, b >= 1 only
  kModularIndexing,  // torch's ModularIndexing (a, b, c): 0 when a == 0 or c == 1; else (a // b) % c
  kPow,        // a ** b, b >= 0
  kMin, kMax,
  kAbs, kNeg,
  kEq, kNe, kLt, kLe, kGt, kGe,
  kAnd, kOr, kNot,
  kWhere,      // c, a, b -> a if c else b
};

// One row per op, in enum order: its Python name (what guard/shape_guards.py emits), how many values it
// pops (it pushes one), and how it prints.
struct ShapeOpSpec {
  ShapeOp op;
  const char* name;
  int arity;
  const char* text;  // infix operator (` + `), prefix (`-`), or function name (`max`)
  int precedence;    // Python's binding strength, higher binds tighter; kAtom for calls
};
inline constexpr int kAtom = 20;
inline constexpr ShapeOpSpec kShapeOps[] = {
    {ShapeOp::kSymbol, "sym", 0, "", kAtom},          {ShapeOp::kConst, "const", 0, "", kAtom},
    {ShapeOp::kAdd, "add", 2, " + ", 10},              {ShapeOp::kSub, "sub", 2, " - ", 10},
    {ShapeOp::kMul, "mul", 2, "*", 11},                {ShapeOp::kFloorDiv, "floordiv", 2, " // ", 11},
    {ShapeOp::kMod, "mod", 2, " % ", 11},              {ShapeOp::kNonNegMod, "mod_nonneg", 2, " % ", 11},
    {ShapeOp::kModularIndexing, "modular_indexing", 3, " % ", 11},
    {ShapeOp::kPow, "pow", 2, "**", 13},               {ShapeOp::kMin, "min", 2, "min", kAtom},
    {ShapeOp::kMax, "max", 2, "max", kAtom},           {ShapeOp::kAbs, "abs", 1, "abs", kAtom},
    {ShapeOp::kNeg, "neg", 1, "-", 12},                {ShapeOp::kEq, "eq", 2, " == ", 4},
    {ShapeOp::kNe, "ne", 2, " != ", 4},                {ShapeOp::kLt, "lt", 2, " < ", 4},
    {ShapeOp::kLe, "le", 2, " <= ", 4},                {ShapeOp::kGt, "gt", 2, " > ", 4},
    {ShapeOp::kGe, "ge", 2, " >= ", 4},                {ShapeOp::kAnd, "and", 2, " and ", 2},
    {ShapeOp::kOr, "or", 2, " or ", 1},                {ShapeOp::kNot, "not", 1, "not ", 3},
    {ShapeOp::kWhere, "where", 3, "", 0},
};
inline const ShapeOpSpec& shape_op_spec(ShapeOp op) { return kShapeOps[static_cast<size_t>(op)]; }

struct ShapeInstr {
  ShapeOp op;
  int64_t operand = 0;  // kSymbol: the symbol's index; kConst: the value; others: 0
};

// Why an expression is not true. Only kTrue passes.
enum class ShapeVerdict : uint8_t { kTrue, kFalse, kOverflow, kZeroDivision, kOutOfDomain };

class ShapeProgram {
 public:
  static constexpr size_t kMaxDepth = 64;  // deepest evaluation stack a program may need

  // InvalidArgument unless `code` leaves exactly one value, never pops an empty stack, stays within
  // kMaxDepth, and reads symbols below `num_symbols`.
  static absl::StatusOr<ShapeProgram> make(std::vector<ShapeInstr> code, size_t num_symbols);
  // The op named `name` (kShapeOps), or InvalidArgument.
  static absl::StatusOr<ShapeOp> parse_op(std::string_view name);

  // Hot path: the verdict for symbol values `symbols` (indexed by symbol). No allocation.
  ShapeVerdict evaluate(const int64_t* symbols) const noexcept;
  // Infix text in Python syntax, symbols printed as `names[i]`: `L['x'].size()[1] == L['y'].size()[0]`.
  std::string text(const std::vector<std::string>& names) const;
  // The symbols the program reads, ascending, each once.
  const std::vector<int>& symbols() const { return symbols_; }
  const std::vector<ShapeInstr>& code() const { return code_; }

 private:
  ShapeProgram(std::vector<ShapeInstr> code, std::vector<int> symbols)
      : code_(std::move(code)), symbols_(std::move(symbols)) {}
  std::vector<ShapeInstr> code_;
  std::vector<int> symbols_;
};

// `false`, `overflows int64`, `divides by zero`, `is out of an operation's domain`.
std::string shape_verdict_text(ShapeVerdict verdict);

}  // namespace tjc
