// check_shadow_compatible: which transformed code may run in a shadow frame of an original.
#include "cpython/frame.h"

#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <string>

#include "guards/guard_test_util.h"

namespace tjc::cpython {
namespace {

namespace py = pybind11;

PyCodeObject* code_of(const py::dict& scope, const char* name) {
  return reinterpret_cast<PyCodeObject*>(scope[name].attr("__code__").ptr());
}

class ShadowCompatibleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    scope_ = testing::run_python(
        "def f(a, b=1, *args, c, **kw):\n"
        "    return a\n"
        "def same_args_more_locals(a, b=1, *args, c, **kw):\n"
        "    t = a + 1\n"
        "    return t\n"
        "def renamed(x, b=1, *args, c, **kw):\n"
        "    return x\n"
        "def fewer(a, *args, c, **kw):\n"
        "    return a\n"
        "def no_star(a, b=1, c=2, **kw):\n"
        "    return a\n"
        "def gen(a, b=1, *args, c, **kw):\n"
        "    yield a\n"
        "def make(z):\n"
        "    def inner(a, b=1, *args, c, **kw):\n"
        "        return a + z\n"
        "    return inner\n"
        "inner = make(1)\n"
        "def cell_arg(a, b=1, *args, c, **kw):\n"
        "    return lambda: a\n");
  }
  std::string error(const char* original, const char* code) {
    absl::Status s = check_shadow_compatible(code_of(scope_, original), code_of(scope_, code));
    return s.ok() ? "" : std::string(s.message());
  }
  py::dict scope_;
};

TEST_F(ShadowCompatibleTest, SameArgumentsAreCompatible) {
  EXPECT_EQ(error("f", "f"), "");
  EXPECT_EQ(error("f", "same_args_more_locals"), "") << "extra locals after the arguments are fine";
}

TEST_F(ShadowCompatibleTest, ArgumentDifferencesAreRefused) {
  EXPECT_NE(error("f", "renamed").find("argument 0 is named 'x', the original's is 'a'"), std::string::npos);
  EXPECT_NE(error("f", "fewer").find("argument counts differ"), std::string::npos);
  EXPECT_NE(error("f", "no_star").find("argument counts differ"), std::string::npos);
}

TEST_F(ShadowCompatibleTest, CellAndFreeVariablesMustMatch) {
  EXPECT_NE(error("f", "inner").find("co_freevars differ"), std::string::npos);
  EXPECT_NE(error("inner", "f").find("co_freevars differ"), std::string::npos);
  EXPECT_NE(error("f", "cell_arg").find("is a cell in one code and not the other"), std::string::npos);
  EXPECT_EQ(error("inner", "inner"), "");
}

TEST_F(ShadowCompatibleTest, GeneratorsAreRefused) {
  EXPECT_NE(error("f", "gen").find("generator and coroutine code cannot run in a shadow frame"), std::string::npos);
}

TEST_F(ShadowCompatibleTest, FreeVariablesNeedCopyFreeVarsFirst) {
  // A code with free variables whose first instruction is not COPY_FREE_VARS would read unset
  // slots; replace() keeps the instructions, so strip the first one by hand.
  py::object code = scope_["inner"].attr("__code__");
  py::bytes raw = code.attr("co_code");
  std::string bytes = raw;
  ASSERT_GE(bytes.size(), 2u);
  std::string nops = bytes;
  nops[0] = static_cast<char>(py::module_::import("opcode").attr("opmap")["NOP"].cast<int>());
  nops[1] = 0;
  py::object patched = code.attr("replace")(py::arg("co_code") = py::bytes(nops));
  absl::Status s = check_shadow_compatible(reinterpret_cast<PyCodeObject*>(code.ptr()),
                                           reinterpret_cast<PyCodeObject*>(patched.ptr()));
  EXPECT_NE(std::string(s.message()).find("does not start with COPY_FREE_VARS"), std::string::npos) << s;
}

}  // namespace
}  // namespace tjc::cpython
