// Guard tree bindings: _C.GuardManager (the root) and _C.GuardNode (every other node).
//
// Python objects share ownership of their C++ node (std::shared_ptr holders): asking twice for a
// source returns the same Python object while it lives, and a child's wrapper keeps its subtree
// alive after the root's wrapper is gone. C++ statuses become Python exceptions
// here: TypeError statuses (guard_errors.h) as TypeError, the rest through throw_if_error.
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "bindings/bindings.h"
#include "cpython/dict_version.h"
#include "guards/guard_errors.h"
#include "guards/guard_manager.h"
#include "guards/leaf_kinds.h"
#include "guards/process_lived.h"
#include "guards/root_guard_manager.h"
#include "guards/value_rules.h"
#include "runtime/frame_handle.h"
#include "guards/torch_backend.h"

namespace tjc::bindings {

namespace {

void raise_if_error(const absl::Status& status) {
  if (!status.ok() && is_type_error(status) && !PyErr_Occurred()) {
    throw py::type_error(std::string(status.message()));
  }
  throw_if_error(status);
}

template <typename T>
T value_or_raise(absl::StatusOr<T> result) {
  raise_if_error(result.status());
  return std::move(*result);
}

std::string leaf_kind_names() {
  std::string out;
  for (const LeafSpec& spec : kLeafSpecs) out += (out.empty() ? "" : ", ") + std::string(spec.name);
  return out;
}

py::tuple leaf_kind_tuple() {
  py::tuple out(std::size(kLeafSpecs));
  for (size_t i = 0; i < std::size(kLeafSpecs); ++i) out[i] = py::str(kLeafSpecs[i].name);
  return out;
}

// value_rules.h's kImmutableScalarTypes, as Python types.
py::tuple immutable_scalar_types() {
  py::tuple out(std::size(kImmutableScalarTypes));
  for (size_t i = 0; i < std::size(kImmutableScalarTypes); ++i) {
    out[i] = py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(kImmutableScalarTypes[i]));
  }
  return out;
}

// `value` as the operand `spec` takes: converted as the named builder's typed argument would be,
// a TypeError naming the kind when it cannot be.
LeafArgs leaf_args(const LeafSpec& spec, const py::object& value) {
  LeafArgs args;
  try {
    switch (spec.operand) {
      case LeafOperand::kNone:
        if (!value.is_none()) throw py::value_error(std::string("add_leaf: ") + spec.name + " takes no value");
        break;
      case LeafOperand::kObject:
        args.value = value;
        break;
      case LeafOperand::kBool:
        args.flag = value.cast<bool>();
        break;
      case LeafOperand::kLength:
        args.length = value.cast<Py_ssize_t>();
        break;
    }
  } catch (const py::cast_error&) {
    throw py::type_error(std::string("add_leaf: ") + spec.name + " needs " +
                         (spec.operand == LeafOperand::kBool ? "a bool" : "an int") + ", got " +
                         Py_TYPE(value.ptr())->tp_name);
  }
  return args;
}

// A named builder taking one operand of type T, which `set` stores in the LeafArgs.
template <typename T, typename Class, typename Set>
void def_operand_builder(Class& cls, const LeafSpec& spec, Set set) {
  const LeafKind kind = spec.kind;
  cls.def(
      spec.name,
      [kind, set](GuardManager& self, T operand) {
        LeafArgs args;
        set(args, std::move(operand));
        raise_if_error(self.add_leaf(kind, args));
      },
      py::arg(spec.arg), spec.doc);
}

// The named builder of one leaf kind: node.<spec.name>(<spec.arg>, options...).
template <typename Class>
void def_leaf_builder(Class& cls, const LeafSpec& spec) {
  const LeafKind kind = spec.kind;
  switch (spec.operand) {
    case LeafOperand::kNone:
      cls.def(spec.name, [kind](GuardManager& self) { raise_if_error(self.add_leaf(kind)); }, spec.doc);
      return;
    case LeafOperand::kBool:
      def_operand_builder<bool>(cls, spec, [](LeafArgs& args, bool b) { args.flag = b; });
      return;
    case LeafOperand::kLength:
      def_operand_builder<Py_ssize_t>(cls, spec, [](LeafArgs& args, Py_ssize_t n) { args.length = n; });
      return;
    case LeafOperand::kObject:
      break;
  }
  if (spec.options & kHoldOption) {
    cls.def(
        spec.name,
        [kind](GuardManager& self, py::object obj, bool strong) {
          LeafArgs args(std::move(obj));
          args.hold = strong ? IdHold::kStrong : IdHold::kWeak;
          raise_if_error(self.add_leaf(kind, args));
        },
        py::arg(spec.arg), py::kw_only(), py::arg("strong") = false, spec.doc);
  } else if (spec.options & kDynamicDimsOption) {
    cls.def(
        spec.name,
        [kind](GuardManager& self, py::object example, std::vector<int> dynamic_sizes, std::vector<int> dynamic_strides) {
          LeafArgs args(std::move(example));
          args.dynamic = DynamicDims{std::move(dynamic_sizes), std::move(dynamic_strides)};
          raise_if_error(self.add_leaf(kind, args));
        },
        py::arg(spec.arg), py::arg("dynamic_sizes") = std::vector<int>(), py::arg("dynamic_strides") = std::vector<int>(),
        spec.doc);
  } else {
    def_operand_builder<py::object>(cls, spec, [](LeafArgs& args, py::object value) { args.value = std::move(value); });
  }
}

SymbolRead parse_symbol_read(const std::string& kind) {
  if (kind == "size") return SymbolRead::kSize;
  if (kind == "stride") return SymbolRead::kStride;
  if (kind == "storage_offset") return SymbolRead::kStorageOffset;
  if (kind == "int") return SymbolRead::kInt;
  throw py::value_error("symbolic_shapes: a binding reads 'size', 'stride', 'storage_offset' or 'int', not '" +
                        kind + "'");
}

// [(op name, operand), ...] -> a validated ShapeProgram.
ShapeProgram parse_program(const std::vector<std::pair<std::string, int64_t>>& code, size_t num_symbols) {
  std::vector<ShapeInstr> instrs;
  instrs.reserve(code.size());
  for (const auto& [name, operand] : code) {
    instrs.push_back(ShapeInstr{value_or_raise(ShapeProgram::parse_op(name)), operand});
  }
  return value_or_raise(ShapeProgram::make(std::move(instrs), num_symbols));
}

// A mapping-mode view for Python callers, with the objects it borrows kept alive.
struct PythonView {
  py::object mapping;
  py::object globals;
  py::object builtins;
  FrameView view;
};

// `frame_or_mapping`: a dict of locals (and closure variables) by name, any other mapping (copied
// into a dict), a frame object (its f_locals, f_globals and f_builtins), or the runtime's Frame
// handle inside an eval-frame callback (the same three). Builtins come from
// globals['__builtins__'] when present, else the caller's builtins.
PythonView make_view(py::handle frame_or_mapping, py::handle globals) {
  PythonView out;
  if (py::isinstance<FrameHandle>(frame_or_mapping)) {
    // The frame an eval-frame callback was handed: its arguments and closure contents, read
    // without changing the frame (the handle raises once the callback has returned).
    py::object handle = py::reinterpret_borrow<py::object>(frame_or_mapping);
    out.mapping = handle.attr("f_locals");
    out.globals = handle.attr("f_globals");
    out.builtins = handle.attr("f_builtins");
  } else if (PyFrame_Check(frame_or_mapping.ptr())) {
    out.mapping = py::dict(frame_or_mapping.attr("f_locals"));
    out.globals = frame_or_mapping.attr("f_globals");
    out.builtins = frame_or_mapping.attr("f_builtins");
  } else {
    out.mapping = PyDict_Check(frame_or_mapping.ptr())
                      ? py::reinterpret_borrow<py::object>(frame_or_mapping)
                      : py::object(py::dict(py::reinterpret_borrow<py::object>(frame_or_mapping)));
    if (!globals.is_none()) {
      if (!PyDict_Check(globals.ptr())) throw py::type_error("globals must be a dict or None");
      out.globals = py::reinterpret_borrow<py::object>(globals);
      PyObject* builtins = PyDict_GetItemString(globals.ptr(), "__builtins__");  // borrowed
      if (builtins != nullptr) {
        out.builtins = PyModule_Check(builtins)
                           ? py::reinterpret_borrow<py::object>(PyModule_GetDict(builtins))
                           : py::reinterpret_borrow<py::object>(builtins);
      }
    }
    // The caller's builtins (borrowed from the running frame, or the interpreter's).
    if (!out.builtins) out.builtins = py::reinterpret_borrow<py::object>(PyEval_GetBuiltins());
  }
  out.view.mapping = out.mapping.ptr();
  out.view.globals = out.globals ? out.globals.ptr() : nullptr;
  out.view.builtins = out.builtins.ptr();
  return out;
}

}  // namespace

void init_guards(py::module_& m) {
  using NodePtr = std::shared_ptr<GuardManager>;
  using RootPtr = std::shared_ptr<RootGuardManager>;
  // Whether GuardNode.dict_tags() is available on this Python (cpython/dict_version.h).
  m.attr("DICT_TAGS_SUPPORTED") = cpython::kDictTagsFollowEveryChange;

  py::class_<GuardManager, NodePtr> node(m, "GuardNode", R"doc(
One source of a guard tree (L['x'], L['self'].fc, ...): made by the GuardManager builder methods,
never directly. Child getters return the same object for the same source.)doc");
  // The leaf builders, all from kLeafSpecs (leaf_kinds.h): add_leaf(kind, ...) by name, and one
  // named method per kind (node.type_match(cls), ...).
  node.def(
      "add_leaf",
      [](GuardManager& self, const std::string& kind, py::object value, bool strong, std::vector<int> dynamic_sizes,
         std::vector<int> dynamic_strides) {
        const LeafSpec* spec = find_leaf_spec(kind);
        if (spec == nullptr) throw py::value_error("add_leaf: unknown leaf kind '" + kind + "' (kinds: " + leaf_kind_names() + ")");
        LeafArgs args = leaf_args(*spec, value);
        if (strong) {
          if ((spec->options & kHoldOption) == 0) throw py::value_error("add_leaf: strong=True is for id_match, not " + kind);
          args.hold = IdHold::kStrong;
        }
        if (!dynamic_sizes.empty() || !dynamic_strides.empty()) {
          if ((spec->options & kDynamicDimsOption) == 0) {
            throw py::value_error("add_leaf: dynamic_sizes / dynamic_strides are for tensor_match, not " + kind);
          }
          args.dynamic = DynamicDims{std::move(dynamic_sizes), std::move(dynamic_strides)};
        }
        raise_if_error(self.add_leaf(spec->kind, args));
      },
      py::arg("kind"), py::arg("value") = py::none(), py::kw_only(), py::arg("strong") = false,
      py::arg("dynamic_sizes") = std::vector<int>(), py::arg("dynamic_strides") = std::vector<int>(),
      "A leaf guard of `kind` (a name of LEAF_KINDS) on this node's value: `value` is its operand (none "
      "for none_match / not_none); strong=True for id_match; dynamic_sizes / dynamic_strides for tensor_match.");
  for (const LeafSpec& spec : kLeafSpecs) def_leaf_builder(node, spec);
  m.attr("LEAF_KINDS") = leaf_kind_tuple();
  // The builtin scalar types whose values EQUALS_MATCH, DICT_KEYS, SET_ITEMS and item() keys hold.
  m.attr("IMMUTABLE_SCALAR_TYPES") = immutable_scalar_types();
  node.def("dict_tags", [](GuardManager& self) { raise_if_error(self.add_dict_tags()); },
           "DICT_TAGS: the children are skipped while the dicts they read are unchanged (version "
           "tags); what tags cannot vouch for (TENSOR_MATCH, ...) runs every time.")
      .def_property_readonly(
          "dict_tags_state",
          [](const GuardManager& self) -> py::object {
            const DictTags* tags = self.dict_tags();
            if (tags == nullptr) return py::none();
            py::dict out;
            out["recorded"] = tags->recorded();
            out["dicts"] = tags->num_dicts();
            out["residuals"] = tags->num_residuals();
            return out;
          },
          "None without DICT_TAGS; else {'recorded', 'dicts', 'residuals'} of the last check.")
      .def_property_readonly("source", &GuardManager::source)
      .def_property_readonly("fail_count", &GuardManager::fail_count)
      .def("num_guards", &GuardManager::num_guards, "Leaf guards in this subtree.")
      .def("debug_string", &GuardManager::debug_string)
      .def("__str__", &GuardManager::debug_string)
      .def("__repr__", [](const GuardManager& self) {
        std::string name = self.is_root() ? "GuardManager" : "GuardNode " + self.source();
        return "<" + name + ": " + std::to_string(self.num_guards()) + " guards>";
      });

  py::class_<RootGuardManager, GuardManager, RootPtr> root(m, "GuardManager", R"doc(
The root of a guard tree: the frame being checked. Build it with local/global_/builtin/closure and
the leaf methods; bind(code) freezes it for a cache entry; check/explain take a dict of locals (or
a frame) and an optional globals dict.)doc");
  // One builder method per accessor kind, named and documented by its row of kAccessorSpecs: kinds
  // that read the frame on the root (GuardManager), kinds that read a value on every node.
  for (const AccessorSpec& spec : kAccessorSpecs) {
    const AccessorKind kind = spec.kind;
    // `self` is typed as the class the method is on, so signatures and errors name that class.
    auto add = [&spec, kind](auto& cls, auto self_type) {
      using Self = typename decltype(self_type)::type;
      switch (spec.operand) {
        case Operand::kName:
          cls.def(
              spec.builder, [kind](Self& self, py::str name) { return value_or_raise(self.child(kind, name)); },
              py::arg("name"), spec.doc);
          break;
        case Operand::kKey:
          cls.def(
              spec.builder, [kind](Self& self, py::object key) { return value_or_raise(self.child(kind, key)); },
              py::arg("key"), spec.doc);
          break;
        case Operand::kNone:
          cls.def(spec.builder, [kind](Self& self) { return value_or_raise(self.child(kind)); }, spec.doc);
          break;
      }
    };
    if (spec.reads == Reads::kFrame) add(root, std::type_identity<RootGuardManager>());
    if (spec.reads == Reads::kParent) add(node, std::type_identity<GuardManager>());
  }
  root.def(py::init<>())
      .def("global_state", [](RootGuardManager& self) { raise_if_error(self.add_global_state()); })
      .def("bind",
           [](RootGuardManager& self, py::object code) {
             if (!PyCode_Check(code.ptr())) throw py::type_error("bind() needs a code object");
             raise_if_error(self.bind(reinterpret_cast<PyCodeObject*>(code.ptr())));
           },
           py::arg("code"))
      .def_property_readonly("bound", &RootGuardManager::bound)
      .def_property_readonly("invalidated", &RootGuardManager::invalidated)
      .def("has_identity_guards", &RootGuardManager::has_identity_guards)
      .def("identity_relation",
           [](RootGuardManager& self, std::vector<NodePtr> nodes, std::vector<int> classes) {
             raise_if_error(self.add_identity_relation(nodes, classes));
           },
           py::arg("nodes"), py::arg("classes"),
           "OBJECT_ALIASING: nodes[i] and nodes[j] must reach one object exactly when classes[i] == "
           "classes[j] (classes[i]: the first index whose object was i's when compiled). Checked "
           "after the tree passed; holds no object.")
      .def("symbolic_shapes",
           [](RootGuardManager& self, const std::vector<std::tuple<NodePtr, std::string, int, int>>& bindings,
              size_t num_symbols,
              const std::vector<std::tuple<int, std::optional<int64_t>, std::optional<int64_t>>>& ranges,
              const std::vector<std::vector<std::pair<std::string, int64_t>>>& exprs) {
             std::vector<RootGuardManager::ShapeBinding> parsed;
             for (const auto& [node, kind, dim, symbol] : bindings) {
               parsed.push_back({node, parse_symbol_read(kind), dim, symbol});
             }
             std::vector<ShapeGuards::Range> parsed_ranges;
             for (const auto& [symbol, min, max] : ranges) parsed_ranges.push_back({symbol, min, max});
             std::vector<ShapeProgram> programs;
             for (const auto& code : exprs) programs.push_back(parse_program(code, num_symbols));
             raise_if_error(self.add_shape_guards(parsed, num_symbols, std::move(parsed_ranges), std::move(programs)));
           },
           py::arg("bindings"), py::arg("num_symbols"), py::arg("ranges"), py::arg("exprs"),
           "SYMBOLIC_SHAPES: bindings [(node, 'size'|'stride'|'storage_offset'|'int', dim, symbol)], "
           "ranges [(symbol, min or None, max or None)], exprs [[(op, operand), ...]] (postfix programs, "
           "torch_jit_cache.guard.shape_guards.compile_expr). Checked after the tree passed; holds no object.")
      .def("check",
           [](RootGuardManager& self, py::handle frame_or_mapping, py::handle globals) {
             PythonView view = make_view(frame_or_mapping, globals);
             return self.check(view.view);
           },
           py::arg("frame_or_mapping"), py::arg("globals") = py::none())
      .def("explain",
           [](RootGuardManager& self, py::handle frame_or_mapping, py::handle globals) {
             PythonView view = make_view(frame_or_mapping, globals);
             return self.explain(view.view);
           },
           py::arg("frame_or_mapping"), py::arg("globals") = py::none())
      .def("set_invalidation_callback",
           [](RootGuardManager& self, py::object callback) {
             if (callback.is_none()) {
               self.set_invalidation_callback(nullptr);
               return;
             }
             // The tree holds the callable strongly until it runs: a callable that refers back to
             // this GuardManager makes a cycle no collector sees. Tests and tools only.
             self.set_invalidation_callback([callback = std::move(callback)]() noexcept {
               PyObject* result = PyObject_CallNoArgs(callback.ptr());  // new ref
               if (result == nullptr) {
                 PyErr_WriteUnraisable(callback.ptr());
               } else {
                 Py_DECREF(result);
               }
             });
           },
           py::arg("callback"),
           "callback() runs once when a weakly held object dies (now, if one already has).");

  m.attr("_shape_program_max_depth") = ShapeProgram::kMaxDepth;
  m.def(
      "_shape_program_text",
      [](const std::vector<std::pair<std::string, int64_t>>& code, const std::vector<std::string>& names) {
        return parse_program(code, names.size()).text(names);
      },
      py::arg("code"), py::arg("names"), "The infix text of a postfix program (tests).");
  m.def(
      "_shape_program_evaluate",
      [](const std::vector<std::pair<std::string, int64_t>>& code, const std::vector<int64_t>& values) {
        return shape_verdict_text(parse_program(code, values.size()).evaluate(values.data()));
      },
      py::arg("code"), py::arg("values"),
      "'true', 'false', 'overflows int64', 'divides by zero' or 'is out of an operation's domain' (tests).");
  m.def(
      "vouch_process_lived", [](py::handle obj) { vouch_process_lived(obj.ptr()); }, py::arg("obj"),
      "Registers obj as living as long as the process: guards may then hold it as a dict key, compared "
      "by identity. Held for good; only torch_jit_cache.guard.process_lived decides what qualifies.");
  m.def(
      "is_process_lived", [](py::handle obj) { return is_process_lived(obj.ptr()); }, py::arg("obj"),
      "Whether obj was registered with vouch_process_lived.");
  m.def("_torch_backend_status",
        []() -> py::tuple {
          absl::StatusOr<TorchBackend*> backend = torch_backend();
          if (backend.ok()) return py::make_tuple(true, (*backend)->name());
          return py::make_tuple(false, std::string(backend.status().message()));
        },
        "(True, backend name) when TENSOR_MATCH/GLOBAL_STATE guards can be built, else (False, why).");
}

}  // namespace tjc::bindings
