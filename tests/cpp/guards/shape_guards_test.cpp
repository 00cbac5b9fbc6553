// ShapeProgram evaluation (Python integer semantics, overflow and division by zero fail, never UB),
// its text, and ShapeGuards on a root over int arguments: ranges, repeated bindings, explain text.
#include "guards/shape_guards.h"

#include <chrono>
#include <cstdio>

#include "guards/guard_test_util.h"

namespace tjc {
namespace {

using namespace tjc::testing;
using Op = ShapeOp;

ShapeProgram program(std::vector<ShapeInstr> code, size_t num_symbols = 4) {
  return ok_or_die(ShapeProgram::make(std::move(code), num_symbols));
}

ShapeInstr sym(int i) { return {Op::kSymbol, i}; }
ShapeInstr k(int64_t v) { return {Op::kConst, v}; }
ShapeInstr op(Op o) { return {o, 0}; }

// `a <op> b == want` over two symbols.
ShapeVerdict binary(Op o, int64_t a, int64_t b, int64_t want) {
  const int64_t values[] = {a, b, want};
  return program({sym(0), sym(1), op(o), sym(2), op(Op::kEq)}, 3).evaluate(values);
}

TEST(ShapeProgram, FloorDivisionAndModuloArePythons) {
  EXPECT_EQ(binary(Op::kFloorDiv, -7, 2, -4), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kFloorDiv, 7, -2, -4), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kFloorDiv, -7, -2, 3), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kFloorDiv, 6, -3, -2), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kMod, -7, 3, 2), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kMod, 7, -3, -2), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kMod, -6, 3, 0), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kMod, INT64_MIN, -1, 0), ShapeVerdict::kTrue);  // UB in C++, 0 in Python
  EXPECT_EQ(binary(Op::kMod, 7, 3, 1), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kNonNegMod, 7, 3, 1), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kNonNegMod, -7, 3, 2), ShapeVerdict::kOutOfDomain);
  EXPECT_EQ(binary(Op::kNonNegMod, 7, -3, 0), ShapeVerdict::kOutOfDomain);
  EXPECT_EQ(binary(Op::kNonNegMod, 7, 0, 0), ShapeVerdict::kZeroDivision);
  EXPECT_EQ(binary(Op::kNonNegMod, 0, 0, 0), ShapeVerdict::kZeroDivision);
}

// torch's Mod.eval answers 0 before it checks its domain (a >= 0, b >= 1); so must the guard.
TEST(ShapeProgram, TorchModAnswersZeroBeforeItsDomainCheck) {
  EXPECT_EQ(binary(Op::kNonNegMod, 0, -2, 0), ShapeVerdict::kTrue);   // Eq(s0, Mod(s0, -2)) at s0 = 0
  EXPECT_EQ(binary(Op::kNonNegMod, -1, 1, 0), ShapeVerdict::kTrue);   // b == 1
  EXPECT_EQ(binary(Op::kNonNegMod, -5, 5, 0), ShapeVerdict::kTrue);   // a == -b
  EXPECT_EQ(binary(Op::kNonNegMod, -5, -5, 0), ShapeVerdict::kTrue);  // a == b
  EXPECT_EQ(binary(Op::kNonNegMod, int64_t{1} - (int64_t{1} << 40) - 1, -(int64_t{1} << 40), 0),
            ShapeVerdict::kTrue);  // Mod(1 % -(2**40 + 1), -2**40): a == b
  EXPECT_EQ(binary(Op::kNonNegMod, INT64_MIN, INT64_MIN, 0), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kNonNegMod, INT64_MAX, INT64_MIN, 0), ShapeVerdict::kOutOfDomain);  // no -INT64_MIN
  EXPECT_EQ(binary(Op::kNonNegMod, 5, -5, 0), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kNonNegMod, -6, 5, 0), ShapeVerdict::kOutOfDomain);
}

// ModularIndexing(a, b, c): torch's eval gives 0 for a == 0 or c == 1 before computing (a // b) % c.
TEST(ShapeProgram, ModularIndexingIsTorchs) {
  auto mi = [](int64_t a, int64_t b, int64_t c, int64_t want) {
    const int64_t values[] = {a, b, c, want};
    return program({sym(0), sym(1), sym(2), op(Op::kModularIndexing), sym(3), op(Op::kEq)}, 4).evaluate(values);
  };
  EXPECT_EQ(mi(6, 2, 3, 0), ShapeVerdict::kTrue);
  EXPECT_EQ(mi(-7, 2, 3, 2), ShapeVerdict::kTrue);  // (-7 // 2) % 3 == -4 % 3 == 2
  EXPECT_EQ(mi(7, 2, -2, -1), ShapeVerdict::kTrue);  // 3 % -2 == -1
  EXPECT_EQ(mi(0, 0, 5, 0), ShapeVerdict::kTrue);   // a == 0: no division
  EXPECT_EQ(mi(0, 3, 0, 0), ShapeVerdict::kTrue);
  EXPECT_EQ(mi(7, 0, 1, 0), ShapeVerdict::kTrue);   // c == 1: no division
  EXPECT_EQ(mi(INT64_MIN, -1, 1, 0), ShapeVerdict::kTrue);
  EXPECT_EQ(mi(7, 0, 3, 0), ShapeVerdict::kZeroDivision);
  EXPECT_EQ(mi(7, 2, 0, 0), ShapeVerdict::kZeroDivision);
  EXPECT_EQ(mi(INT64_MIN, -1, 3, 2), ShapeVerdict::kOverflow);  // a // b needs 2**63
  const std::vector<std::string> names = {"a", "b", "c", "d"};
  const ShapeProgram text =
      program({sym(0), k(1), op(Op::kAdd), sym(1), sym(2), op(Op::kModularIndexing), k(0), op(Op::kEq)});
  EXPECT_EQ(text.text(names), "(a + 1) // b % c == 0");
}

TEST(ShapeProgram, OverflowAndDivisionByZeroFail) {
  EXPECT_EQ(binary(Op::kFloorDiv, 1, 0, 0), ShapeVerdict::kZeroDivision);
  EXPECT_EQ(binary(Op::kMod, 1, 0, 0), ShapeVerdict::kZeroDivision);
  EXPECT_EQ(binary(Op::kFloorDiv, INT64_MIN, -1, 0), ShapeVerdict::kOverflow);
  EXPECT_EQ(binary(Op::kAdd, INT64_MAX, 1, 0), ShapeVerdict::kOverflow);
  EXPECT_EQ(binary(Op::kSub, INT64_MIN, 1, 0), ShapeVerdict::kOverflow);
  EXPECT_EQ(binary(Op::kMul, int64_t{1} << 32, int64_t{1} << 31, 0), ShapeVerdict::kOverflow);
  EXPECT_EQ(binary(Op::kMul, int64_t{1} << 31, int64_t{1} << 31, int64_t{1} << 62), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kPow, 2, 62, int64_t{1} << 62), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kPow, 2, 63, 0), ShapeVerdict::kOverflow);
  EXPECT_EQ(binary(Op::kPow, -2, 63, INT64_MIN), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kPow, -1, INT64_MAX, -1), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kPow, 3, 0, 1), ShapeVerdict::kTrue);
  EXPECT_EQ(binary(Op::kPow, 3, -1, 0), ShapeVerdict::kOutOfDomain);
  const int64_t min[] = {INT64_MIN};
  EXPECT_EQ(program({sym(0), op(Op::kAbs), k(0), op(Op::kGt)}, 1).evaluate(min), ShapeVerdict::kOverflow);
  EXPECT_EQ(program({sym(0), op(Op::kNeg), k(0), op(Op::kGt)}, 1).evaluate(min), ShapeVerdict::kOverflow);
}

TEST(ShapeProgram, LogicMinMaxWhere) {
  const int64_t v[] = {3, 5};
  // (s0 < s1 and not s0 == 4) or s1 == 0
  auto p = program({sym(0), sym(1), op(Op::kLt), sym(0), k(4), op(Op::kEq), op(Op::kNot), op(Op::kAnd), sym(1), k(0),
                    op(Op::kEq), op(Op::kOr)},
                   2);
  EXPECT_EQ(p.evaluate(v), ShapeVerdict::kTrue);
  const int64_t w[] = {5, 3};
  EXPECT_EQ(p.evaluate(w), ShapeVerdict::kFalse);
  EXPECT_EQ(program({sym(0), sym(1), op(Op::kMax), k(5), op(Op::kEq)}, 2).evaluate(w), ShapeVerdict::kTrue);
  EXPECT_EQ(program({sym(0), sym(1), op(Op::kMin), k(3), op(Op::kEq)}, 2).evaluate(w), ShapeVerdict::kTrue);
  // (s0 if s0 > s1 else s1) == 5
  EXPECT_EQ(program({sym(0), sym(1), op(Op::kGt), sym(0), sym(1), op(Op::kWhere), k(5), op(Op::kEq)}, 2).evaluate(v),
            ShapeVerdict::kTrue);
}

TEST(ShapeProgram, MalformedProgramsAreRefused) {
  EXPECT_FALSE(ShapeProgram::make({op(Op::kAdd)}, 1).ok());
  EXPECT_FALSE(ShapeProgram::make({sym(0), sym(0)}, 1).ok());
  EXPECT_FALSE(ShapeProgram::make({sym(3)}, 1).ok());
  EXPECT_FALSE(ShapeProgram::make({}, 1).ok());
  std::vector<ShapeInstr> deep(ShapeProgram::kMaxDepth + 1, k(1));
  for (size_t i = 0; i < ShapeProgram::kMaxDepth; ++i) deep.push_back(op(Op::kAnd));
  EXPECT_FALSE(ShapeProgram::make(deep, 1).ok());
  EXPECT_FALSE(ShapeProgram::parse_op("shl").ok());
  EXPECT_EQ(ok_or_die(ShapeProgram::parse_op("mod_nonneg")), Op::kNonNegMod);
  EXPECT_EQ(ok_or_die(ShapeProgram::parse_op("modular_indexing")), Op::kModularIndexing);
  EXPECT_FALSE(ShapeProgram::make({sym(0), sym(0), op(Op::kModularIndexing)}, 1).ok());
}

TEST(ShapeProgram, TextIsPythonWithSourceNames) {
  const std::vector<std::string> names = {"L['x'].size()[1]", "L['y'].size()[0]", "L['n']"};
  EXPECT_EQ(program({sym(0), sym(1), op(Op::kEq)}).text(names), "L['x'].size()[1] == L['y'].size()[0]");
  // 2*s0 + s1 < 100
  EXPECT_EQ(program({k(2), sym(0), op(Op::kMul), sym(1), op(Op::kAdd), k(100), op(Op::kLt)}).text(names),
            "2*L['x'].size()[1] + L['y'].size()[0] < 100");
  // s2 + -1*s0 >= (s1 - 3) * 2  -> s2 - s0, and parentheses where Python needs them
  EXPECT_EQ(program({sym(2), k(-1), sym(0), op(Op::kMul), op(Op::kAdd), sym(1), k(-3), op(Op::kAdd), k(2), op(Op::kMul),
                     op(Op::kGe)})
                .text(names),
            "L['n'] - L['x'].size()[1] >= (L['y'].size()[0] - 3)*2");
  EXPECT_EQ(program({sym(2), sym(0), op(Op::kSub), op(Op::kAbs), k(2), op(Op::kPow), k(1), op(Op::kNe), op(Op::kNot)})
                .text(names),
            "not abs(L['n'] - L['x'].size()[1])**2 != 1");
}

class Shapes : public ::testing::Test {
 protected:
  // Bindings s0 = L['a'], s1 = L['b'], s2 = L['a'] again through a second symbol's read of L['c'].
  std::unique_ptr<RootGuardManager> root = std::make_unique<RootGuardManager>();
  std::shared_ptr<GuardManager> a = ok_or_die(root->child(kLocal, s("a")));
  std::shared_ptr<GuardManager> b = ok_or_die(root->child(kLocal, s("b")));
  std::shared_ptr<GuardManager> c = ok_or_die(root->child(kLocal, s("c")));

  void add(std::vector<ShapeGuards::Range> ranges, std::vector<std::vector<ShapeInstr>> codes) {
    std::vector<ShapeProgram> exprs;
    for (auto& code : codes) exprs.push_back(program(std::move(code), 2));
    expect_ok(root->add_shape_guards({{a, SymbolRead::kInt, -1, 0}, {b, SymbolRead::kInt, -1, 1},
                                      {c, SymbolRead::kInt, -1, 0}},
                                     2, std::move(ranges), std::move(exprs)));
  }
  bool check(py::object av, py::object bv, py::object cv) {
    py::dict locals;
    locals["a"] = av;
    locals["b"] = bv;
    locals["c"] = cv;
    return root->check(mapping_view(locals));
  }
  std::optional<std::string> explain(py::object av, py::object bv, py::object cv) {
    py::dict locals;
    locals["a"] = av;
    locals["b"] = bv;
    locals["c"] = cv;
    return root->explain(mapping_view(locals));
  }
};

TEST_F(Shapes, RangesRepeatedBindingsAndExpressionsExplainInWords) {
  add({{0, 2, 4096}, {1, std::nullopt, 10}}, {{sym(0), sym(1), op(Op::kFloorDiv), k(2), op(Op::kEq)}});
  py::int_ i4(4), i2(2), i8(8);
  EXPECT_TRUE(check(i4, i2, i4));
  EXPECT_EQ(explain(i4, i2, i4), std::nullopt);
  EXPECT_FALSE(check(py::int_(4097), i2, py::int_(4097)));
  EXPECT_EQ(explain(py::int_(4097), i2, py::int_(4097)), "L['a']: 4097 > max 4096");
  EXPECT_EQ(explain(py::int_(1), i2, py::int_(1)), "L['a']: 1 < min 2");
  EXPECT_EQ(explain(i4, py::int_(11), i4), "L['b']: 11 > max 10");
  EXPECT_EQ(explain(i4, i2, i8), "L['c'] == L['a'] (L['c'] = 8, L['a'] = 4)");
  EXPECT_FALSE(check(i4, i2, i8));
  EXPECT_EQ(explain(i8, i2, i8), "L['a'] // L['b'] == 2 (L['a'] = 8, L['b'] = 2)");
  EXPECT_EQ(explain(i4, py::int_(0), i4), "L['a'] // L['b'] == 2 (L['a'] = 4, L['b'] = 0): divides by zero");
  EXPECT_EQ(explain(i4, py::bool_(true), i4), "L['b']: expected an int, got bool");
  EXPECT_FALSE(check(i4, py::bool_(true), i4));
  EXPECT_FALSE(check(i4, py::float_(2.0), i4));
  EXPECT_EQ(root->debug_string(),
            "RootGuardManager\n"
            "| SYMBOLIC_SHAPES: 2 <= L['a'] <= 4096\n"
            "| SYMBOLIC_SHAPES: L['b'] <= 10\n"
            "| SYMBOLIC_SHAPES: L['c'] == L['a']\n"
            "| SYMBOLIC_SHAPES: L['a'] // L['b'] == 2\n"
            "+- L['a']\n"
            "+- L['b']\n"
            "+- L['c']");
  EXPECT_EQ(root->num_guards(), 4);
  EXPECT_FALSE(PyErr_Occurred());
}

TEST_F(Shapes, RefusedBuilds) {
  EXPECT_FALSE(root->add_shape_guards({{a, SymbolRead::kInt, -1, 0}}, 2, {}, {}).ok());  // s1 unbound
  EXPECT_FALSE(root->add_shape_guards({{a, SymbolRead::kInt, -1, 0}}, 1, {{0, 5, 4}}, {}).ok());  // empty range
  RootGuardManager other;
  auto foreign = ok_or_die(other.child(kLocal, s("z")));
  EXPECT_FALSE(root->add_shape_guards({{foreign, SymbolRead::kInt, -1, 0}}, 1, {}, {}).ok());
  EXPECT_FALSE(root->add_shape_guards({{a, SymbolRead::kInt, -1, 0}, {a, SymbolRead::kSize, 0, 0}}, 1, {}, {}).ok());
  EXPECT_TRUE(root->shape_guards().empty());
}

TEST_F(Shapes, CheckIsFast) {
  add({{0, 2, 4096}, {1, 0, std::nullopt}},
      {{sym(0), k(8), op(Op::kMod), k(0), op(Op::kEq)}, {sym(0), sym(1), op(Op::kMul), k(1 << 20), op(Op::kLt)}});
  // Frame mode, what the runtime calls (as Root.CheckIsFast).
  py::dict scope = run_python("def g(a, b, c):\n  return a\n");
  expect_ok(root->bind(reinterpret_cast<PyCodeObject*>(scope["g"].attr("__code__").ptr())));
  FakeFrame frame(scope["g"], {py::int_(64), py::int_(3), py::int_(64)});
  const FrameView view = frame.view;
  ASSERT_TRUE(root->check(view));
  const int n = 200000;
  const auto start = std::chrono::steady_clock::now();
  int passed = 0;
  for (int i = 0; i < n; ++i) passed += root->check(view) ? 1 : 0;
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / n;
  EXPECT_EQ(passed, n);
  std::printf("[ shapes ] 3 int bindings, 2 ranges, 2 expressions: %.1f ns per check (frame mode)\n", ns);
}

}  // namespace
}  // namespace tjc
