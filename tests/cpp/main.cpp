// The GoogleTest main: starts one embedded interpreter for the whole run, then runs every test.
//
// Tests create and drop Python objects freely; all of them are gone before the interpreter is
// finalized, because the scoped_interpreter outlives RUN_ALL_TESTS().
#include <gtest/gtest.h>
#include <pybind11/embed.h>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  pybind11::scoped_interpreter interpreter;
  return RUN_ALL_TESTS();
}
