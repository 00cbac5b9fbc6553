// ShapeGuards (SYMBOLIC_SHAPES): a root-level guard over symbolic sizes, the facts torch's ShapeEnv
// leaves when a trace treats some dims (and some int arguments) as symbols: per-symbol value
// ranges (`2 <= s0 <= 4096`) and boolean expressions (`Eq(s0, s1)`, `Ne(Mod(s1, 2), 0)`).
//
// What it holds: for each binding, the chain of tree nodes from the root's child down to the node
// whose value it reads (shared_ptr; nodes never point up, so no cycle) and what it reads there: a
// tensor's size(dim), stride(dim) or storage_offset() (through the torch backend, torch_backend.h)
// or the value itself, an exact int. It holds NO user object: values are fetched anew on each
// check. A symbol bound twice (one size seen through two sources) reads both, and they must agree.
// Expressions are ShapePrograms: flat postfix code over int64, compiled in Python
// (torch_jit_cache/guard/shape_guards.py) from sympy. Booleans are 0 / 1.
//
// Expression semantics (Python's, on int64, every failure a verdict): shape_program.h.
//
// Evaluation: RootGuardManager::check runs it after every node passed (TENSOR_MATCH has then
// proven the types and dim counts). Ranges first, then expressions; a failing expression moves to
// the front. The hot path allocates nothing while the guard has at most kInline bindings and
// symbols and its programs are at most kMaxDepth deep (make() refuses deeper ones); it formats no
// string. explain() and the text are out of line.
//
// Threads: under the GIL.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "guards/frame_view.h"
#include "guards/shape_program.h"
#include "guards/torch_backend.h"

namespace tjc {

class GuardManager;

// ---------------------------------------------------------------------------------------------
// ShapeGuards: bindings, ranges and expressions, checked together on the root.

// What a binding reads from its node's value.
enum class SymbolRead : uint8_t { kSize, kStride, kStorageOffset, kInt };

class ShapeGuards {
 public:
  static constexpr size_t kInline = 32;  // bindings / symbols read without allocating

  struct Binding {
    std::vector<std::shared_ptr<GuardManager>> chain;  // root's child first, the read node last
    SymbolRead read;
    int dim;     // kSize / kStride: >= 0; else ignored
    int symbol;  // index in [0, num_symbols)
  };
  struct Range {
    int symbol;
    std::optional<int64_t> min;  // nullopt: unbounded
    std::optional<int64_t> max;
  };

  // InvalidArgument when a symbol is out of range or has no binding, a range is empty, or a dim
  // is negative; the torch backend's error when a binding reads a tensor and torch is missing.
  static absl::StatusOr<std::unique_ptr<ShapeGuards>> make(std::vector<Binding> bindings, size_t num_symbols,
                                                           std::vector<Range> ranges,
                                                           std::vector<ShapeProgram> exprs);

  // Hot path: reads every binding, then ranges, then expressions. Leaves no Python error set.
  bool check(const FrameView& view) noexcept;
  // Slow path: the first failing binding, range or expression in words, or nullopt.
  std::optional<std::string> explain(const FrameView& view) const;
  // One `SYMBOLIC_SHAPES: ...` line per range, repeated binding and expression.
  std::vector<std::string> describe() const;
  // What describe() prints lines for.
  int64_t num_guards() const;
  int64_t fail_count() const { return fail_count_; }

 private:
  // The bindings that read one source (one chain), so each source is fetched once per check.
  struct SourceReads {
    std::vector<std::shared_ptr<GuardManager>> chain;
    bool is_int = false;
    size_t first = 0;  // index of its first binding in bindings_
    size_t count = 0;  // its bindings: bindings_[first, first + count)
    std::vector<TensorRead> reads;  // tensor sources: one per binding
  };
  struct Read {
    int symbol;
    bool defines;  // the symbol's first read: it sets the value; later reads must agree
    std::string name;  // `L['x'].size()[1]`, `L['n']`
  };
  struct Expr {
    ShapeProgram program;
    std::string text;  // in source names
    int64_t fail_count = 0;
  };

  ShapeGuards() = default;
  // Reads the source values into raw[] (one per binding); false on any failure (error cleared).
  bool read_all(const FrameView& view, int64_t* raw) const noexcept;
  // Why source `s`'s bindings cannot be read (values into raw[]), or nullopt.
  std::optional<std::string> explain_read(const SourceReads& s, const FrameView& view, int64_t* raw) const;

  std::vector<SourceReads> sources_;
  std::vector<Read> bindings_;   // grouped by source, in sources_ order
  size_t num_symbols_ = 0;
  std::vector<std::string> symbol_names_;  // the name of each symbol's defining read
  std::vector<Range> ranges_;
  std::vector<Expr> exprs_;
  TorchBackend* backend_ = nullptr;  // set when some binding reads a tensor
  int64_t fail_count_ = 0;
};


}  // namespace tjc
